"""`MsgspecRouter` and its route class: where FastAPI meets the request path.

Adding a route analyses the endpoint once (`_endpoint.analysis.analyse`) and registers a
thin wrapper with FastAPI, so that dependencies, security, overrides and background
tasks stay FastAPI's. Building a route's handler (once per place the route is included)
turns that analysis into a `RoutePlan` and a request-path runtime, and decides the tier:
routes with nothing for FastAPI to solve get the runtime as their whole ASGI app. Where
an inclusion adds dependencies that take msgspec types, the route is analysed again for
that place (`_endpoint.analysis`), and FastAPI builds that place on the analysis. All of this is
registration: what the delegated tier runs per request (the wrapper, the handlers) is in
`_endpoint.delegated`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import suppress
from contextvars import ContextVar
from dataclasses import replace
from functools import cache, partial, wraps
from types import ModuleType
from typing import Any, ClassVar

import msgspec
from fastapi import APIRouter
from fastapi.datastructures import Default, DefaultPlaceholder
from fastapi.routing import APIRoute
from fastapi.sse import EventSourceResponse
from starlette.responses import Response

from . import _compat, _select
from ._dependencies.errors import ErrorOrder
from ._dependencies.plan import Answer, BodyParts, FastAPIBody, build_plan
from ._dependencies.tree import (
    StandInOverridesProvider,
    has_stand_ins,
    refuse_copied_route_dependencies,
    take_msgspec_types,
)
from ._endpoint.analysis import Analysis, Registration, analyse
from ._endpoint.delegated import (
    ARGUMENTS_ATTR,
    SPEC_ATTR,
    Handler,
    InBuiltins,
    WithBody,
    WithForm,
    WithoutBody,
)
from ._endpoint.plan import (
    BodyPlan,
    DirectPlan,
    EndpointSpec,
    OutputPlan,
    RoutePlan,
    embedded_body_plan,
    literal_path,
    segment_template,
)
from ._endpoint.pydantic_route import (
    PydanticPlan,
    pydantic_body_dependency_plan,
    pydantic_body_plan,
    pydantic_dependency_plan,
    pydantic_plan,
    pydantic_spec,
    reads_form,
)
from ._endpoint.telemetry import traced_handler
from ._errors.pydantic_style import (
    FastAPIBodyErrors,
    JsonScan,
    ModelErrors,
    NoEquivalent,
    ResponseErrors,
    fastapi_parameter_errors,
)
from ._openapi.schemas import merge_components, mixed_request_body
from ._params.converters import direct_param_specs, prepare_dependant
from ._routing.index import build_included_index
from ._shared import DIRECT_ATTR, MATCHER_ATTR, PARAM_HEADER, STREAM_NONE
from .responses import MsgspecJSONResponse

# On a route context built on an inclusion's analysis: (the analysis, the inclusion's
# context), from FastAPI's reading of the endpoint to the route's get_route_handler.
_INCLUSION_ATTR = "msgspec_inclusion"
# The msgspec schemas the OpenAPI entries of such a context refer to (`install_openapi`).
INCLUSION_COMPONENTS_ATTR = "msgspec_inclusion_components"

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
# `errors=` of a route decorator, on its way to add_api_route; a route's resolved value,
# on its way to the route.
_DECORATOR_ERRORS: ContextVar[str | None] = ContextVar("msgspec_decorator_errors", default=None)
_ROUTE_ERRORS: ContextVar[str | None] = ContextVar("msgspec_route_errors", default=None)
# The error vocabularies a route may answer in (`_errors.pydantic_style` for "fastapi"),
# and the one of a route for which neither it, its router nor an inclusion chose one.
ERROR_STYLES = ("msgspec", "fastapi")
DEFAULT_ERRORS = "msgspec"
# On a route context: the `errors=` its inclusion gives the route where the route and its
# router chose none (None where no inclusion did either).
_INHERITED_ERRORS_ATTR = "msgspec_inherited_errors"
# What add_api_route analysed the route from, on its way to the route (`MsgspecRoute`).
_REGISTRATION: ContextVar[Registration | None] = ContextVar("msgspec_registration", default=None)


def _check_limit(max_body_size: int | None) -> None:
    if max_body_size is None:
        return
    if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 0:
        raise ValueError("max_body_size must be a non-negative integer or None")


def _check_msgpack(msgpack: bool | None) -> None:
    if msgpack is not None and not isinstance(msgpack, bool):
        raise TypeError("msgpack must be True, False or None")


def _check_errors(errors: str | None) -> None:
    if errors is None:
        return
    if not isinstance(errors, str):
        raise TypeError('errors must be "msgspec" or "fastapi"')
    if errors not in ERROR_STYLES:
        raise ValueError(f'errors must be "msgspec" or "fastapi", not {errors!r}')


def _accepting_route_options(method: Callable[..., Any]) -> Callable[..., Any]:
    """A route decorator of APIRouter that also takes `msgpack` and `errors`, and
    `max_body_size` before FastAPI 0.164 (later FastAPI takes that one itself)."""

    @wraps(method)
    def decorator_factory(
        self: Any, *args: Any, msgpack: bool | None = None, errors: str | None = None, **kw: Any
    ) -> Any:
        limit = None if _compat.HAS_NATIVE_BODY_LIMIT else kw.pop("max_body_size", None)
        decorator = method(self, *args, **kw)
        if limit is None and msgpack is None and errors is None:
            return decorator
        _check_limit(limit)
        _check_msgpack(msgpack)
        _check_errors(errors)

        def register(func: Callable[..., Any]) -> Any:
            limit_token = _DECORATOR_LIMIT.set(limit)
            msgpack_token = _DECORATOR_MSGPACK.set(msgpack)
            errors_token = _DECORATOR_ERRORS.set(errors)
            try:
                return decorator(func)
            finally:
                _DECORATOR_ERRORS.reset(errors_token)
                _DECORATOR_MSGPACK.reset(msgpack_token)
                _DECORATOR_LIMIT.reset(limit_token)

        return register

    return decorator_factory


def _resolve(value: Any) -> Any:
    return value.value if isinstance(value, DefaultPlaceholder) else value


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


def json_scan(twin: ModuleType) -> JsonScan | None:
    """How a route on `twin` finds where Python's `json` refuses a body: the compiled
    twin with `_errors.jsonscan` compiled; the pure twin asks `json.loads` itself (None),
    whose C scanner is quicker than that module run as Python."""
    if not _select.is_compiled(twin):
        return None
    scan: JsonScan = _select.companion(_select.JSONSCAN, twin).syntax_error
    return scan


def fastapi_errors_body(body: BodyPlan, scan: JsonScan | None) -> BodyPlan:
    """A body plan answering failures as FastAPI does (`_errors.pydantic_style`): decoded
    in msgspec's lax mode, reported with Pydantic's errors; MessagePack bodies too, a
    malformed one as a 422 `msgpack_invalid`. `scan` is the route's `json_scan`."""
    msgpack: dict[str, Any] = {}
    if body.msgpack_decoder is not None and body.report_invalid_msgpack is not None:
        msgpack["msgpack_decoder"] = msgspec.msgpack.Decoder(type=body.decode_type, strict=False)
        msgpack["report_invalid_msgpack"] = FastAPIBodyErrors(
            body.decode_type, body.report_invalid_msgpack
        )
    return replace(
        body,
        decoder=msgspec.json.Decoder(type=body.decode_type, strict=False),
        report_invalid=FastAPIBodyErrors(body.decode_type, body.report_invalid, scan),
        **msgpack,
    )


