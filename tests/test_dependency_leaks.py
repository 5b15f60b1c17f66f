"""100,000 requests through generator dependencies leave nothing open and no memory behind.

The routes below take their database session from an async generator (request scope,
torn down after the response), a transaction from a sync generator (function scope, torn
down before it), the current user from a header, a Struct body through a dependency, and
background tasks; requests succeed, fail with an HTTPException in a dependency, in a
generator's set-up and in the endpoint (which the transaction generator replaces), fail
validation (422 for a path parameter and for the body, 400 for malformed JSON), raise a
handled exception in a teardown, leave mid-body (the client disconnects before any
dependency runs), and leave mid-stream (the client disconnects while a streamed response,
made from the session, is being sent: the session and the stream are open then). They go
as raw ASGI calls on one event loop, to each twin in turn, measured as tests/test_leaks.py
measures.

After a warm-up: every generator set up was torn down (counted), no generator object of
these dependencies is alive, and the memory tracemalloc sees (over the first 5% of the
requests), the resident set size and the number of allocated memory blocks (over the
rest) do not grow. The fixture prints the figures (`pytest -s`).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import os
import sys
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest
from fastapi import BackgroundTasks, Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from leak_limits import (
    BLOCKS_GROWTH_LIMIT,
    REQUESTS,
    RSS_GROWTH_LIMIT,
    TRACED,
    TRACED_GROWTH_LIMIT,
    WARM_UP,
)
from raw_asgi import DISCONNECT, JSON, Reply, scope_for, send_request
from twins import TWIN_NAMES, Twin, get_twin

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path("/proc/self/statm").exists(), reason="reads the resident set size from /proc"
    ),
]

OPENED: Counter[str] = Counter()
CLOSED: Counter[str] = Counter()
TASKS: Counter[str] = Counter()


class Item(msgspec.Struct):
    name: str
    qty: int = 0


class Rollback(Exception):
    """Raised by the transaction's teardown when asked; the app answers it with a 418."""


async def session() -> AsyncIterator[dict[str, Any]]:
    OPENED["session"] += 1
    try:
        yield {"rows": [1, 2, 3]}
    finally:
        CLOSED["session"] += 1


def transaction(
    db: Annotated[dict[str, Any], Depends(session)], x_fail: Annotated[str, Header()] = ""
) -> Iterator[list[int]]:
    if x_fail == "setup":
        raise HTTPException(403, "no transaction")
    OPENED["transaction"] += 1
    try:
        yield db["rows"]
    except LookupError as exc:
        raise HTTPException(409, "conflict") from exc
    finally:
        CLOSED["transaction"] += 1
        if x_fail == "teardown":
            raise Rollback


async def current_user(
    db: Annotated[dict[str, Any], Depends(session)],
    authorization: Annotated[str, Header()] = "",
) -> str:
    if not authorization:
        raise HTTPException(401, "not authenticated", headers={"www-authenticate": "Bearer"})
    return authorization


def audit(tasks: BackgroundTasks, user: Annotated[str, Depends(current_user)]) -> None:
    tasks.add_task(TASKS.update, [user])


def get_item(item: Item) -> Item:
    return item


async def read(
    n: int,
    rows: Annotated[list[int], Depends(transaction, scope="function")],
    user: Annotated[str, Depends(current_user)],
) -> Item:
    if n == 404:
        raise HTTPException(404, "no such item")
    if n == 409:
        raise LookupError(n)
    return Item(user, rows[0] + n)


def create(
    item: Annotated[Item, Depends(get_item)],
    rows: Annotated[list[int], Depends(transaction, scope="function")],
) -> Item:
    return Item(item.name, item.qty + len(rows))


async def lines(rows: list[int]) -> AsyncIterator[bytes]:
    OPENED["stream"] += 1
    try:
        for row in rows:
            await asyncio.sleep(0)
            yield b"%d\n" % row
    finally:
        CLOSED["stream"] += 1


