"""The delegated tier, per request: FastAPI solves the route, the request path reads its
body and models and makes its response.

Registration (`router`) builds two things per route, and this module is what they run:
the endpoint FastAPI calls (`make_wrapper`), once per route, and a handler for FastAPI's
route app (`WithoutBody`, `WithBody`, `WithForm`), once per place the route is included.
For each request the handler reads what the request path reads (sending its 400, 413 and
415 before any dependency runs), leaves it in the scope under `SCOPE_KEY` and calls
FastAPI's handler; the wrapper takes it from there, hands the endpoint its body and
models and makes the response.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import wraps
from typing import TYPE_CHECKING, Any

from msgspec.json import decode as json_decode
from starlette.requests import Request
from starlette.responses import Response

from .. import _compat
from .._dependencies.errors import ErrorOrder
from .._dependencies.standins import UNDECODED_KEY, valid_parts
from .._errors.validation import received_body, request_invalid
from .._shared import (
    PARTS_KEY,
    REACHED_KEY,
    SCOPE_KEY,
    STREAM_NONE,
    TELEMETRY_SCOPE_KEY,
    ClientDisconnect,
    NoResponse,
    RequestValidationError,
    body_too_large,
)
from .telemetry import Traced, report_unparsed_body, reported

if TYPE_CHECKING:
    from .._dependencies.plan import BodyParts
    from .plan import EndpointSpec

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

# What registration learned of the endpoint, on the wrapper (see `router`).
SPEC_ATTR = "__msgspec_spec__"
# The wrapper's `arguments`, which the handling of an observed request shares.
ARGUMENTS_ATTR = "__msgspec_arguments__"
# Where the handler leaves the route's ErrorOrder for the wrapper.
ERRORS_KEY = "msgspec_fastapi.error_order"


def invalid(
    scope: Any, model_errors: list[Any], body: Any, raw: bytes | None
) -> RequestValidationError:
    """The 422 for our models' and body's errors (`model_errors`, or `body` when it is a
    RequestValidationError): every error in FastAPI's order where the route's
    dependencies can be planned (`_dependencies.errors`), else FastAPI's parameter errors, then
    ours."""
    order: ErrorOrder | None = scope.get(ERRORS_KEY)
    if order is not None:
        errors = order.errors(scope, body)
        if errors:
            received = body.body if type(body) is RequestValidationError else received_body(raw)
            return RequestValidationError(errors, body=received)
    return request_invalid(model_errors, body, raw)


def invalid_anew(scope: Any, body: RequestValidationError) -> bool:
    """Whether the request has errors FastAPI would report, where that can be told."""
    order: ErrorOrder | None = scope.get(ERRORS_KEY)
    return order is None or order.errors(scope, body) != []


def make_wrapper(spec: EndpointSpec, exposed: inspect.Signature) -> Callable[..., Any]:
    """The endpoint FastAPI sees on the delegated tier, with the signature `exposed`."""
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
        where the route is included (the handler's `respond`; None: FastAPI makes it
        from the result), the request and the sub-response FastAPI made."""
        request = values.pop(request_name) if pop_request else values[request_name]
        sub_response = values.pop(response_name) if pop_response else values[response_name]
        respond, body, raw, models, model_errors = request.scope[SCOPE_KEY]
        request.scope[REACHED_KEY] = True
        if UNDECODED_KEY in request.scope:
            # A dependency was handed what the request path could not decode.
            raise reported(
                invalid(request.scope, model_errors, body, raw), spec, values, body, models
            )
        if model_names:
            if model_errors:
                raise reported(
                    invalid(request.scope, model_errors, body, raw), spec, values, body, models
                )
            for name in model_names:
                values[name] = models[name]
        if body_names:
            if type(body) is RequestValidationError:
                # Valid parts of its own, and no error FastAPI would see (an invalid part
                # no dependency takes, its taker overridden): the endpoint runs.
                parts = valid_parts(request.scope, body, raw)
                if any(name not in parts for name in body_names) or invalid_anew(
                    request.scope, body
                ):
                    raise reported(
                        invalid(request.scope, [], body, raw), spec, values, body, models
                    )
                body = parts
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
    setattr(wrapper, SPEC_ATTR, spec)
    setattr(wrapper, ARGUMENTS_ATTR, arguments)
    return wrapper


class InBuiltins:
    """`respond` where FastAPI's response class renders the responses: the result checked
    and encoded as the request path's are, then handed to FastAPI as builtins for the
    response class to render, as FastAPI hands it a model's dump."""

    __slots__ = ("runtime",)

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime

    def __call__(self, result: Any, *_: Any) -> Any:
        return json_decode(self.runtime.encode(result))


