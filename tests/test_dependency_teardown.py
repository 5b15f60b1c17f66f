"""Async generator dependencies set up and closed by hand behave as FastAPI's wrappers do
under cancellation and disconnects.

Where nothing can reach FastAPI's exit stacks, the direct tier drives plain async
generator dependencies itself (`msgspec_fastapi._teardown`). Each test runs one request
through a MsgspecRouter of one twin and through a plain APIRouter (the oracle) inside an
anyio cancel scope that the dependency or the endpoint cancels at a chosen moment, and
compares what each saw: the generator's set-up and teardown, the exception thrown into
it, whether its teardown ran to its end (FastAPI 0.165 shields it, 0.142.2 does not),
the messages sent, and what left the app.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

import anyio
import pytest
from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import StreamingResponse
from twins import Twin

from msgspec_fastapi import MsgspecRouter

LOG: list[Any] = []
# The cancel scope the request runs in, for the dependencies and endpoints to cancel.
OUTER: list[anyio.CancelScope] = []

HAS_SCOPE = "scope" in {field.name for field in dataclasses.fields(Depends(lambda: None))}


def cancel() -> None:
    LOG.append("cancel")
    OUTER[0].cancel()


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


async def run(app: FastAPI, path: str, disconnect: bool = False) -> list[Any]:
    """One GET to `app` inside a cancel scope; what happened, in order."""
    LOG.clear()
    OUTER.clear()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"test")],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
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


def test_a_disconnect_during_a_stream_closes_the_generator_as_in_fastapi(twin: Twin) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/stream")
        async def stream(s: Annotated[str, Depends(session)]):  # type: ignore[no-untyped-def]
            async def chunks() -> AsyncIterator[bytes]:
                yield s.encode()
                await anyio.sleep(1)  # the disconnect ends the stream here
                LOG.append("stream not cancelled")
                yield b"more"

            return StreamingResponse(chunks())

    log = both(twin, build, "/stream", disconnect=True)
    assert "stream not cancelled" not in log
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
