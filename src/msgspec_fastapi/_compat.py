"""Every private FastAPI and Starlette name this package touches, in one place.

Private means underscored (modules, module attributes, object attributes) or
undocumented (scope keys, FastAPI's `validation_error*` OpenAPI components), and one
public-looking attribute we overwrite, `ModelField.validate`. Nothing else in the
package names any of them. Checked against FastAPI 0.142.2 and 0.165.0 (the declared
range, each with Starlette 1.10.0); the Starlette names also against Starlette 0.46.0,
the lowest FastAPI 0.142.2 accepts. When FastAPI or Starlette moves one of these, this
module is the only one to change.

`building_context()` hands out FastAPI's internal inclusion context; the router and the
request path read its route-shaped attributes (`original_route`, `path_format`,
`methods`, `dependant`, ...), which carry no underscore but belong to a private class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import routing as _routing
from fastapi.openapi import utils as _openapi_utils
from starlette._exception_handler import _lookup_exception_handler
from starlette._utils import get_route_path as _get_route_path
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Scope

# The route context FastAPI is building a handler for. Included routers are built lazily
# per inclusion (0.137+), and `get_route_handler` learns which inclusion it serves only
# through this ContextVar.
_effective_route_context_var = _routing._effective_route_context_var

# The scope entry where the router records the inclusion context that matched, read by
# `APIRoute.handle` to pick that context's app, and by the request path to find what
# registration left on that context. Constants, not functions: the request path reads
# them on every request.
FASTAPI_SCOPE_KEY: str = _routing._FASTAPI_SCOPE_KEY
ROUTE_CONTEXT_KEY: str = _routing._FASTAPI_EFFECTIVE_ROUTE_CONTEXT_KEY

# OpenAPI components of FastAPI's 422 response, reused for the 422 we document.
VALIDATION_ERROR_DEFINITION: dict[str, Any] = _openapi_utils.validation_error_definition
VALIDATION_ERROR_RESPONSE_DEFINITION: dict[str, Any] = (
    _openapi_utils.validation_error_response_definition
)

# Where ExceptionMiddleware leaves the app's (exception class, status code) handler maps.
_EXCEPTION_HANDLERS_KEY = "starlette.exception_handlers"

_wrap_body_limit: Callable[[ASGIApp, int | None], ASGIApp] | None
try:
    # 0.164+: per-route request body limits, applied around each route's app.
    from fastapi._body_limit import wrap_app_with_body_limit as _wrap_body_limit
except ImportError:  # pragma: no cover - exercised on FastAPI < 0.164
    _wrap_body_limit = None

HAS_NATIVE_BODY_LIMIT = _wrap_body_limit is not None

# The scope's path without its root_path, as Starlette's routes match it. Bound as it is,
# not wrapped: the request path calls it per request when a root_path is set.
get_route_path: Callable[[Scope], str] = _get_route_path


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
    method).
    """
    return (
        context.path_regex,
        dict(context.param_convertors),
        context.endpoint,
        frozenset(context.methods),
    )


def cache_request_body(request: Request, body: bytes) -> None:
    """Make `request.body()` (and `stream()`, `json()`) return `body` without reading.

    Starlette caches a read body in `Request._body`; the request path reads the body
    itself, so that dependencies reading it later get the same bytes.
    """
    request._body = body


def replace_validator(
    field: Any, validate: Callable[..., tuple[Any, list[dict[str, Any]]]]
) -> None:
    """Make FastAPI validate a parameter with `validate` instead of Pydantic.

    FastAPI calls `ModelField.validate(value, values, loc=loc)` for every path, query,
    header and cookie value and takes `(value, errors)` back; the instance attribute
    shadows the method.
    """
    field.validate = validate


def exception_handler(scope: Scope, exc: Exception) -> Callable[..., Any] | None:
    """The application's handler for `exc`, found as Starlette finds it for a route.

    Starlette's `wrap_app_handling_exceptions`: a status-code handler for an
    HTTPException first, then the handler of the nearest class in the exception's MRO.
    Typed loosely because Starlette's union of HTTP and WebSocket handlers cannot be
    called with a Request alone; the direct tier only ever serves HTTP.
    """
    exception_handlers, status_handlers = scope.get(_EXCEPTION_HANDLERS_KEY, ({}, {}))
    handler = None
    if isinstance(exc, HTTPException):
        handler = status_handlers.get(exc.status_code)
    if handler is None:
        handler = _lookup_exception_handler(exception_handlers, exc)
    return handler
