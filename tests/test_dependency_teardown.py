"""Generator dependencies set up and closed by the direct tier behave as FastAPI's wrappers
do under exceptions, cancellation and disconnects.

The direct tier sets up async and sync generator dependencies, with or without
`max_concurrency`, itself (`_dependencies.executor`, with `_dependencies.teardown` for
what awaits with an exception in flight): their teardowns in lists of its
own where nothing can reach FastAPI's exit stacks, on those stacks where a step is given
the request. Each test runs one request
through a MsgspecRouter of one twin and through a plain APIRouter (the oracle) inside an
anyio cancel scope that the dependency or the endpoint cancels at a chosen moment, and
compares what each saw: the generator's set-up and teardown, the exception thrown into
it, whether its teardown ran to its end (FastAPI 0.165 shields it, 0.142.2 does not),
which parts of a sync generator ran in a worker thread, the messages sent, and what left
the app. The tests at the end run the request in a plain asyncio task instead, as an ASGI
server does, with native cancellation and with cancel scopes and task groups of the
generators' and the application's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import math
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Annotated, Any

import anyio
import anyio.to_thread
import fastapi.dependencies.models
import fastapi.dependencies.utils
import pytest
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import StreamingResponse
from raw_asgi import scope_for
from twins import Twin

from msgspec_fastapi import MsgspecRouter, _compat, _select

LOG: list[Any] = []
# The cancel scope the request runs in, for the dependencies and endpoints to cancel.
OUTER: list[anyio.CancelScope] = []

DEPENDS_FIELDS = {field.name for field in dataclasses.fields(Depends(lambda: None))}
HAS_SCOPE = "scope" in DEPENDS_FIELDS
HAS_MAX_CONCURRENCY = "max_concurrency" in DEPENDS_FIELDS
needs_max_concurrency = pytest.mark.skipif(
    not HAS_MAX_CONCURRENCY, reason="max_concurrency is newer than this FastAPI"
)


@pytest.fixture(autouse=True, scope="module")
def collect_only_what_this_module_makes() -> Iterator[None]:
    """`run` collects garbage around every request. Frozen, the objects the session made
    before this module are left out of those collections, which then scan only this
    module's objects: seconds fewer per test in a whole-suite run."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def cancel() -> None:
    LOG.append("cancel")
    OUTER[0].cancel()


async def settle_threads() -> None:
    """Let the worker thread that set a sync generator up drop its last reference to it
    (anyio's worker does so after handing the result over): FastAPI 0.142.2 leaves a
    cancelled sync generator to be closed wherever that last reference goes."""
    await anyio.to_thread.run_sync(lambda: None)


async def session() -> AsyncIterator[str]:
    """Logs what reaches it; its teardown awaits, so an unshielded one is interrupted."""
    LOG.append("set-up")
    try:
        yield "session"
    except BaseException as exc:
        LOG.append(("thrown in", type(exc).__name__))
        raise
    finally:
        LOG.append("teardown starts")
        await anyio.sleep(0.01)
        LOG.append("teardown ends")


async def cancelled_in_teardown() -> AsyncIterator[str]:
    yield "value"
    LOG.append("teardown starts")
    cancel()
    await anyio.sleep(0.01)
    LOG.append("teardown ends")


async def cancelled_in_set_up() -> AsyncIterator[str]:
    LOG.append("set-up starts")
    cancel()
    await anyio.sleep(0.01)
    LOG.append("set-up ends")
    yield "never"


async def swallows() -> AsyncIterator[str]:
    """Catches what is thrown in and ends: the exception is suppressed."""
    try:
        yield "value"
    except BaseException as exc:
        LOG.append(("swallowed", type(exc).__name__))


async def function_scoped() -> AsyncIterator[str]:
    try:
        yield "function"
    finally:
        LOG.append("function-scope teardown")
        await anyio.sleep(0.01)
        LOG.append("function-scope teardown ends")


def context_chain(exc: BaseException | None) -> list[str]:
    """The exception and its `__context__`s, by type."""
    chain = []
    while exc is not None:
        chain.append(type(exc).__name__)
        exc = exc.__context__
    return chain


async def raises_value_error() -> AsyncIterator[str]:
    try:
        yield "value"
    finally:
        raise ValueError("teardown")


async def raises_type_error() -> AsyncIterator[str]:
    try:
        yield "value"
    finally:
        raise TypeError("teardown")


def in_worker() -> bool:
    return threading.current_thread() is not threading.main_thread()


def sync_session() -> Iterator[str]:
    """A sync generator: what reaches it, and in which thread each part runs."""
    LOG.append(("sync set-up", in_worker()))
    try:
        yield "sync"
    except BaseException as exc:
        LOG.append(("sync thrown in", type(exc).__name__, in_worker()))
        raise
    finally:
        LOG.append(("sync teardown starts", in_worker()))
        time.sleep(0.01)
        LOG.append("sync teardown ends")


def sync_swallows() -> Iterator[str]:
    try:
        yield "value"
    except BaseException as exc:
        LOG.append(("sync swallowed", type(exc).__name__))


