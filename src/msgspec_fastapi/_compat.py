"""Every private FastAPI name this package touches, in one place.

Checked against FastAPI 0.142.2 and 0.165.0 (the declared range). When FastAPI moves one
of these, this module is the only one to change.
"""

from __future__ import annotations

from typing import Any

from fastapi import routing as _routing
from fastapi.openapi import utils as _openapi_utils
from starlette.types import ASGIApp

# The route context FastAPI is building a handler for. Included routers are built lazily
# per inclusion (0.137+), and `get_route_handler` learns which inclusion it serves only
# through this ContextVar.
_effective_route_context_var = _routing._effective_route_context_var

# The scope entry where the router records the inclusion context that matched, read by
# `APIRoute.handle` to pick that context's app, and by the request path to find what
# registration left on that context.
FASTAPI_SCOPE_KEY: str = _routing._FASTAPI_SCOPE_KEY
ROUTE_CONTEXT_KEY: str = _routing._FASTAPI_EFFECTIVE_ROUTE_CONTEXT_KEY

# OpenAPI components of FastAPI's 422 response, reused for the 422 we document.
VALIDATION_ERROR_DEFINITION: dict[str, Any] = _openapi_utils.validation_error_definition
VALIDATION_ERROR_RESPONSE_DEFINITION: dict[str, Any] = (
    _openapi_utils.validation_error_response_definition
)

try:
    # 0.164+: per-route request body limits, applied around each route's app.
    from fastapi._body_limit import wrap_app_with_body_limit as _wrap_body_limit
except ImportError:  # pragma: no cover - exercised on FastAPI < 0.164
    _wrap_body_limit = None

HAS_NATIVE_BODY_LIMIT = _wrap_body_limit is not None

# How Starlette strips root_path from the path before matching (starlette._utils).
get_route_path = _routing.get_route_path


def building_context() -> Any | None:
    """The inclusion context whose handler is being built, or None for the route itself."""
    return _effective_route_context_var.get()


def wrap_body_limit(app: ASGIApp, max_body_size: int | None) -> ASGIApp:
    """Apply FastAPI's own body limit around `app`, where FastAPI has one."""
    if _wrap_body_limit is None or max_body_size is None:
        return app
    return _wrap_body_limit(app, max_body_size)


def included_match_data(context: Any) -> tuple[Any, dict[str, Any], Any, frozenset[str]]:
    """What matching an included route needs: path regex, convertors, endpoint, methods.

    The request path repeats the steps of `_EffectiveRouteContext.matches` and
    `APIRoute.matches` with these (path regex, convertors, inherited path params,
    method). Checked against 0.142.2 and 0.165.0.
    """
    return (
        context.path_regex,
        dict(context.param_convertors),
        context.endpoint,
        frozenset(context.methods),
    )
