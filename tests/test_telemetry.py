"""FastAPI's own telemetry (`FastAPI(telemetry={...})`) sees a MsgspecRouter route as it
sees the same route on an APIRouter with Pydantic models.

Each test builds both applications, with the same endpoint names, exports their spans,
metrics and log records to memory (OpenTelemetry's SDK), and compares what came out of
the same request: span names, kinds, attributes, statuses and parents, each metric's
attributes and counts, each log record's event, severity, body and attributes, and the
request's TelemetryData (body, values, errors) as a processor reads it when each span ends
and each record is emitted. Timings and ids are left out; so are error messages, and an
exception's stack trace and message, which differ by design (docs/differences.md).
Every test runs on both twins and both tiers.
"""

# No `from __future__ import annotations`: the endpoints' annotations name a local model.
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import pydantic
import pytest
from fastapi import APIRouter, Depends, FastAPI, Form, HTTPException, Query
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse
from fastapi.testclient import TestClient
from support import NoFields
from twins import Twin

from msgspec_fastapi import MsgspecRouter, _compat

pytest.importorskip("fastapi.telemetry", reason="FastAPI has no telemetry before 0.142")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from fastapi.telemetry import get_telemetry_data  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor  # noqa: E402
from opentelemetry.sdk._logs.export import (  # noqa: E402
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)


class PydanticItem(pydantic.BaseModel):
    name: str
    price: float


class StructItem(msgspec.Struct):
    name: str
    price: float


class PydanticLogin(pydantic.BaseModel):
    username: str
    remember: bool = False


class StructLogin(msgspec.Struct):
    username: str
    remember: bool = False


def audit(_: Annotated[NoFields, Query()]) -> None:
    """A router dependency FastAPI must solve (a Pydantic parameter model): its presence
    puts the msgspec routes on the delegated tier."""


