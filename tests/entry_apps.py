"""One application, built on demand with or without `install_dispatch`, and a raw ASGI
server for it that records everything the application did.

`build_app(router_class, config)` builds the application tests/test_entry_differential.py
compares: routes on a MsgspecRouter (the twin's router class) and on the application
itself, exception handlers by class, by MRO parent and for server errors, dependencies
with `yield`, background tasks, streaming responses, websockets, a lifespan, a mounted
Starlette app and a mounted FastAPI app, and whichever user middleware `config` names.
What the endpoints, dependencies and handlers did goes to `Built.events`.

`serve(built, calls)` plays the part of the server: each call is an HTTP request or a
websocket session, optionally inside the application's lifespan, and the result is
every message the application sent, what escaped `await app(scope, receive, send)` (by
type and message), the events, the log records of the server's and the frameworks'
loggers, and, with telemetry on, what FastAPI's telemetry exported.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn
from urllib.parse import unquote

import msgspec
import pytest
from fastapi import (
    APIRouter,
    BackgroundTasks,
    Depends,
    FastAPI,
    HTTPException,
    Request,
    WebSocket,
)
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.middleware.trustedhost import TrustedHostMiddleware
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from support import delegating_dependency

from msgspec_fastapi import MsgspecRouter
from msgspec_fastapi._compat import HAS_NATIVE_BODY_LIMIT

try:
    import fastapi.telemetry  # noqa: F401  (FastAPI 0.142+)
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import (
        InMemoryLogRecordExporter,
        SimpleLogRecordProcessor,
    )
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    HAS_TELEMETRY = True
except ImportError:  # pragma: no cover - FastAPI without telemetry, or no OpenTelemetry SDK
    HAS_TELEMETRY = False

# The loggers a server and the frameworks log to; their records are compared.
LOGGERS = ("uvicorn", "starlette", "fastapi", "msgspec_fastapi")
TIMEOUT = 10.0  # seconds before a call that hangs fails the test
BODY_LIMIT = 32  # the application's `max_body_size`, where the config asks for one
HERE = str(Path(__file__).resolve())

MIDDLEWARE = ("cors", "gzip", "trusted-host", "asgi", "base-http", "http-decorator")


# --- the exceptions the application raises, and how each is handled ----------------------


class Teapot(Exception):
    """Handled by a handler registered for this very class (an async handler)."""


class Produce(Exception):
    """Has a handler (a sync one); raised only through its subclass."""


class Sprout(Produce):
    """Handled by the handler registered for its MRO parent `Produce`."""


class Unhandled(Exception):
    """No handler: a 500 from ServerErrorMiddleware (or its 500/Exception handler)."""


KINDS = (
    "http-exception",
    "not-found",
    "validation-error",
    "handled-by-class",
    "handled-by-parent",
    "unhandled",
)


def fail(kind: str) -> NoReturn:
    """Raise the exception `kind` names."""
    if kind == "http-exception":
        raise HTTPException(418, "short and stout", headers={"x-tea": "earl grey"})
    if kind == "not-found":  # handled by the handler registered for the status code
        raise HTTPException(404, "no such teapot")
    if kind == "validation-error":
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("query", "cups"), "msg": "too many", "input": "9"}]
        )
    if kind == "handled-by-class":
        raise Teapot("handled by its class")
    if kind == "handled-by-parent":
        raise Sprout("handled by its parent's handler")
    raise Unhandled(f"nobody handles {kind}")


class Item(msgspec.Struct):
    name: str
    price: float


@dataclass(frozen=True)
class Config:
    """How the application is built."""

    debug: bool = False
    telemetry: bool = False
    body_limit: bool = False  # FastAPI(max_body_size=BODY_LIMIT)
    # A handler for server errors, registered under 500 (sync) or Exception (async).
    server_error_handler: Literal["500", "Exception"] | None = None
    middleware: str | None = None  # one of MIDDLEWARE
    # FastAPI subclassed with its own `build_middleware_stack` (which calls FastAPI's).
    own_stack: bool = False

    def label(self) -> str:
        parts = [
            name
            for name, on in (
                ("debug", self.debug),
                ("telemetry", self.telemetry),
                ("body limit", self.body_limit),
                ("own stack", self.own_stack),
            )
            if on
        ]
        if self.server_error_handler:
            parts.append(f"{self.server_error_handler} handler")
        if self.middleware:
            parts.append(f"{self.middleware} middleware")
        return ", ".join(parts) or "defaults"

    def skip_unsupported(self) -> None:
        """Skip the test where the installed FastAPI lacks what this config uses."""
        if self.telemetry and not HAS_TELEMETRY:
            pytest.skip("FastAPI's telemetry or OpenTelemetry's SDK is not installed")
        if self.body_limit and not HAS_NATIVE_BODY_LIMIT:
            pytest.skip("FastAPI has no max_body_size before 0.164")


# --- telemetry ---------------------------------------------------------------------------


@dataclass
class Telemetry:
    """An application's telemetry, exported to memory; `report()` without timings or ids."""

    tracer_provider: Any
    spans: Any
    metrics: Any
    logs: Any
    baseline: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    @classmethod
    def config(cls) -> tuple[Telemetry, dict[str, Any]]:
        spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        metrics = InMemoryMetricReader()
        logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
        options = {
            "tracer_provider": tracer_provider,
            "meter_provider": MeterProvider(metric_readers=[metrics]),
            "logger_provider": logger_provider,
            "auto_configure": False,
        }
        return cls(tracer_provider, spans, metrics, logs), options

    def reset(self) -> None:
        """Forget what was exported so far (an application serves many tests)."""
        self.spans.clear()
        self.logs.clear()
        self.baseline = self.metric_totals()

    def metric_totals(self) -> dict[tuple[Any, ...], Any]:
        """Each metric's data points: a duration's count (not its timing), an up-down
        counter's value, by metric name and attributes."""
        totals = {}
        data = self.metrics.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        key = (metric.name, tuple(sorted((point.attributes or {}).items())))
                        totals[key] = getattr(point, "count", getattr(point, "value", None))
        return totals

    def report(self) -> dict[str, Any]:
        """What was exported since `reset()`, without timings or ids."""
        finished = self.spans.get_finished_spans()
        names = {span.context.span_id: span.name for span in finished}
        spans = [
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
        metrics = {
            key: total - self.baseline.get(key, 0)
            for key, total in self.metric_totals().items()
            if total != self.baseline.get(key, 0)
        }
        logs = []
        for finished_log in self.logs.get_finished_logs():
            record = getattr(finished_log, "log_record", finished_log)
            attributes = dict(record.attributes or {})
            # The stack trace names the frames the request passed through, which is not
            # behaviour; the exception's type and message stay.
            attributes.pop("exception.stacktrace", None)
            logs.append((record.event_name, record.severity_text, record.body, attributes))
        return {"spans": spans, "metrics": metrics, "logs": logs}


# --- the application -----------------------------------------------------------------------


@dataclass
class Built:
    app: FastAPI
    router: APIRouter  # the MsgspecRouter the application includes
    events: list[str]
    telemetry: Telemetry | None


class OwnStackFastAPI(FastAPI):
    """A FastAPI subclass that builds its own middleware stack (here: FastAPI's)."""

    def build_middleware_stack(self) -> ASGIApp:
        return super().build_middleware_stack()


def build_app(router_class: type[MsgspecRouter], config: Config) -> Built:
    """The application, on `router_class`, as `config` says; nothing installed on it."""
    events: list[str] = []
    options: dict[str, Any] = {"debug": config.debug, "title": "entry"}
    telemetry = None
    if config.telemetry:
        telemetry, options["telemetry"] = Telemetry.config()
    if config.body_limit:
        options["max_body_size"] = BODY_LIMIT

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, str]]:
        events.append("startup")
        yield {"from_lifespan": "lifespan state"}
        events.append("shutdown")

    app = (OwnStackFastAPI if config.own_stack else FastAPI)(lifespan=lifespan, **options)
    app.state.flavour = "root state"
    # Typed as its base: the package's decorators are untyped (they take more options).
    router: APIRouter = router_class()

    def watch() -> Any:
        """A dependency with `yield` on every raising route: it sees what passes it."""
        try:
            yield
        except Exception as exc:
            events.append(f"dependency teardown saw {type(exc).__name__}")
            raise
        else:
            events.append("dependency teardown")

    watched = [Depends(watch)]

    @router.get("/items/{item_id}")
    async def read_item(item_id: int, q: str = "") -> Item:
        return Item(name=f"item {item_id}{q}", price=1.5)

    @router.post("/items")
    async def create_item(item: Item) -> Item:
        return Item(name=item.name.upper(), price=item.price * 2)

    @router.post("/ignores-body")
    async def ignores_body() -> dict[str, str]:
        return {"body": "not read"}

    @router.get("/raise/{kind}", dependencies=watched)
    async def raise_async(kind: str) -> Item:
        fail(kind)

    @router.get("/raise-sync/{kind}", dependencies=watched)
    def raise_sync(kind: str) -> Item:
        fail(kind)

    # A dependency only FastAPI solves keeps this route on the delegated tier.
    @router.get("/raise-delegated/{kind}", dependencies=[*watched, Depends(delegating_dependency)])
    async def raise_delegated(kind: str) -> Item:
        fail(kind)

    def fail_before_yield(kind: str) -> Any:
        fail(kind)
        yield  # unreachable: makes this a dependency with `yield`

    async def fail_after_yield(kind: str) -> AsyncIterator[None]:
        yield
        events.append("after yield")
        fail(kind)

    @router.get("/dependency-before-yield/{kind}", dependencies=[Depends(fail_before_yield)])
    async def dependency_before_yield(kind: str) -> dict[str, str]:
        events.append("endpoint ran")
        return {"kind": kind}

    @router.get("/dependency-after-yield/{kind}", dependencies=[Depends(fail_after_yield)])
    async def dependency_after_yield(kind: str) -> dict[str, str]:
        events.append("endpoint ran")
        return {"kind": kind}

    @router.get("/background/{kind}")
    async def background(kind: str, tasks: BackgroundTasks) -> dict[str, str]:
        tasks.add_task(fail, kind)
        return {"kind": kind}

    @router.get("/stream/{kind}")
    async def stream(kind: str) -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            try:
                for n in range(3):
                    events.append(f"chunk {n}")
                    yield f"chunk {n};".encode()
                    await asyncio.sleep(0)
                if kind != "none":
                    fail(kind)
            finally:
                events.append("stream closed")

        return StreamingResponse(chunks(), media_type="text/plain")

    @router.get("/where", name="where")
    async def where(request: Request) -> dict[str, Any]:
        return {
            "app": request.app.title,
            "state": request.app.state.flavour,
            "lifespan": getattr(request.state, "from_lifespan", None),
            "root_path": request.scope.get("root_path"),
            "url_for": str(request.url_for("read_item", item_id=7)),
            "url": str(request.url),
            "scope": routing_scope(request),
        }

    @router.get("/big")
    async def big() -> PlainTextResponse:
        return PlainTextResponse("compress me " * 50)

    @router.websocket("/ws/echo")
    async def echo(websocket: WebSocket) -> None:
        await websocket.accept()
        text = await websocket.receive_text()
        await websocket.send_text(f"echo {text}")
        await websocket.close(code=1000)

    @router.websocket("/ws/raise/{kind}")
    async def websocket_raise(websocket: WebSocket, kind: str) -> None:
        await websocket.accept()
        fail(kind)

    @router.websocket("/ws/raise-before-accept/{kind}")
    async def websocket_raise_before_accept(websocket: WebSocket, kind: str) -> None:
        fail(kind)

    app.include_router(router)

    # Plain FastAPI routes beside the router's.
    @app.get("/plain/items/{item_id}")
    async def plain_item(item_id: int) -> dict[str, int]:
        return {"plain": item_id}

    @app.get("/plain/raise/{kind}", dependencies=watched)
    async def plain_raise(kind: str) -> dict[str, str]:
        fail(kind)

    mount_sub_apps(app, router_class)
    add_exception_handlers(app, config, events)
    if config.middleware:
        add_middleware(app, config.middleware, events)
    return Built(app, router, events, telemetry)


