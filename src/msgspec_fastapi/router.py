"""`MsgspecRouter` and its route class: where FastAPI meets the request path.

Adding a route analyses the endpoint once (`_plan.analyze_endpoint`) and registers a
thin wrapper with FastAPI, so that dependencies, security, overrides and background
tasks stay FastAPI's. Building a route's handler (once per place the route is included)
turns that analysis into a `RoutePlan` and a request-path runtime, and decides the tier:
routes with nothing for FastAPI to solve get the runtime as their whole ASGI app.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from dataclasses import replace
from functools import cache, wraps
from types import ModuleType
from typing import Any, ClassVar

import msgspec
from fastapi import APIRouter
from fastapi.datastructures import Default, DefaultPlaceholder
from fastapi.routing import APIRoute
from fastapi.sse import EventSourceResponse
from msgspec.json import decode as json_decode
from starlette.requests import Request
from starlette.responses import Response

from . import _compat, _impl
from ._depends import UNDECODED_KEY, DependencyTree, refuse_inclusion_dependencies
from ._depplan import build_plan
from ._openapi import merge_components, mixed_request_body, route_openapi
from ._params import direct_param_specs, prepare_dependant
from ._plan import (
    DirectPlan,
    EndpointSpec,
    OutputPlan,
    RoutePlan,
    analyze_endpoint,
    embedded_body_plan,
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
    body_too_large,
)
from ._telemetry import reported, traced_handler
from ._validation import request_invalid
from .responses import MsgspecJSONResponse

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

_SPEC_ATTR = "__msgspec_spec__"
# The wrapper's `arguments`, which the handling of an observed request shares.
_ARGUMENTS_ATTR = "__msgspec_arguments__"

# Who renders a route's responses where it is included (`MsgspecRoute._output_for`).
_RESPOND_FASTAPI = 0  # FastAPI, from what the endpoint returned
_RESPOND_MSGSPEC = 1  # the request path
_RESPOND_BUILTINS = 2  # FastAPI's response class, from the checked result in builtins

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
    # A generator endpoint's call only makes the generator: no threadpool, no await.
    streams = spec.output is not None and spec.output.stream != STREAM_NONE

    def arguments(values: dict[str, Any]) -> tuple[Any, Request, Response]:
        """Fill in what the request path read, or raise its 422; how the response is made
        where the route is included (`MsgspecRoute._output_for`; None: FastAPI makes it
        from the result), the request and the sub-response FastAPI made."""
        request = values.pop(request_name) if pop_request else values[request_name]
        sub_response = values.pop(response_name) if pop_response else values[response_name]
        respond, body, raw, models, model_errors = request.scope[SCOPE_KEY]
        request.scope[REACHED_KEY] = True
        if UNDECODED_KEY in request.scope:
            # A dependency was handed what the request path could not decode.
            raise reported(request_invalid(model_errors, body, raw), spec, values, body, models)
        if model_names:
            if model_errors:
                raise reported(request_invalid(model_errors, body, raw), spec, values, body, models)
            for name in model_names:
                values[name] = models[name]
        if body_names:
            if type(body) is RequestValidationError:
                raise reported(body, spec, values, body, models)
            if embedded:
                for name in body_names:
                    values[name] = body[name]
            else:
                values[body_names[0]] = body
        return respond, request, sub_response

    def responded(result: Any, respond: Any, request: Request, sub_response: Response) -> Any:
        if respond is None or isinstance(result, Response):
            return result
        return respond(
            result, sub_response.status_code, sub_response.raw_headers, request.scope["headers"]
        )

    wrapper: Callable[..., Any]
    if is_coroutine or streams:

        @wraps(endpoint)
        async def wrapper(**values: Any) -> Any:
            respond, request, sub_response = arguments(values)
            if streams:
                result = endpoint(**values)
            else:
                result = await endpoint(**values)
            return responded(result, respond, request, sub_response)

    else:
        # Sync as the endpoint is, so that FastAPI runs it in its threadpool: an
        # integration that wraps the call FastAPI makes with a sync function (older
        # Sentry SDKs) then gets a result, not a coroutine.
        @wraps(endpoint)
        def wrapper(**values: Any) -> Any:
            respond, request, sub_response = arguments(values)
            return responded(endpoint(**values), respond, request, sub_response)

    wrapper.__signature__ = exposed  # type: ignore[attr-defined]
    if streams:
        # FastAPI follows __wrapped__ to decide whether an endpoint streams: this one
        # returns the stream itself.
        delattr(wrapper, "__wrapped__")
    setattr(wrapper, _SPEC_ATTR, spec)
    setattr(wrapper, _ARGUMENTS_ATTR, arguments)
    return wrapper


def _direct_plan(spec: EndpointSpec, output: OutputPlan | None, target: Any) -> DirectPlan | None:
    """The direct tier's plan when FastAPI has nothing to solve for this route."""
    dependant = target.dependant
    if output is None or not (spec.injected_request and spec.injected_response):
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