async def export(
    db: Annotated[dict[str, Any], Depends(session)],
    rows: Annotated[list[int], Depends(transaction, scope="function")],
    user: Annotated[str, Depends(current_user)],
) -> StreamingResponse:
    return StreamingResponse(lines(db["rows"]), media_type="text/plain")


def build_app(twin: Twin) -> FastAPI:
    router = twin.router_class(dependencies=[Depends(audit)])
    router.add_api_route("/items/{n}", read, methods=["GET"])
    router.add_api_route("/items", create, methods=["POST"], status_code=201)
    router.add_api_route("/export", export, methods=["GET"])
    app = FastAPI()
    app.include_router(router)

    async def rolled_back(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": "rolled back"}, status_code=418)

    app.add_exception_handler(Rollback, rolled_back)
    return app


AUTH = [(b"authorization", b"Bearer u")]
VALID = b'{"name": "n", "qty": 2}'
# (method, target, headers, chunks, complete) -> the status the client sees (None: none);
# complete=MID_STREAM: the body is sent whole, and the client leaves after the first chunk
# of the response.
MID_STREAM = "mid-stream"
KINDS: list[tuple[tuple[Any, ...], int | None]] = [
    (("GET", "/items/1", AUTH, [b""], True), 200),
    (("GET", "/items/1", [], [b""], True), 401),
    (("GET", "/items/x", AUTH, [b""], True), 422),
    (("GET", "/items/1", [*AUTH, (b"x-fail", b"setup")], [b""], True), 403),
    (("GET", "/items/1", [*AUTH, (b"x-fail", b"teardown")], [b""], True), 418),
    (("GET", "/items/404", AUTH, [b""], True), 404),
    (("GET", "/items/409", AUTH, [b""], True), 409),
    (("POST", "/items", [*AUTH, *JSON], [VALID[:9], VALID[9:]], True), 201),
    (("POST", "/items", [*AUTH, *JSON], [b'{"qty": "x"}'], True), 422),
    (("POST", "/items", [*AUTH, *JSON], [b'{"name": '], True), 400),
    (("POST", "/items", [*JSON], [VALID], True), 401),
    (("POST", "/items", [*AUTH, *JSON], [VALID[:9]], False), None),  # the client leaves
    (("GET", "/export", AUTH, [b""], True), 200),
    (("GET", "/export", AUTH, [b""], MID_STREAM), 200),
]


async def leave_mid_stream(app: Any, method: str, target: bytes, headers: Any) -> Reply:
    """One request whose client disconnects once the first chunk of the body was sent
    (`receive` waits until then, as a server's does while the client is there)."""
    sent: list[dict[str, Any]] = []
    first_chunk = asyncio.Event()
    pending = [{"type": "http.request", "body": b"", "more_body": False}]
    received = 0

    async def receive() -> dict[str, Any]:
        nonlocal received
        received += 1
        if pending:
            return pending.pop(0)
        await first_chunk.wait()
        return dict(DISCONNECT)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            first_chunk.set()

    await asyncio.wait_for(app(scope_for(method, target, headers), receive, send), 30)
    assert not Reply(tuple(sent), received).finished  # it left before the end
    return Reply(tuple(sent), received)


async def send_all(app: Any, count: int, start: int = 0) -> Counter[tuple[str, int | None]]:
    """Send `count` requests, cycling through KINDS; count what came back."""
    seen: Counter[tuple[str, int | None]] = Counter()
    for i in range(start, start + count):
        (method, target, headers, chunks, complete), _ = KINDS[i % len(KINDS)]
        if complete == MID_STREAM:
            reply = await leave_mid_stream(app, method, target.encode(), headers)
        else:
            reply = await send_request(app, method, target.encode(), headers, chunks, complete)
        seen[(f"{method} {target}", reply.status)] += 1
    return seen


def expected_counts(count: int) -> Counter[tuple[str, int | None]]:
    outcomes = [(f"{method} {target}", status) for (method, target, *_), status in KINDS]
    return Counter(outcomes[i % len(outcomes)] for i in range(count))


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def live_generators() -> list[Any]:
    """Generator objects of the dependencies above that are still alive."""
    codes = {session.__code__, transaction.__code__, lines.__code__}
    return [
        o
        for o in gc.get_objects()
        if (inspect.isasyncgen(o) and o.ag_code in codes)
        or (inspect.isgenerator(o) and o.gi_code in codes)
    ]


@pytest.fixture(scope="module", params=TWIN_NAMES)
def measured(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Warm up, then send REQUESTS requests to the app on one twin; what changed
    (measured as tests/test_leaks.py)."""
    twin = get_twin(request.param)
    OPENED.clear()
    CLOSED.clear()
    TASKS.clear()
    app = build_app(twin)
    runner = asyncio.Runner()
    try:
        seen = runner.run(send_all(app, WARM_UP))
        tracemalloc.start()
        gc.collect()
        traced_before = tracemalloc.get_traced_memory()[0]
        seen += runner.run(send_all(app, TRACED, start=WARM_UP))
        gc.collect()
        traced_after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        gc.collect()
        rss_before, blocks_before = resident_bytes(), sys.getallocatedblocks()
        seen += runner.run(send_all(app, REQUESTS - TRACED, start=WARM_UP + TRACED))
        gc.collect()
        rss_after, blocks_after = resident_bytes(), sys.getallocatedblocks()
        alive = live_generators()
    finally:
        tracemalloc.stop()
        runner.close()
    print(
        f"\n{WARM_UP} + {REQUESTS} requests through generator dependencies on the "
        f"{twin.name} twin: set up {dict(OPENED)}, torn down "
        f"{dict(CLOSED)}; traced memory {traced_after - traced_before:+} B over {TRACED}, "
        f"resident set {rss_after - rss_before:+} B and memory blocks "
        f"{blocks_after - blocks_before:+} over {REQUESTS - TRACED}"
    )
    return {
        "seen": seen,
        "opened": Counter(OPENED),
        "closed": Counter(CLOSED),
        "tasks": sum(TASKS.values()),
        "alive": alive,
        "traced": traced_after - traced_before,
        "rss": rss_after - rss_before,
        "blocks": blocks_after - blocks_before,
    }


def test_every_request_got_its_expected_answer(measured: dict[str, Any]) -> None:
    assert measured["seen"] == expected_counts(WARM_UP + REQUESTS)


def test_every_generator_set_up_was_torn_down(measured: dict[str, Any]) -> None:
    assert measured["opened"] == measured["closed"]
    # Both generators ran in most requests, and a stream in some: the counts are not vacuous.
    assert min(measured["opened"]["session"], measured["opened"]["transaction"]) > REQUESTS // 2
    assert measured["opened"]["stream"] > REQUESTS // len(KINDS)


def test_no_generator_of_a_dependency_is_left_alive(measured: dict[str, Any]) -> None:
    assert measured["alive"] == []


def test_background_tasks_of_dependencies_ran_after_every_success(
    measured: dict[str, Any],
) -> None:
    # The router's audit dependency adds one task per request; it runs after a response
    # that the endpoint made (not after an error's).
    successes = sum(n for (_, status), n in measured["seen"].items() if status in (200, 201))
    assert measured["tasks"] == successes > 0


def test_traced_memory_does_not_grow(measured: dict[str, Any]) -> None:
    assert measured["traced"] < TRACED_GROWTH_LIMIT


def test_resident_set_does_not_grow(measured: dict[str, Any]) -> None:
    assert measured["rss"] < RSS_GROWTH_LIMIT


def test_allocated_memory_blocks_do_not_grow(measured: dict[str, Any]) -> None:
    assert measured["blocks"] < BLOCKS_GROWTH_LIMIT
