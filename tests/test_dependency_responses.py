"""How a route with dependencies sends its response, compared with FastAPI's APIRouter.

A response whose class keeps Starlette's `Response.__call__` (the route's own, or a JSON
response the endpoint returns) is sent by the dependency executor itself, without that
coroutine; any other response is called. Either way the server sees the same messages,
the background tasks run after the body and before the generator dependencies close, and
an error raised once the response has started is not answered a second time. Each test
runs one request through a MsgspecRouter of one twin and through an APIRouter, logging
the dependencies, the endpoint, the background task and each message sent, and compares
the logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, BackgroundTasks, Depends, FastAPI, HTTPException, Response
from fastapi.responses import JSONResponse
from raw_asgi import scope_for
from starlette.background import BackgroundTask
from starlette.types import Message, Receive, Scope, Send
from twins import Twin

LOG: list[Any] = []


async def session() -> AsyncIterator[str]:
    LOG.append("open")
    try:
        yield "session"
    finally:
        LOG.append("close")


def note(event: str) -> None:
    LOG.append(event)


def fail_late() -> None:
    LOG.append("background fails")
    raise HTTPException(status_code=418)


class CalledResponse(JSONResponse):
    """A response that does something of its own when it is sent."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        LOG.append("its own __call__")
        await super().__call__(scope, receive, send)


def define_routes(router: Any) -> None:
    @router.get("/value")
    async def value(db: Annotated[str, Depends(session)], tasks: BackgroundTasks) -> dict[str, str]:
        LOG.append("endpoint")
        tasks.add_task(note, "background")
        return {"name": db}

    @router.get("/plain")
    async def plain(tasks: BackgroundTasks) -> dict[str, str]:
        LOG.append("endpoint")
        tasks.add_task(note, "background")
        return {"name": "plain"}

    @router.get("/json")
    async def json(db: Annotated[str, Depends(session)]) -> JSONResponse:
        LOG.append("endpoint")
        return JSONResponse(
            {"db": db}, status_code=201, background=BackgroundTask(note, "background")
        )

    @router.get("/called")
    async def called(db: Annotated[str, Depends(session)]) -> JSONResponse:
        LOG.append("endpoint")
        return CalledResponse({"db": db}, background=BackgroundTask(note, "background"))

    @router.get("/late")
    async def late(db: Annotated[str, Depends(session)], tasks: BackgroundTasks) -> dict[str, str]:
        LOG.append("endpoint")
        tasks.add_task(fail_late)
        return {"name": db}

    @router.get("/status")
    async def status(
        db: Annotated[str, Depends(session)], response: Response, tasks: BackgroundTasks
    ) -> dict[str, str]:
        LOG.append("endpoint")
        response.status_code = 202
        response.headers["x-session"] = db
        tasks.add_task(note, "background")
        return {"name": db}

    @router.get("/function-scope")
    async def function_scope(
        db: Annotated[str, Depends(session, scope="function")],
        response: Response,
        tasks: BackgroundTasks,
    ) -> dict[str, str]:
        LOG.append("endpoint")
        response.headers["x-session"] = db
        tasks.add_task(note, "background")
        return {"name": db}

    @router.get("/stream")
    async def stream(
        db: Annotated[str, Depends(session)], tasks: BackgroundTasks
    ) -> AsyncIterator[dict[str, str]]:
        LOG.append("endpoint")
        tasks.add_task(note, "background")
        for name in (db, "second"):
            yield {"name": name}


def run(app: FastAPI, path: str) -> list[Any]:
    """The log of one GET of `path`: events, messages sent, and what left the app."""
    LOG.clear()

    received = False

    async def receive() -> Message:
        nonlocal received
        if received:  # a streaming response listens for the disconnect: none comes
            await asyncio.Event().wait()
        received = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        LOG.append((message["type"], message.get("status"), message.get("headers")))
        if "body" in message:
            LOG.append(("body", message["body"]))

    async def call() -> None:
        try:
            await app(scope_for("GET", path.encode(), []), receive, send)
        except Exception as exc:
            LOG.append(("raised", type(exc).__name__, str(exc)))

    asyncio.run(call())
    return list(LOG)


def both(twin: Twin, define: Callable[[Any], None]) -> tuple[FastAPI, FastAPI]:
    theirs, ours = FastAPI(), FastAPI()
    fastapi_router = APIRouter()
    define(fastapi_router)
    theirs.include_router(fastapi_router)
    router = twin.router_class()
    define(router)
    ours.include_router(router)
    assert {route.tier for route in router.routes} == {"direct"}
    return theirs, ours


@pytest.fixture
def apps(twin: Twin) -> tuple[FastAPI, FastAPI]:
    return both(twin, define_routes)


def test_the_endpoints_value_is_sent_then_its_background_runs_then_the_generator_closes(
    apps: tuple[FastAPI, FastAPI],
) -> None:
    theirs, ours = apps
    expected = run(theirs, "/value")
    assert expected.index("background") < expected.index("close")
    assert run(ours, "/value") == expected


def test_a_route_without_teardowns_sends_the_endpoints_value_and_runs_its_background(
    apps: tuple[FastAPI, FastAPI],
) -> None:
    theirs, ours = apps
    expected = run(theirs, "/plain")
    assert expected[-1] == "background"
    assert run(ours, "/plain") == expected


def test_a_returned_json_response_keeps_its_status_headers_and_background(
    apps: tuple[FastAPI, FastAPI],
) -> None:
    theirs, ours = apps
    expected = run(theirs, "/json")
    assert [event[1] for event in expected if event[0] == "http.response.start"] == [201]
    assert run(ours, "/json") == expected


def test_a_response_class_with_its_own_call_is_called(
    apps: tuple[FastAPI, FastAPI],
) -> None:
    theirs, ours = apps
    expected = run(theirs, "/called")
    assert "its own __call__" in expected
    assert run(ours, "/called") == expected


def test_an_error_after_the_response_started_is_not_answered_again(
    apps: tuple[FastAPI, FastAPI],
) -> None:
    theirs, ours = apps
    expected = run(theirs, "/late")
    assert expected[-1][0] == "raised"
    assert sum(1 for event in expected if event[0] == "http.response.start") == 1
    assert run(ours, "/late") == expected


def test_the_status_and_headers_a_dependency_response_sets_are_sent_with_the_value(
    apps: tuple[FastAPI, FastAPI],
) -> None:
    theirs, ours = apps
    expected = run(theirs, "/status")
    assert [event[1] for event in expected if event[0] == "http.response.start"] == [202]
    assert run(ours, "/status") == expected


def test_a_function_scope_generator_closes_before_the_value_is_sent_with_its_background(
    apps: tuple[FastAPI, FastAPI],
) -> None:
    theirs, ours = apps
    expected = run(theirs, "/function-scope")
    assert expected.index("close") < expected.index("background")
    assert run(ours, "/function-scope") == expected


def test_a_streamed_answer_runs_its_background_after_the_last_item(
    apps: tuple[FastAPI, FastAPI],
) -> None:
    theirs, ours = apps
    expected = run(theirs, "/stream")
    assert expected.index(("body", b"")) < expected.index("background")
    assert run(ours, "/stream") == expected