def _content_type(response_class: Any) -> str:
    """The content-type header of a response class's responses."""
    media_type = getattr(response_class, "media_type", None) or "application/json"
    if media_type.startswith("text/") and "charset=" not in media_type.lower():
        # Starlette's rule for the header of a text response.
        media_type += f"; charset={getattr(response_class, 'charset', 'utf-8')}"
    return media_type


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
    # What registration learned of the endpoint (None where FastAPI serves it alone), the
    # endpoint FastAPI calls (our wrapper, or the user's) and the user's.
    msgspec_spec: EndpointSpec | None
    msgspec_wrapper: Callable[..., Any]
    msgspec_endpoint: Callable[..., Any]

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        # Only used before FastAPI 0.164, which has no max_body_size of its own.
        self.msgspec_max_body_size = _ROUTE_LIMIT.get()
        # As registered: each place the route is included may document its body anew.
        self.msgspec_openapi_extra: dict[str, Any] | None = kwargs.get("openapi_extra")
        super().__init__(path, endpoint, **kwargs)
        direct = getattr(self, DIRECT_ATTR, None)
        if direct is not None:
            self.app = direct

    @property
    def endpoint(self) -> Callable[..., Any]:
        """The user's endpoint, as APIRoute's; FastAPI builds on the wrapper instead.

        FastAPI reads a route's `endpoint` to build the dependant it solves and calls,
        for the route and again for each inclusion (`_compat.builds_from_endpoint`):
        those reads get the wrapper whose signature FastAPI must see.
        """
        if _compat.builds_from_endpoint(sys._getframe(1)):
            return self.msgspec_wrapper
        return self.msgspec_endpoint

    @endpoint.setter
    def endpoint(self, value: Callable[..., Any]) -> None:
        spec: EndpointSpec | None = getattr(value, _SPEC_ATTR, None)
        self.msgspec_spec = spec
        self.msgspec_wrapper = value
        self.msgspec_endpoint = value if spec is None else spec.endpoint

    def get_route_handler(self) -> Handler:
        context = _compat.building_context()
        target: Any = context if context is not None and context.original_route is self else self
        spec = self.msgspec_spec
        if target is context:
            # FastAPI built the context's dependant on the wrapper; what it shows of
            # the route (RouteContext, scope["endpoint"]) is the user's endpoint.
            context.endpoint = self.endpoint
            path_regex, convertors, endpoint, methods = _compat.included_match_data(context)
            literal = literal_path(path_regex, context.path_format)
            matcher = self.twin.RouteMatcher(
                self, path_regex, literal, convertors, endpoint, methods
            )
            setattr(context, MATCHER_ATTR, matcher)
        prepare_dependant(target.dependant)
        body = spec.body if spec is not None else None
        single = None
        if spec is not None and target.body_field is not None:
            if spec.form is not None:
                raise TypeError(
                    f"{spec.endpoint.__name__}(): other FastAPI body fields cannot be "
                    "combined with a msgspec form model"
                )
            if body is not None:
                # Body fields of FastAPI's beside ours: FastAPI reads every body field
                # by its key, as it does when they are not the only ones, and the
                # request path decodes ours from the same object.
                _compat.embed_body_fields(target)
                key = None
                if not body.embedded:
                    single = body.names[0]
                    body = embedded_body_plan(spec)
                    key = msgspec.structs.fields(body.decode_type)[0].encode_name
                model, required = _compat.body_model(target)
                target.openapi_extra = mixed_request_body(
                    self.msgspec_openapi_extra, model, required, key
                )
        handler = super().get_route_handler()
        if spec is None:
            return handler
        # A route class with a handler of its own sees every request (no direct tier),
        # and may hand ours a Request of its own class: the body is read from that.
        own_handler = type(self).get_route_handler is not MsgspecRoute.get_route_handler
        # So does an integration (Sentry, say) that wrapped the endpoint FastAPI calls
        # while FastAPI built its handler.
        wrapped = target.dependant.call is not self.msgspec_wrapper
        output, respond_as = self._output_for(spec.output, target.response_class)
        may_run_direct = (
            spec.form is None and respond_as == _RESPOND_MSGSPEC and not (own_handler or wrapped)
        )
        plan = RoutePlan(
            body=body,
            output=output,
            strict_content_type=bool(_resolve(target.strict_content_type)),
            status_code=target.status_code or 200,
            # A form is parsed FastAPI's way, on the delegated tier.
            direct=_direct_plan(spec, output, target) if may_run_direct else None,
            max_body_size=self._own_limit(),
            models=spec.models,
            form=spec.form,
        )
        runtime = self.twin.RouteRuntime(plan)
        handler = self._handler(
            spec, plan, runtime, target, handler, body, single, respond_as, wrapped, own_handler
        )
        app: Any = None
        if plan.direct is not None:
            app = runtime
        elif may_run_direct and output is not None:
            # Dependencies, special parameters: run from a plan where it can be built.
            app = self._dependency_route(spec, plan, runtime, target, handler)
        direct = None
        if app is not None:
            direct = _compat.wrap_body_limit(app, getattr(target, "max_body_size", None))
        if plan.direct is not None:
            # The requests FastAPI's telemetry observes (`RouteRuntime.traced_app`).
            runtime.traced_app = _compat.route_app(handler)
        setattr(target, DIRECT_ATTR, direct)
        return handler

    def _dependency_route(
        self,
        spec: EndpointSpec,
        plan: RoutePlan,
        runtime: Any,
        target: Any,
        handler: Handler,
    ) -> Any:
        """The direct tier's app for a route with dependencies, or None when its
        dependencies cannot be planned (then FastAPI solves them)."""
        root = target.dependant
        twin = self.twin

        def build(overrides: Any) -> Any:
            return build_plan(root, spec, overrides, twin.RouteRuntime)

        dependency_plan, _ = build(None)
        if dependency_plan is None:
            return None
        provider = getattr(target, "dependency_overrides_provider", None)
        executor = _impl.executor_for(twin)
        return executor.DependencyRoute(
            runtime, plan, dependency_plan, build, provider, _compat.route_app(handler)
        )

    def _handler(
        self,
        spec: EndpointSpec,
        plan: RoutePlan,
        runtime: Any,
        target: Any,
        handler: Handler,
        body: Any,
        single: str | None,
        respond_as: int,
        wrapped: bool,
        own_handler: bool,
    ) -> Handler:
        """The delegated tier's handler: FastAPI's, behind the request path's body."""
        has_models = bool(spec.models)
        respond: Callable[..., Any] | None = None
        if respond_as == _RESPOND_MSGSPEC:
            respond = runtime.respond
        elif respond_as == _RESPOND_BUILTINS:

            def respond(result: Any, *_: Any) -> Any:
                # Checked and encoded as ours are, then handed to FastAPI as builtins for
                # the response class to render, as FastAPI hands it a model's dump.
                return json_decode(runtime.encode(result))

        def gather_models(scope: Any) -> tuple[dict[str, Any], list[Any]]:
            values: dict[str, Any] = {}
            errors: list[Any] = []
            if has_models:
                runtime.extract_models(scope, values, errors)
            return values, errors

        # What FastAPI's telemetry, when it observes a request, sees of the route: see
        # `_telemetry`. Not for a route whose body or response FastAPI handles itself, nor
        # one whose endpoint an integration wrapped (FastAPI's handler calls the wrapper).
        traced = None
        if respond_as == _RESPOND_MSGSPEC and target.body_field is None and not wrapped:
            traced = traced_handler(spec, target, getattr(self.msgspec_wrapper, _ARGUMENTS_ATTR))

        async def delegate(
            request: Request, body: Any, raw: bytes | None, models: Any, model_errors: list[Any]
        ) -> Response:
            """FastAPI's handler, with what the request path read left for the wrapper."""
            request.scope[SCOPE_KEY] = (respond, body, raw, models, model_errors)
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

        if body is None:

            async def handle(request: Request) -> Response:
                if plan.max_body_size >= 0:
                    runtime.check_declared_length(request.scope["headers"])
                models, model_errors = gather_models(request.scope)
                return await delegate(request, None, None, models, model_errors)

            return handle

        reads_raw = plan.max_body_size >= 0 and not own_handler
        checks_size = plan.max_body_size >= 0 and own_handler

        async def handle_with_body(request: Request) -> Response:
            try:
                if reads_raw:
                    raw = await runtime.read_raw(request.scope, request.receive)
                    _compat.cache_request_body(request, raw)  # for dependencies
                else:
                    raw = await request.body()
                    if checks_size and len(raw) > plan.max_body_size:
                        raise body_too_large()
            except ClientDisconnect:
                return NoResponse()
            # 415 and 400 are sent here, before any dependency runs.
            body = runtime.parse_body(request.scope, raw)
            if single is not None and type(body) is not RequestValidationError:
                body = body[single]  # one parameter, read embedded beside FastAPI's
            models, model_errors = gather_models(request.scope)
            return await delegate(request, body, raw, models, model_errors)

        return handle_with_body

    @staticmethod
    def _output_for(
        output: OutputPlan | None, response_class: Any
    ) -> tuple[OutputPlan | None, int]:
        """The output plan for where the route is included, and who renders responses.

        `response_class` is the class FastAPI resolved there (the route's own, else the
        inclusions' `default_response_class`). A placeholder (none chosen) or a
        MsgspecJSONResponse that changes only its media type: the request path sends
        the responses, labelled with that media type. Any other class renders them, as
        in FastAPI: an untyped result as it is, a typed one checked and in builtins.
        Streams were decided at registration.
        """
        if output is None:
            return None, _RESPOND_FASTAPI
        if output.stream != STREAM_NONE or isinstance(response_class, DefaultPlaceholder):
            return output, _RESPOND_MSGSPEC
        if _renders_as_msgspec(response_class):
            header = (b"content-type", _content_type(response_class).encode("latin-1"))
            if header != output.content_type:
                output = replace(output, content_type=header)
            return output, _RESPOND_MSGSPEC
        if output.output_type is None:
            return None, _RESPOND_FASTAPI
        return output, _RESPOND_BUILTINS

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