def routing_scope(request: Request) -> dict[str, Any]:
    """What routing left in the request's scope, as an endpoint or a handler sees it."""
    scope = request.scope
    route = scope.get("route")
    endpoint = scope.get("endpoint")
    return {
        "route": getattr(route, "path", None),
        "endpoint": getattr(endpoint, "__name__", None),
        "path_params": scope.get("path_params"),
        "router is the app's": scope.get("router") is getattr(request.app, "router", None),
        "app": getattr(scope.get("app"), "title", None),
    }


def mount_sub_apps(app: FastAPI, router_class: type[MsgspecRouter]) -> None:
    """A Starlette app at /starlette and a FastAPI app (its own MsgspecRouter) at /sub."""

    async def starlette_where(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "app": type(request.app).__name__,
                "root_path": request.scope.get("root_path"),
                "url_for": str(request.url_for("starlette-where")),
            }
        )

    async def starlette_echo(request: Request) -> Response:
        return Response(await request.body())

    starlette_app = Starlette(
        routes=[
            Route("/where", starlette_where, name="starlette-where"),
            Route("/echo", starlette_echo, methods=["POST"]),
        ]
    )
    app.mount("/starlette", starlette_app)

    sub = FastAPI(title="sub")
    sub.state.flavour = "sub state"
    sub_router: APIRouter = router_class()

    @sub_router.get("/where")
    async def sub_where(request: Request) -> dict[str, Any]:
        return {
            "app": request.app.title,
            "state": request.app.state.flavour,
            "root_path": request.scope.get("root_path"),
            "url_for": str(request.url_for("sub_where")),
            "scope": routing_scope(request),
        }

    @sub_router.post("/items")
    async def sub_create_item(item: Item) -> Item:
        return item

    @sub_router.get("/raise/{kind}")
    async def sub_raise(kind: str) -> Item:
        fail(kind)

    sub.include_router(sub_router)
    app.mount("/sub", sub)