def fastapi_errors_output(output: OutputPlan) -> OutputPlan:
    """An output plan whose invalid values raise FastAPI's ResponseValidationError errors
    (`_errors.pydantic_style.ResponseErrors`), where Pydantic has an equivalent type.
    Streams keep msgspec's report for an invalid item."""
    if output.output_type is None or output.stream != STREAM_NONE:
        return output
    try:
        return replace(output, report_invalid=ResponseErrors(output.output_type))
    except (NoEquivalent, TypeError, ValueError, NameError):
        return output


def fastapi_errors_spec(spec: EndpointSpec) -> EndpointSpec:
    """The spec with its query, header, cookie and form models (its dependencies' too)
    answering failures as FastAPI does (`_errors.pydantic_style.ModelErrors`), where
    Pydantic has an equivalent type; the others keep msgspec's errors."""
    models = []
    for model in spec.models:
        header_keys = None
        if model.location == PARAM_HEADER:
            header_keys = {field.name: field.key for field in model.fields}
        try:
            report = ModelErrors(model.model, model.where, header_keys)
        except (NoEquivalent, TypeError, ValueError, NameError):
            report = None  # no Pydantic equivalent: msgspec's errors
        models.append(replace(model, report=report))
    form = spec.form
    if form is not None:
        # Where Pydantic has no equivalent, msgspec's errors.
        with suppress(NoEquivalent, TypeError, ValueError, NameError):
            form = replace(form, report=ModelErrors(form.model, form.where))
    return replace(spec, models=tuple(models), form=form)


