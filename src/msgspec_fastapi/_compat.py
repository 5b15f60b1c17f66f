"""Every private FastAPI and Starlette name this package touches, in one place.

Private means underscored (modules, module attributes, object attributes) or
undocumented (scope keys, FastAPI's `validation_error*` OpenAPI components, its parameter
solving in `fastapi.dependencies.utils`), and one public-looking attribute we overwrite,
`ModelField.validate`. Nothing else in the
package names any of them. Checked against FastAPI 0.142.2 and 0.165.0 (the declared
range, each with Starlette 1.10.0); the Starlette names also against Starlette 0.46.0,
the lowest FastAPI 0.142.2 accepts. When FastAPI or Starlette moves one of these, this
module is the only one to change.

`building_context()` hands out FastAPI's internal inclusion context; the router and the
request path read its route-shaped attributes (`original_route`, `path_format`,
`methods`, `dependant`, ...), which carry no underscore but belong to a private class.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import os
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager, AsyncExitStack
from functools import cache, partial
from types import BuiltinFunctionType, ModuleType
from typing import Annotated, Any, get_args, get_origin
from weakref import WeakKeyDictionary

import anyio._core._eventloop as _anyio_eventloop
from anyio import CancelScope
from fastapi import Body, Header, Query, params
from fastapi import concurrency as _fastapi_concurrency
from fastapi import routing as _routing
from fastapi import sse as _sse
from fastapi._compat import copy_field_info as _copy_field_info
from fastapi._compat.v2 import _regenerate_error_with_loc
from fastapi.dependencies import models as _dep_models
from fastapi.dependencies import utils as _dep_utils
from fastapi.dependencies import utils as _dependency_utils
from fastapi.dependencies.utils import (
    get_dependant,
    request_body_to_args,
    request_params_to_args,
)
from fastapi.dependencies.utils import solve_dependencies as _solve_dependencies
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import FastAPIError, RequestValidationError
from fastapi.openapi import utils as _openapi_utils
from fastapi.telemetry import _api as _telemetry
from fastapi.telemetry import _asgi as _telemetry_asgi
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from starlette._exception_handler import _lookup_exception_handler
from starlette._utils import get_route_path as _get_route_path
from starlette._utils import is_async_callable as _is_async_callable
from starlette.datastructures import FormData, Headers, QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

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

_body_limit_error: Callable[[Exception], Exception | None] | None
try:
    # 0.164+: the error a body read past the route's limit raised, as FastAPI re-raises it.
    from fastapi._body_limit import get_body_limit_error as _body_limit_error
    from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY as _BODY_LIMIT_KEY
except ImportError:  # pragma: no cover - exercised on FastAPI < 0.164
    _body_limit_error = None
    _BODY_LIMIT_KEY = ""

# 0.165: the form limits the routers entering the request left in the FastAPI scope, with
# the route's own over them; 0.142.2 parses forms with Starlette's defaults.
_resolve_form_limits: Callable[[dict[str, Any], Any], dict[str, Any]] | None = getattr(
    _routing, "_resolve_form_limits", None
)
# The exit stack FastAPI closes a request's form files on, once the response is sent.
_FILE_STACK_KEY = "fastapi_middleware_astack"

# The scope's path without its root_path, as Starlette's routes match it. Bound as it is,
# not wrapped: the request path calls it per request when a root_path is set.
get_route_path: Callable[[Scope], str] = _get_route_path


# The FastAPI functions that read a route's `endpoint` to build what FastAPI calls and
# solves (the dependant): APIRoute's own state, and each inclusion's route context.
_ENDPOINT_BUILDERS = frozenset(
    {
        _routing._populate_api_route_state.__code__,
        _routing._EffectiveRouteContext.from_api_route.__func__.__code__,  # type: ignore[attr-defined]
    }
)


def builds_from_endpoint(frame: Any) -> bool:
    """Whether `frame` (the reader of a route's `endpoint`) is FastAPI building the route."""
    return frame.f_code in _ENDPOINT_BUILDERS


# -- inclusions that add dependencies taking msgspec types ------------------------------
# `_EffectiveRouteContext.from_api_route` reads the route's `endpoint` (an argument of its
# `_populate_api_route_state` call) after making the route context and before reading
# the inclusion's `dependencies`, which FastAPI cannot build when one takes a Struct.
# The route lends the inclusion context the stand-ins of those dependencies for that one
# build (`lend_dependencies`), takes its own back in its `get_route_handler`, which
# from_api_route calls next (`take_back_dependencies`), and rebuilds there what FastAPI
# built of the route context from its own endpoint and dependencies
# (`rebuild_route_context`). Checked against FastAPI 0.142.2 and 0.165.0.
_FROM_API_ROUTE = _routing._EffectiveRouteContext.from_api_route.__func__.__code__  # type: ignore[attr-defined]


class _Lent(list[Any]):
    """An inclusion's dependencies lent for one route context's build, with its own."""

    __slots__ = ("own",)

    def __init__(self, lent: list[Any], own: list[Any]) -> None:
        super().__init__(lent)
        self.own = own


def inclusion_being_built(frame: Any) -> tuple[Any, Any] | None:
    """(route context, inclusion context) when `frame` (a reader of a route's `endpoint`)
    is FastAPI building the route's context for an inclusion; else None."""
    if frame.f_code is not _FROM_API_ROUTE:
        return None
    found = frame.f_locals
    include_context = found["include_context"]
    dependencies = include_context.dependencies
    if isinstance(dependencies, _Lent):
        # A build that failed before its route took them back.
        include_context.dependencies = dependencies.own
    return found["context"], include_context


def inclusion_dependencies(include_context: Any) -> list[Any]:
    """The dependencies an inclusion adds to its routes: the application's, the including
    routers' own and those of each `include_router` call, outermost first."""
    return list(include_context.dependencies)


def inclusion_responses(include_context: Any) -> dict[Any, Any]:
    """The responses an inclusion adds to its routes' (which win over them)."""
    return dict(include_context.responses)


def lend_dependencies(include_context: Any, dependencies: list[Any]) -> None:
    """Have FastAPI build the route context being built with `dependencies` in place of
    the inclusion's own (as many, in the same order)."""
    include_context.dependencies = _Lent(dependencies, include_context.dependencies)


def take_back_dependencies(include_context: Any) -> None:
    """Give the inclusion its own dependencies back after `lend_dependencies`."""
    dependencies = include_context.dependencies
    if isinstance(dependencies, _Lent):
        include_context.dependencies = dependencies.own


def rebuild_route_context(context: Any, call: Any, dependencies: list[Any]) -> None:
    """Build a route context's dependant, body field and body embedding anew from `call`
    and `dependencies`, as `_populate_api_route_state` builds them."""
    context.dependencies = list(dependencies)
    dependant, body_params, embed = _routing._build_dependant_with_parameterless_dependencies(
        path=context.path_format, call=call, dependencies=context.dependencies
    )
    context.dependant = dependant
    context._embed_body_fields = embed
    context.body_field = _dependency_utils._get_body_field(
        body_params=body_params, name=context.unique_id, embed_body_fields=embed
    )


# -- options inherited through include_router (errors=) ---------------------------------
# FastAPI carries `strict_content_type` down a chain of inclusions in its inclusion
# contexts: each `include_router` makes one (`_RouterIncludeContext.for_include`, the
# including router's value), and an inclusion nested in another gets the two combined
# (`combine`, the inner value where set, else the outer), when the outer inclusion's
# candidates are first built (`_IncludedRouter.effective_candidates`); a route context
# then takes the route's value, else its router's, else the combined one. The contexts
# have no field for options of ours. So an inclusion that sets one carries it as an
# attribute, and its context gets a `combine` of its own (an instance attribute, found
# before the class's method), which calls FastAPI's and carries the options onto the
# result, which gets that `combine` too. An outer context FastAPI made (an application
# or an APIRouter including a router that sets options) is given that `combine` when it
# first builds candidates from a router holding such an inclusion: that router's
# `_get_routes_version`, which `effective_candidates` calls first, is hooked
# (`carry_options_through`) to find the context in its caller's frame. Checked against
# FastAPI 0.142.2 and 0.165.0.
_INCLUSION_OPTIONS_ATTR = "msgspec_options"
_CANDIDATE_BUILDERS = frozenset(
    {
        _routing._IncludedRouter.effective_candidates.__code__,
        _routing._IncludedRouter.effective_low_priority_routes.__code__,
    }
)


def inclusion_options(include_context: Any) -> dict[str, Any]:
    """The options an inclusion context carries (set on it or on an outer inclusion)."""
    return getattr(include_context, _INCLUSION_OPTIONS_ATTR, None) or {}


def inclusion_router_of(include_context: Any) -> Any:
    """The router an inclusion context includes (whose routes it makes contexts of)."""
    return include_context.included_router


def _carry_options(include_context: Any) -> None:
    """Give `include_context` the `combine` that carries options to what it combines."""
    if "combine" in vars(include_context):
        return
    fastapi_combine = type(include_context).combine

    def combine(child: Any) -> Any:
        combined = fastapi_combine(include_context, child)
        # The inner inclusion's options win, as `combine` does with strict_content_type.
        options = {**inclusion_options(include_context), **inclusion_options(child)}
        if options:
            setattr(combined, _INCLUSION_OPTIONS_ATTR, options)
        _carry_options(combined)
        return combined

    include_context.combine = combine


def carry_options_through(router: Any) -> None:
    """Have every inclusion of `router` carry options to the inclusions `router` holds
    (see above). Idempotent."""
    if "_msgspec_carries" in vars(router):
        return
    routes_version = router._get_routes_version

    def hooked(seen: set[int] | None = None) -> int:
        caller = sys._getframe(1)
        if caller.f_code in _CANDIDATE_BUILDERS:
            _carry_options(caller.f_locals["self"].include_context)
        return routes_version(seen)  # type: ignore[no-any-return]

    if vars(router).setdefault("_msgspec_carries", hooked) is hooked:
        router._get_routes_version = hooked


def set_inclusion_options(router: Any, options: dict[str, Any]) -> None:
    """Give the inclusion `router.include_router` just made `options` (its own, over
    those of the inclusions around it), to carry to the inclusions inside it."""
    included = router.routes[-1]
    assert isinstance(included, _routing._IncludedRouter)
    include_context = included.include_context
    setattr(include_context, _INCLUSION_OPTIONS_ATTR, dict(options))
    _carry_options(include_context)
    carry_options_through(router)


def embed_body_fields(route: Any) -> None:
    """Make FastAPI read its body fields of `route` (an APIRoute or a route context)
    embedded by name, as it does when they are not the only body parameters.

    FastAPI decides the embedding from the body fields it sees (`_embed_body_fields`)
    and builds the body model from it (`body_field`); both are read when its handler
    is built, and the body model for the OpenAPI document.
    """
    if route._embed_body_fields:
        return
    route._embed_body_fields = True
    route.body_field = _dependency_utils._get_body_field(
        body_params=_dependency_utils._get_flat_body_params(route.dependant),
        name=route.unique_id,
        embed_body_fields=True,
    )


def body_model(route: Any) -> tuple[str, bool]:
    """The component name FastAPI documents the route's embedded body fields under (its
    body model's name), and whether that body is required."""
    info = route.body_field.field_info
    return info.annotation.__name__, bool(info.is_required())


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


def route_form_limits(route: Any) -> dict[str, Any]:
    """A route's own `form_limits=` (0.165; {} before)."""
    if _resolve_form_limits is None:
        return {}
    return dict(getattr(route, "form_limits", None) or {})


async def read_form(request: Request, route_limits: dict[str, Any]) -> FormData:
    """The request's form, parsed as FastAPI parses a form body.

    The limits are those FastAPI would apply (the route's over the routers' and the
    app's); Starlette's 400 for a malformed form or a limit passed, and FastAPI's 413
    for a body past `max_body_size`, pass through; any other parsing failure is
    FastAPI's 400. The form's files are closed after the response, as FastAPI does.
    """
    limits: dict[str, Any] = {}
    if _resolve_form_limits is not None:
        limits = _resolve_form_limits(request.scope.get(FASTAPI_SCOPE_KEY, {}), route_limits)
    try:
        form = await request.form(**limits)
    except (HTTPException, ClientDisconnect):
        raise
    except Exception as exc:
        if _body_limit_error is not None and _BODY_LIMIT_KEY in request.scope:
            error = _body_limit_error(exc)
            if error is not None:
                raise error from exc
        raise HTTPException(400, "There was an error parsing the body") from exc
    request.scope[_FILE_STACK_KEY].push_async_callback(form.close)
    return form


def replace_validator(
    field: Any, validate: Callable[..., tuple[Any, list[dict[str, Any]]]]
) -> None:
    """Make FastAPI validate a parameter with `validate` instead of Pydantic.

    FastAPI calls `ModelField.validate(value, values, loc=loc)` for every path, query,
    header and cookie value and takes `(value, errors)` back; the instance attribute
    shadows the method.
    """
    field.validate = validate


def pydantic_validation(field: Any) -> Callable[..., tuple[Any, list[dict[str, Any]]]]:
    """FastAPI's own validation of a parameter's ModelField (the method
    `replace_validator` shadows), bound to the field: `(value, values, loc=loc)`, with
    Pydantic's errors at `loc`. Checked against FastAPI 0.142.2 to 0.165.0."""
    return partial(type(field).validate, field)


def body_field_info(annotation: Any, default: Any) -> FieldInfo:
    """The FieldInfo FastAPI reads a body parameter by (its alias, validation alias),
    chosen as `analyze_param` chooses it: the last Body (or other parameter) in
    `Annotated`, merged with the Field()s there by FastAPI's `copy_field_info` (0.165
    takes their alias, 0.142.2 only their constraints); else a Body default; else the
    Body FastAPI infers, into which 0.165 merges the Field()s too
    (`inferred_body_merges_fields`). Never mutates the parameter's own FieldInfo."""
    metadata = get_args(annotation)[1:] if get_origin(annotation) is Annotated else ()
    specific = [m for m in metadata if isinstance(m, (params.Param, params.Body, params.Depends))]
    if specific and isinstance(specific[-1], FieldInfo):
        return _copy_field_info(field_info=specific[-1], annotation=annotation)
    if isinstance(default, FieldInfo):
        return default
    inferred = params.Body(annotation=annotation)
    if metadata and inferred_body_merges_fields():
        return _copy_field_info(field_info=inferred, annotation=annotation)
    return inferred


@cache
def inferred_body_merges_fields() -> bool:
    """Whether FastAPI reads a body parameter without Body() by the alias of a Field()
    in its `Annotated` (0.165) or by its own name (0.142.2); asked of FastAPI's own
    parameter analysis, once."""

    def endpoint(**values: Any) -> None:
        """Takes one inferred body parameter, as its signature says."""

    annotation = Annotated[list[int], FieldInfo(alias="probe_alias")]
    parameter = inspect.Parameter("probe", inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
    endpoint.__signature__ = inspect.Signature([parameter])  # type: ignore[attr-defined]
    dependant = get_dependant(path="/", call=endpoint)
    return bool(dependant.body_params[0].alias == "probe_alias")


@cache
def body_null_is_missing() -> bool:
    """Whether FastAPI takes a body (or an embedded body part) that is JSON `null` as
    missing, its default or the `missing` error (0.142.2), or validates `None` as its
    value (0.165, where a `null` embedded body misses every part). FastAPI's own
    `request_body_to_args` is asked, once, on the first failing body of a route with
    errors="fastapi"; it awaits nothing for a dict, so the coroutine is run by hand."""

    def endpoint(**values: Any) -> None:
        """Takes one embedded body part, as its signature says."""

    parameter = inspect.Parameter(
        "probe", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[int, Body(embed=True)]
    )
    endpoint.__signature__ = inspect.Signature([parameter])  # type: ignore[attr-defined]
    dependant = get_dependant(path="/", call=endpoint)
    solving = request_body_to_args(dependant.body_params, {"probe": None}, True)
    try:
        solving.send(None)
    except StopIteration as done:
        _, errors = done.value
        return bool(errors[0]["type"] == "missing")
    solving.close()
    raise RuntimeError("FastAPI's request_body_to_args awaited on a dict body")


@cache
def parameter_models_take_defaults() -> bool:
    """Whether FastAPI validates a query or cookie model from the request's values with
    the defaults of the fields it lacks filled in (0.142.2: they show in a `missing`
    error's input) or from the request's values alone (0.165). FastAPI's own parameter
    solving is asked, once, on the first such error of a route with errors="fastapi"."""

    class Probe(BaseModel):
        x_probe: int
        y_probe: int = 5

    def endpoint(**values: Any) -> None:
        """Takes one query model, as its signature says."""

    parameter = inspect.Parameter(
        "probe", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[Probe, Query()]
    )
    endpoint.__signature__ = inspect.Signature([parameter])  # type: ignore[attr-defined]
    dependant = get_dependant(path="/", call=endpoint)
    _, errors = request_params_to_args(dependant.query_params, QueryParams(""))
    return bool(errors[0]["input"] == {"y_probe": 5})


@cache
def header_model_errors_by_header_name() -> bool:
    """Whether FastAPI locates a header model's field errors by the header's name
    (`["header", "x-token"]`, FastAPI 0.165) or by the field's (`["header", "x_token"]`,
    0.142.2). FastAPI's own parameter solving is asked, once, on the first such error.
    The probe's model is made then, not at import: a Pydantic model's objects, alive for
    good, would make every full garbage collection longer."""

    class Probe(BaseModel):
        x_probe: int

    def endpoint(**values: Any) -> None:
        """Takes one header model, as its signature says."""

    parameter = inspect.Parameter(
        "probe", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[Probe, Header()]
    )
    endpoint.__signature__ = inspect.Signature([parameter])  # type: ignore[attr-defined]
    dependant = get_dependant(path="/", call=endpoint)
    _, errors = request_params_to_args(dependant.header_params, Headers({"x-probe": "?"}))
    return bool(errors[0]["loc"][-1] == "x-probe")


# -- Pydantic routes on the direct tier: FastAPI's own reading of a body, without its handler --
# Checked against FastAPI 0.142.2 and 0.165.0.


def embeds_body_fields(route: Any) -> bool:
    """Whether FastAPI reads the route's body fields by key (several, or `embed=True`)."""
    return bool(route._embed_body_fields)


@cache
def absent_body() -> Any:
    """What FastAPI's handler hands its solving for a request without a body: None where
    it takes a JSON `null` body as missing too (0.142.2), else PydanticUndefined (0.165,
    which validates `null`)."""
    return None if body_null_is_missing() else PydanticUndefined


def validate_body(fields: list[Any], body: Any, embedded: bool) -> tuple[dict[str, Any], list[Any]]:
    """The body's values by parameter name and its errors, from FastAPI's own
    `request_body_to_args`. It awaits nothing for a body that is not a form, so its
    coroutine is run by hand: one step, no event loop."""
    solving = request_body_to_args(fields, body, embedded)
    try:
        solving.send(None)
    except StopIteration as done:
        values, errors = done.value
        return values, errors
    solving.close()
    raise RuntimeError("FastAPI's request_body_to_args awaited on a body that is not a form")


def solve_params(dependant: Any, connection: Any) -> tuple[dict[str, Any], list[Any]]:
    """A Dependant's path, query, header and cookie parameters (parameter models
    included) solved by FastAPI's own `request_params_to_args`, from `connection` (the
    request's HTTPConnection): the values by name, and the errors in FastAPI's order."""
    values, errors = request_params_to_args(dependant.path_params, connection.path_params)
    query_values, query_errors = request_params_to_args(
        dependant.query_params, connection.query_params
    )
    header_values, header_errors = request_params_to_args(
        dependant.header_params, connection.headers
    )
    cookie_values, cookie_errors = request_params_to_args(
        dependant.cookie_params, connection.cookies
    )
    values.update(query_values)
    values.update(header_values)
    values.update(cookie_values)
    return values, errors + query_errors + header_errors + cookie_errors


async def validate_form(
    fields: list[Any], form: Any, embedded: bool
) -> tuple[dict[str, Any], list[Any]]:
    """`validate_body` for a form: FastAPI's `request_body_to_args`, awaited (it reads
    the form's files)."""
    return await request_body_to_args(fields, form, embedded)


_validate_value_with_model_field = _dep_utils._validate_value_with_model_field
_BODY_LOC = ("body",)


def validate_whole_body(field: Any, body: Any) -> tuple[Any, list[Any]]:
    """`validate_body` for a route whose one body field is the whole body (not a form,
    not embedded): the step `request_body_to_args` takes for it, without its checks."""
    return _validate_value_with_model_field(field=field, value=body, values={}, loc=_BODY_LOC)


def field_type_adapter(field: Any) -> Any:
    """The TypeAdapter a FastAPI ModelField validates and serializes with."""
    return field._type_adapter


def located_errors(exc: Any, loc: tuple[str, ...]) -> list[Any]:
    """A Pydantic ValidationError's errors as FastAPI's ModelField.validate gives them:
    without documentation URLs, each located under `loc`."""
    return _regenerate_error_with_loc(errors=exc.errors(include_url=False), loc_prefix=loc)


def endpoint_context(call: Any, path: str, scope: Scope) -> Any:
    """The endpoint context FastAPI's handler gives its validation errors (where the
    endpoint is defined, and the request's method and path template), made as it makes
    it; only when a request fails."""
    context = _routing._extract_endpoint_context(call)
    if path:
        mount_path = scope.get("root_path", "").rstrip("/")
        context["path"] = f"{scope['method']} {mount_path}{path}"
    return context


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


# -- dispatch: what the route index (`_routing.index`, and the twins' dispatch section) reads --
# Every name below checked against FastAPI 0.142.2 and 0.165.0.

# FastAPI's node for one `include_router` (0.137+): its `effective_candidates()` are the
# inclusion's routes as contexts (and nested inclusions), built once per routes version.
IncludedRouter: Any = _routing._IncludedRouter

# The entry of the FastAPI scope dict naming the inclusion being matched or handled; the
# router's own `matches`/`handle` read it to know which inclusion they serve.
INCLUDED_ROUTER_KEY: str = _routing._FASTAPI_INCLUDED_ROUTER_KEY

# The scope entry where FastAPI's telemetry (0.142+) keeps its per-request record; when
# it is set, a selected route is reported with `route_selected`.
TELEMETRY_SCOPE_KEY = "fastapi.telemetry"

# Reports the selected route's path template to the request's telemetry span (both
# versions: `_route_selected(scope=, path=, mount=)`, a no-op without telemetry).
route_selected: Callable[..., None] = _routing._route_selected  # type: ignore[attr-defined]

# 0.165 merges the FastAPI entry of a child scope instead of replacing it; 0.142.2 has
# no `_update_scope` and uses `scope.update`.
_update_scope = getattr(_routing, "_update_scope", None)

# 0.165 applies per-router multipart limits on entering each router (top level and each
# inclusion); 0.142.2 has no form limits.
_apply_router_form_limits = getattr(_routing, "_apply_router_form_limits", None)


def update_scope(scope: Scope, child_scope: Scope) -> None:
    """Merge a matched route's child scope into the scope, as FastAPI's router does."""
    if _update_scope is None:
        scope.update(child_scope)
    else:
        _update_scope(scope, child_scope)


def router_form_limits(router: Any) -> dict[str, Any]:
    """The form limits a router applies when a request enters it ({} before 0.165)."""
    if _apply_router_form_limits is None:
        return {}
    return dict(getattr(router, "form_limits", None) or {})


def inclusion_form_limits(included: Any) -> dict[str, Any]:
    """The form limits an inclusion applies in its `handle` ({} before 0.165)."""
    if _apply_router_form_limits is None:
        return {}
    return dict(getattr(included.include_context, "form_limits", None) or {})


def apply_form_limits(scope: Scope, limits: dict[str, Any]) -> None:
    """What FastAPI does with a router's form limits on entering it (0.165)."""
    if _apply_router_form_limits is not None:
        _apply_router_form_limits(scope, limits)


def included_candidates(included: Any) -> list[Any]:
    """An inclusion's candidates in order: route contexts and nested inclusions.

    Builds them (and the route handlers) on first use, as FastAPI's first request would.
    """
    return included.effective_candidates()  # type: ignore[no-any-return]


def watch_route_changes(router: Any, on_change: Any) -> None:
    """Call `on_change()` whenever FastAPI bumps `router`'s routes version.

    Every change FastAPI counts (add_api_route, add_route, include_router, websocket
    routes, frontend) goes through `APIRouter._mark_routes_changed` in both versions;
    the hook is an instance attribute that calls the original first. Idempotent, also
    when index builds in two threads (two event loops) watch the same router at once:
    only the thread whose hook `setdefault` stored installs it.
    """
    if "_msgspec_watched" in vars(router):
        return
    original = router._mark_routes_changed

    def mark_routes_changed() -> None:
        original()
        on_change()

    if vars(router).setdefault("_msgspec_watched", mark_routes_changed) is mark_routes_changed:
        router._mark_routes_changed = mark_routes_changed


def routes_version(router: Any) -> int:
    """FastAPI's count of `router`'s route changes, its included routers' counted in: what
    `FastAPI.openapi()` compares to rebuild the document when the routes changed."""
    return router._get_routes_version()  # type: ignore[no-any-return]


def included_routers(router: Any) -> list[Any]:
    """The routers `router` includes directly, in inclusion order."""
    return [inclusion_router(route) for route in router.routes if isinstance(route, IncludedRouter)]


def replace_router_app(router: Any, app: Any) -> None:
    """Put `app` where `router.app` (Starlette's route loop) sits in the router's stack.

    `Router.__init__` wraps the bound `app` in the router's own middleware (and, with
    `max_body_size`, Starlette's body limit) as `middleware_stack`; the loop is the
    innermost `.app` of that chain. The instance attribute covers `Router.handle`.
    """
    loop = type(router).app

    def is_loop(candidate: Any) -> bool:
        return (
            getattr(candidate, "__self__", None) is router
            and getattr(candidate, "__func__", None) is loop
        ) or getattr(candidate, "installed_on", None) is router

    if is_loop(router.middleware_stack):
        router.middleware_stack = app
    else:
        node = router.middleware_stack
        for _ in range(64):
            inner = getattr(node, "app", None)
            if inner is None:
                raise RuntimeError("the router's route loop is not in its middleware stack")
            if is_loop(inner):
                node.app = app
                break
            node = inner
        else:
            raise RuntimeError("the router's route loop is not in its middleware stack")
    router.app = app


# The field of an inclusion (`_IncludedRouter`) holding the router it includes; read per
# request by `MsgspecRouter.matches`/`handle` to know the inclusion is one of theirs.
INCLUSION_ROUTER_ATTR = "original_router"


def inclusion_router(included: Any) -> Any:
    """The router an inclusion includes."""
    return getattr(included, INCLUSION_ROUTER_ATTR)


def context_route(context: Any) -> Any:
    """The route a route context (`_EffectiveRouteContext`) was built from."""
    return context.original_route


def context_starlette_route(context: Any) -> Any:
    """The prefixed copy FastAPI matches a non-API route of an inclusion with (or None)."""
    return getattr(context, "starlette_route", None)


def context_path(context: Any) -> tuple[str, Any, dict[str, Any]]:
    """A route context's prefixed path: (path_format, path_regex, param_convertors)."""
    return context.path_format, context.path_regex, context.param_convertors


# Server-sent events (FastAPI 0.135+): the idle time after which FastAPI sends a keep-alive
# comment, read per stream so that a patched value applies (from `fastapi.routing`, whose
# copy of `fastapi.sse._PING_INTERVAL` FastAPI's streaming reads), and the event schema
# its OpenAPI documents event streams with.
def sse_ping_interval() -> float:
    return float(_routing._PING_INTERVAL)  # type: ignore[attr-defined]


SSE_EVENT_SCHEMA: dict[str, Any] = _sse._SSE_EVENT_SCHEMA

# FastAPI 0.165 writes NaN and infinities of an untyped stream item as null; 0.142 lets
# json.dumps write its NaN and Infinity tokens.
_normalize_non_finite_floats: Callable[[Any], Any] = getattr(
    _routing, "_normalize_non_finite_floats", lambda data: data
)


def untyped_item_json(data: Any) -> str:
    """A stream item without an item type (or a ServerSentEvent's data that is no
    Pydantic model), as FastAPI's streaming writes it."""
    return json.dumps(_normalize_non_finite_floats(jsonable_encoder(data)))


# -- dependencies: what the dependency plan (`_dependencies.plan`, its executor) reads --
# Every name below checked against FastAPI 0.142.2 and 0.165.0.

# The Dependant fields the plan knows; a FastAPI that adds one keeps its routes delegated.
KNOWN_DEPENDANT_FIELDS = frozenset(
    {
        "path_params",
        "query_params",
        "header_params",
        "cookie_params",
        "body_params",
        "dependencies",
        "name",
        "call",
        "request_param_name",
        "websocket_param_name",
        "http_connection_param_name",
        "response_param_name",
        "background_tasks_param_name",
        "security_scopes_param_name",
        "own_oauth_scopes",
        "parent_oauth_scopes",
        "use_cache",
        "path",
        "scope",
        "concurrency",  # 0.165 (max_concurrency)
    }
)

# Where FastAPI's request_response keeps a request's two dependency exit stacks.
REQUEST_STACK_KEY = "fastapi_inner_astack"
FUNCTION_STACK_KEY = "fastapi_function_astack"


def dependant_fields(dependant: Any) -> frozenset[str]:
    """The fields of a Dependant (a slotted dataclass in both versions)."""
    return frozenset(field.name for field in dataclasses.fields(dependant))


def dependency_cache_key(dependant: Any) -> Any:
    """FastAPI's per-request cache key of a dependency: (call, scopes, computed scope)."""
    return _dep_models._get_cache_key(dependant=dependant)


def oauth_scopes(dependant: Any) -> list[str]:
    """The security scopes of a dependant: its parents', then its own new ones."""
    return _dep_models._get_oauth_scopes(dependant=dependant)


def is_gen_callable(call: Any) -> bool:
    return bool(_dep_models._is_gen_callable(call))


def is_async_gen_callable(call: Any) -> bool:
    return bool(_dep_models._is_async_gen_callable(call))


def is_coroutine_callable(call: Any) -> bool:
    return bool(_dep_models._is_coroutine_callable(call))


def parameter_errors(dependant: Any, connection: Any) -> list[Any]:
    """The errors FastAPI's solve_dependencies finds in `dependant`'s own path, query,
    header and cookie parameters for the request of `connection`, in its order."""
    errors: list[Any] = []
    for fields, received in (
        (dependant.path_params, connection.path_params),
        (dependant.query_params, connection.query_params),
        (dependant.header_params, connection.headers),
        (dependant.cookie_params, connection.cookies),
    ):
        if fields:
            errors += request_params_to_args(fields, received)[1]
    return errors


def rebuild_dependant(sub: Any, call: Any) -> Any:
    """What solve_dependencies makes of a sub-dependant while any override is set: a new
    Dependant of `call` (the override, or the original) under the original's name, scope,
    concurrency and merged security scopes."""
    kwargs: dict[str, Any] = {}
    if "concurrency" in dependant_fields(sub):
        kwargs["concurrency"] = sub.concurrency
    return _dep_utils.get_dependant(
        path=sub.path,
        call=call,
        name=sub.name,
        parent_oauth_scopes=oauth_scopes(sub),
        scope=sub.scope,
        **kwargs,
    )


# 0.165 shields the teardown of async generator dependencies (none before), under one
# cancel scope per request kept in the scope by request stack.
SHIELDS_ASYNC_TEARDOWN = hasattr(_fastapi_concurrency, "_asynccontextmanager_with_shielded_exit")
_CLEANUP_SCOPES_KEY = "fastapi_async_cleanup_scopes"
# anyio 4: the running library's backend, behind anyio's module-level calls.
get_async_backend: Callable[[], Any] | None = getattr(_anyio_eventloop, "get_async_backend", None)

# The async generator functions behind FastAPI's generator wrappers, which the dependency
# executor's `Teardown` drives as `asynccontextmanager` would: a sync generator's context
# manager run in the threadpool (both versions; its exception handling differs between
# them), and 0.165's `max_concurrency` limit around a dependency's context manager (None
# before, or where a FastAPI makes them otherwise: its plans then leave such dependencies
# to FastAPI).
threadpool_generator: Callable[..., Any] | None = getattr(
    _fastapi_concurrency.contextmanager_in_threadpool, "__wrapped__", None
)
concurrency_limit_generator: Callable[..., Any] | None = getattr(
    getattr(_fastapi_concurrency, "_contextmanager_with_concurrency_limit", None),
    "__wrapped__",
    None,
)


# anyio's cancel scope on asyncio, and its record of each task's current scope (weak keys
# to task states), which tell whether FastAPI's cleanup scope would be its task's outermost
# (`_dependencies.executor.enter_cleanup_scope`, which reads these names per request);
# None where anyio lays them out otherwise, and the route then enters the scope as FastAPI
# does.
asyncio_cancel_scope: type | None
asyncio_checkpoint_if_cancelled: Callable[[], Awaitable[None]] | None
task_state_records: dict[Any, Any] | None
try:
    from anyio._backends import _asyncio as _anyio_asyncio
except ImportError:  # pragma: no cover - anyio without its asyncio backend module
    asyncio_cancel_scope = asyncio_checkpoint_if_cancelled = task_state_records = None
else:
    asyncio_cancel_scope = getattr(_anyio_asyncio, "CancelScope", None)
    asyncio_checkpoint_if_cancelled = getattr(
        getattr(_anyio_asyncio, "backend_class", None), "checkpoint_if_cancelled", None
    )
    _task_states = getattr(_anyio_asyncio, "_task_states", None)
    _task_state_slots = getattr(getattr(_anyio_asyncio, "TaskState", None), "__slots__", ())
    # The weak dictionary's own dict of weak references, read as its `get` reads it.
    task_state_records = (
        getattr(_task_states, "data", None)
        if isinstance(_task_states, WeakKeyDictionary) and "cancel_scope" in _task_state_slots
        else None
    )

# How anyio 4's `get_async_backend()` names the running library: sniffio's answer where
# sniffio is installed, else asyncio while an asyncio loop runs (the executor's
# `enter_cleanup_scope` asks the same directly). `_UNKNOWN` where anyio does not say, and
# then anyio is asked.
_UNKNOWN = object()
_anyio_sniffio: Any = getattr(_anyio_eventloop, "sniffio", _UNKNOWN)
# The names sniffio answers before it looks for asyncio: one set for the thread (sniffio
# 1.3 on), then one set for the context; None where this sniffio has no such name.
sniffio_thread_local: Any = getattr(_anyio_sniffio, "thread_local", None)
sniffio_cvar: Any = getattr(_anyio_sniffio, "current_async_library_cvar", None)
# Its `get`, bound once: the request path calls it without looking the method up.
sniffio_cvar_get: Callable[[], str | None] | None = getattr(sniffio_cvar, "get", None)
takes_asyncio_scope = (
    asyncio_cancel_scope is not None
    and asyncio_checkpoint_if_cancelled is not None
    and task_state_records is not None
    and _anyio_sniffio is not _UNKNOWN
)


# asyncio's record of the task running on each loop, read as its `current_task` reads it,
# where that function is Python (3.11: a frame per call); None where it is C (3.12 on).
running_tasks: dict[Any, Any] | None = (
    None
    if isinstance(asyncio.current_task, BuiltinFunctionType)
    else getattr(asyncio.tasks, "_current_tasks", None)
)


def stack_cleanup_scope(scope: Scope) -> CancelScope:
    """FastAPI 0.165's cleanup scope of the request, on the request stack in `scope`: made
    and entered there before the first async generator, as `_solve_generator` does."""
    cleanup_scopes = scope.setdefault(_CLEANUP_SCOPES_KEY, {})
    request_stack = scope[REQUEST_STACK_KEY]
    cleanup_scope: CancelScope | None = cleanup_scopes.get(request_stack)
    if cleanup_scope is None:
        cleanup_scope = request_stack.enter_context(CancelScope())
        cleanup_scopes[request_stack] = cleanup_scope
        request_stack.callback(cleanup_scopes.pop, request_stack)
    return cleanup_scope


def response_not_awaited() -> Exception:
    """FastAPI's error when a request-scope generator swallowed the handler's exception."""
    return FastAPIError(
        "Response not awaited. There's a high chance that the "
        "application code is raising an exception and a dependency with yield "
        "has a block with a bare except, or a block with except Exception, "
        "and is not raising the exception again. Read more about it in the "
        "docs: https://fastapi.tiangolo.com/tutorial/dependencies/dependencies-with-yield/#dependencies-with-yield-and-except"
    )


async def run_in_exit_stacks(
    scope: Scope,
    receive: Receive,
    send: Send,
    solve: Callable[..., Awaitable[Response | None]],
    *args: Any,
) -> None:
    """As FastAPI's request_response: `solve(*args)` inside the function stack inside the
    request stack, its response sent between their closings.

    Plain Python on purpose, for both twins: an exception a teardown raises in a worker
    thread comes back by being thrown through the awaiting frames, and CPython then sets
    its `__context__` to the exception the frame closing a stack is handling (FastAPI's
    own frame does so). A Cython coroutine frame does not, so a compiled copy of this
    frame hands the exception handlers another `__context__` than FastAPI does."""
    response: Response | None = None
    response_awaited = False
    async with AsyncExitStack() as request_stack:
        scope[REQUEST_STACK_KEY] = request_stack
        async with AsyncExitStack() as function_stack:
            scope[FUNCTION_STACK_KEY] = function_stack
            response = await solve(*args)
        if response is None:
            # A function-scope generator swallowed the exception: FastAPI reads its
            # unbound `response` here.
            raise UnboundLocalError(
                "cannot access local variable 'response' where it is not associated with a value"
            )
        await response(scope, receive, send)
        response_awaited = True
    if not response_awaited:
        raise response_not_awaited()


# -- telemetry: FastAPI's own reporting of a route (`FastAPI(telemetry=...)`) ------------
# What `_endpoint.telemetry` runs in place of FastAPI's request handler, all alike in 0.142.2 and
# 0.165.0. The three reporting functions do nothing for a request not observed.

# The request's TelemetryData (public), or None.
telemetry_data: Callable[[], Any] = _telemetry.get_telemetry_data
# `with operation(name="endpoint", function=call):` a `fastapi.<name>` span, as FastAPI's
# request handler opens around dependency solving, the endpoint and serialization.
operation: Callable[..., AbstractContextManager[None]] = _telemetry._operation
# Reports a RequestValidationError: TelemetryData's body and errors, and the
# `fastapi.validation.failed` log record.
validation_failed: Callable[[RequestValidationError], None] = _telemetry._validation_failed

# The ASGI app FastAPI makes of a route handler (`APIRoute.app`, without the body limit):
# the exit stacks dependencies need, and the application's exception handlers.
route_app: Callable[[Callable[[Request], Coroutine[Any, Any, Response]]], ASGIApp] = (
    _routing.request_response
)


async def solve_dependencies(request: Request, dependant: Any, overrides_provider: Any) -> Any:
    """FastAPI's solving of a dependant without a FastAPI body, as its request handler
    runs it: (values, errors, background_tasks, response, ...)."""
    return await _solve_dependencies(
        request=request,
        dependant=dependant,
        dependency_overrides_provider=overrides_provider,
        async_exit_stack=request.scope["fastapi_inner_astack"],
        embed_body_fields=False,
    )


# -- entry: FastAPI's default application layers, as `_routing.stack` replaces them
# FastAPI.build_middleware_stack builds, outermost first: ServerErrorMiddleware,
# ExceptionTelemetryMiddleware, AppBodyLimitMiddleware (0.164+; none in 0.142.2), the
# user middleware, ExceptionMiddleware, AsyncExitStackMiddleware, then the router. With a
# `max_body_size`, AppBodyLimitMiddleware wraps its app in Starlette's
# RequestBodyLimitMiddleware and FastAPI's `_BodyLimitExceptionMiddleware`. Checked
# against FastAPI 0.142.2 and 0.165.0 with Starlette 1.10.0; any other layer, or another
# order, leaves FastAPI's stack in place (see `_routing.stack`).

ExceptionTelemetryMiddleware: type = _telemetry_asgi.ExceptionTelemetryMiddleware

# What ExceptionTelemetryMiddleware records of an exception on its way out (the same
# `_exception(scope=, exc=)` in both versions; a no-op for a request not observed).
_record_exception: Callable[..., None] = _telemetry_asgi._exception


def record_exception(scope: Scope, exc: Exception) -> None:
    """ExceptionTelemetryMiddleware's record of `exc` in the request's telemetry."""
    _record_exception(scope=scope, exc=exc)


AppBodyLimitMiddleware: type | None
BODY_LIMIT_INNER_LAYERS: tuple[type, ...]
try:
    # 0.164+: the application's `max_body_size`, and the two layers it adds with one.
    from fastapi._body_limit import AppBodyLimitMiddleware, _BodyLimitExceptionMiddleware
    from starlette.middleware.body_limit import RequestBodyLimitMiddleware

    BODY_LIMIT_INNER_LAYERS = (RequestBodyLimitMiddleware, _BodyLimitExceptionMiddleware)
except ImportError:  # pragma: no cover - exercised on FastAPI < 0.164
    AppBodyLimitMiddleware = None
    BODY_LIMIT_INNER_LAYERS = ()

# The scope entry where Starlette's body limit records the limit of the request (set by
# an enclosing application too: AppBodyLimitMiddleware then applies it); "" before 0.164.
BODY_LIMIT_SCOPE_KEY: str = _BODY_LIMIT_KEY

# The scope entries AsyncExitStackMiddleware and ExceptionMiddleware set.
FILE_STACK_KEY = _FILE_STACK_KEY
EXCEPTION_HANDLERS_KEY = _EXCEPTION_HANDLERS_KEY

# Starlette's handler lookup by the exception's MRO, and its test for an async handler.
lookup_exception_handler: Callable[[dict[Any, Any], Exception], Any] = _lookup_exception_handler
is_async_callable: Callable[[Any], bool] = _is_async_callable


def exception_middleware_handlers(middleware: Any) -> tuple[dict[Any, Any], dict[int, Any]]:
    """ExceptionMiddleware's (exception class, status code) handler maps, as it puts them
    in the scope; its defaults for HTTPException and WebSocketException included."""
    return middleware._exception_handlers, middleware._status_handlers


# The deque of an AsyncExitStack's callbacks: empty when nothing was pushed onto it. A
# name, not a function: the entry reads it on every request.
EXIT_CALLBACKS_ATTR = "_exit_callbacks"


class FileStack(AsyncExitStack):
    """The AsyncExitStack the entry makes per request for FastAPI's form files, made
    without the Python frame of contextlib's `__init__` and without its deque of
    callbacks, which the first callback pushed onto it makes: most requests push none.
    Until then the deque's attribute is the class's empty tuple, so the stack reads as
    empty wherever contextlib or the entry look. Every push of contextlib's stacks goes
    through `_push_exit_callback` (`file_stack_class` checks that it does)."""

    __init__ = object.__init__
    _exit_callbacks: Any = ()

    def _push_exit_callback(self, callback: Any, is_sync: bool = True) -> None:
        if self._exit_callbacks is FileStack._exit_callbacks:
            self._exit_callbacks = deque()
        super()._push_exit_callback(callback, is_sync)  # type: ignore[misc]


def file_stack_class() -> type[AsyncExitStack]:
    """`FileStack` where this Python's contextlib keeps a stack's callbacks as
    FileStack expects (a deque made by `__init__`, and every kind of push appended to it
    by `_push_exit_callback`), else AsyncExitStack itself."""

    async def async_callback() -> None:
        return None

    def exit_callback(*details: Any) -> None:
        return None

    try:
        if type(vars(AsyncExitStack()).get(EXIT_CALLBACKS_ATTR)) is not deque:
            return AsyncExitStack
        probe = FileStack()
        probe.push(exit_callback)
        probe.callback(exit_callback)
        probe.push_async_exit(exit_callback)
        probe.push_async_callback(async_callback)
        callbacks = getattr(probe, EXIT_CALLBACKS_ATTR)
    except Exception:  # a contextlib that keeps its callbacks some other way
        return AsyncExitStack
    return FileStack if type(callbacks) is deque and len(callbacks) == 4 else AsyncExitStack


# The class of the entry's per-request file stack, chosen once.
FILE_STACK_CLASS: type[AsyncExitStack] = file_stack_class()


# -- FastAPI's native telemetry test: `FastAPI.__call__` (0.165) asks
# `app._native_telemetry.enabled()` on every request, which asks each OpenTelemetry API
# for its global provider. The entry's `TelemetryGate` answers it from the same state, read
# directly: per kind, the configuration keys, the module FastAPI calls the getter on, the
# getter, its global provider, the environment variable naming one, and the proxy the
# getter returns while none is set (which FastAPI must find unconfigured).
_TELEMETRY_KINDS = (
    ("tracing", "tracer_provider", "trace", "get_tracer_provider", "_TRACER_PROVIDER",
     "OTEL_PYTHON_TRACER_PROVIDER", "_PROXY_TRACER_PROVIDER"),
    ("metrics", "meter_provider", "metrics", "get_meter_provider", "_METER_PROVIDER",
     "OTEL_PYTHON_METER_PROVIDER", "_PROXY_METER_PROVIDER"),
    ("logs", "logger_provider", "_logs", "get_logger_provider", "_LOGGER_PROVIDER",
     "OTEL_PYTHON_LOGGER_PROVIDER", "_PROXY_LOGGER_PROVIDER"),
)  # fmt: skip


# The application's attribute holding its native telemetry, whose `enabled()` its
# `__call__` asks on every HTTP and WebSocket request.
NATIVE_TELEMETRY_ATTR = "_native_telemetry"


def telemetry_gate_parts(app: Any) -> tuple[Any, tuple[Any, ...]] | None:
    """(`app`'s native telemetry, the arguments of a `TelemetryGate` for it), or None
    where FastAPI has no such test or its state is not the one the gate knows."""
    telemetry: Any = getattr(app, NATIVE_TELEMETRY_ATTR, None)
    native: Any = getattr(_telemetry_asgi, "NativeTelemetry", None)
    if native is None or type(telemetry) is not native:
        return None
    config = telemetry.config
    environ: Any = os.environ
    # The dict behind `os.environ`, which every change to it goes through.
    data = getattr(environ, "_data", None)
    if type(environ) is not os._Environ or type(data) is not dict:
        return None
    kinds = []
    for switch, provider, api_name, name, current, variable, proxy in _TELEMETRY_KINDS:
        api = getattr(_telemetry_asgi, api_name, None)
        getter = getattr(api, name, None)
        namespace = getattr(getter, "__globals__", None)
        if (
            # A plain module's attribute is its `__dict__` entry, which the gate reads.
            type(api) is not ModuleType
            or type(config) is not dict
            or switch not in config
            or provider not in config
            or not isinstance(namespace, dict)
            or current not in namespace
            or proxy not in namespace
            or not _telemetry._unconfigured(namespace[proxy])
        ):
            return None
        key = environ.encodekey(variable)
        kinds.append((switch, provider, vars(api), name, getter, namespace, current, key))
    original = native.enabled.__get__(telemetry)
    return telemetry, (original, config, tuple(kinds), data)


def replace_telemetry_test(telemetry: Any, gate: Callable[[], bool]) -> None:
    """Put `gate` in place of FastAPI's `enabled()` on this application's telemetry."""
    telemetry.enabled = gate