def add_exception_handlers(app: FastAPI, config: Config, events: list[str]) -> None:
    async def teapot(request: Request, exc: Exception) -> Response:
        events.append(f"class handler: {exc}")
        return JSONResponse(
            {"handled": str(exc), "scope": routing_scope(request)},
            status_code=409,
            headers={"x-handler": "class"},
        )

    def produce(request: Request, exc: Exception) -> Response:
        events.append(f"parent handler: {exc}")
        return PlainTextResponse(f"parent handled {exc}", status_code=400)

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse(
            {"not found": getattr(exc, "detail", None), "scope": routing_scope(request)},
            status_code=404,
        )

    app.add_exception_handler(404, not_found)
    app.add_exception_handler(Teapot, teapot)
    app.add_exception_handler(Produce, produce)

    def server_error_sync(request: Request, exc: Exception) -> Response:
        logging.getLogger("uvicorn.error").error("server error handler", exc_info=exc)
        return JSONResponse(
            {"server error": str(exc), "scope": routing_scope(request)}, status_code=500
        )

    async def server_error_async(request: Request, exc: Exception) -> Response:
        events.append(f"server error handler: {type(exc).__name__}")
        return PlainTextResponse(f"handled {type(exc).__name__}", status_code=503)

    if config.server_error_handler == "500":
        app.add_exception_handler(500, server_error_sync)
    elif config.server_error_handler == "Exception":
        app.add_exception_handler(Exception, server_error_async)