def plain(value: Any) -> Any:
    """A value of TelemetryData as builtins: models and Structs as dicts."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump()
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def snapshot(where: str) -> tuple[Any, ...]:
    """The request's TelemetryData now: the body, the values, and each error's location."""
    data = get_telemetry_data()
    if data is None:
        return (where, None)
    errors = None if data.errors is None else [tuple(error["loc"]) for error in data.errors]
    return (where, data.request is not None, plain(data.body), plain(data.values), errors)


@dataclass
class DataRecorder(sdk_trace.SpanProcessor):  # type: ignore[misc]
    """Reads the TelemetryData as a span processor can, when each span ends."""

    seen: list[tuple[Any, ...]] = field(default_factory=list)

    def on_end(self, span: Any) -> None:
        self.seen.append(snapshot(f"span {span.name}"))


@dataclass
class LogDataRecorder(LogRecordProcessor):  # type: ignore[misc]
    """Reads the TelemetryData as a log processor can, when each record is emitted."""

    seen: list[tuple[Any, ...]] = field(default_factory=list)

    def on_emit(self, log_record: Any) -> None:
        record = getattr(log_record, "log_record", log_record)
        self.seen.append(snapshot(f"log {record.event_name}"))

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@dataclass
class Telemetry:
    """What one application exported, read back in a comparable form."""

    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    logs: InMemoryLogRecordExporter
    data: DataRecorder
    log_data: LogDataRecorder

    def span_report(self) -> list[tuple[Any, ...]]:
        finished = self.spans.get_finished_spans()
        names = {span.context.span_id: span.name for span in finished}
        return [
            (
                span.name,
                span.kind.name,
                span.status.status_code.name,
                names.get(span.parent.span_id) if span.parent is not None else None,
                dict(span.attributes or {}),
                [event.name for event in span.events],
            )
            for span in finished
        ]

    def metric_report(self) -> dict[tuple[Any, ...], Any]:
        found: dict[tuple[Any, ...], Any] = {}
        data = self.metrics.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        key = (metric.name, tuple(sorted((point.attributes or {}).items())))
                        # A duration's count, not its timing; an up-down counter's value.
                        found[key] = getattr(point, "count", getattr(point, "value", None))
        return found

    def log_report(self) -> list[tuple[Any, ...]]:
        report = []
        for finished in self.logs.get_finished_logs():
            record = getattr(finished, "log_record", finished)
            attributes = {
                key: value
                for key, value in (record.attributes or {}).items()
                if key not in ("exception.message", "exception.stacktrace")
            }
            report.append(
                (
                    record.event_name,
                    record.severity_text,
                    record.body,
                    attributes,
                    record.trace_id != 0,
                )
            )
        return report

    def report(self) -> dict[str, Any]:
        return {
            "spans": self.span_report(),
            "metrics": self.metric_report(),
            "logs": self.log_report(),
            "data at span ends": self.data.seen,
            "data at log records": self.log_data.seen,
        }


def observed_app(router: APIRouter, **config: Any) -> tuple[FastAPI, Telemetry]:
    """An application with `router`, its telemetry exported to memory (and `config`)."""
    spans = InMemorySpanExporter()
    data = DataRecorder()
    tracer_provider = sdk_trace.TracerProvider()
    tracer_provider.add_span_processor(data)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[metrics])
    logs = InMemoryLogRecordExporter()
    log_data = LogDataRecorder()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(log_data)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    app = FastAPI(
        telemetry={
            "tracer_provider": tracer_provider,
            "meter_provider": meter_provider,
            "logger_provider": logger_provider,
            "auto_configure": False,
            **config,
        }
    )
    app.include_router(router)
    return app, Telemetry(spans, metrics, logs, data, log_data)


def add_routes(router: APIRouter, item: type[Any], login: type[Any]) -> None:
    """The same endpoints, under the same names, with `item` and `login` as the models."""

    @router.get("/items/{item_id}")
    async def read_item(item_id: int, q: int = 0) -> item:  # type: ignore[valid-type]
        return item(name=f"item {item_id}", price=q)

    @router.get("/sync/{item_id}")
    def read_item_sync(item_id: int) -> item:  # type: ignore[valid-type]
        return item(name=f"item {item_id}", price=1.5)

    @router.post("/items")
    async def create_item(body: item, q: int = 0) -> item:  # type: ignore[valid-type]
        return item(name=body.name, price=body.price + q)

    @router.get("/teapot")
    async def teapot() -> item:  # type: ignore[valid-type]
        raise HTTPException(status_code=418, detail="I'm a teapot")

    @router.get("/invalid-response")
    async def invalid_response() -> item:  # type: ignore[valid-type]
        return {"name": "no price"}  # type: ignore[return-value]

    @router.get("/stream")
    async def stream() -> AsyncIterator[item]:  # type: ignore[valid-type]
        for n in range(3):
            yield item(name=f"item {n}", price=n)

    @router.post("/login")
    async def log_in(form: Annotated[login, Form()]) -> item:  # type: ignore[valid-type]
        return item(name=form.username, price=1)

    async def item_name(body: item) -> str:  # type: ignore[valid-type]
        return body.name  # type: ignore[no-any-return]

    @router.post("/named")
    async def named(name: str = Depends(item_name)) -> item:  # type: ignore[valid-type]
        return item(name=name, price=0)

    @router.get("/events", response_class=EventSourceResponse)
    async def events() -> AsyncIterator[item]:  # type: ignore[valid-type]
        for n in range(3):
            yield item(name=f"item {n}", price=n)


# A form is parsed FastAPI's way: on the delegated tier, whatever the router's dependencies.
ALWAYS_DELEGATED = ("/login",)


def pydantic_router_without_routes(tier: str) -> APIRouter:
    return APIRouter(dependencies=[Depends(audit)] if tier == "delegated" else [])


def pydantic_router(tier: str) -> APIRouter:
    router = pydantic_router_without_routes(tier)
    add_routes(router, PydanticItem, PydanticLogin)
    return router


def msgspec_router_without_routes(tier: str, twin: Twin, errors: str = "msgspec") -> MsgspecRouter:
    return MsgspecRouter(
        route_class=twin.route_class,
        dependencies=[Depends(audit)] if tier == "delegated" else [],
        errors=errors,
    )


def msgspec_router(tier: str, twin: Twin, errors: str = "msgspec") -> MsgspecRouter:
    router = msgspec_router_without_routes(tier, twin, errors)
    add_routes(router, StructItem, StructLogin)
    tiers = {route.path: route.tier for route in router.routes}  # type: ignore[attr-defined]
    assert {tiers.pop(path) for path in ALWAYS_DELEGATED} == {"delegated"}
    assert set(tiers.values()) == {tier}
    return router


Request = Callable[[TestClient], Any]

REQUESTS: dict[str, Request] = {
    "successful GET": lambda client: client.get("/items/3?q=2"),
    "successful sync GET": lambda client: client.get("/sync/3"),
    "successful POST": lambda client: client.post(
        "/items?q=1", json={"name": "lamp", "price": 2.5}
    ),
    "422 on the body": lambda client: client.post("/items", json={"name": "lamp", "price": "x"}),
    "422 on a missing body": lambda client: client.post("/items"),
    "422 on a query parameter": lambda client: client.get("/items/3?q=many"),
    "422 on a query parameter and the body": lambda client: client.post(
        "/items?q=many", json={"name": "lamp"}
    ),
    "successful form": lambda client: client.post(
        "/login", data={"username": "ada", "remember": "on"}
    ),
    "a dependency's body": lambda client: client.post("/named", json={"name": "lamp", "price": 1}),
    "422 on a dependency's body": lambda client: client.post("/named", json={"name": "lamp"}),
    "HTTPException from the endpoint": lambda client: client.get("/teapot"),
    "response validation error": lambda client: client.get("/invalid-response"),
    "JSON Lines stream": lambda client: client.get("/stream"),
    "server-sent events": lambda client: client.get("/events"),
}


@pytest.mark.parametrize("tier", ["direct", "delegated"])
@pytest.mark.parametrize("case", list(REQUESTS))
def test_telemetry_reports_a_msgspec_route_as_an_apirouter_route(
    twin: Twin, tier: str, case: str
) -> None:
    send = REQUESTS[case]
    reports = []
    for router in (pydantic_router(tier), msgspec_router(tier, twin)):
        app, telemetry = observed_app(router)
        response = send(TestClient(app, raise_server_exceptions=False))
        reports.append((response.status_code, telemetry.report()))
    (expected_status, expected), (status, report) = reports
    assert status == expected_status
    assert report == expected


def test_a_validation_failure_is_logged_with_every_error(twin: Twin) -> None:
    """One record for a query and a body error together, counting both, as FastAPI's."""
    app, telemetry = observed_app(msgspec_router("delegated", twin))
    response = TestClient(app).post("/items?q=many", json={"name": "lamp"})
    assert response.status_code == 422
    [record] = telemetry.log_report()
    assert record[0] == "fastapi.validation.failed"
    assert record[3] == {"fastapi.validation.error_count": 2, "http.route": "/items"}


