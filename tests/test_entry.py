"""The application entry `install_dispatch` puts in place of FastAPI's default layers.

Each test builds the same application twice: once with `install_dispatch` (the entry, on
the twin under test) and once as FastAPI builds it (its own layers, the same routes), and
compares what the same request gets from both: every message sent, and the exception
that escapes to the server. Each also checks the reply is the one FastAPI documents, so
that two equally wrong answers cannot pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import msgspec
import pytest
from fastapi import Depends, FastAPI, HTTPException, Request, WebSocket
from fastapi.middleware.cors import CORSMiddleware
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.testclient import TestClient
from raw_asgi import JSON, Message, body_messages, scope_for
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send
from twins import Twin

from msgspec_fastapi import _compat, _select
from msgspec_fastapi._routing.stack import STATUS_ATTR, EntryStatus


class Item(msgspec.Struct):
    name: str
    price: float


class AppError(Exception):
    """The base of the application's own errors."""


class NotFoundError(AppError):
    """A subclass, for handler lookup by MRO."""


Build = Callable[[Twin], FastAPI]


def apps(twin: Twin, build: Build) -> tuple[FastAPI, FastAPI]:
    """(`build` with the entry installed on `twin`, `build` as FastAPI runs it)."""
    entry_app = build(twin)
    twin.install_dispatch(entry_app)
    return entry_app, build(twin)


async def run(
    app: ASGIApp, scope: dict[str, Any], messages: list[Message]
) -> tuple[list[Message], str | None]:
    """The messages `app` sent, and the exception that escaped it (type and message)."""
    pending = list(messages)
    sent: list[Message] = []

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    try:
        await asyncio.wait_for(app(scope, receive, send), 30)
    except Exception as exc:
        return sent, f"{type(exc).__name__}: {exc}"
    return sent, None


def both(
    twin: Twin,
    build: Build,
    method: str = "GET",
    target: str = "/",
    headers: list[tuple[bytes, bytes]] | None = None,
    chunks: tuple[bytes, ...] = (b"",),
    root_path: str = "",
) -> tuple[list[Message], str | None]:
    """The request on the entry and on FastAPI's layers: asserted the same, returned.
    `root_path` is the server's (the scope's path starts with it, as in ASGI)."""
    entry_app, reference = apps(twin, build)
    answers = []
    for app in (entry_app, reference):
        scope = scope_for(method, (root_path + target).encode(), headers or [])
        scope["root_path"] = root_path
        answers.append(asyncio.run(run(app, scope, body_messages(chunks))))
    assert_entry(entry_app, twin)
    assert answers[0] == answers[1]
    return answers[0]


def assert_entry(app: FastAPI, twin: Twin) -> None:
    """The entry of `twin` serves `app`."""
    status = getattr(app, STATUS_ATTR)
    assert (status.installed, status.reason) == (True, "")
    module = type(app.middleware_stack).__module__
    assert module == _select.module_name(_select.ENTRY, twin.name)


def status_of(sent: list[Message]) -> int:
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def body_of(sent: list[Message]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def header_of(sent: list[Message], name: bytes) -> bytes | None:
    start = next(m for m in sent if m["type"] == "http.response.start")
    return dict(start["headers"]).get(name)


def raising(exc: Exception, **app_options: Any) -> Build:
    """An application whose msgspec route at / raises `exc`."""

    def build(twin: Twin) -> FastAPI:
        app = FastAPI(**app_options)
        router = twin.router_class()

        @router.get("/")
        async def fail() -> Item:
            raise exc

        app.include_router(router)
        return app

    return build


# -- the 500 and the debug page --------------------------------------------------------


def test_an_unhandled_exception_gives_a_500_and_reaches_the_server(twin: Twin) -> None:
    sent, raised = both(twin, raising(ValueError("boom")))
    assert (status_of(sent), body_of(sent)) == (500, b"Internal Server Error")
    assert raised == "ValueError: boom"


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [(b"text/html", b"text/html; charset=utf-8"), (b"*/*", b"text/plain; charset=utf-8")],
)
def test_debug_shows_starlettes_page_as_html_or_text(
    twin: Twin, accept: bytes, content_type: bytes
) -> None:
    entry_app, reference = apps(twin, raising(ValueError("boom"), debug=True))
    answers = []
    for app in (entry_app, reference):
        scope = scope_for("GET", b"/", [(b"accept", accept)])
        answers.append(asyncio.run(run(app, scope, body_messages())))
    assert_entry(entry_app, twin)
    (sent, raised), (reference_sent, reference_raised) = answers
    assert (status_of(sent), header_of(sent, b"content-type")) == (500, content_type)
    assert (status_of(reference_sent), header_of(reference_sent, b"content-type")) == (
        500,
        content_type,
    )
    # The traceback's frames differ by design; the page names the error either way.
    assert b"ValueError" in body_of(sent) and b"boom" in body_of(sent)
    assert raised == reference_raised == "ValueError: boom"