class HeaderMiddleware:
    """A pure ASGI middleware: adds a header to each response, and raises (before the
    application runs) on /middleware-raise/{kind}."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if path.startswith("/middleware-raise/"):
            fail(path.rsplit("/", 1)[1])

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message["headers"], (b"x-asgi", b"1")]}
            await send(message)

        await self.app(scope, receive, send_with_header)


class HeaderBaseHTTPMiddleware(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if request.url.path.startswith("/middleware-raise/"):
            fail(request.url.path.rsplit("/", 1)[1])
        response = await call_next(request)
        response.headers["x-base-http"] = "1"
        return response


def add_middleware(app: FastAPI, name: str, events: list[str]) -> None:
    if name == "cors":
        app.add_middleware(
            CORSMiddleware,
            allow_origins=["https://ok.example"],
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["x-tea"],
        )
    elif name == "gzip":
        app.add_middleware(GZipMiddleware, minimum_size=100)
    elif name == "trusted-host":
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=["test", "*.example"])
    elif name == "asgi":
        app.add_middleware(HeaderMiddleware)
    elif name == "base-http":
        app.add_middleware(HeaderBaseHTTPMiddleware)
    elif name == "http-decorator":

        @app.middleware("http")
        async def after_the_app(
            request: Request, call_next: Callable[[Request], Awaitable[Response]]
        ) -> Response:
            response = await call_next(request)
            events.append(f"middleware saw {response.status_code}")
            # Raises after the application answered, when the path asks for it.
            if request.url.path.startswith("/middleware-raise/"):
                fail(request.url.path.rsplit("/", 1)[1])
            response.headers["x-decorated"] = "1"
            return response

    else:
        raise ValueError(name)


# --- the server --------------------------------------------------------------------------


Headers = tuple[tuple[bytes, bytes], ...]


@dataclass(frozen=True)
class Http:
    """One HTTP request. `chunks` is the body, message by message; with `complete=False`
    the client leaves (http.disconnect) instead of finishing it. With `leave_after` the
    client leaves once the application has sent that many body messages; with
    `send_fails_after` the server is an ASGI 2.4 one whose `send` raises OSError (the
    connection is gone) on the body message after that many."""

    method: str
    path: str
    headers: Headers = ()
    chunks: tuple[bytes, ...] = (b"",)
    complete: bool = True
    root_path: str = ""
    host: bytes = b"test"
    leave_after: int | None = None
    send_fails_after: int | None = None

    def scope(self, state: dict[str, Any] | None) -> dict[str, Any]:
        path, _, query = self.path.partition("?")
        full = self.root_path + path
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4" if self.send_fails_after else "2.3"},
            "http_version": "1.1",
            "method": self.method,
            "scheme": "http",
            "path": unquote(full),  # as servers do; raw_path keeps the request target's
            "raw_path": full.encode(),
            "root_path": self.root_path,
            "query_string": query.encode(),
            "headers": [(b"host", self.host), *self.headers],
            "client": ("127.0.0.1", 50000),
            "server": ("test", 80),
        }
        if state is not None:
            scope["state"] = dict(state)
        return scope

    async def run(self, app: ASGIApp, state: dict[str, Any] | None) -> tuple[Any, ...]:
        incoming = [
            {
                "type": "http.request",
                "body": chunk,
                "more_body": not self.complete or i < len(self.chunks) - 1,
            }
            for i, chunk in enumerate(self.chunks)
        ]
        sent: list[Message] = []
        body_sent = asyncio.Event()

        async def receive() -> Message:
            if incoming:
                return incoming.pop(0)
            if self.complete and self.leave_after is not None:
                while sum(m["type"] == "http.response.body" for m in sent) < self.leave_after:
                    body_sent.clear()
                    await body_sent.wait()
            elif self.complete:
                await asyncio.Event().wait()  # the client waits for the response
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.body":
                bodies = sum(m["type"] == "http.response.body" for m in sent)
                if self.send_fails_after is not None and bodies >= self.send_fails_after:
                    raise OSError("connection lost")
                body_sent.set()
            sent.append(message)

        raised = await escaped(app(self.scope(state), receive, send))
        return ("http", self.method, self.path, normalized(sent), raised)


@dataclass(frozen=True)
class WebSocketSession:
    """A websocket client: connects, sends `texts`, then closes."""

    path: str
    texts: tuple[str, ...] = ()

    async def run(self, app: ASGIApp, state: dict[str, Any] | None) -> tuple[Any, ...]:
        scope: dict[str, Any] = {
            "type": "websocket",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "scheme": "ws",
            "path": self.path,
            "raw_path": self.path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"test")],
            "client": ("127.0.0.1", 50000),
            "server": ("test", 80),
            "subprotocols": [],
        }
        if state is not None:
            scope["state"] = dict(state)
        incoming: list[Message] = [
            {"type": "websocket.connect"},
            *({"type": "websocket.receive", "text": text} for text in self.texts),
            {"type": "websocket.disconnect", "code": 1000},
        ]
        sent: list[Message] = []

        async def receive() -> Message:
            return incoming.pop(0) if len(incoming) > 1 else incoming[0]

        async def send(message: Message) -> None:
            sent.append(message)

        raised = await escaped(app(scope, receive, send))
        return ("websocket", self.path, normalized(sent), raised)


Call = Http | WebSocketSession


async def escaped(call: Awaitable[None]) -> tuple[str, str] | None:
    """What escaped the application, as (type, message): what the server sees."""
    try:
        await asyncio.wait_for(call, TIMEOUT)
    except Exception as exc:
        return (type(exc).__name__, str(exc))
    return None


def normalized(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The messages, comparable: header pairs as tuples, and a debug traceback reduced to
    what the user's code put in it (`user_traceback`)."""
    result = []
    for message in messages:
        message = dict(message)
        if "headers" in message:
            message["headers"] = [tuple(pair) for pair in message["headers"]]
        body = message.get("body")
        if isinstance(body, bytes) and body.startswith(b"Traceback (most recent call last)"):
            message["body"] = user_traceback(body.decode())
        result.append(message)
    for message in result:
        if "headers" in message and any(
            isinstance(m.get("body"), str) for m in result if m["type"] == "http.response.body"
        ):
            # The traceback's length depends on the frames it lists.
            message["headers"] = [
                (name, b"(traceback length)" if name == b"content-length" else value)
                for name, value in message["headers"]
            ]
    return result