@dataclass(slots=True, eq=False)
class Delegation:
    """What the delegated tier's handlers share: the models read, and the request handed
    to FastAPI's handler with what the request path read.

    `respond` makes the response from the endpoint's result (the route's
    `RouteRuntime.respond`, an `InBuiltins`, or None where FastAPI makes it); `traced`
    handles a request FastAPI's telemetry observes (`_endpoint.telemetry`), where one was built;
    `max_body_size` is the limit the request path enforces, -1 where FastAPI enforces its
    own; `error_order` lists a 422 in FastAPI's order, and `body_parts` decodes an
    embedded body's parts one by one, where our body or models may fail. FastAPI calls
    `handle`.
    """

    fastapi_handler: Handler
    runtime: Any
    respond: Callable[..., Any] | None
    traced: Traced | None
    has_models: bool
    max_body_size: int
    error_order: ErrorOrder | None
    body_parts: BodyParts | None

    def gather_models(self, scope: Any) -> tuple[dict[str, Any], list[Any]]:
        values: dict[str, Any] = {}
        errors: list[Any] = []
        if self.has_models:
            self.runtime.extract_models(scope, values, errors)
        return values, errors

    async def delegate(
        self, request: Request, body: Any, raw: bytes | None, models: Any, model_errors: list[Any]
    ) -> Response:
        """FastAPI's handler, with what the request path read left for the wrapper."""
        request.scope[SCOPE_KEY] = (self.respond, body, raw, models, model_errors)
        if self.error_order is not None:
            request.scope[ERRORS_KEY] = self.error_order
            request.scope[PARTS_KEY] = self.body_parts
        traced = self.traced
        if traced is not None and request.scope.get(TELEMETRY_SCOPE_KEY) is not None:
            return await traced(request, body, raw, models, model_errors)
        try:
            return await self.fastapi_handler(request)
        except RequestValidationError as exc:
            if request.scope.get(REACHED_KEY) or (raw is None and not model_errors):
                raise
            # FastAPI's parameter errors, raised before the endpoint ran, and ours.
            if model_errors or type(body) is RequestValidationError:
                raise invalid(request.scope, [*exc.errors(), *model_errors], body, raw) from None
            raise request_invalid(exc.errors(), body, raw) from None


@dataclass(slots=True, eq=False)
class WithoutBody(Delegation):
    """The handler of a route without a body the request path reads."""

    async def handle(self, request: Request) -> Response:
        if self.max_body_size >= 0:
            self.runtime.check_declared_length(request.scope["headers"])
        models, model_errors = self.gather_models(request.scope)
        return await self.delegate(request, None, None, models, model_errors)


@dataclass(slots=True, eq=False)
class WithForm(Delegation):
    """The handler of a route with a msgspec form model: the form parsed FastAPI's way,
    with the route's `form_limits`, its fields converted by the request path."""

    form_limits: dict[str, Any]

    async def handle(self, request: Request) -> Response:
        runtime = self.runtime
        try:
            if self.max_body_size >= 0:
                raw = await runtime.read_raw(request.scope, request.receive)
                _compat.cache_request_body(request, raw)  # what the form parser reads
            form = await _compat.read_form(request, self.form_limits)
        except ClientDisconnect:
            return NoResponse()
        models, model_errors = self.gather_models(request.scope)
        runtime.extract_form(form, models, model_errors)
        return await self.delegate(request, None, None, models, model_errors)


@dataclass(slots=True, eq=False)
class WithBody(Delegation):
    """The handler of a route with a body the request path decodes.

    `single` names the one body parameter read embedded beside FastAPI's body fields
    (None otherwise). With `through_request` the body is read with `request.body()` (a
    route class's own handler may hand over a Request of its own class), the limit
    checked after; otherwise the request path reads it from the ASGI stream.
    """

    single: str | None
    through_request: bool
    reads_raw: bool = field(init=False)
    checks_size: bool = field(init=False)

    def __post_init__(self) -> None:
        limited = self.max_body_size >= 0
        self.reads_raw = limited and not self.through_request
        self.checks_size = limited and self.through_request

    async def handle(self, request: Request) -> Response:
        runtime = self.runtime
        try:
            if self.reads_raw:
                raw = await runtime.read_raw(request.scope, request.receive)
                _compat.cache_request_body(request, raw)  # for dependencies
            else:
                raw = await request.body()
                if self.checks_size and len(raw) > self.max_body_size:
                    raise body_too_large()
        except ClientDisconnect:
            return NoResponse()
        # 415 and 400 are sent here, before any dependency runs.
        try:
            body = runtime.parse_body(request.scope, raw)
        except RequestValidationError as invalid:  # errors="fastapi": malformed JSON
            report_unparsed_body(invalid, request)
            raise
        single = self.single
        if single is not None and type(body) is not RequestValidationError:
            body = body[single]  # one parameter, read embedded beside FastAPI's
        models, model_errors = self.gather_models(request.scope)
        return await self.delegate(request, body, raw, models, model_errors)
