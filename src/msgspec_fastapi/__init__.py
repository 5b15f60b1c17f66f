"""FastAPI routes with msgspec bodies and responses, with a compiled request path."""

from ._dispatch_install import install_dispatch
from ._impl import IMPLEMENTATION
from ._openapi_install import install_openapi
from .responses import MsgspecJSONResponse
from .router import MsgspecRoute, MsgspecRouter

__all__ = [
    "IMPLEMENTATION",
    "MsgspecJSONResponse",
    "MsgspecRoute",
    "MsgspecRouter",
    "install_dispatch",
    "install_openapi",
]
