"""A msgspec route as FastAPI's telemetry sees an APIRoute (`FastAPI(telemetry=...)`).

FastAPI's request handler reports its steps to the request's telemetry: a
`fastapi.dependencies` span around dependency solving, `fastapi.endpoint` around the
endpoint and `fastapi.serialization` around the response's encoding (none of the two for
a stream), the request's TelemetryData (body, values, errors), and a
`fastapi.validation.failed` log record for a 422, raised after solving and before the
endpoint. Run with our wrapper as its endpoint, it would report the request path's 422
from inside an endpoint span and the encoding as part of the endpoint, and only its own
share of the errors and values.

So for a request the telemetry observes (and only then), `traced_handler` takes the place
of FastAPI's handler: the same steps, with FastAPI's own solving and reporting functions,
and the errors, values and body as an APIRoute reports them.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from .. import _compat
from .._dependencies.standins import UNDECODED
from .._errors.validation import received_body, request_invalid
from .._shared import STREAM_NONE, RequestValidationError

if TYPE_CHECKING:
    from .plan import EndpointSpec

Traced = Callable[
    [Request, Any, "bytes | None", dict[str, Any], list[Any]],
    Coroutine[Any, Any, Response],
]
# Fills in what the request path read, raising its 422: (respond, request, sub-response),
# `respond` the route's `RouteRuntime.respond` where it is traced.
Arguments = Callable[[dict[str, Any]], tuple[Any, Request, Response]]


def shown_values(
    spec: EndpointSpec, values: dict[str, Any], body: Any, models: dict[str, Any]
) -> dict[str, Any]:
    """The endpoint's arguments as FastAPI lists them in TelemetryData: without what the
    wrapper was given for itself, with the body and models the request path decoded."""
    injected = (
        spec.request_name if spec.injected_request else None,
        spec.response_name if spec.injected_response else None,
    )
    shown = {k: v for k, v in values.items() if k not in injected and v is not UNDECODED}
    if type(body) is not RequestValidationError:
        embedded = spec.body is not None and spec.body.embedded
        for name in spec.endpoint_body:
            shown[name] = body[name] if embedded else body
    elif spec.endpoint_body and not (spec.body is not None and spec.body.embedded):
        shown[spec.endpoint_body[0]] = None  # as FastAPI lists a single body that failed
    for name in spec.endpoint_models:
        if name in models:
            shown[name] = models[name]
    return shown


def reported(
    invalid: RequestValidationError,
    spec: EndpointSpec,
    values: dict[str, Any],
    body: Any,
    models: dict[str, Any],
) -> RequestValidationError:
    """A 422 the wrapper raises inside FastAPI's handler, reported to the telemetry (when
    it observes the request) as FastAPI's handler reports one it raises before the
    endpoint: the arguments and errors in TelemetryData, and the log record."""
    data = _compat.telemetry_data()
    if data is not None:
        data.values = shown_values(spec, values, body, models)
    _compat.validation_failed(invalid)
    return invalid


def report_unparsed_body(invalid: RequestValidationError, request: Request) -> None:
    """A body that is not JSON, answered with FastAPI's 422 (`errors="fastapi"`), reported
    to the telemetry (when it observes the request) as FastAPI's handler reports it before
    solving: the request in TelemetryData, the body's text and the error by the log."""
    data = _compat.telemetry_data()
    if data is not None:
        data.request = request
    _compat.validation_failed(invalid)


def traced_handler(spec: EndpointSpec, target: Any, arguments: Arguments) -> Traced:
    """The route's handling for an observed request: `traced(request, body, raw, models,
    model_errors)` with what the request path read, as FastAPI's handler gets a request.

    `target` is the route or the inclusion context being built (its dependant and
    overrides); the route returns its response through the request path (`spec.output`)
    and has no body FastAPI reads.
    """
    endpoint = spec.endpoint
    dependant = target.dependant
    # The wrapper, named as the endpoint: what FastAPI names its spans by.
    call = dependant.call
    overrides_provider = target.dependency_overrides_provider
    is_coroutine = spec.is_coroutine
    assert spec.output is not None
    streams = spec.output.stream != STREAM_NONE
    has_form = spec.form is not None

    def endpoint_values(values: dict[str, Any], body: Any, models: dict[str, Any]) -> Any:
        return shown_values(spec, values, body, models)

    async def traced(
        request: Request, body: Any, raw: bytes | None, models: Any, model_errors: list[Any]
    ) -> Response:
        data = _compat.telemetry_data()
        if data is not None:
            data.request = request
            # A form was parsed already: Starlette keeps it on the request.
            data.body = await request.form() if has_form else received_body(raw)
        invalid: RequestValidationError | None = None
        with _compat.operation(name="dependencies", function=call):
            solved = await _compat.solve_dependencies(request, dependant, overrides_provider)
            if solved.errors or model_errors or type(body) is RequestValidationError:
                invalid = request_invalid([*solved.errors, *model_errors], body, raw)
            if data is not None:
                data.values = endpoint_values(solved.values, body, models)
                data.errors = solved.errors if invalid is None else invalid.errors()
        if invalid is not None:
            _compat.validation_failed(invalid)
            raise invalid
        values = dict(solved.values)
        respond, request, sub_response = arguments(values)
        status, headers = sub_response.status_code, sub_response.raw_headers
        request_headers = request.scope["headers"]
        response: Response
        if streams:
            # FastAPI makes a stream without an endpoint or serialization span.
            response = respond(endpoint(**values), status, headers, request_headers)
        else:
            with _compat.operation(name="endpoint", function=call):
                if is_coroutine:
                    result = await endpoint(**values)
                else:
                    result = await run_in_threadpool(endpoint, **values)
            if isinstance(result, Response):
                response = result
            else:
                with _compat.operation(name="serialization", function=call):
                    response = respond(result, status, headers, request_headers)
        if response.background is None:
            response.background = solved.background_tasks
        return response

    return traced