def sync_raises_lookup_error() -> Iterator[str]:
    try:
        yield "value"
    finally:
        raise LookupError("sync teardown")


def sync_fails_in_set_up() -> Iterator[str]:
    LOG.append(("sync failing set-up", in_worker()))
    raise HTTPException(418, "sync set-up")
    yield "never"


def sync_does_not_stop() -> Iterator[str]:
    yield "value"
    LOG.append("sync second yield")
    yield "again"


async def fails_in_teardown() -> AsyncIterator[str]:
    yield "value"
    LOG.append("failing teardown")
    raise ValueError("teardown")


async def does_not_stop() -> AsyncIterator[str]:
    try:
        yield "value"
        LOG.append("second yield")
        yield "again"
    finally:
        LOG.append("closed")


async def does_not_yield() -> AsyncIterator[str]:
    LOG.append("returns before yielding")
    return
    yield "never"


async def yields_again_after_a_throw() -> AsyncIterator[str]:
    try:
        yield "value"
    except HTTPException:
        LOG.append("yields again")
        yield "again"
    finally:
        LOG.append("closed")


def pushes_onto_the_stacks(request: Request) -> str:
    """Code holding the scope: pushes callbacks onto FastAPI's stacks and notes what the
    scope holds under their keys."""
    scope = request.scope
    LOG.append(
        (
            "keys",
            type(scope.get("fastapi_inner_astack")).__name__,
            type(scope.get("fastapi_function_astack")).__name__,
            sorted(key for key in scope if key.startswith("fastapi_async")),
        )
    )
    scope["fastapi_inner_astack"].callback(LOG.append, "request-stack callback")
    scope["fastapi_function_astack"].callback(LOG.append, "function-stack callback")
    return "pushed"


def get_exchange(
    path: str, disconnect: bool = False, send_fails: bool = False
) -> tuple[dict[str, Any], Any, Any]:
    """The scope, `receive` and `send` of one GET to `path`: the body, then a disconnect
    (with `disconnect`) or nothing more; every message sent is logged, and with
    `send_fails` the response's body then fails to go out, as a server's send fails on a
    closed connection."""
    scope = scope_for("GET", path.encode(), [])
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        if disconnect:
            return {"type": "http.disconnect"}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        LOG.append(("sent", message["type"], message.get("status")))
        if send_fails and message["type"] == "http.response.body":
            raise OSError("connection lost")

    return scope, receive, send


async def run(
    app: FastAPI, path: str, disconnect: bool = False, send_fails: bool = False
) -> list[Any]:
    """One GET to `app` inside a cancel scope; what happened, in order, up to a garbage
    collection after it (FastAPI 0.142.2 leaves a cancelled sync generator to be closed
    by the garbage collector)."""
    gc.collect()
    LOG.clear()
    OUTER.clear()
    scope, receive, send = get_exchange(path, disconnect, send_fails)
    try:
        with anyio.CancelScope() as outer:
            OUTER.append(outer)
            try:
                await app(scope, receive, send)
            except BaseException as exc:
                LOG.append(("left the app", context_chain(exc)))
                raise
        LOG.append(("cancelled caught", outer.cancelled_caught))
    except Exception as exc:
        LOG.append(("escaped", type(exc).__name__))
    gc.collect()
    return list(LOG)


def both(twin: Twin, build: Callable[[APIRouter], None], path: str, **options: Any) -> list[Any]:
    """The same routes on a MsgspecRouter of `twin` and on an APIRouter: what one request
    did on each, checked equal; ours checked to be on the direct tier."""
    ours = MsgspecRouter(route_class=twin.route_class)
    theirs = APIRouter()
    logs = []
    for router in (ours, theirs):
        build(router)
        app = FastAPI()
        app.include_router(router)
        logs.append(anyio.run(run, app, path, *options.values()))
    assert {route.tier for route in ours.routes} == {"direct"}  # type: ignore[attr-defined]
    assert logs[0] == logs[1]
    return logs[0]


def test_a_cancellation_while_the_endpoint_awaits_reaches_the_teardown_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/wait")
        async def wait(s: Annotated[str, Depends(session)]) -> str:
            cancel()
            await anyio.sleep(1)
            return s

    log = both(twin, build, "/wait")
    assert ("thrown in", "CancelledError") in log


def test_a_cancellation_during_a_teardown_after_success_is_handled_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/late")
        async def late(s: Annotated[str, Depends(cancelled_in_teardown)]) -> str:
            return s

    log = both(twin, build, "/late")
    assert "teardown starts" in log


def test_a_cancellation_during_a_set_up_tears_down_the_generators_before_it_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/early")
        async def early(
            s: Annotated[str, Depends(session)],
            never: Annotated[str, Depends(cancelled_in_set_up)],
        ) -> str:
            return s

    log = both(twin, build, "/early")
    assert "set-up ends" not in log
    assert "teardown starts" in log


def test_a_generator_that_swallows_the_cancellation_is_handled_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/swallow")
        async def swallow(
            s: Annotated[str, Depends(session)], w: Annotated[str, Depends(swallows)]
        ) -> str:
            cancel()
            await anyio.sleep(1)
            return s

    log = both(twin, build, "/swallow")
    assert ("swallowed", "CancelledError") in log