def user_traceback(text: str) -> str:
    """A formatted traceback with the frames of library code left out: what the debug
    page shows of the user's code, and every exception line, in order."""
    kept = []
    in_library_frame = False
    for line in text.splitlines():
        if line.startswith('  File "'):
            in_library_frame = not line.startswith(f'  File "{HERE}"')
        elif not line.startswith("    "):
            in_library_frame = False
        if not in_library_frame:
            kept.append(line)
    return "\n".join(kept)


@dataclass
class Observed:
    """Everything one application did while serving the calls."""

    calls: list[tuple[Any, ...]]
    lifespan: list[Message] | None
    events: list[str]
    logs: list[tuple[Any, ...]]
    telemetry: dict[str, Any] | None = field(default=None)


async def serve_calls(
    app: ASGIApp, calls: Sequence[Call], lifespan: bool
) -> tuple[list[tuple[Any, ...]], list[Message] | None]:
    if not lifespan:
        return [await call.run(app, None) for call in calls], None
    state: dict[str, Any] = {}
    messages: list[Message] = []
    started = asyncio.Event()
    stop = asyncio.Event()
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive() -> Message:
        if len(incoming) == 1:
            await stop.wait()
        return incoming.pop(0)

    async def send(message: Message) -> None:
        messages.append(message)
        started.set()

    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": state}
    task = asyncio.ensure_future(app(scope, receive, send))
    await asyncio.wait_for(started.wait(), TIMEOUT)
    results = [await call.run(app, state) for call in calls]
    stop.set()
    await asyncio.wait_for(task, TIMEOUT)
    return results, messages


