"""`MsgspecRouter` and its route class: where FastAPI meets the request path.

Adding a route analyses the endpoint once (`_plan.analyze_endpoint`) and registers a
thin wrapper with FastAPI, so that dependencies, security, overrides and background
tasks stay FastAPI's. Building a route's handler (once per place the route is included)
turns that analysis into a `RoutePlan` and a request-path runtime, and decides the tier:
routes with nothing for FastAPI to solve get the runtime as their whole ASGI app.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from functools import cache, wraps
from types import ModuleType
from typing import Any, ClassVar

from fastapi import APIRouter
from fastapi.datastructures import Default, DefaultPlaceholder
from fastapi.routing import APIRoute
from fastapi.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from . import _compat, _impl
from ._depends import UNDECODED_KEY, DependencyTree, refuse_inclusion_dependencies
from ._openapi import merge_components, route_openapi
from ._params import direct_param_specs, prepare_dependant
from ._plan import (
    DirectPlan,
    EndpointSpec,
    RoutePlan,
    analyze_endpoint,
    literal_path,
)
from ._shared import (
    DIRECT_ATTR,
    MATCHER_ATTR,
    REACHED_KEY,
    SCOPE_KEY,
    STREAM_NONE,
    TELEMETRY_SCOPE_KEY,
    ClientDisconnect,
    NoResponse,
    RequestValidationError,
)
from ._telemetry import traced_handler
from ._validation import request_invalid
from .responses import MsgspecJSONResponse

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

_SPEC_ATTR = "__msgspec_spec__"
# The wrapper's `arguments`, which the handling of an observed request shares.
_ARGUMENTS_ATTR = "__msgspec_arguments__"

# Before FastAPI 0.164 the router carries `max_body_size` itself: from a route decorator
# to add_api_route, and from there to the route being built.
_DECORATOR_LIMIT: ContextVar[int | None] = ContextVar("msgspec_decorator_limit", default=None)
_ROUTE_LIMIT: ContextVar[int | None] = ContextVar("msgspec_route_limit", default=None)
# `msgpack=` of a route decorator, on its way to add_api_route.
_DECORATOR_MSGPACK: ContextVar[bool | None] = ContextVar("msgspec_decorator_msgpack", default=None)


def _check_limit(max_body_size: int | None) -> None:
    if max_body_size is None:
        return
    if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 0:
        raise ValueError("max_body_size must be a non-negative integer or None")


def _check_msgpack(msgpack: bool | None) -> None:
    if msgpack is not None and not isinstance(msgpack, bool):
        raise TypeError("msgpack must be True, False or None")


def _accepting_route_options(method: Callable[..., Any]) -> Callable[..., Any]:
    """A route decorator of APIRouter that also takes `msgpack`, and `max_body_size`
    before FastAPI 0.164 (later FastAPI takes that one itself)."""

    @wraps(method)
    def decorator_factory(self: Any, *args: Any, msgpack: bool | None = None, **kw: Any) -> Any:
        limit = None if _compat.HAS_NATIVE_BODY_LIMIT else kw.pop("max_body_size", None)
        decorator = method(self, *args, **kw)
        if limit is None and msgpack is None:
            return decorator
        _check_limit(limit)
        _check_msgpack(msgpack)

        def register(func: Callable[..., Any]) -> Any:
            limit_token = _DECORATOR_LIMIT.set(limit)
            msgpack_token = _DECORATOR_MSGPACK.set(msgpack)
            try:
                return decorator(func)
            finally:
                _DECORATOR_MSGPACK.reset(msgpack_token)
                _DECORATOR_LIMIT.reset(limit_token)

        return register

    return decorator_factory


def _resolve(value: Any) -> Any:
    return value.value if isinstance(value, DefaultPlaceholder) else value


def _make_wrapper(spec: EndpointSpec, exposed: inspect.Signature) -> Callable[..., Any]:
    """The endpoint FastAPI sees on the delegated tier."""
    endpoint = spec.endpoint
    is_coroutine = spec.is_coroutine
    # The endpoint's own part of the body and the models; its dependencies take the rest.
    body_names = spec.endpoint_body
    embedded = spec.body is not None and spec.body.embedded
    model_names = spec.endpoint_models
    request_name, response_name = spec.request_name, spec.response_name
    pop_request, pop_response = spec.injected_request, spec.injected_response
    handles_output = spec.output is not None
    # A generator endpoint's call only makes the generator: no threadpool, no await.
    streams = spec.output is not None and spec.output.stream != STREAM_NONE

    def arguments(values: dict[str, Any]) -> tuple[Any, Request, Response]:
        """Fill in what the request path read, or raise its 422; the route's runtime, the
        request and the sub-response FastAPI made."""
        request = values.pop(request_name) if pop_request else values[request_name]
        sub_response = values.pop(response_name) if pop_response else values[response_name]
        runtime, body, raw, models, model_errors = request.scope[SCOPE_KEY]
        request.scope[REACHED_KEY] = True
        if UNDECODED_KEY in request.scope:
            # A dependency was handed what the request path could not decode.
            raise request_invalid(model_errors, body, raw)
        if model_names:
            if model_errors:
                raise request_invalid(model_errors, body, raw)
            for name in model_names:
                values[name] = models[name]
        if body_names:
            if type(body) is RequestValidationError:
                raise body
            if embedded:
                for name in body_names:
                    values[name] = body[name]
            else:
                values[body_names[0]] = body
        return runtime, request, sub_response

    @wraps(endpoint)
    async def wrapper(**values: Any) -> Any:
        runtime, request, sub_response = arguments(values)
        if streams:
            result = endpoint(**values)
        elif is_coroutine:
            result = await endpoint(**values)
        else:
            result = await run_in_threadpool(endpoint, **values)
        if not handles_output or isinstance(result, Response):
            return result
        return runtime.respond(
            result, sub_response.status_code, sub_response.raw_headers, request.scope["headers"]
        )

    wrapper.__signature__ = exposed  # type: ignore[attr-defined]
    if streams:
        # FastAPI follows __wrapped__ to decide whether an endpoint streams: this one
        # returns the stream itself.
        del wrapper.__wrapped__
    setattr(wrapper, _SPEC_ATTR, spec)
    setattr(wrapper, _ARGUMENTS_ATTR, arguments)
    return wrapper


def _direct_plan(spec: EndpointSpec, target: Any) -> DirectPlan | None:
    """The direct tier's plan when FastAPI has nothing to solve for this route."""
    dependant = target.dependant
    if spec.output is None or not (spec.injected_request and spec.injected_response):
        return None
    if dependant.dependencies or dependant.body_params:
        return None
    special = (
        dependant.websocket_param_name,
        dependant.http_connection_param_name,
        dependant.background_tasks_param_name,
        dependant.security_scopes_param_name,
    )
    if any(name is not None for name in special):
        return None
    params = direct_param_specs(dependant)
    if params is None:
        return None
    body_name = spec.body.name if spec.body is not None else None
    return DirectPlan(spec.endpoint, spec.is_coroutine, params, body_name)