@pytest.mark.parametrize("key", [500, Exception])
@pytest.mark.parametrize("kind", ["async", "sync"])
def test_a_handler_for_500_or_exception_answers_and_the_error_still_reaches_the_server(
    twin: Twin, key: Any, kind: str
) -> None:
    def build(twin: Twin) -> FastAPI:
        app = raising(ValueError("boom"))(twin)

        async def async_handler(request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"handled": str(exc), "path": request.url.path}, 503)

        def sync_handler(request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"handled": str(exc), "path": request.url.path}, 503)

        app.add_exception_handler(key, async_handler if kind == "async" else sync_handler)
        return app

    sent, raised = both(twin, build)
    assert (status_of(sent), msgspec.json.decode(body_of(sent))) == (
        503,
        {"handled": "boom", "path": "/"},
    )
    assert raised == "ValueError: boom"


# -- the application's exception handlers ---------------------------------------------


def test_an_http_exception_keeps_its_headers(twin: Twin) -> None:
    sent, raised = both(twin, raising(HTTPException(418, "tea", headers={"x-pot": "full"})))
    assert (status_of(sent), header_of(sent, b"x-pot"), raised) == (418, b"full", None)
    assert msgspec.json.decode(body_of(sent)) == {"detail": "tea"}


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_handlers_are_found_by_the_exceptions_mro(twin: Twin, kind: str) -> None:
    def build(twin: Twin) -> FastAPI:
        app = raising(NotFoundError("gone"))(twin)

        def make(label: str) -> Any:
            async def async_handler(request: Request, exc: Exception) -> PlainTextResponse:
                return PlainTextResponse(f"{label}: {exc}", 404)

            def sync_handler(request: Request, exc: Exception) -> PlainTextResponse:
                return PlainTextResponse(f"{label}: {exc}", 404)

            return async_handler if kind == "async" else sync_handler

        app.add_exception_handler(Exception, make("any"))
        app.add_exception_handler(AppError, make("app"))
        return app

    sent, raised = both(twin, build)
    # The nearest class wins over Exception, whose handler is ServerErrorMiddleware's.
    assert (status_of(sent), body_of(sent), raised) == (404, b"app: gone", None)


def test_a_status_code_handler_answers_an_http_exception(twin: Twin) -> None:
    def build(twin: Twin) -> FastAPI:
        app = raising(HTTPException(409, "taken"))(twin)

        async def conflict(request: Request, exc: Exception) -> PlainTextResponse:
            return PlainTextResponse("by status", 409)

        app.add_exception_handler(409, conflict)
        return app

    sent, raised = both(twin, build)
    assert (status_of(sent), body_of(sent), raised) == (409, b"by status", None)


def test_a_handled_exception_after_the_response_started_is_starlettes_error(
    twin: Twin,
) -> None:
    async def raw(scope: Scope, receive: Receive, send: Send) -> None:
        # A mounted ASGI app: its exception reaches the application's handlers unhandled.
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise AppError("late")

    def build(twin: Twin) -> FastAPI:
        app = FastAPI()
        app.mount("/raw", raw)

        async def handler(request: Request, exc: Exception) -> PlainTextResponse:
            return PlainTextResponse("handled", 400)

        app.add_exception_handler(AppError, handler)
        return app

    sent, raised = both(twin, build, target="/raw/")
    assert sent == [{"type": "http.response.start", "status": 200, "headers": []}]
    assert raised == "RuntimeError: Caught handled exception, but response already started."