def serve(
    built: Built,
    calls: Sequence[Call],
    caplog: pytest.LogCaptureFixture,
    lifespan: bool = False,
) -> Observed:
    """Serve `calls` to the built application on a new event loop, and record it all."""
    caplog.clear()
    built.events.clear()
    if built.telemetry is not None:
        built.telemetry.reset()
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    results, lifespan_messages = asyncio.run(serve_calls(built.app, calls, lifespan))
    logs = [
        (
            record.name,
            record.levelname,
            record.getMessage(),
            None if not record.exc_info else (record.exc_info[0].__name__, str(record.exc_info[1])),  # type: ignore[union-attr]
        )
        for record in caplog.records
        if record.name.split(".")[0] in LOGGERS
    ]
    telemetry = built.telemetry.report() if built.telemetry is not None else None
    return Observed(results, lifespan_messages, list(built.events), logs, telemetry)


Side = Literal["fastapi", "install_dispatch"]
Install = Callable[[FastAPI], None]
Builder = Callable[[], Built]


def both_sides(build: Builder, install: Install) -> dict[Side, Built]:
    """The application built twice: as FastAPI serves it, and with `install(app)`."""
    plain = build()
    installed = build()
    install(installed.app)
    return {"fastapi": plain, "install_dispatch": installed}