def test_a_route_without_telemetry_never_reaches_fastapis_telemetry(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With telemetry off (the default) the direct tier serves every request itself: it
    never calls FastAPI's telemetry functions, nor the handling they need."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("FastAPI's telemetry was reached")

    for name in ("telemetry_data", "operation", "validation_failed", "solve_dependencies"):
        monkeypatch.setattr(_compat, name, refuse)
    # What the direct tier would hand an observed request to.
    monkeypatch.setattr(_compat, "route_app", lambda handler: refuse)
    app = FastAPI()
    app.include_router(msgspec_router("direct", twin))
    client = TestClient(app)
    assert client.get("/items/3?q=2").json() == {"name": "item 3", "price": 2.0}
    assert client.post("/items", json={"name": "lamp", "price": 1}).status_code == 200
    assert client.post("/items", json={"name": "lamp"}).status_code == 422
    assert client.get("/items/3?q=x").status_code == 422
    assert client.get("/teapot").status_code == 418
    assert client.get("/stream").text.count("\n") == 3


def test_a_request_the_telemetry_excludes_stays_on_the_direct_tier(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the request left the direct tier")

    monkeypatch.setattr(_compat, "route_app", lambda handler: refuse)
    app, telemetry = observed_app(msgspec_router("direct", twin), exclude=lambda scope: True)
    assert TestClient(app).get("/items/3?q=2").json() == {"name": "item 3", "price": 2.0}
    assert telemetry.span_report() == []


@pytest.mark.parametrize("tier", ["direct", "delegated"])
def test_a_validation_failure_of_a_route_fastapi_renders_is_logged_as_fastapis(
    twin: Twin, tier: str
) -> None:
    """A route whose responses FastAPI's JSONResponse renders (as on an application's own
    router, whose default class it is): the request path's 422 is logged all the same."""
    reports = []
    for router, item in (
        (pydantic_router_without_routes(tier), PydanticItem),
        (msgspec_router_without_routes(tier, twin), StructItem),
    ):

        @router.post("/rendered", response_class=JSONResponse)
        async def rendered(body: item) -> Any:  # type: ignore[valid-type]
            return {"name": body.name}

        app, telemetry = observed_app(router)
        response = TestClient(app).post("/rendered", json={"name": "lamp", "price": "x"})
        reports.append((response.status_code, telemetry.log_report(), telemetry.log_data.seen))
    assert reports[1] == reports[0]


@pytest.mark.parametrize("tier", ["direct", "delegated"])
def test_malformed_json_on_a_route_with_fastapi_errors_is_reported_as_fastapis(
    twin: Twin, tier: str
) -> None:
    """With errors="fastapi" malformed JSON is FastAPI's 422 `json_invalid`, which FastAPI's
    handler logs as a validation failure, with the body's text in TelemetryData."""
    reports = []
    for router in (pydantic_router(tier), msgspec_router(tier, twin, errors="fastapi")):
        app, telemetry = observed_app(router)
        response = TestClient(app).post(
            "/items", content="{", headers={"content-type": "application/json"}
        )
        reports.append((response.status_code, response.json(), telemetry.report()))
    assert reports[1] == reports[0]