def _inherited_errors(include_context: Any) -> str | None:
    """The `errors=` an inclusion gives its routes, as FastAPI resolves
    `strict_content_type`: the included router's own, else the inclusion's (given to
    `include_router`, else the including router's), else the enclosing inclusions'."""
    router = _compat.inclusion_router_of(include_context)
    if isinstance(router, MsgspecRouter) and router.errors is not None:
        return router.errors
    return _compat.inclusion_options(include_context).get("errors")


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

    # The request-path twin the route runs on: the one `_select` picked. `route_class_for`
    # makes subclasses bound to a given twin, so that tests can run both in one process.
    twin: ClassVar[ModuleType] = _select.twin
    # What registration learned of the endpoint (None where FastAPI serves it alone), the
    # endpoint FastAPI calls (our wrapper, or the user's) and the user's.
    msgspec_spec: EndpointSpec | None
    msgspec_wrapper: Callable[..., Any]
    msgspec_endpoint: Callable[..., Any]

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        # Only used before FastAPI 0.164, which has no max_body_size of its own.
        self.msgspec_max_body_size = _ROUTE_LIMIT.get()
        # The error vocabulary of its 422s, "msgspec" or FastAPI's ("fastapi"), as the
        # route or its router chose it; None to take an inclusion's (`_inherited_errors`).
        self.msgspec_errors = _ROUTE_ERRORS.get()
        # What MsgspecRouter analysed the route from (None for a route made otherwise),
        # and the analyses for inclusions whose dependencies take msgspec types (None
        # for those whose do not), by the inclusion's dependencies (kept, for their ids).
        self.msgspec_registration = _REGISTRATION.get()
        self.msgspec_inclusions: dict[tuple[int, ...], tuple[list[Any], Analysis | None]] = {}
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
        frame = sys._getframe(1)
        if _compat.builds_from_endpoint(frame):
            return self._endpoint_to_build(frame)
        return self.msgspec_endpoint

    @endpoint.setter
    def endpoint(self, value: Callable[..., Any]) -> None:
        spec: EndpointSpec | None = getattr(value, SPEC_ATTR, None)
        self.msgspec_spec = spec
        self.msgspec_wrapper = value
        self.msgspec_endpoint = value if spec is None else spec.endpoint

    def _endpoint_to_build(self, frame: Any) -> Callable[..., Any]:
        """What FastAPI builds the route (or a context of it) on: the route's wrapper, or
        for an inclusion whose dependencies take msgspec types, the wrapper of the
        route's analysis with them, the inclusion then lent their stand-ins."""
        being_built = _compat.inclusion_being_built(frame)
        if being_built is None:
            return self.msgspec_wrapper
        context, include_context = being_built
        setattr(context, _INHERITED_ERRORS_ATTR, _inherited_errors(include_context))
        added = _compat.inclusion_dependencies(include_context)
        analysis = self._inclusion_analysis(added)
        if analysis is None:
            return self.msgspec_wrapper
        assert analysis.dependencies is not None
        _compat.lend_dependencies(include_context, analysis.dependencies[: len(added)])
        setattr(context, _INCLUSION_ATTR, (analysis, include_context))
        return analysis.endpoint

    def _inclusion_analysis(self, added: list[Any]) -> Analysis | None:
        """The route's analysis with an inclusion's dependencies in front of its own, or
        None where they take no msgspec types (the route's own analysis holds)."""
        registration = self.msgspec_registration
        if registration is None or not added:
            return None
        key = tuple(map(id, added))
        known = self.msgspec_inclusions.get(key)
        if known is None:
            name = getattr(registration.endpoint, "__name__", "endpoint")
            takes = take_msgspec_types(name, added)
            analysis = analyse(registration, added) if takes else None
            known = self.msgspec_inclusions[key] = (added, analysis)
        return known[1]

    def _take_inclusion(self, context: Any) -> Analysis | None:
        """For a context built on an inclusion's analysis (`_endpoint_to_build`): the
        inclusion's own dependencies back, and what FastAPI built of the context rebuilt
        from that analysis, its OpenAPI entries too."""
        found = getattr(context, _INCLUSION_ATTR, None)
        if found is None:
            return None
        analysis: Analysis = found[0]
        include_context = found[1]
        _compat.take_back_dependencies(include_context)
        assert analysis.dependencies is not None
        _compat.rebuild_route_context(context, analysis.endpoint, analysis.dependencies)
        # FastAPI's merge of the inclusion's responses and the route's.
        context.responses = {
            **_compat.inclusion_responses(include_context),
            **(analysis.options.get("responses") or {}),
        }
        context.openapi_extra = analysis.options.get("openapi_extra")
        setattr(context, INCLUSION_COMPONENTS_ATTR, analysis.components)
        return analysis

    def get_route_handler(self) -> Handler:
        context = _compat.building_context()
        target: Any = context if context is not None and context.original_route is self else self
        spec = self.msgspec_spec
        wrapper = self.msgspec_wrapper
        openapi_extra = self.msgspec_openapi_extra
        if target is context:
            analysis = self._take_inclusion(context)
            if analysis is not None:
                spec, wrapper = analysis.spec, analysis.endpoint
                openapi_extra = analysis.options.get("openapi_extra")
            self._bind_inclusion(context)
        errors = self.msgspec_errors
        if errors is None and target is context:
            errors = getattr(context, _INHERITED_ERRORS_ATTR, None)
        fastapi_errors = errors == "fastapi"
        # A route without msgspec types answers every request as on an APIRouter, its
        # parameters' failures too.
        on_failure = fastapi_parameter_errors if fastapi_errors or spec is None else None
        prepare_dependant(target.dependant, on_failure)
        if spec is not None and fastapi_errors and (spec.models or spec.form is not None):
            spec = fastapi_errors_spec(spec)
        body = spec.body if spec is not None else None
        single = None
        if spec is not None and target.body_field is not None:
            body, single = self._body_beside_fastapi(spec, target, openapi_extra)
        provider = getattr(target, "dependency_overrides_provider", None)
        if provider is not None and has_stand_ins(target.dependant):
            # FastAPI's solving (the delegated tier) must not rebuild a dependency that
            # overrides itself from its own signature: it keeps the stand-in.
            target.dependency_overrides_provider = StandInOverridesProvider(provider)
        try:
            handler = super().get_route_handler()
        finally:
            target.dependency_overrides_provider = provider
        # A route class with a handler of its own sees every request (no direct tier),
        # and may hand ours a Request of its own class: the body is read from that.
        own_handler = type(self).get_route_handler is not MsgspecRoute.get_route_handler
        # So does an integration (Sentry, say) that wrapped the endpoint FastAPI calls
        # while FastAPI built its handler.
        wrapped = target.dependant.call is not wrapper
        if spec is None:
            pydantic_app = None
            if not (own_handler or wrapped):
                pydantic_app = self._pydantic_route(target, handler, on_failure)
            direct = None
            if pydantic_app is not None:
                limit = getattr(target, "max_body_size", None)
                direct = _compat.wrap_body_limit(pydantic_app, limit)
            setattr(target, DIRECT_ATTR, direct)
            return handler
        output, respond_as = self._output_for(spec.output, target.response_class)
        may_run_direct = (
            spec.form is None and respond_as == _RESPOND_MSGSPEC and not (own_handler or wrapped)
        )
        if body is not None and fastapi_errors:
            body = fastapi_errors_body(body, json_scan(self.twin))
        if output is not None and fastapi_errors:
            output = fastapi_errors_output(output)
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
        handler = self._delegated_handler(
            spec, plan, runtime, target, handler, single, respond_as, wrapper, own_handler
        )
        app: Any = None
        if plan.direct is not None:
            app = runtime
        elif may_run_direct and output is not None:
            # Dependencies, special parameters: run from a plan where it can be built.
            app = self._dependency_route(spec, plan, runtime, target, handler, on_failure)
            if app is None and target.body_field is not None:
                app = self._pydantic_body_route(spec, output, target, handler, on_failure)
        direct = None
        if app is not None:
            direct = _compat.wrap_body_limit(app, getattr(target, "max_body_size", None))
        if plan.direct is not None:
            # The requests FastAPI's telemetry observes (`RouteRuntime.traced_app`).
            runtime.traced_app = _compat.route_app(handler)
        setattr(target, DIRECT_ATTR, direct)
        return handler

    def _bind_inclusion(self, context: Any) -> None:
        """Give the inclusion context being built its matcher on the request path."""
        # FastAPI built the context's dependant on the wrapper; what it shows of the
        # route (RouteContext, scope["endpoint"]) is the user's endpoint.
        context.endpoint = self.endpoint
        path_regex, convertors, endpoint, methods = _compat.included_match_data(context)
        literal = literal_path(path_regex, context.path_format)
        segments = segment_template(path_regex, context.path_format, convertors)
        matcher = self.twin.RouteMatcher(
            self, path_regex, literal, segments, convertors, endpoint, methods
        )
        setattr(context, MATCHER_ATTR, matcher)

    def _body_beside_fastapi(
        self, spec: EndpointSpec, target: Any, openapi_extra: dict[str, Any] | None
    ) -> tuple[BodyPlan | None, str | None]:
        """The body plan where FastAPI has body fields of its own beside the route's, and
        the one body parameter read embedded (None where the body is embedded already)."""
        if spec.form is not None:
            raise TypeError(
                f"{spec.endpoint.__name__}(): other FastAPI body fields cannot be "
                "combined with a msgspec form model"
            )
        body = spec.body
        if body is None:
            return None, None
        # FastAPI reads every body field by its key, as it does when they are not the
        # only ones, and the request path decodes ours from the same object.
        _compat.embed_body_fields(target)
        single = key = None
        if not body.embedded:
            single = body.names[0]
            body = embedded_body_plan(spec)
            key = msgspec.structs.fields(body.decode_type)[0].encode_name
        model, required = _compat.body_model(target)
        target.openapi_extra = mixed_request_body(openapi_extra, model, required, key)
        return body, single

    def _pydantic_route(self, target: Any, handler: Handler, on_failure: Any) -> Any:
        """The direct tier's app for a route without msgspec types (FastAPI validates it
        with Pydantic), or None where its requests need FastAPI's handler."""
        limit = self._own_limit()
        alone = pydantic_plan(target, limit)
        if alone is not None:
            return self._pydantic_runtime(alone, handler)
        # Dependencies, special parameters, forms, parameters FastAPI solves: run from a
        # dependency plan where it can be built.
        solved = pydantic_dependency_plan(target, limit)
        if solved is None:
            return None
        spec = pydantic_spec(target)
        return self._solved_pydantic_route(spec, solved, target, handler, on_failure, True)

    def _pydantic_body_route(
        self, spec: EndpointSpec, output: OutputPlan, target: Any, handler: Handler, on_failure: Any
    ) -> Any:
        """The direct tier's app for a route whose body FastAPI validates with Pydantic and
        whose response is msgspec's, or None where its requests need FastAPI's handler."""
        limit = self._own_limit()
        alone = pydantic_body_plan(target, spec, output, limit)
        if alone is not None:
            return self._pydantic_runtime(alone, handler)
        solved = pydantic_body_dependency_plan(target, spec, output, limit)
        if solved is None:
            return None
        return self._solved_pydantic_route(spec, solved, target, handler, on_failure, False)

    def _pydantic_runtime(self, plan: PydanticPlan, handler: Handler) -> Any:
        """The twin's PydanticRuntime for a route with nothing for FastAPI to solve; the
        requests FastAPI's telemetry observes go to FastAPI's handler."""
        runtime = self.twin.PydanticRuntime(plan)
        runtime.traced_app = _compat.route_app(handler)
        return runtime

    def _solved_pydantic_route(
        self,
        spec: EndpointSpec,
        solved: PydanticPlan,
        target: Any,
        handler: Handler,
        on_failure: Any,
        fastapi_params: bool,
    ) -> Any:
        """The dependency route of a route whose body FastAPI's fields validate, its body
        and response handled by the twin's PydanticRuntime for the plan `solved`;
        `fastapi_params`: its parameters are FastAPI's (a route without msgspec types)."""
        embedded = _compat.embeds_body_fields(target)
        fastapi_body = FastAPIBody(embedded, reads_form(target), fastapi_params)
        runtime = self.twin.PydanticRuntime(solved)
        return self._dependency_route(
            spec, solved.route, runtime, target, handler, on_failure, fastapi_body
        )

    def _dependency_route(
        self,
        spec: EndpointSpec,
        plan: RoutePlan,
        runtime: Any,
        target: Any,
        handler: Handler,
        on_failure: Any,
        fastapi_body: FastAPIBody | None = None,
    ) -> Any:
        """The direct tier's app for a route with dependencies, or None when its
        dependencies cannot be planned (then FastAPI solves them). `fastapi_body`: the
        route's body is FastAPI's body fields, and `runtime` a PydanticRuntime."""
        root = target.dependant
        twin = self.twin

        def build(overrides: Any, answers: tuple[Answer, ...] = ()) -> Any:
            return build_plan(
                root,
                spec,
                overrides,
                twin.RouteRuntime,
                fastapi_body=fastapi_body,
                on_failure=on_failure,
                answers=answers,
            )

        dependency_plan, _ = build(None)
        if dependency_plan is None:
            return None
        provider = getattr(target, "dependency_overrides_provider", None)
        executor = _select.companion(_select.EXECUTOR, twin)
        return executor.DependencyRoute(
            runtime,
            plan,
            dependency_plan,
            build,
            provider,
            _compat.route_app(handler),
            twin.response_send,
            fastapi_body is not None,
            fastapi_body is not None and target.body_field is not None,
            _compat.route_form_limits(self) if fastapi_body and fastapi_body.form else None,
        )

    def _delegated_handler(
        self,
        spec: EndpointSpec,
        plan: RoutePlan,
        runtime: Any,
        target: Any,
        fastapi_handler: Handler,
        single: str | None,
        respond_as: int,
        wrapper: Callable[..., Any],
        own_handler: bool,
    ) -> Handler:
        """The delegated tier's handler (`_endpoint.delegated`): FastAPI's, behind the request
        path's body."""
        respond: Callable[..., Any] | None = None
        if respond_as == _RESPOND_MSGSPEC:
            respond = runtime.respond
        elif respond_as == _RESPOND_BUILTINS:
            respond = InBuiltins(runtime)
        # What FastAPI's telemetry, when it observes a request, sees of the route: see
        # `_endpoint.telemetry`. Not for a route whose body or response FastAPI handles itself, nor
        # one whose endpoint an integration wrapped (FastAPI's handler calls the wrapper).
        traced = None
        if (
            respond_as == _RESPOND_MSGSPEC
            and target.body_field is None
            and target.dependant.call is wrapper
        ):
            traced = traced_handler(spec, target, getattr(wrapper, ARGUMENTS_ATTR))
        # Where our bodies or models fail: the 422 in FastAPI's order (`_dependencies.errors`), and
        # an embedded body's valid parts for the dependencies that take them.
        error_order = None
        body_parts = None
        if (spec.body is not None or spec.models) and single is None:
            root, twin = target.dependant, self.twin

            def build(overrides: Any) -> Any:
                return build_plan(root, spec, overrides, twin.RouteRuntime, errors_only=True)

            error_order = ErrorOrder(build, getattr(target, "dependency_overrides_provider", None))
            if plan.body is not None and plan.body.embedded:
                body_parts = BodyParts(plan.body.decode_type)
        shared = (
            fastapi_handler,
            runtime,
            respond,
            traced,
            bool(spec.models),
            plan.max_body_size,
            error_order,
            body_parts,
        )
        if spec.form is not None:
            return WithForm(*shared, form_limits=_compat.route_form_limits(self)).handle
        if plan.body is None:
            return WithoutBody(*shared).handle
        return WithBody(*shared, single=single, through_request=own_handler).handle

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
    """A MsgspecRoute subclass whose routes run on `twin` (a twin `_select.load_twin` gives)."""
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

    def __init__(
        self, *args: Any, msgpack: bool = False, errors: str | None = None, **kwargs: Any
    ) -> None:
        _check_msgpack(msgpack)
        _check_errors(errors)
        self.msgpack = msgpack
        # None: the routes take the errors= of where the router is included ("msgspec"
        # where no inclusion chose).
        self.errors = errors
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
    # and then to handle it; both go through the inclusion's route index, which the twin
    # (importing no registration code) builds with `index_builder` when routes change.
    matches = _select.twin.router_matches
    handle = _select.twin.router_handle  # type: ignore[assignment]
    index_builder: ClassVar[Callable[[Any], Any]] = staticmethod(
        partial(build_included_index, classes=_select.twin.INDEX_CLASSES)
    )

    def include_router(
        self, router: APIRouter, *args: Any, errors: str | None = None, **kwargs: Any
    ) -> None:
        """APIRouter's, with `errors=` for the included routes that chose none, over this
        router's own (`include_router` of this module for an application or APIRouter)."""
        _check_errors(errors)
        if isinstance(router, MsgspecRouter):
            merge_components(self.msgspec_components, router.msgspec_components)
        super().include_router(router, *args, **kwargs)
        if errors is None:
            errors = self.errors
        if errors is not None:
            _compat.set_inclusion_options(self, {"errors": errors})

    def add_api_route(
        self,
        path: str,
        endpoint: Callable[..., Any],
        *,
        msgpack: bool | None = None,
        errors: str | None = None,
        **kwargs: Any,
    ) -> None:
        _check_msgpack(msgpack)
        _check_errors(errors)
        if errors is None:
            errors = _DECORATOR_ERRORS.get()
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
        errors_token = _ROUTE_ERRORS.set(self.errors if errors is None else errors)
        try:
            self._add_route(path, endpoint, limit, takes_msgpack, kwargs)
        finally:
            _ROUTE_ERRORS.reset(errors_token)
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
        if getattr(endpoint, SPEC_ATTR, None) is not None:
            # Already analysed: a route copied from another MsgspecRouter, whose own
            # dependencies already stand in for what takes msgspec types.
            refuse_copied_route_dependencies(dependencies)
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
        if self.responses:
            # FastAPI adds the router's responses to the route's; ours must see them to
            # take their msgspec models out, and the route's entries still win.
            kwargs["responses"] = {**self.responses, **(kwargs.get("responses") or {})}
        registration = Registration(
            endpoint,
            dict(kwargs),
            untyped_allowed,
            msgpack,
            sse,
            content_type if untyped_allowed else "application/json",
            media_type,
            limit,
            tuple(dependencies),
        )
        analysis = analyse(registration)
        spec = analysis.spec
        kwargs = analysis.options
        router_dependencies = self.dependencies
        if analysis.dependencies is not None:
            # The router's own dependencies may need stand-ins too: the route gets them
            # all, and FastAPI must not add the router's again.
            kwargs["dependencies"] = analysis.dependencies
            router_dependencies = []
        if spec is not None and spec.output is not None:
            kwargs["response_model"] = None
            if spec.output.stream != STREAM_NONE:
                # Documented by route_openapi; a class without a media type adds nothing.
                kwargs["response_class"] = Response
        merged = dict(self.msgspec_components)
        merge_components(merged, analysis.components)
        count = len(self.routes)
        own_dependencies, self.dependencies = self.dependencies, router_dependencies
        token = _REGISTRATION.set(registration)
        try:
            super().add_api_route(path, analysis.endpoint, **kwargs)
        except Exception:
            del self.routes[count:]
            raise
        finally:
            _REGISTRATION.reset(token)
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