def _renders_as_msgspec(response_class: Any) -> bool:
    """MsgspecJSONResponse, or a subclass that changes nothing but its media type: the
    request path can send its responses itself."""
    if not (isinstance(response_class, type) and issubclass(response_class, MsgspecJSONResponse)):
        return False
    return all(
        getattr(response_class, name) is getattr(MsgspecJSONResponse, name)
        for name in ("__init__", "render", "__call__", "init_headers")
    )


class MsgspecRoute(APIRoute):
    """An APIRoute whose body and response go through the msgspec request path."""

    # The request-path twin the route runs on: the one `_impl` picked. `route_class_for`
    # makes subclasses bound to a given twin, so that tests can run both in one process.
    twin: ClassVar[ModuleType] = _impl.twin

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        # Only used before FastAPI 0.164, which has no max_body_size of its own.
        self.msgspec_max_body_size = _ROUTE_LIMIT.get()
        super().__init__(path, endpoint, **kwargs)
        direct = getattr(self, DIRECT_ATTR, None)
        if direct is not None:
            self.app = direct

    def get_route_handler(self) -> Handler:
        context = _compat.building_context()
        target: Any = context if context is not None and context.original_route is self else self
        if target is context:
            path_regex, convertors, endpoint, methods = _compat.included_match_data(context)
            literal = literal_path(path_regex, context.path_format)
            matcher = self.twin.RouteMatcher(
                self, path_regex, literal, convertors, endpoint, methods
            )
            setattr(context, MATCHER_ATTR, matcher)
        prepare_dependant(target.dependant)
        spec: EndpointSpec | None = getattr(self.endpoint, _SPEC_ATTR, None)
        handler = super().get_route_handler()
        if spec is None:
            return handler
        if (spec.body is not None or spec.form is not None) and target.body_field is not None:
            raise TypeError(
                f"{spec.endpoint.__name__}(): other FastAPI body fields cannot be combined "
                f"with a msgspec {'body' if spec.form is None else 'form model'}"
            )
        plan = RoutePlan(
            body=spec.body,
            output=spec.output,
            strict_content_type=bool(_resolve(target.strict_content_type)),
            status_code=target.status_code or 200,
            # A form is parsed FastAPI's way, on the delegated tier.
            direct=_direct_plan(spec, target) if spec.form is None else None,
            max_body_size=self._own_limit(),
            models=spec.models,
            form=spec.form,
        )
        runtime = self.twin.RouteRuntime(plan)
        direct = None
        if plan.direct is not None:
            direct = _compat.wrap_body_limit(runtime, getattr(target, "max_body_size", None))
        setattr(target, DIRECT_ATTR, direct)

        def served(handler: Handler) -> Handler:
            """`handler`, which a direct-tier route's runtime hands the requests FastAPI's
            telemetry observes (`RouteRuntime.traced_app`)."""
            if direct is not None:
                runtime.traced_app = _compat.route_app(handler)
            return handler

        has_models = bool(spec.models)

        def gather_models(scope: Any) -> tuple[dict[str, Any], list[Any]]:
            values: dict[str, Any] = {}
            errors: list[Any] = []
            if has_models:
                runtime.extract_models(scope, values, errors)
            return values, errors

        # What FastAPI's telemetry, when it observes a request, sees of the route: see
        # `_telemetry`. Not for a route whose body or response FastAPI handles itself.
        traced = None
        if spec.output is not None and target.body_field is None:
            traced = traced_handler(spec, target, getattr(self.endpoint, _ARGUMENTS_ATTR))

        async def delegate(
            request: Request, body: Any, raw: bytes | None, models: Any, model_errors: list[Any]
        ) -> Response:
            """FastAPI's handler, with what the request path read left for the wrapper."""
            request.scope[SCOPE_KEY] = (runtime, body, raw, models, model_errors)
            if traced is not None and request.scope.get(TELEMETRY_SCOPE_KEY) is not None:
                return await traced(request, body, raw, models, model_errors)
            try:
                return await handler(request)
            except RequestValidationError as exc:
                if request.scope.get(REACHED_KEY) or (raw is None and not model_errors):
                    raise
                # FastAPI's parameter errors, raised before the endpoint ran: the models'
                # and the body's errors follow them, with the received body, as in FastAPI.
                raise request_invalid([*exc.errors(), *model_errors], body, raw) from None

        if spec.form is not None:
            form_limits = _compat.route_form_limits(self)

            async def handle_form(request: Request) -> Response:
                try:
                    if plan.max_body_size >= 0:
                        raw = await runtime.read_raw(request.scope, request.receive)
                        _compat.cache_request_body(request, raw)  # what the form parser reads
                    form = await _compat.read_form(request, form_limits)
                except ClientDisconnect:
                    return NoResponse()
                models, model_errors = gather_models(request.scope)
                runtime.extract_form(form, models, model_errors)
                return await delegate(request, None, None, models, model_errors)

            return handle_form

        if spec.body is None:

            async def handle(request: Request) -> Response:
                if plan.max_body_size >= 0:
                    runtime.check_declared_length(request.scope["headers"])
                models, model_errors = gather_models(request.scope)
                return await delegate(request, None, None, models, model_errors)

            return served(handle)

        enforce_limit = plan.max_body_size >= 0

        async def handle_with_body(request: Request) -> Response:
            try:
                if enforce_limit:
                    raw = await runtime.read_raw(request.scope, request.receive)
                    _compat.cache_request_body(request, raw)  # for dependencies
                else:
                    raw = await request.body()
            except ClientDisconnect:
                return NoResponse()
            # 415 and 400 are sent here, before any dependency runs.
            body = runtime.parse_body(request.scope, raw)
            models, model_errors = gather_models(request.scope)
            return await delegate(request, body, raw, models, model_errors)

        return served(handle_with_body)

    def _own_limit(self) -> int:
        """The body limit the request path enforces: -1 where FastAPI enforces its own."""
        if _compat.HAS_NATIVE_BODY_LIMIT or self.msgspec_max_body_size is None:
            return -1
        return self.msgspec_max_body_size

    # Per request, FastAPI's router calls these for every route it tries. They are the
    # request path's functions (C in the compiled twin), so no Python frame runs here.
    matches = twin.route_matches
    handle = twin.route_handle

    @property
    def tier(self) -> str:
        """The tier of the route as added: "direct" or "delegated"."""
        return "direct" if getattr(self, DIRECT_ATTR, None) is not None else "delegated"