_COMBINED: dict[tuple[type[APIRoute], type[MsgspecRoute]], type[MsgspecRoute]] = {}


def msgspec_route_class(
    route_class: type[APIRoute], base: type[MsgspecRoute]
) -> type[MsgspecRoute]:
    """`route_class` where it is a MsgspecRoute, else a class that is both: the APIRoute
    subclass first, so that its own `matches`, `handle` and `get_route_handler` run as
    FastAPI runs them, each reaching `base` (a MsgspecRoute) through `super()`. One class
    per pair, made once."""
    if issubclass(route_class, MsgspecRoute):
        return route_class
    if issubclass(base, route_class):
        return base  # APIRoute itself (strawberry's GraphQLRouter passes it): nothing to add
    combined = _COMBINED.get((route_class, base))
    if combined is None:
        namespace = {
            "__module__": route_class.__module__,
            "__qualname__": route_class.__qualname__,
            "__doc__": route_class.__doc__,
        }
        combined = type(route_class.__name__, (route_class, base), namespace)
        _COMBINED[route_class, base] = combined
    return combined


def _check_route_class(route_class: Any, option: str) -> None:
    if not (isinstance(route_class, type) and issubclass(route_class, APIRoute)):
        raise TypeError(f"{option} must be an APIRoute subclass")