def include_router(
    parent: Any, router: APIRouter, *, errors: str | None = None, **kwargs: Any
) -> None:
    """`parent.include_router(router, **kwargs)` for an application, an APIRouter or a
    MsgspecRouter, with `errors=` for the included MsgspecRouter routes that chose none
    (neither the route nor its router), and those of routers included in it: FastAPI's
    own `include_router` takes no such option."""
    _check_errors(errors)
    if isinstance(parent, MsgspecRouter):
        parent.include_router(router, errors=errors, **kwargs)
    elif errors is None:
        parent.include_router(router, **kwargs)
    elif isinstance(parent, APIRouter):
        # FastAPI's routing walks an APIRouter's inclusions per request, which would run
        # the hook that carries the option (`_compat.carry_options_through`) each time: a
        # MsgspecRouter between them carries it instead, walked only when routes change.
        # It adds nothing to the routes: the inclusion's prefix is its, the rest FastAPI's.
        carrier = (type(router) if isinstance(router, MsgspecRouter) else MsgspecRouter)()
        carrier.include_router(router, prefix=kwargs.pop("prefix", ""), errors=errors)
        parent.include_router(carrier, **kwargs)
    else:
        # An application's own inclusions are the roots of FastAPI's walk: nothing
        # combines them into another, so nothing walks them per request for the option.
        parent.include_router(router, **kwargs)
        _compat.set_inclusion_options(parent.router, {"errors": errors})


@cache
def router_class_for(twin: ModuleType) -> type[MsgspecRouter]:
    """A MsgspecRouter subclass on `twin`: its inclusions' index and, by default, its routes
    (`route_class_for`) run on it. With `install_dispatch_with(app, twin)` an application
    runs on one twin throughout, whichever twin `_select` picked. An APIRoute subclass given
    as `route_class` is combined with the twin's route class (`base_route_class`)."""
    return type(
        f"MsgspecRouter_{twin.IMPLEMENTATION}",
        (MsgspecRouter,),
        {
            "base_route_class": route_class_for(twin),
            "matches": twin.router_matches,
            "handle": twin.router_handle,
            "index_builder": staticmethod(
                partial(build_included_index, classes=twin.INDEX_CLASSES)
            ),
        },
    )