async def session() -> AsyncIterator[str]:
    yield "session"


def answering(dependency: bool) -> Build:
    """An application whose msgspec route at / answers an Item, after a `yield` dependency
    (`session`) where `dependency`, with a handler for AppError."""

    def build(twin: Twin) -> FastAPI:
        app = FastAPI()
        router = twin.router_class()
        if dependency:

            @router.get("/")
            async def with_session(name: Annotated[str, Depends(session)]) -> Item:
                return Item(name, 1.0)

        else:

            @router.get("/")
            async def plain() -> Item:
                return Item("plain", 1.0)

        app.include_router(router)

        async def handler(request: Request, exc: Exception) -> PlainTextResponse:
            return PlainTextResponse("handled", 400)

        app.add_exception_handler(AppError, handler)
        return app

    return build


async def failing_on_body(app: ASGIApp) -> tuple[list[Message], str | None]:
    """What `app` sent to a server whose send fails with an AppError on the body message,
    and the exception that escaped it."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            raise AppError("the connection failed")

    try:
        await app(scope_for("GET", b"/", []), receive, send)
    except Exception as exc:
        return sent, f"{type(exc).__name__}: {exc}"
    return sent, None


@pytest.mark.parametrize("dependency", [False, True], ids=["plain", "yield dependency"])
def test_a_response_the_route_sends_itself_counts_as_started(twin: Twin, dependency: bool) -> None:
    # The route sends its answer past the entry's send wrapper: the entry must still know
    # it started, so that the handled failure of the body's send is not answered again.
    entry_app, reference = apps(twin, answering(dependency))
    answers = [asyncio.run(failing_on_body(app)) for app in (entry_app, reference)]
    assert_entry(entry_app, twin)
    assert answers[0] == answers[1]
    sent, raised = answers[0]
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert status_of(sent) == 200
    assert raised == "RuntimeError: Caught handled exception, but response already started."


def test_an_exception_a_handler_raises_gets_the_500(twin: Twin) -> None:
    def build(twin: Twin) -> FastAPI:
        app = raising(AppError("first"))(twin)

        async def handler(request: Request, exc: Exception) -> PlainTextResponse:
            raise KeyError("second")

        app.add_exception_handler(AppError, handler)
        return app

    sent, raised = both(twin, build)
    assert (status_of(sent), raised) == (500, "KeyError: 'second'")


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_the_routers_404_goes_to_a_status_code_handler(twin: Twin, kind: str) -> None:
    def build(twin: Twin) -> FastAPI:
        app = raising(ValueError("unused"))(twin)

        async def async_handler(request: Request, exc: Exception) -> PlainTextResponse:
            return PlainTextResponse(f"no {request.url.path}", 404)

        def sync_handler(request: Request, exc: Exception) -> PlainTextResponse:
            return PlainTextResponse(f"no {request.url.path}", 404)

        app.add_exception_handler(404, async_handler if kind == "async" else sync_handler)
        return app

    sent, raised = both(twin, build, target="/missing")
    assert (status_of(sent), body_of(sent), raised) == (404, b"no /missing", None)


def test_a_stack_wrapping_the_entry_still_uses_it(twin: Twin) -> None:
    app = FastAPI()

    @app.get("/")
    async def read() -> dict[str, int]:
        return {"a": 1}

    twin.install_dispatch(app)
    built = app.build_middleware_stack

    class Wrapper:
        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await self.app(scope, receive, send)

    # As OpenTelemetry's instrument_app wraps whatever builds the stack.
    app.build_middleware_stack = lambda: Wrapper(built())  # type: ignore[method-assign]
    assert TestClient(app).get("/").json() == {"a": 1}
    status: EntryStatus = getattr(app, STATUS_ATTR)
    assert (status.installed, status.reason) == (True, "")
    assert isinstance(app.middleware_stack, Wrapper)


# -- the body limit --------------------------------------------------------------------

needs_body_limit = pytest.mark.skipif(
    not _compat.HAS_NATIVE_BODY_LIMIT, reason="FastAPI has no max_body_size before 0.164"
)


def limited_app(twin: Twin) -> FastAPI:
    app = FastAPI(max_body_size=16)
    router = twin.router_class()

    @router.post("/")
    async def create(item: Item) -> Item:
        return item

    app.include_router(router)
    return app


BIG = b'{"name":"a long name for the limit","price":1.5}'


@needs_body_limit
def test_the_applications_body_limit_refuses_a_declared_length(twin: Twin) -> None:
    headers = [*JSON, (b"content-length", str(len(BIG)).encode())]
    sent, raised = both(twin, limited_app, "POST", "/", headers, (BIG,))
    assert (status_of(sent), body_of(sent), raised) == (413, b"Content Too Large", None)


@needs_body_limit
def test_the_applications_body_limit_refuses_a_streamed_body(twin: Twin) -> None:
    sent, raised = both(twin, limited_app, "POST", "/", list(JSON), (BIG[:10], BIG[10:]))
    assert status_of(sent) == 413 and raised is None


@needs_body_limit
def test_a_body_within_the_applications_limit_passes(twin: Twin) -> None:
    body = b'{"name":"a","price":1}'
    app = FastAPI(max_body_size=64)
    router = twin.router_class()

    @router.post("/")
    async def create(item: Item) -> Item:
        return item

    app.include_router(router)
    twin.install_dispatch(app)
    reply = TestClient(app).post("/", content=body, headers={"content-type": "application/json"})
    assert (reply.status_code, reply.json()) == (200, {"name": "a", "price": 1.0})
    assert_entry(app, twin)


# -- the exit stack, and what the application hands on ----------------------------------


def test_the_file_exit_stack_is_closed_after_the_response(twin: Twin) -> None:
    events: list[str] = []

    def build(twin: Twin) -> FastAPI:
        app = FastAPI()

        @app.get("/")
        async def push(request: Request) -> dict[str, bool]:
            stack = request.scope["fastapi_middleware_astack"]

            async def closed() -> None:
                events.append("closed")

            stack.push_async_callback(closed)
            events.append("endpoint")
            return {"stack": True}

        return app

    sent, raised = both(twin, build)
    assert (status_of(sent), raised) == (200, None)
    assert events == ["endpoint", "closed"] * 2


def test_the_file_exit_stack_sees_the_exception_and_may_swallow_it(twin: Twin) -> None:
    seen: list[Any] = []

    def build(twin: Twin) -> FastAPI:
        app = FastAPI()

        @app.get("/")
        async def push(request: Request) -> None:
            def swallow(kind: Any, exc: Any, tb: Any) -> bool:
                seen.append(kind)
                return True

            request.scope["fastapi_middleware_astack"].push(swallow)
            raise ValueError("swallowed")

        return app

    sent, raised = both(twin, build)
    # Swallowed inside every error layer: nothing is sent and nothing raised.
    assert (sent, raised, seen) == ([], None, [ValueError, ValueError])


def test_a_context_entered_on_the_file_exit_stack_exits_when_the_request_ends(
    twin: Twin,
) -> None:
    events: list[str] = []

    @asynccontextmanager
    async def opened() -> AsyncIterator[None]:
        events.append("entered")
        yield
        events.append("exited")

    def build(twin: Twin) -> FastAPI:
        app = FastAPI()

        @app.get("/")
        async def enter(request: Request) -> dict[str, bool]:
            await request.scope["fastapi_middleware_astack"].enter_async_context(opened())
            return {"entered": True}

        return app

    sent, raised = both(twin, build)
    assert (status_of(sent), raised) == (200, None)
    assert events == ["entered", "exited"] * 2


def test_root_path_url_for_app_and_state_are_handed_on(twin: Twin) -> None:
    def build(twin: Twin) -> FastAPI:
        app = FastAPI()
        app.state.flag = "set"
        router = twin.router_class()

        @router.get("/items/{name}", name="item")
        async def item(name: str, request: Request) -> dict[str, Any]:
            return {
                "url": str(request.url_for("item", name=name)),
                "root_path": request.scope["root_path"],
                "same_app": request.app is request.scope["app"],
                "state": request.app.state.flag,
            }

        app.include_router(router)
        return app

    sent, raised = both(twin, build, target="/items/x", root_path="/api")
    assert raised is None
    assert msgspec.json.decode(body_of(sent)) == {
        "url": "http://test/api/items/x",
        "root_path": "/api",
        "same_app": True,
        "state": "set",
    }


def test_a_mounted_application_is_handed_on(twin: Twin) -> None:
    def build(twin: Twin) -> FastAPI:
        app = FastAPI()
        sub = FastAPI()
        router = twin.router_class()

        @router.get("/item")
        async def item(request: Request) -> dict[str, Any]:
            return {"root_path": request.scope["root_path"], "sub": request.app is sub}

        sub.include_router(router)
        twin.install_dispatch(sub)
        app.mount("/sub", sub)
        return app

    sent, raised = both(twin, build, target="/sub/item")
    assert (msgspec.json.decode(body_of(sent)), raised) == (
        {"root_path": "/sub", "sub": True},
        None,
    )


def test_websockets_and_their_handlers_are_handed_on(twin: Twin) -> None:
    def build(twin: Twin) -> FastAPI:
        app = FastAPI()

        @app.websocket("/ws")
        async def echo(websocket: WebSocket) -> None:
            await websocket.accept()
            text = await websocket.receive_text()
            await websocket.send_text(f"{text} from {websocket.scope['root_path']!r}")
            await websocket.close()

        return app

    entry_app, reference = apps(twin, build)
    answers = []
    for app in (entry_app, reference):
        with TestClient(app).websocket_connect("/ws") as socket:
            socket.send_text("hi")
            answers.append(socket.receive_text())
    assert answers == ["hi from ''"] * 2
    assert_entry(entry_app, twin)


def test_lifespan_is_handed_on(twin: Twin) -> None:
    events: list[str] = []

    def build(twin: Twin) -> FastAPI:
        @asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, str]]:
            events.append("start")
            yield {"resource": "open"}
            events.append("stop")

        app = FastAPI(lifespan=lifespan)

        @app.get("/")
        async def read(request: Request) -> dict[str, str]:
            return {"resource": request.state.resource}

        return app

    entry_app, reference = apps(twin, build)
    for app in (entry_app, reference):
        with TestClient(app) as client:
            assert client.get("/").json() == {"resource": "open"}
    assert events == ["start", "stop"] * 2
    assert_entry(entry_app, twin)


# -- user middleware --------------------------------------------------------------------


class Recording:
    """Pure ASGI middleware noting when a request passes it (and its app under `inner`,
    not `app`: the entry must not need to find it)."""

    def __init__(self, app: ASGIApp, label: str, log: list[str]) -> None:
        self.inner = app
        self.label = label
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.log.append(
                f"{self.label} in, handlers set: {'starlette.exception_handlers' in scope}"
            )
        await self.inner(scope, receive, send)


def middleware_app(log: list[str]) -> Build:
    def build(twin: Twin) -> FastAPI:
        app = raising(AppError("in route"))(twin)
        app.add_middleware(Recording, label="first added", log=log)

        @app.middleware("http")
        async def decorated(request: Request, call_next: Any) -> Any:
            log.append("decorated in")
            response = await call_next(request)
            response.headers["x-decorated"] = "yes"
            return response

        app.add_middleware(GZipMiddleware, minimum_size=1)
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=["test"])
        app.add_middleware(CORSMiddleware, allow_origins=["http://a"])
        app.add_middleware(Recording, label="last added", log=log)

        async def handler(request: Request, exc: Exception) -> PlainTextResponse:
            log.append("handler")
            return PlainTextResponse("handled inside the middleware", 400)

        app.add_exception_handler(AppError, handler)
        return app

    return build


def test_user_middleware_keeps_its_order_between_the_entrys_halves(twin: Twin) -> None:
    log: list[str] = []
    headers = [(b"origin", b"http://a"), (b"accept-encoding", b"identity")]
    sent, raised = both(twin, middleware_app(log), headers=headers)
    assert (status_of(sent), body_of(sent), raised) == (400, b"handled inside the middleware", None)
    assert header_of(sent, b"x-decorated") == b"yes"
    assert header_of(sent, b"access-control-allow-origin") == b"http://a"
    # The handler maps are set by the inner half, after every user middleware.
    once = [
        "last added in, handlers set: False",
        "decorated in",
        "first added in, handlers set: False",
        "handler",
    ]
    assert log == once * 2


def test_an_exception_in_user_middleware_gets_the_outer_halfs_500(twin: Twin) -> None:
    def build(twin: Twin) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def broken(request: Request, call_next: Any) -> Any:
            raise AppError("in middleware")

        async def handler(request: Request, exc: Exception) -> PlainTextResponse:
            return PlainTextResponse("not reached: outside ExceptionMiddleware", 400)

        app.add_exception_handler(AppError, handler)
        return app

    sent, raised = both(twin, build)
    assert (status_of(sent), raised) == (500, "AppError: in middleware")


# -- telemetry ---------------------------------------------------------------------------


def test_telemetry_records_the_exception_as_fastapis_layers_do(twin: Twin) -> None:
    pytest.importorskip("opentelemetry.sdk.trace")
    from test_telemetry import observed_app

    reports = []
    for install in (True, False):
        router = twin.router_class()

        @router.get("/")
        async def fail() -> Item:
            raise ValueError("boom")

        app, telemetry = observed_app(router)
        if install:
            twin.install_dispatch(app)
        with pytest.raises(ValueError, match="boom"):
            TestClient(app).get("/")
        if install:
            assert_entry(app, twin)
        reports.append(telemetry.report())
    assert reports[0] == reports[1]
    assert [log[0] for log in reports[0]["logs"]] == ["http.server.request.exception"]


def gated_app(twin: Twin, **telemetry: Any) -> tuple[FastAPI, Any]:
    """An application with the entry built on `twin`, and its telemetry test (the gate)."""
    app = FastAPI(telemetry=telemetry or None)

    @app.get("/")
    async def read() -> dict[str, int]:
        return {"a": 1}

    twin.install_dispatch(app)
    assert TestClient(app).get("/").json() == {"a": 1}
    parts = _compat.telemetry_gate_parts(app)
    if parts is None:
        pytest.skip("this FastAPI has no per-request telemetry test")
    gate = parts[0].enabled
    assert type(gate).__name__ == "TelemetryGate"
    assert type(gate).__module__ == _select.companion(_select.ENTRY, twin.module).__name__
    return app, gate


def test_the_telemetry_gate_finds_nothing_configured_as_fastapi_does(twin: Twin) -> None:
    _, gate = gated_app(twin)
    assert gate() is False
    assert gate.original() is False


def test_the_telemetry_gate_follows_a_kind_switched_off(twin: Twin) -> None:
    _, gate = gated_app(twin, tracing=False, metrics=False, logs=False)
    assert (gate(), gate.original()) == (False, False)


def test_the_telemetry_gate_defers_to_fastapi_for_a_configured_provider(twin: Twin) -> None:
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    _, gate = gated_app(twin, tracer_provider=sdk_trace.TracerProvider())
    assert (gate(), gate.original()) == (True, True)


def test_the_telemetry_gate_sees_a_global_provider_set_after_start(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry import trace

    _, gate = gated_app(twin)
    assert gate() is False
    # As set_tracer_provider leaves it (which can run once per process).
    monkeypatch.setitem(
        trace.get_tracer_provider.__globals__, "_TRACER_PROVIDER", sdk_trace.TracerProvider()
    )
    assert (gate(), gate.original()) == (True, True)


def test_the_telemetry_gate_sees_a_replaced_getter(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    sdk_metrics = pytest.importorskip("opentelemetry.sdk.metrics")
    from opentelemetry import metrics

    _, gate = gated_app(twin)
    provider = sdk_metrics.MeterProvider()
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: provider)
    assert (gate(), gate.original()) == (True, True)


def test_the_telemetry_gate_leaves_a_provider_named_in_the_environment_to_fastapi(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, gate = gated_app(twin)
    # A name no package provides: OpenTelemetry fails to load it, in FastAPI's test as
    # through the gate (a real one would become the process's provider for good).
    monkeypatch.setenv("OTEL_PYTHON_LOGGER_PROVIDER", "no_such_provider")
    with pytest.raises(StopIteration):
        gate.original()
    with pytest.raises(StopIteration):
        gate()
    monkeypatch.delenv("OTEL_PYTHON_LOGGER_PROVIDER")
    assert gate() is False


def test_the_telemetry_gate_takes_str_environment_keys_as_windows_has_them(
    twin: Twin,
) -> None:
    """On Windows `os.environ` keeps str keys (upper case), on POSIX bytes."""
    app, _ = gated_app(twin)
    parts = _compat.telemetry_gate_parts(app)
    assert parts is not None
    _, config, kinds, _ = parts[1]
    names = [kind[-1].decode().upper() for kind in kinds]
    str_kinds = tuple((*kind[:-1], name) for kind, name in zip(kinds, names, strict=True))
    environ: dict[str, str] = {}
    entry = _select.companion(_select.ENTRY, twin.module)
    gate = entry.TelemetryGate(lambda: "FastAPI's answer", config, str_kinds, environ)
    assert gate() is False
    environ[names[0]] = "some.provider"
    assert gate() == "FastAPI's answer"


# -- where FastAPI's stack stays ---------------------------------------------------------


@pytest.fixture
def entry_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.WARNING, logger="msgspec_fastapi"):
        yield caplog


def reported(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "msgspec_fastapi"]


def test_an_overridden_build_middleware_stack_keeps_fastapis_stack(
    twin: Twin, entry_log: pytest.LogCaptureFixture
) -> None:
    class Custom(FastAPI):
        def build_middleware_stack(self) -> ASGIApp:
            return super().build_middleware_stack()

    app = Custom()

    @app.get("/")
    async def read() -> dict[str, int]:
        return {"a": 1}

    twin.install_dispatch(app)
    assert TestClient(app).get("/").json() == {"a": 1}
    status: EntryStatus = getattr(app, STATUS_ATTR)
    assert (status.installed, status.reason) == (False, "Custom overrides build_middleware_stack")
    assert not type(app.middleware_stack).__module__.startswith("msgspec_fastapi")
    assert reported(entry_log) == [
        "msgspec_fastapi entry not used, FastAPI's stack kept: Custom overrides "
        "build_middleware_stack"
    ]


def test_a_replaced_middleware_stack_is_reported(
    twin: Twin, entry_log: pytest.LogCaptureFixture
) -> None:
    app = FastAPI()

    @app.get("/")
    async def read() -> dict[str, int]:
        return {"a": 1}

    twin.install_dispatch(app)
    client = TestClient(app)
    client.get("/")
    status: EntryStatus = getattr(app, STATUS_ATTR)
    assert status.installed
    app.middleware_stack = FastAPI.build_middleware_stack(app)
    assert client.get("/").json() == {"a": 1}
    reason = "app.middleware_stack was replaced after the entry was built"
    assert (status.installed, status.reason) == (False, reason)
    assert reported(entry_log) == [f"msgspec_fastapi entry not used: {reason}"]


def test_a_stack_set_before_the_first_request_is_reported(twin: Twin) -> None:
    app = FastAPI()
    twin.install_dispatch(app)
    app.middleware_stack = app.router
    status: EntryStatus = getattr(app, STATUS_ATTR)
    assert (status.installed, status.reason) == (
        False,
        "app.middleware_stack was set without FastAPI building it",
    )


def test_an_unknown_layer_keeps_fastapis_stack(
    twin: Twin, entry_log: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Extra:
        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await self.app(scope, receive, send)

    original = FastAPI.build_middleware_stack

    def with_extra(self: FastAPI) -> ASGIApp:
        return Extra(original(self))

    # A FastAPI whose default stack has a layer the entry does not know.
    monkeypatch.setattr(FastAPI, "build_middleware_stack", with_extra)
    app = FastAPI()

    @app.get("/")
    async def read() -> dict[str, int]:
        return {"a": 1}

    twin.install_dispatch(app)
    assert TestClient(app).get("/").json() == {"a": 1}
    status: EntryStatus = getattr(app, STATUS_ATTR)
    assert not status.installed
    assert status.reason.startswith("FastAPI's middleware stack has layers the entry does not know")
    assert isinstance(app.middleware_stack, Extra)
    assert len(reported(entry_log)) == 1


def test_the_stack_is_reported_not_built_before_the_first_request(twin: Twin) -> None:
    app = FastAPI()
    twin.install_dispatch(app)
    status: EntryStatus = getattr(app, STATUS_ATTR)
    assert (status.installed, status.reason) == (False, "the middleware stack is not built yet")