@cache
def route_class_for(twin: ModuleType) -> type[MsgspecRoute]:
    """A MsgspecRoute subclass whose routes run on `twin` (a module of `_impl.TWIN_MODULES`)."""
    return type(
        f"MsgspecRoute_{twin.IMPLEMENTATION}",
        (MsgspecRoute,),
        {"twin": twin, "matches": twin.route_matches, "handle": twin.route_handle},
    )


class MsgspecRouter(APIRouter):
    """An APIRouter that decodes bodies and encodes responses with msgspec.

    With `msgpack=True` its routes (unless a route says `msgpack=False`) also take
    MessagePack bodies and answer in MessagePack when the request's Accept prefers it.
    """

    def __init__(self, *args: Any, msgpack: bool = False, **kwargs: Any) -> None:
        _check_msgpack(msgpack)
        self.msgpack = msgpack
        kwargs.setdefault("route_class", MsgspecRoute)
        # A placeholder, as FastAPI's own default is: FastAPI streams a generator route of
        # Pydantic items as JSON Lines only when no response class was chosen.
        kwargs.setdefault("default_response_class", Default(MsgspecJSONResponse))
        if not issubclass(kwargs["route_class"], MsgspecRoute):
            raise TypeError("route_class must be MsgspecRoute or a subclass of it")
        if not _compat.HAS_NATIVE_BODY_LIMIT:
            limit = kwargs.pop("max_body_size", None)
            _check_limit(limit)
            self.max_body_size = limit
        super().__init__(*args, **kwargs)
        self.msgspec_components: dict[str, Any] = {}

    # Per request, FastAPI's loop asks each inclusion's router whether it has the route
    # and then to handle it; both go through the inclusion's route index (`_routing`).
    matches = _impl.twin.router_matches
    handle = _impl.twin.router_handle  # type: ignore[assignment]

    def include_router(self, router: APIRouter, *args: Any, **kwargs: Any) -> None:
        refuse_inclusion_dependencies([*self.dependencies, *(kwargs.get("dependencies") or ())])
        if isinstance(router, MsgspecRouter):
            merge_components(self.msgspec_components, router.msgspec_components)
        super().include_router(router, *args, **kwargs)

    def add_api_route(
        self,
        path: str,
        endpoint: Callable[..., Any],
        *,
        msgpack: bool | None = None,
        **kwargs: Any,
    ) -> None:
        _check_msgpack(msgpack)
        if msgpack is None:
            msgpack = _DECORATOR_MSGPACK.get()
        takes_msgpack = self.msgpack if msgpack is None else msgpack
        override = kwargs.get("route_class_override")
        if override is not None and not issubclass(override, MsgspecRoute):
            raise TypeError("route_class_override must be MsgspecRoute or a subclass of it")
        if _compat.HAS_NATIVE_BODY_LIMIT:
            limit = kwargs.get("max_body_size")
            limit = limit if limit is not None else self.max_body_size
        else:
            limit = kwargs.pop("max_body_size", None)
            _check_limit(limit)
            for fallback in (_DECORATOR_LIMIT.get(), self.max_body_size):
                limit = fallback if limit is None else limit
        token = _ROUTE_LIMIT.set(limit)
        try:
            self._add_route(path, endpoint, limit, takes_msgpack, kwargs)
        finally:
            _ROUTE_LIMIT.reset(token)

    def _add_route(
        self,
        path: str,
        endpoint: Callable[..., Any],
        limit: int | None,
        msgpack: bool,
        kwargs: dict[str, Any],
    ) -> None:
        dependencies = [*self.dependencies, *(kwargs.get("dependencies") or ())]
        if getattr(endpoint, _SPEC_ATTR, None) is not None:
            # Already analysed: a route copied from another MsgspecRouter, whose own
            # dependencies already stand in for what takes msgspec types.
            refuse_inclusion_dependencies(dependencies)
            super().add_api_route(path, endpoint, **kwargs)
            return
        response_class = kwargs.get("response_class")
        if response_class is None or isinstance(response_class, DefaultPlaceholder):
            response_class = _resolve(self.default_response_class)
        untyped_allowed = _renders_as_msgspec(response_class)
        sse = isinstance(response_class, type) and issubclass(response_class, EventSourceResponse)
        # What responses are labelled and documented with: the class the route responds with.
        media_type = getattr(response_class, "media_type", None) or "application/json"
        content_type = media_type
        if media_type.startswith("text/") and "charset=" not in media_type.lower():
            # Starlette's rule for the header of a text response.
            content_type += f"; charset={getattr(response_class, 'charset', 'utf-8')}"
        tree = DependencyTree.read(endpoint, dependencies)
        spec, exposed = analyze_endpoint(
            endpoint,
            kwargs,
            untyped_allowed,
            msgpack,
            sse,
            content_type if untyped_allowed else "application/json",
            tree.body,
            tree.models,
        )
        router_dependencies = self.dependencies
        if spec is not None and not tree.empty:
            embedded = spec.body is not None and spec.body.embedded
            dependencies, parameters = tree.stand_ins(
                embedded, dependencies, list(exposed.parameters.values())
            )
            exposed = exposed.replace(parameters=parameters)
            # The router's own dependencies may need stand-ins too: the route gets them
            # all, and FastAPI must not add the router's again.
            kwargs["dependencies"] = dependencies
            router_dependencies = []
        if spec is not None and spec.output is not None and not untyped_allowed:
            media_type = "application/json"
        if self.responses:
            # FastAPI adds the router's responses to the route's; ours must see them to
            # take their msgspec models out, and the route's entries still win.
            kwargs["responses"] = {**self.responses, **(kwargs.get("responses") or {})}
        components = route_openapi(spec, kwargs, limit, media_type)
        if spec is not None and spec.output is not None:
            kwargs["response_model"] = None
            kwargs["response_class"] = response_class if untyped_allowed else MsgspecJSONResponse
            if spec.output.stream != STREAM_NONE:
                # Documented by route_openapi; a class without a media type adds nothing.
                kwargs["response_class"] = Response
        merged = dict(self.msgspec_components)
        merge_components(merged, components)
        count = len(self.routes)
        own_dependencies, self.dependencies = self.dependencies, router_dependencies
        try:
            if spec is None:
                super().add_api_route(path, endpoint, **kwargs)
            else:
                super().add_api_route(path, _make_wrapper(spec, exposed), **kwargs)
        except Exception:
            del self.routes[count:]
            raise
        finally:
            self.dependencies = own_dependencies
        self.msgspec_components = merged

    api_route = _accepting_route_options(APIRouter.api_route)
    get = _accepting_route_options(APIRouter.get)
    put = _accepting_route_options(APIRouter.put)
    post = _accepting_route_options(APIRouter.post)
    delete = _accepting_route_options(APIRouter.delete)
    options = _accepting_route_options(APIRouter.options)
    head = _accepting_route_options(APIRouter.head)
    patch = _accepting_route_options(APIRouter.patch)
    trace = _accepting_route_options(APIRouter.trace)


@cache
def router_class_for(twin: ModuleType) -> type[MsgspecRouter]:
    """A MsgspecRouter subclass on `twin`: its inclusions' index and, by default, its routes
    (`route_class_for`) run on it. With `install_dispatch_with(app, twin)` an application
    runs on one twin throughout, whichever twin `_impl` picked."""
    route_class = route_class_for(twin)

    def __init__(self: MsgspecRouter, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("route_class", route_class)
        MsgspecRouter.__init__(self, *args, **kwargs)

    return type(
        f"MsgspecRouter_{twin.IMPLEMENTATION}",
        (MsgspecRouter,),
        {"__init__": __init__, "matches": twin.router_matches, "handle": twin.router_handle},
    )
