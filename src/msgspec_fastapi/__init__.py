"""FastAPI routes with msgspec bodies and responses, with a compiled request path."""

from ._openapi.install import install_openapi
from ._routing.install import install_dispatch
from ._select import IMPLEMENTATION
from .responses import MsgspecJSONResponse
from .router import MsgspecRoute, MsgspecRouter, include_router

__all__ = [
    "IMPLEMENTATION",
    "MsgspecJSONResponse",
    "MsgspecRoute",
    "MsgspecRouter",
    "include_router",
    "install_dispatch",
    "install_openapi",
]