class MsgspecRouter(APIRouter):
    """An APIRouter that decodes bodies and encodes responses with msgspec.

    With `msgpack=True` its routes (unless a route says `msgpack=False`) also take
    MessagePack bodies and answer in MessagePack when the request's Accept prefers it.
    A `route_class` (or `route_class_override`) that is an APIRoute subclass but no
    MsgspecRoute is combined with `base_route_class` (`msgspec_route_class`).
    """

    # The route class routes are built on, unless given a MsgspecRoute subclass.
    base_route_class: ClassVar[type[MsgspecRoute]] = MsgspecRoute

    def __init__(self, *args: Any, msgpack: bool = False, **kwargs: Any) -> None:
        _check_msgpack(msgpack)
        self.msgpack = msgpack
        kwargs.setdefault("route_class", self.base_route_class)
        # A placeholder, as FastAPI's own default is: FastAPI streams a generator route of
        # Pydantic items as JSON Lines only when no response class was chosen.
        kwargs.setdefault("default_response_class", Default(MsgspecJSONResponse))
        _check_route_class(kwargs["route_class"], "route_class")
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
        if override is not None:
            _check_route_class(override, "route_class_override")
        kwargs["route_class_override"] = msgspec_route_class(
            override or self.route_class, self.base_route_class
        )
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
        registered = kwargs.get("response_class")
        if registered is None or isinstance(registered, DefaultPlaceholder):
            registered = self.default_response_class
        response_class = _resolve(registered)
        # A class chosen here is the route's wherever it is included; without one (our
        # placeholder), each inclusion's default decides (`MsgspecRoute._output_for`).
        untyped_allowed = _renders_as_msgspec(response_class)
        sse = isinstance(response_class, type) and issubclass(response_class, EventSourceResponse)
        # What responses are labelled and documented with: the class the route responds with.
        media_type = getattr(response_class, "media_type", None) or "application/json"
        content_type = _content_type(response_class)
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
        if self.responses:
            # FastAPI adds the router's responses to the route's; ours must see them to
            # take their msgspec models out, and the route's entries still win.
            kwargs["responses"] = {**self.responses, **(kwargs.get("responses") or {})}
        components = route_openapi(spec, kwargs, limit, media_type)
        if spec is not None and spec.output is not None:
            kwargs["response_model"] = None
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
    runs on one twin throughout, whichever twin `_impl` picked. An APIRoute subclass given
    as `route_class` is combined with the twin's route class (`base_route_class`)."""
    return type(
        f"MsgspecRouter_{twin.IMPLEMENTATION}",
        (MsgspecRouter,),
        {
            "base_route_class": route_class_for(twin),
            "matches": twin.router_matches,
            "handle": twin.router_handle,
        },
    )
