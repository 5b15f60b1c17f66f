"""100,000 requests leave no memory and no references behind.

Valid and invalid requests of every kind (200, 400 from malformed and from too deeply
nested JSON, 413, 415, 422 for bodies and parameters, a response that fails validation,
a client that leaves mid-body, a sync endpoint; JSON Lines and server-sent events from
async and sync generators, streamed to the end, cut short by a client that leaves, or
failing on an invalid item; a path no route serves) go to both tiers of `hostile_app`,
as raw ASGI calls on one event loop, on whichever twin the session runs (compiled or
pure), once through FastAPI's own application layers and once through the entry of
`install_dispatch`.
After a warm-up, the memory tracemalloc sees (over the first 5% of the requests: it
slows every allocation), then the resident set size (/proc/self/statm) and the number of
allocated memory blocks (over the rest), and the reference counts of every route
runtime, its plan, decoders, encoders and parameter converters (over all) must not grow.
The fixture prints the figures (`pytest -s`).

Both twins get the full count: most of a request's time is FastAPI's and this test's
own, so the pure twin is hardly slower here (about 40 s for either on a 2-core machine).
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fastapi.exceptions import ResponseValidationError
from hostile_app import EVERYTHING, SMALL_LIMIT, TIERS, build_app
from leak_limits import (
    BLOCKS_GROWTH_LIMIT,
    REQUESTS,
    RSS_GROWTH_LIMIT,
    TRACED,
    TRACED_GROWTH_LIMIT,
    WARM_UP,
)
from raw_asgi import JSON, send_request

import msgspec_fastapi
from msgspec_fastapi import _select, _shared

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path("/proc/self/statm").exists(), reason="reads the resident set size from /proc"
    ),
]

VALID = msgspec.json.encode(EVERYTHING)
DEEP = b"[" * 5_000 + b"]" * 5_000
URLENCODED = [(b"content-type", b"application/x-www-form-urlencoded")]
MULTIPART = [(b"content-type", b"multipart/form-data; boundary=xx")]
# A name and a file: the file's spooled buffer must be closed after every response.
MULTIPART_FORM = (
    b'--xx\r\nContent-Disposition: form-data; name="name"\r\n\r\nada\r\n'
    b'--xx\r\nContent-Disposition: form-data; name="avatar"; filename="a.png"\r\n\r\n'
    + b"p" * 2000
    + b"\r\n--xx--\r\n"
)

# (method, target, headers, chunks, complete[, then]) -> what the client sees
KINDS: list[tuple[tuple[Any, ...], Any]] = [
    (("POST", "/everything", JSON, [VALID], True), 200),
    (("POST", "/everything", JSON, [VALID[:30], VALID[30:]], True), 200),
    (("POST", "/everything", JSON, [b'{"text": '], True), 400),
    (("POST", "/anything", JSON, [DEEP], True), 400),
    (("POST", "/everything", JSON, [VALID.replace(b'"count":3', b'"count":"3"')], True), 422),
    (("POST", "/everything", JSON, [b""], True), 422),
    (("POST", "/everything", [(b"content-type", b"text/plain")], [VALID], True), 415),
    (("POST", "/small", JSON, [b'{"name":"' + b"x" * SMALL_LIMIT + b'"}'], True), 413),
    (("POST", "/everything", JSON, [VALID[:30]], False), None),
    (("POST", "/optional", JSON, [b'{"x":1,"y":2}'], True), 200),
    (("POST", "/form", URLENCODED, [b"name=ada&tags=a&tags=b"], True), 200),
    (("POST", "/form", URLENCODED, [b"age=x&other=1"], True), 422),
    (("POST", "/form", MULTIPART, [MULTIPART_FORM[:40], MULTIPART_FORM[40:]], True), 200),
    # Multipart without a boundary: a 400 before parsing. (python-multipart logs a warning
    # for malformed parts, and pytest's log capture keeps every record, which would count
    # as growth here.)
    (("POST", "/form", [(b"content-type", b"multipart/form-data")], [b"garbage"], True), 400),
    (("GET", "/items/1?q=x&n=%2B5&tags=a&tags=b", [(b"x-token", b"t")], [b""], True), 200),
    (("GET", "/items/1?n=x&when=2024-02-30", [], [b""], True), 422),
    (("GET", "/pick/0", [], [b""], True), 200),
    (("GET", "/pick/3", [], [b""], True), "ResponseValidationError"),
    (("GET", "/lines/50", [], [b""], True, "wait"), 200),
    (("GET", "/lines/1000", [], [b""], True), 200),  # the client leaves mid-stream
    (("GET", "/sync-lines/20", [], [b""], True, "wait"), 200),
    (("GET", "/sync-lines/1000", [], [b""], True), 200),
    (("GET", "/events/50", [], [b""], True, "wait"), 200),
    (("GET", "/events/1000", [], [b""], True), 200),
    (("GET", "/bad-lines", [], [b""], True, "wait"), "ResponseValidationError"),
    # No such route: FastAPI's router raises its 404, which the application's handler
    # answers (in the entry, its own handler lookup and Request).
    (("GET", "/nowhere", [], [b""], True), 404),
]


async def send_all(app: Any, count: int, start: int = 0) -> Counter:
    """Send `count` requests, cycling through KINDS on both tiers; count what came back."""
    plan = [
        (f"/{tier}{target}".encode(), method, headers, chunks, *rest)
        for tier in TIERS
        for (method, target, headers, chunks, *rest), _ in KINDS
    ]
    seen: Counter = Counter()
    for i in range(start, start + count):
        target, method, headers, chunks, *rest = plan[i % len(plan)]
        try:
            reply = await send_request(app, method, target, headers, chunks, *rest)
        except* ResponseValidationError:
            seen[(target, "ResponseValidationError")] += 1
        else:
            seen[(target, reply.status)] += 1
    return seen


def expected_counts(start: int, count: int) -> Counter:
    outcomes = [
        (f"/{tier}{target}".encode(), status) for tier in TIERS for (_, target, *_), status in KINDS
    ]
    return Counter(outcomes[i % len(outcomes)] for i in range(start, start + count))


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def watched_objects() -> list[Any]:
    """Every route runtime of the active twin, and what its plan holds."""
    runtimes = [o for o in gc.get_objects() if type(o) is _select.twin.RouteRuntime]
    watched: list[Any] = [_shared.JSON_CONTENT_TYPE, _shared.MISSING]
    for runtime in runtimes:
        plan = runtime.plan
        watched += [runtime, plan]
        if plan.body is not None:
            watched += [plan.body, plan.body.decoder]
        if plan.output is not None:
            watched += [plan.output, plan.output.encoder, plan.output.decoder]
        if plan.direct is not None:
            watched += [plan.direct.endpoint, *plan.direct.params]
            watched += [spec.convert for spec in plan.direct.params]
    # None stands for what a plan leaves out; its count moves with every object anywhere.
    return [o for o in watched if o is not None]


def refcounts(objects: list[Any]) -> list[int]:
    # The list and the loop variable hold one reference each, the same every time.
    return [sys.getrefcount(o) for o in objects]


@pytest.fixture(scope="module", params=["layers", "entry"])
def measured(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Warm up, then send REQUESTS requests; what changed. Twice: through FastAPI's own
    application layers, and through the entry `install_dispatch` puts in their place
    (where the 422s, the 404 and the 500 of a failing response go through its handling).

    tracemalloc slows every allocation several times over, so it watches only the first
    TRACED requests; the resident set size and the count of allocated memory blocks are
    measured over the rest, after tracemalloc has stopped and freed its own tables.
    Reference counts are compared across all of them.
    """
    app = build_app()
    if request.param == "entry":
        msgspec_fastapi.install_dispatch(app)
    runner = asyncio.Runner()
    try:
        runner.run(send_all(app, WARM_UP))
        watched = watched_objects()
        counts_before = refcounts(watched)
        tracemalloc.start()
        gc.collect()
        traced_before = tracemalloc.get_traced_memory()[0]
        seen = runner.run(send_all(app, TRACED))
        gc.collect()
        traced_after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        gc.collect()
        rss_before, blocks_before = resident_bytes(), sys.getallocatedblocks()
        seen += runner.run(send_all(app, REQUESTS - TRACED, start=TRACED))
        gc.collect()
        rss_after, blocks_after = resident_bytes(), sys.getallocatedblocks()
        counts_after = refcounts(watched)
    finally:
        tracemalloc.stop()
        runner.close()
    print(
        f"\n{REQUESTS} requests on the {msgspec_fastapi.IMPLEMENTATION} twin through the "
        f"{request.param}: traced memory "
        f"{traced_after - traced_before:+} B over {TRACED}, resident set "
        f"{rss_after - rss_before:+} B and memory blocks {blocks_after - blocks_before:+} "
        f"over {REQUESTS - TRACED}"
    )
    return {
        "seen": seen,
        "traced": traced_after - traced_before,
        "rss": rss_after - rss_before,
        "blocks": blocks_after - blocks_before,
        "refcounts": (counts_before, counts_after),
        "watched": watched,
        "app": app,
    }


def test_every_request_got_its_expected_answer(measured: dict[str, Any]) -> None:
    assert measured["seen"] == expected_counts(0, REQUESTS)


def test_the_entry_served_the_entry_case(
    measured: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    status = getattr(measured["app"], "msgspec_fastapi_entry", None)
    assert (status is not None and status.installed) == ("[entry]" in request.node.name)


def test_traced_memory_does_not_grow(measured: dict[str, Any]) -> None:
    assert measured["traced"] < TRACED_GROWTH_LIMIT


def test_resident_set_does_not_grow(measured: dict[str, Any]) -> None:
    assert measured["rss"] < RSS_GROWTH_LIMIT


def test_allocated_memory_blocks_do_not_grow(measured: dict[str, Any]) -> None:
    assert measured["blocks"] < BLOCKS_GROWTH_LIMIT


def test_runtimes_plans_and_decoders_gain_no_references(measured: dict[str, Any]) -> None:
    before, after = measured["refcounts"]
    grown = [
        (type(o).__name__, b, a)
        for o, b, a in zip(measured["watched"], before, after, strict=True)
        if a > b
    ]
    assert len(measured["watched"]) > 20  # both tiers' runtimes were found
    assert grown == []