@pytest.mark.skipif(not HAS_SCOPE, reason="Depends(scope=...) is newer than this FastAPI")
def test_a_cancellation_reaches_a_function_scope_generator_first_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/scoped")
        async def scoped(
            s: Annotated[str, Depends(session)],
            f: Annotated[str, Depends(function_scoped, scope="function")],
        ) -> str:
            cancel()
            await anyio.sleep(1)
            return s + f

    log = both(twin, build, "/scoped")
    assert log.index("function-scope teardown") < log.index("teardown starts")


@pytest.mark.parametrize(
    ("dependency", "closed"), [(session, "teardown ends"), (sync_session, "sync teardown ends")]
)
def test_a_disconnect_during_a_stream_closes_the_generator_as_in_fastapi(
    twin: Twin, dependency: Callable[[], Any], closed: str
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/stream")
        async def stream(s: str = Depends(dependency)):  # type: ignore[no-untyped-def]
            async def chunks() -> AsyncIterator[bytes]:
                yield s.encode()
                await anyio.sleep(1)  # the disconnect ends the stream here
                LOG.append("stream not cancelled")
                yield b"more"

            return StreamingResponse(chunks())

    log = both(twin, build, "/stream", disconnect=True)
    assert "stream not cancelled" not in log
    assert closed in log


@pytest.mark.parametrize("scope", ["request", "function"])
def test_a_response_that_fails_to_go_out_reaches_the_teardown_as_in_fastapi(
    twin: Twin, scope: str
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/sent")
        async def sent(s: str = Depends(session, scope=scope)) -> str:  # type: ignore[call-arg]
            return s

    if not HAS_SCOPE:
        pytest.skip("Depends(scope=...) is newer than this FastAPI")
    log = both(twin, build, "/sent", disconnect=False, send_fails=True)
    assert ("sent", "http.response.body", None) in log
    assert "teardown ends" in log


def test_an_exception_replaced_by_two_teardowns_keeps_fastapis_context_chain(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/replaced")
        async def replaced(
            outer: Annotated[str, Depends(raises_type_error)],
            inner: Annotated[str, Depends(raises_value_error)],
        ) -> str:
            raise KeyError("endpoint")

    log = both(twin, build, "/replaced")
    assert ("left the app", ["TypeError", "ValueError", "KeyError"]) in log


def test_a_sync_generator_sets_up_and_tears_down_in_worker_threads_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/sync")
        async def sync(s: Annotated[str, Depends(sync_session)]) -> str:
            return s

    log = both(twin, build, "/sync")
    assert ("sync set-up", True) in log
    assert ("sync teardown starts", True) in log


def test_an_endpoint_exception_is_thrown_into_a_sync_generator_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/thrown")
        async def thrown(s: Annotated[str, Depends(sync_session)]) -> str:
            raise KeyError("endpoint")

    log = both(twin, build, "/thrown")
    assert ("sync thrown in", "KeyError", True) in log


def test_a_cancellation_reaches_a_sync_generator_as_in_fastapi(twin: Twin) -> None:
    """FastAPI 0.142.2 hands a sync generator only an Exception; 0.165 any exception."""

    def build(router: APIRouter) -> None:
        @router.get("/wait")
        async def wait(
            a: Annotated[str, Depends(session)], s: Annotated[str, Depends(sync_session)]
        ) -> str:
            await settle_threads()
            cancel()
            await anyio.sleep(1)
            return a + s

    both(twin, build, "/wait")


def test_a_sync_generator_that_swallows_the_exception_is_handled_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/swallow")
        async def swallow(
            a: Annotated[str, Depends(session)], s: Annotated[str, Depends(sync_swallows)]
        ) -> str:
            raise KeyError("endpoint")

    log = both(twin, build, "/swallow")
    assert ("sync swallowed", "KeyError") in log


def test_exceptions_replaced_by_sync_and_async_teardowns_keep_fastapis_context_chain(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/replaced")
        async def replaced(
            outer: Annotated[str, Depends(raises_type_error)],
            middle: Annotated[str, Depends(sync_raises_lookup_error)],
            inner: Annotated[str, Depends(raises_value_error)],
        ) -> str:
            raise KeyError("endpoint")

    log = both(twin, build, "/replaced")
    assert ("escaped", "TypeError") in log


@pytest.mark.parametrize("order", ["sync first", "async first"])
def test_sync_and_async_generators_tear_down_in_reverse_order_as_in_fastapi(
    twin: Twin, order: str
) -> None:
    """On 0.165 the cleanup scope sits on the request stack where the first async
    generator entered it, between the sync generator's teardown and the async one's."""

    def build(router: APIRouter) -> None:
        if order == "sync first":

            @router.get("/order")
            async def sync_first(
                s: Annotated[str, Depends(sync_session)], a: Annotated[str, Depends(session)]
            ) -> str:
                return s + a
        else:

            @router.get("/order")
            async def async_first(
                a: Annotated[str, Depends(session)], s: Annotated[str, Depends(sync_session)]
            ) -> str:
                return s + a

    log = both(twin, build, "/order")
    first, second = ("sync teardown starts", True), "teardown starts"
    if order == "sync first":
        first, second = second, first
    assert log.index(first) < log.index(second)


def test_a_sync_generator_failing_in_set_up_tears_down_the_ones_before_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/fails")
        async def fails(
            a: Annotated[str, Depends(session)],
            s: Annotated[str, Depends(sync_fails_in_set_up)],
        ) -> str:
            return a + s

    log = both(twin, build, "/fails")
    assert ("thrown in", "HTTPException") in log
    assert ("sent", "http.response.start", 418) in log


def test_a_sync_generator_that_does_not_stop_fails_as_in_fastapi(twin: Twin) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/again")
        async def again(s: Annotated[str, Depends(sync_does_not_stop)]) -> str:
            return s

    log = both(twin, build, "/again")
    assert "sync second yield" in log


def test_an_async_generator_that_does_not_stop_fails_as_in_fastapi(twin: Twin) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/again")
        async def again(s: Annotated[str, Depends(does_not_stop)]) -> str:
            return s

    log = both(twin, build, "/again")
    assert log.index("second yield") < log.index("closed")
    assert ("left the app", ["RuntimeError"]) in log


def test_a_teardown_failing_after_success_passes_its_exception_to_the_earlier_ones(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/fails")
        async def fails(
            a: Annotated[str, Depends(session)], f: Annotated[str, Depends(fails_in_teardown)]
        ) -> str:
            return a + f

    log = both(twin, build, "/fails")
    assert log.index("failing teardown") < log.index(("thrown in", "ValueError"))
    assert ("left the app", ["ValueError"]) in log


def test_an_async_generator_that_does_not_yield_fails_as_in_fastapi(twin: Twin) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/never")
        async def never(s: Annotated[str, Depends(does_not_yield)]) -> str:
            return s

    log = both(twin, build, "/never")
    assert ("left the app", ["RuntimeError", "StopAsyncIteration"]) in log


def test_an_async_generator_that_yields_again_after_an_exception_fails_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/again")
        async def again(s: Annotated[str, Depends(yields_again_after_a_throw)]) -> str:
            raise HTTPException(418, "endpoint")

    log = both(twin, build, "/again")
    assert log.index("yields again") < log.index("closed")


@needs_max_concurrency
@pytest.mark.parametrize("dependency", [session, sync_session])
def test_a_cancellation_reaches_a_limited_generator_as_in_fastapi(
    twin: Twin, dependency: Callable[[], Any]
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/limited")
        async def limited(s: str = Depends(dependency, max_concurrency=1)) -> str:
            await settle_threads()
            cancel()
            await anyio.sleep(1)
            return s

    log = both(twin, build, "/limited")
    assert any(entry[0] in ("thrown in", "sync thrown in") for entry in log if type(entry) is tuple)


@needs_max_concurrency
def test_limited_generators_replacing_the_exception_keep_fastapis_context_chain(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/replaced")
        async def replaced(
            outer: Annotated[str, Depends(raises_type_error, max_concurrency=1)],
            middle: Annotated[str, Depends(sync_raises_lookup_error, max_concurrency=2)],
            inner: Annotated[str, Depends(swallows, max_concurrency=1)],
            last: Annotated[str, Depends(raises_value_error)],
        ) -> str:
            raise KeyError("endpoint")

    log = both(twin, build, "/replaced")
    assert ("swallowed", "ValueError") in log


@pytest.mark.parametrize("cancelled", [False, True])
def test_generators_of_a_route_given_the_request_go_on_fastapis_stacks_as_in_fastapi(
    twin: Twin, cancelled: bool
) -> None:
    """A dependency holding the scope finds FastAPI's stacks under FastAPI's keys, and
    what it pushes onto them is closed among the generators' teardowns in FastAPI's
    order."""

    def build(router: APIRouter) -> None:
        @router.get("/stacks")
        async def stacks(
            a: Annotated[str, Depends(session)],
            pushed: Annotated[str, Depends(pushes_onto_the_stacks)],
            s: Annotated[str, Depends(sync_session)],
            f: Annotated[str, Depends(function_scoped)],
        ) -> str:
            if cancelled:
                await settle_threads()
                cancel()
                await anyio.sleep(1)
            return a + pushed + s + f

    log = both(twin, build, "/stacks")
    keys = next(entry for entry in log if type(entry) is tuple and entry[0] == "keys")
    assert keys[1:3] == ("AsyncExitStack", "AsyncExitStack")
    assert "request-stack callback" in log
    assert "function-stack callback" in log


def test_generators_are_set_up_without_inspecting_their_callables_per_request(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each dependency's kind is decided when the route is added: FastAPI's checks of a
    callable are not called per request, on routes with and without the request."""
    router = MsgspecRouter(route_class=twin.route_class)
    limited = [Depends(sync_swallows, max_concurrency=1)] if HAS_MAX_CONCURRENCY else []

    @router.get("/plain", dependencies=limited)
    async def plain(
        a: Annotated[str, Depends(session)], s: Annotated[str, Depends(sync_session)]
    ) -> str:
        return a + s

    @router.get("/given-the-request", dependencies=limited)
    async def given_the_request(
        request: Request,
        a: Annotated[str, Depends(session)],
        s: Annotated[str, Depends(sync_session)],
    ) -> str:
        return a + s

    app = FastAPI()
    app.include_router(router)

    def refuse(call: Any) -> bool:
        raise AssertionError(f"{call!r} inspected per request")

    for path in ("/plain", "/given-the-request"):
        anyio.run(run, app, path)  # FastAPI 0.165 builds an included route on its first match
    for module in (fastapi.dependencies.models, fastapi.dependencies.utils):
        for name in ("_is_gen_callable", "_is_async_gen_callable", "_is_coroutine_callable"):
            monkeypatch.setattr(module, name, refuse)
    for path in ("/plain", "/given-the-request"):
        log = anyio.run(run, app, path)
        assert ("sent", "http.response.start", 200) in log
        assert ("sync teardown starts", True) in log


# A request served from a task inside no anyio cancel scope (an ASGI server's own task,
# not the test client's): what the generators see is FastAPI's, with native cancellation,
# with cancel scopes the generators open themselves, and for a task the request starts in
# a task group of the application's. FastAPI 0.165's cleanup scope is the request task's
# current scope there, and a task started from the request belongs to it until started:
# the direct tier enters it as FastAPI does, though its shield keeps nothing out.

TASK: list[Any] = []
SCOPES: list[anyio.CancelScope] = []


def cancel_the_task() -> None:
    LOG.append("task cancelled")
    TASK[0].cancel()


async def holds_a_scope_across_its_yield() -> AsyncIterator[str]:
    """Opens a cancel scope before its yield and closes it after: another teardown may
    cancel it, and the checkpoint after that teardown delivers the cancellation."""
    with anyio.CancelScope() as scope:
        SCOPES.append(scope)
        try:
            yield "scoped"
        except BaseException as exc:
            LOG.append(("scoped thrown in", type(exc).__name__))
            raise
        finally:
            LOG.append("scoped teardown starts")
            await anyio.sleep(0)
            LOG.append("scoped teardown ends")
    LOG.append(("scope cancelled caught", scope.cancelled_caught))


async def cancels_the_held_scope() -> AsyncIterator[str]:
    yield "canceller"
    LOG.append("canceller teardown")
    SCOPES[0].cancel()
    LOG.append("canceller teardown ends")


async def times_out_in_its_teardown() -> AsyncIterator[str]:
    yield "deadline"
    with anyio.move_on_after(0.01) as scope:
        await anyio.sleep(1)
    LOG.append(("teardown moved on", scope.cancelled_caught))


async def run_in_a_plain_task(app: FastAPI, path: str) -> list[Any]:
    """One GET to `app` in an asyncio task of its own, outside any anyio cancel scope, as
    an ASGI server runs it; what happened, in order."""
    gc.collect()
    LOG.clear()
    TASK.clear()
    SCOPES.clear()
    scope, receive, send = get_exchange(path)

    async def serve() -> None:
        try:
            await app(scope, receive, send)
        except BaseException as exc:
            LOG.append(("left the app", context_chain(exc)))
            raise

    task = asyncio.get_running_loop().create_task(serve())
    TASK.append(task)
    try:
        await task
    except BaseException as exc:
        LOG.append(("escaped", type(exc).__name__))
    gc.collect()
    return list(LOG)


def both_in_plain_tasks(twin: Twin, build: Callable[[APIRouter], None], path: str) -> list[Any]:
    """`both`, each request in a plain asyncio task (`run_in_a_plain_task`)."""
    ours = MsgspecRouter(route_class=twin.route_class)
    theirs = APIRouter()
    logs = []
    for router in (ours, theirs):
        build(router)
        app = FastAPI()
        app.include_router(router)
        logs.append(asyncio.run(run_in_a_plain_task(app, path)))
    assert {route.tier for route in ours.routes} == {"direct"}  # type: ignore[attr-defined]
    assert logs[0] == logs[1]
    return logs[0]


def two_generators(router: APIRouter) -> None:
    @router.get("/two")
    async def two(a: Annotated[str, Depends(session)], b: Annotated[str, Depends(swallows)]) -> str:
        return a + b


def test_generators_in_a_plain_task_tear_down_as_in_fastapi(twin: Twin) -> None:
    log = both_in_plain_tasks(twin, two_generators, "/two")
    assert "teardown ends" in log


def test_a_native_cancellation_while_the_endpoint_awaits_is_handled_as_in_fastapi(
    twin: Twin,
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/wait")
        async def wait(s: Annotated[str, Depends(session)]) -> str:
            cancel_the_task()
            await anyio.sleep(1)
            return s

    log = both_in_plain_tasks(twin, build, "/wait")
    assert ("thrown in", "CancelledError") in log


async def cancelled_natively_in_teardown() -> AsyncIterator[str]:
    yield "value"
    LOG.append("teardown starts")
    cancel_the_task()
    await anyio.sleep(0.01)
    LOG.append("teardown ends")


def test_a_native_cancellation_during_a_teardown_is_handled_as_in_fastapi(twin: Twin) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/late")
        async def late(s: Annotated[str, Depends(cancelled_natively_in_teardown)]) -> str:
            return s

    log = both_in_plain_tasks(twin, build, "/late")
    assert "teardown starts" in log


def test_a_scope_cancelled_in_a_later_teardown_is_delivered_as_in_fastapi(twin: Twin) -> None:
    """The later generator's teardown cancels the scope the earlier one holds across its
    yield. FastAPI 0.165 delivers it at the checkpoint after that teardown, into the earlier
    generator; FastAPI 0.142.2 has no checkpoint there, and the earlier teardown's own
    `await` delivers it. Either way the scope catches it."""

    def build(router: APIRouter) -> None:
        @router.get("/held")
        async def held(
            a: Annotated[str, Depends(holds_a_scope_across_its_yield)],
            b: Annotated[str, Depends(cancels_the_held_scope)],
        ) -> str:
            return a + b

    log = both_in_plain_tasks(twin, build, "/held")
    assert ("scope cancelled caught", True) in log


def test_a_deadline_inside_a_teardown_in_a_plain_task_works_as_in_fastapi(twin: Twin) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/deadline")
        async def deadline(s: Annotated[str, Depends(times_out_in_its_teardown)]) -> str:
            return s

    log = both_in_plain_tasks(twin, build, "/deadline")
    assert ("teardown moved on", True) in log


APP_GROUP: list[Any] = []


async def starts_and_cancels_its_group(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    """Started from a request in the application's task group: until it reports started it
    belongs to the request's current cancel scope where the request has one (FastAPI
    0.165's cleanup scope, which the group's cancellation misses), else to the group's."""
    LOG.append(("deadline before started", math.isinf(anyio.current_effective_deadline())))
    APP_GROUP[0].cancel_scope.cancel()
    try:
        await anyio.sleep(0.01)
        LOG.append("survived the group's cancellation")
    except BaseException as exc:
        LOG.append(("worker", type(exc).__name__))
        raise
    task_status.started()


def start_in_the_apps_group(router: APIRouter) -> None:
    @router.get("/start")
    async def start(s: Annotated[str, Depends(session)]) -> str:
        try:
            await APP_GROUP[0].start(starts_and_cancels_its_group)
            LOG.append("start returned")
        except BaseException as exc:
            LOG.append(("start raised", type(exc).__name__))
        return s


async def in_the_apps_group(app: FastAPI) -> list[Any]:
    """A GET of /start in a plain task, with the application's task group running."""
    APP_GROUP.clear()
    log: list[Any] = []
    async with anyio.create_task_group() as group:  # the application's, not the request's
        group.cancel_scope.deadline = anyio.current_time() + 1000
        APP_GROUP.append(group)
        with anyio.CancelScope(shield=True):
            log = await run_in_a_plain_task(app, "/start")
    return log


class InACancelScope:
    """User middleware that runs the rest of the app inside a cancel scope of its own."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        with anyio.CancelScope():
            await self.app(scope, receive, send)


def start_logs(twin: Twin, *middleware: Any) -> tuple[list[Any], list[Any]]:
    """What a task started from the request in the application's task group saw, through
    our route and through FastAPI's, each app with `middleware` added."""
    ours = MsgspecRouter(route_class=twin.route_class)
    theirs = APIRouter()
    logs = []
    for router in (ours, theirs):
        start_in_the_apps_group(router)
        app = FastAPI()
        app.include_router(router)
        for each in middleware:
            app.add_middleware(each)
        logs.append(asyncio.run(in_the_apps_group(app)))
    assert {route.tier for route in ours.routes} == {"direct"}  # type: ignore[attr-defined]
    return logs[0], logs[1]


def test_a_task_started_from_a_plain_task_belongs_to_the_groups_scope_until_started(
    twin: Twin,
) -> None:
    """The route leaves out FastAPI 0.165's cleanup scope where it would be the request
    task's outermost (a listed difference): the started task is in the group's scope,
    under its deadline and its cancellation, as under FastAPI before 0.165."""
    ours, _ = start_logs(twin)
    assert ("deadline before started", False) in ours
    assert ("worker", "CancelledError") in ours
    assert "survived the group's cancellation" not in ours


@pytest.mark.skipif(_compat.SHIELDS_ASYNC_TEARDOWN, reason="FastAPI 0.165 enters a cleanup scope")
def test_a_task_started_from_a_plain_task_sees_what_fastapi_before_0_165_gives_it(
    twin: Twin,
) -> None:
    ours, theirs = start_logs(twin)
    assert ours == theirs


@pytest.mark.skipif(not _compat.SHIELDS_ASYNC_TEARDOWN, reason="no cleanup scope before 0.165")
def test_fastapi_0_165_keeps_a_started_task_under_its_cleanup_scope(twin: Twin) -> None:
    """The other side of the listed difference, which the README states: this fails when
    the installed FastAPI stops doing so."""
    _, theirs = start_logs(twin)
    assert ("deadline before started", True) in theirs
    assert "survived the group's cancellation" in theirs


def test_a_task_started_inside_a_middlewares_cancel_scope_sees_what_fastapi_gives_it(
    twin: Twin,
) -> None:
    """The request's task is inside a cancel scope: the started task belongs to the
    request's current scope under both. (That the cleanup scope is entered and shields
    there is held by the tests that run each request inside a scope, `both`.)"""
    ours, theirs = start_logs(twin, InACancelScope)
    assert ("deadline before started", True) in ours
    assert ours == theirs


async def leaves_a_cancel_scope_open() -> AsyncIterator[str]:
    anyio.CancelScope().__enter__()
    yield "left open"


def test_a_cancel_scope_a_dependency_leaves_open_goes_unreported_in_a_plain_task(
    twin: Twin,
) -> None:
    """A listed difference: FastAPI 0.165's cleanup scope, exited after the response, raises
    about the scope that is not the task's current one; where it is left out, nothing
    does."""
    router = MsgspecRouter(route_class=twin.route_class)

    @router.get("/open")
    async def left_open(s: Annotated[str, Depends(leaves_a_cancel_scope_open)]) -> str:
        return s

    app = FastAPI()
    app.include_router(router)
    log = asyncio.run(run_in_a_plain_task(app, "/open"))
    assert ("sent", "http.response.start", 200) in log
    assert not [entry for entry in log if entry[0] in ("left the app", "escaped")]


# Where the cleanup scope is entered and where it is left out (the executor's
# `enter_cleanup_scope`), on each twin's executor.


@pytest.fixture
def executor(twin: Twin) -> ModuleType:
    return _select.companion(_select.EXECUTOR, twin.module)


@contextlib.contextmanager
def entered_cleanup_scope(
    executor: ModuleType,
) -> Iterator[tuple[anyio.CancelScope | None, Any, Any]]:
    """The cleanup scope as the route makes and enters it in the running task (None: left
    out), its checkpoint, and the task where it is left out; left at the end of the
    block."""
    scope, checkpoint, task = executor.enter_cleanup_scope()
    try:
        yield scope, checkpoint, task
    finally:
        if scope is not None:
            scope.__exit__(None, None, None)


async def cleanup_scope_is_left_out(executor: ModuleType) -> bool:
    with entered_cleanup_scope(executor) as (scope, _, task):
        assert (scope is None) is (task is not None)
        assert task is None or task is asyncio.current_task()
        return scope is None


def test_the_cleanup_scope_of_a_plain_task_is_left_out(executor: ModuleType) -> None:
    async def main() -> bool:
        loop = asyncio.get_running_loop()
        return await loop.create_task(cleanup_scope_is_left_out(executor))

    assert asyncio.run(main()) is True


def test_the_cleanup_scope_of_a_plain_task_whose_earlier_scope_closed_is_left_out(
    executor: ModuleType,
) -> None:
    async def main() -> bool:
        with anyio.CancelScope():
            pass
        return await cleanup_scope_is_left_out(executor)

    assert asyncio.run(main()) is True


def test_the_cleanup_scope_inside_another_scope_is_entered(executor: ModuleType) -> None:
    async def main() -> bool:
        with anyio.move_on_after(1000):
            return await cleanup_scope_is_left_out(executor)

    assert asyncio.run(main()) is False


def test_the_cleanup_scope_in_a_task_groups_task_is_entered(executor: ModuleType) -> None:
    left_out: list[bool] = []

    async def child() -> None:
        left_out.append(await cleanup_scope_is_left_out(executor))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(child)

    asyncio.run(main())
    assert left_out == [False]


def left_out_with_the_context_named(
    executor: ModuleType, sniffio: Any, library: str, monkeypatch: pytest.MonkeyPatch
) -> bool:
    """Whether a plain task's cleanup scope is left out while sniffio's context names
    `library`; anyio's backend for another library is stood in for by asyncio's."""
    backend = anyio._core._eventloop.get_async_backend("asyncio")
    monkeypatch.setattr(executor, "get_async_backend", lambda: backend)

    async def main() -> bool:
        token = sniffio.current_async_library_cvar.set(library)
        try:
            return await cleanup_scope_is_left_out(executor)
        finally:
            sniffio.current_async_library_cvar.reset(token)

    return asyncio.run(main())


def test_the_cleanup_scope_is_entered_where_sniffio_names_another_library(
    executor: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As under trio-asyncio in trio mode: anyio takes the named library's backend (here a
    stand-in), and the route enters that backend's scope."""
    sniffio = pytest.importorskip("sniffio")
    assert left_out_with_the_context_named(executor, sniffio, "trio", monkeypatch) is False


def test_a_plain_task_is_in_a_cancel_scope_only_while_one_is_open(executor: ModuleType) -> None:
    async def main() -> list[bool]:
        task = asyncio.current_task()
        before = executor.in_a_cancel_scope(task)
        with anyio.CancelScope():
            inside = executor.in_a_cancel_scope(task)
        after = executor.in_a_cancel_scope(task)
        return [before, inside, after]

    assert asyncio.run(main()) == [False, True, False]


def test_a_plain_task_is_in_no_cancel_scope_while_another_task_is_in_one(
    executor: ModuleType,
) -> None:
    """anyio then holds a record, of the other task: the plain task's is looked up."""

    async def main() -> bool:
        entered, release = asyncio.Event(), asyncio.Event()

        async def scoped() -> None:
            with anyio.CancelScope():
                entered.set()
                await release.wait()

        other = asyncio.get_running_loop().create_task(scoped())
        await entered.wait()
        try:
            return executor.in_a_cancel_scope(asyncio.current_task())
        finally:
            release.set()
            await other

    assert asyncio.run(main()) is False


def test_a_request_leaves_no_reference_to_its_task(twin: Twin) -> None:
    """The request's objects hold its task where the cleanup scope is left out; once the
    request is over, nothing of the route's keeps the task."""
    router = MsgspecRouter(route_class=twin.route_class)

    async def session() -> AsyncIterator[str]:
        yield "open"

    @router.get("/session")
    async def read(s: Annotated[str, Depends(session)]) -> str:
        return s

    app = FastAPI()
    app.include_router(router)

    async def main() -> weakref.ref[asyncio.Task[None]]:
        scope, receive, send = get_exchange("/session")
        task = asyncio.get_running_loop().create_task(app(scope, receive, send))
        await task
        return weakref.ref(task)

    task_ref = asyncio.run(main())
    gc.collect()
    assert task_ref() is None


def test_the_running_task_is_asyncios_current_task(executor: ModuleType) -> None:
    async def main() -> bool:
        return executor.running_task() is asyncio.current_task()

    assert asyncio.run(main()) is True


def test_the_running_task_is_asked_for_outside_a_running_loop(executor: ModuleType) -> None:
    with pytest.raises(RuntimeError):
        executor.running_task()


async def cleanup_scope_beside_anyios(executor: ModuleType) -> tuple[bool, float, bool, bool]:
    """The route's cleanup scope, entered inside another scope, beside what anyio's backend
    for the running library makes: the same class, its deadline and shield, and whether
    its checkpoint is anyio's."""
    backend = anyio._core._eventloop.get_async_backend()
    with anyio.CancelScope(), entered_cleanup_scope(executor) as (scope, checkpoint, _):
        assert scope is not None
        same_class = type(scope) is type(backend.create_cancel_scope())
        anyios_checkpoint = checkpoint == backend.checkpoint_if_cancelled
        return same_class, scope.deadline, scope.shield, anyios_checkpoint


def test_the_left_out_cleanup_scope_comes_with_anyios_checkpoint(executor: ModuleType) -> None:
    async def main() -> bool:
        backend = anyio._core._eventloop.get_async_backend()
        with entered_cleanup_scope(executor) as (scope, checkpoint, _):
            return scope is None and checkpoint == backend.checkpoint_if_cancelled

    assert asyncio.run(main()) is True


def test_the_cleanup_scope_is_the_scope_anyio_makes_on_asyncio(executor: ModuleType) -> None:
    assert asyncio.run(cleanup_scope_beside_anyios(executor)) == (True, math.inf, False, True)


def test_the_cleanup_scope_comes_from_anyios_backend_where_anyio_is_laid_out_otherwise(
    executor: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As where anyio does not say how it finds the library, or its asyncio scope differs.
    monkeypatch.setattr(executor, "takes_asyncio_scope", False)
    assert asyncio.run(cleanup_scope_beside_anyios(executor)) == (True, math.inf, False, True)


def as_without_sniffio(executor: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """As anyio runs where sniffio is missing: asyncio while its loop runs."""
    monkeypatch.setattr(executor, "sniffio_thread_local", None)
    monkeypatch.setattr(executor, "sniffio_cvar_get", None)


def test_the_cleanup_scope_is_the_scope_anyio_makes_on_asyncio_without_sniffio(
    executor: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_without_sniffio(executor, monkeypatch)
    assert asyncio.run(cleanup_scope_beside_anyios(executor)) == (True, math.inf, False, True)


def test_the_cleanup_scope_of_a_plain_task_is_left_out_without_sniffio(
    executor: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_without_sniffio(executor, monkeypatch)
    assert asyncio.run(cleanup_scope_is_left_out(executor)) is True


def test_the_cleanup_scope_of_a_plain_task_is_left_out_with_a_sniffio_before_1_3(
    executor: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sniffio before 1.3 has no name for the thread, only the context's."""
    monkeypatch.setattr(executor, "sniffio_thread_local", None)
    assert asyncio.run(cleanup_scope_is_left_out(executor)) is True


def test_sniffios_name_for_the_thread_comes_before_the_contexts(
    executor: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread named for another library while the context says asyncio: anyio takes that
    library's backend (here a stand-in), and the route enters that backend's scope."""
    sniffio = pytest.importorskip("sniffio")
    if not hasattr(sniffio, "thread_local"):
        pytest.skip("sniffio before 1.3 has no name for the thread")
    monkeypatch.setattr(sniffio.thread_local, "name", "trio")
    assert left_out_with_the_context_named(executor, sniffio, "asyncio", monkeypatch) is False
