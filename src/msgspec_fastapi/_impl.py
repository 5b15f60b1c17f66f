"""Pick the request-path twin once, at import time.

The compiled module when it imports and MSGSPEC_FASTAPI_PURE is not "1"; the pure twin
otherwise, and on interpreters other than CPython. Router code imports only this module.
"""

from __future__ import annotations

import os
import platform
from typing import TYPE_CHECKING, Any

_PURE = os.environ.get("MSGSPEC_FASTAPI_PURE") == "1"

if TYPE_CHECKING or _PURE or platform.python_implementation() != "CPython":
    from . import _fastpath_py as _twin
else:
    try:
        from . import _fastpath as _twin
    except ImportError:
        from . import _fastpath_py as _twin

IMPLEMENTATION = _twin.IMPLEMENTATION
RouteMatcher = _twin.RouteMatcher
RouteRuntime = _twin.RouteRuntime
route_handle = _twin.route_handle
route_matches = _twin.route_matches
router_handle = _twin.router_handle
router_matches = _twin.router_matches


def twin_module() -> Any:
    """The twin picked at import, for code that builds its objects (the route index)."""
    return _twin


__all__ = [
    "IMPLEMENTATION",
    "RouteMatcher",
    "RouteRuntime",
    "route_handle",
    "route_matches",
    "router_handle",
    "router_matches",
    "twin_module",
]
