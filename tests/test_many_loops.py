"""One application object served from several asyncio event loops, each in a thread of its
own, as Granian's threaded runtime serves it.

Nothing is built before the loops start: the first requests, sent from every loop at once,
build what is built on first use (the application's route index under
`install_dispatch`, each inclusion's route contexts and index under FastAPI's own loop,
the analysis of an inclusion whose dependencies take msgspec types, the dependency plan
and the 422 order of a route per override set). Routes are added to an included router
after its inclusion, and to the application after `install_dispatch`, before the loops
start. While requests run, another thread keeps changing `app.dependency_overrides`
through more override sets than a route keeps plans for, so plans are built, reused and
dropped concurrently.

Every route answers with its name and the dependency value it saw, and the inclusion it
was reached through sets a header: an answer from the wrong route, inclusion or plan
differs from the right one. Each answer must be the answer the same request gets from a
copy of the application served on one loop under one of the override sets in force
while the request ran.

The size: MSGSPEC_FASTAPI_LOOPS_REQUESTS requests in all (default 2,000), spread over
MSGSPEC_FASTAPI_LOOPS loops (default 4). Full size: MSGSPEC_FASTAPI_LOOPS_REQUESTS=100000.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
import pytest
from fastapi import Depends, FastAPI, Query, Response
from raw_asgi import JSON, send_request
from support import delegating_dependency
from twins import Twin

from msgspec_fastapi._shared import DIRECT_ATTR

REQUESTS = int(os.environ.get("MSGSPEC_FASTAPI_LOOPS_REQUESTS", "2000"))
LOOPS = int(os.environ.get("MSGSPEC_FASTAPI_LOOPS", "4"))
# Requests each loop keeps in flight at once.
IN_FLIGHT = 8
# Seconds between two changes of the override set.
SWITCH_EVERY = 0.002
# Override sets: none, then one of VARIANT_COUNT replacements of `which`; more than the
# plans a route keeps (PLANS_PER_ROUTE), so that old plans are dropped and rebuilt.
VARIANT_COUNT = 10
STATES = VARIANT_COUNT + 1


class Item(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    count: int


class Mark(msgspec.Struct):
    """A query model taken by an inclusion's dependency."""

    tag: str = "-"


def which() -> str:
    """The dependency the override sets replace."""
    return "base"


def variant(number: int) -> Callable[[], str]:
    def replacement() -> str:
        return f"v{number}"

    return replacement


VARIANTS = [variant(number) for number in range(VARIANT_COUNT)]


def takes_item(item: Item) -> str:
    """A dependency that takes the body as a msgspec type."""
    return item.name


def marks(inclusion: str) -> Callable[[Response], None]:
    def mark(response: Response) -> None:
        response.headers["x-inclusion"] = inclusion

    return mark


def mark_with_model(mark: Annotated[Mark, Query()], response: Response) -> None:
    """An inclusion dependency that takes a msgspec model: the inclusion gets an analysis
    of its own, built when FastAPI first builds its routes."""
    response.headers["x-inclusion"] = f"b{mark.tag}"


def build_router(twin: Twin) -> Any:
    router = twin.router_class()

    @router.get("/items/{n}")
    async def items(n: int, q: str = "") -> dict[str, Any]:
        return {"route": "items", "n": n, "q": q}

    @router.post("/echo")
    async def echo(item: Item) -> dict[str, Any]:
        return {"route": "echo", "item": item}

    @router.get("/dep")
    async def dep(v: Annotated[str, Depends(which)], k: int = 0) -> dict[str, Any]:
        return {"route": "dep", "dep": v, "k": k}

    @router.post("/dep-body")
    def dep_body(item: Item, v: Annotated[str, Depends(which)]) -> dict[str, Any]:
        return {"route": "dep-body", "dep": v, "item": item}

    @router.post("/takes")
    async def takes(
        name: Annotated[str, Depends(takes_item)], v: Annotated[str, Depends(which)]
    ) -> dict[str, Any]:
        return {"route": "takes", "name": name, "dep": v}

    @router.post("/delegated", dependencies=[Depends(delegating_dependency)])
    async def delegated(
        item: Item,
        name: Annotated[str, Depends(takes_item)],
        v: Annotated[str, Depends(which)],
    ) -> dict[str, Any]:
        return {"route": "delegated", "name": name, "dep": v, "count": item.count}

    return router


def build_app(twin: Twin, dispatch: bool) -> FastAPI:
    """The application; nothing of its inclusions built yet."""
    app = FastAPI()
    router = build_router(twin)
    app.include_router(router, prefix="/a", dependencies=[Depends(marks("a"))])
    app.include_router(router, prefix="/b", dependencies=[Depends(mark_with_model)])
    outer = twin.router_class()
    outer.include_router(router, prefix="/in")
    app.include_router(outer, prefix="/c", dependencies=[Depends(marks("c"))])

    @router.get("/late/{word}")
    async def late(word: str) -> dict[str, Any]:
        return {"route": "late", "word": word}

    @app.get("/top/{n}")
    async def top(n: int) -> dict[str, Any]:
        return {"route": "top", "n": n}

    if dispatch:
        twin.install_dispatch(app)

    @app.get("/after/{n}")
    async def after(n: int) -> dict[str, Any]:
        return {"route": "after", "n": n}

    return app


def set_state(overrides: dict[Any, Any], state: int) -> None:
    """Override set `state` in one store: 0 none, else `which` replaced by a variant."""
    if state == 0:
        overrides.pop(which, None)
    else:
        overrides[which] = VARIANTS[state - 1]


@dataclass(frozen=True)
class Sent:
    method: str
    target: bytes
    body: bytes


def item_body(name: str, count: Any) -> bytes:
    return msgspec.json.encode({"name": name, "count": count})


def kinds() -> list[Sent]:
    """Every request the loops send, each route through each inclusion, valid and not."""
    found = [
        Sent("GET", b"/top/7", b""),
        Sent("GET", b"/top/x", b""),
        Sent("GET", b"/after/3", b""),
        Sent("GET", b"/nowhere", b""),
    ]
    for prefix, tag in ((b"/a", b""), (b"/b", b""), (b"/b", b"tag=x"), (b"/c/in", b"")):

        def to(path: bytes, query: bytes = b"", prefix: bytes = prefix, tag: bytes = tag) -> bytes:
            return prefix + path + b"?" + b"&".join(part for part in (query, tag) if part)

        found += [
            Sent("GET", to(b"/items/5", b"q=z"), b""),
            Sent("GET", to(b"/items/five"), b""),
            Sent("PUT", to(b"/items/5"), b""),
            Sent("POST", to(b"/echo"), item_body("e", 1)),
            Sent("POST", to(b"/echo"), item_body("e", "one")),
            Sent("GET", to(b"/dep", b"k=2"), b""),
            Sent("GET", to(b"/dep", b"k=no"), b""),
            Sent("POST", to(b"/dep-body"), item_body("d", 2)),
            Sent("POST", to(b"/dep-body"), b'{"name": 3}'),
            Sent("POST", to(b"/takes"), item_body("t", 3)),
            Sent("POST", to(b"/takes"), b'{"count": 3}'),
            Sent("POST", to(b"/delegated"), item_body("g", 4)),
            Sent("POST", to(b"/delegated"), b'{"name": "g", "count": "x"}'),
            Sent("GET", to(b"/late/w"), b""),
        ]
    return found


KINDS = kinds()

Answer = tuple[int | None, bytes | None, bytes]


async def answer(app: FastAPI, sent: Sent) -> Answer:
    reply = await send_request(app, sent.method, sent.target, JSON, (sent.body,))
    inclusion = dict(reply.headers).get(b"x-inclusion")
    return reply.status, inclusion, reply.body


def reference_answers(twin: Twin, dispatch: bool) -> dict[tuple[int, int], Answer]:
    """(kind, override set) -> the answer of a copy of the app served on one loop."""
    app = build_app(twin, dispatch)

    async def all_answers() -> dict[tuple[int, int], Answer]:
        found = {}
        for state in range(STATES):
            set_state(app.dependency_overrides, state)
            for number, sent in enumerate(KINDS):
                found[number, state] = await answer(app, sent)
        return found

    return asyncio.run(all_answers())


class Switcher(threading.Thread):
    """Changes the override set every SWITCH_EVERY seconds until stopped; `count` is the
    number of changes made, raised after each change is in place."""

    def __init__(self, overrides: dict[Any, Any]) -> None:
        super().__init__(daemon=True)
        self.overrides = overrides
        self.count = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SWITCH_EVERY):
            set_state(self.overrides, (self.count + 1) % STATES)
            self.count += 1


@dataclass
class Outcome:
    kind: int
    first: int  # switcher count before the request was sent
    last: int  # and after it was answered
    answer: Answer | None  # None: the app raised
    error: str = ""


def loop_schedule(loop: int, count: int) -> list[int]:
    """The kinds one loop sends: every kind first, in the same order on every loop (so the
    first uses race), then kinds at random."""
    picker = random.Random(loop)
    first = list(range(len(KINDS)))
    rest = [picker.randrange(len(KINDS)) for _ in range(max(0, count - len(first)))]
    return (first + rest)[: max(count, len(first))]


def serve_on_loop(
    app: FastAPI, schedule: list[int], switcher: Switcher, start: threading.Barrier
) -> list[Outcome]:
    async def one(kind: int) -> Outcome:
        first = switcher.count
        try:
            got: Answer | None = await answer(app, KINDS[kind])
            error = ""
        except Exception:
            got, error = None, traceback.format_exc(limit=-6)
        return Outcome(kind, first, switcher.count, got, error)

    async def run() -> list[Outcome]:
        outcomes: list[Outcome] = []
        for at in range(0, len(schedule), IN_FLIGHT):
            outcomes += await asyncio.gather(*(one(k) for k in schedule[at : at + IN_FLIGHT]))
        return outcomes

    start.wait()
    return asyncio.run(run())


@dataclass
class Tally:
    requests: int = 0
    errors: int = 0
    misroutes: int = 0
    wrong_plans: int = 0
    examples: list[Any] | None = None


def route_of(got: Answer) -> tuple[Any, ...]:
    """What identifies the route and inclusion that answered: the header and the name."""
    _, inclusion, body = got
    try:
        name = msgspec.json.decode(body).get("route")
    except (msgspec.DecodeError, AttributeError):
        name = None
    return inclusion, name


def judge(outcomes: Iterator[Outcome], expected: dict[tuple[int, int], Answer]) -> Tally:
    tally = Tally(examples=[])
    assert tally.examples is not None
    for outcome in outcomes:
        tally.requests += 1
        got = outcome.answer
        # A change in place while the request ran: any set from the one before it to the
        # one the next change made (that change may land before its count is raised).
        changes = range(outcome.first, outcome.last + 2)
        allowed = {expected[outcome.kind, n % STATES] for n in changes}
        if got is not None and got in allowed:
            continue
        if got is None or got[0] == 500:
            tally.errors += 1
        elif route_of(got) not in {route_of(answer) for answer in allowed}:
            tally.misroutes += 1
        else:
            tally.wrong_plans += 1
        if len(tally.examples) < 5:
            tally.examples.append((KINDS[outcome.kind], outcome.error or got))
    return tally


def serve_from_many_loops(twin: Twin, dispatch: bool) -> tuple[Tally, float]:
    expected = reference_answers(twin, dispatch)
    app = build_app(twin, dispatch)
    switcher = Switcher(app.dependency_overrides)
    start = threading.Barrier(LOOPS)
    per_loop = -(-REQUESTS // LOOPS)
    results: list[list[Outcome]] = [[] for _ in range(LOOPS)]

    def worker(loop: int) -> None:
        results[loop] = serve_on_loop(app, loop_schedule(loop, per_loop), switcher, start)

    threads = [threading.Thread(target=worker, args=(loop,)) for loop in range(LOOPS)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: first uses and plan swaps interleave
    began = time.monotonic()
    try:
        switcher.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        switcher.done.set()
        switcher.join()
        sys.setswitchinterval(interval)
    seconds = time.monotonic() - began
    return judge((o for found in results for o in found), expected), seconds


# FastAPI silences this Pydantic warning while it builds a parameter's field (which it does
# per request on the delegated tier while overrides are set) with `catch_warnings`, whose
# filters are the whole process's before Python 3.14: another thread leaving its own
# `catch_warnings` meanwhile lets the warning out, which this suite's filters make an error.
# It lets one in about 100,000 requests fail so, FastAPI's race and not ours: this test is
# a long mode (`make test-many-loops`), kept out of the suite's default run.
@pytest.mark.slow
@pytest.mark.skipif(
    "MSGSPEC_FASTAPI_LOOPS_REQUESTS" not in os.environ,
    reason="long mode: make test-many-loops (MSGSPEC_FASTAPI_LOOPS_REQUESTS)",
)
@pytest.mark.filterwarnings("ignore::pydantic.warnings.UnsupportedFieldAttributeWarning")
@pytest.mark.parametrize("dispatch", [False, True], ids=["fastapi-loop", "install-dispatch"])
def test_one_app_served_from_many_loops_answers_every_request_rightly(
    twin: Twin, dispatch: bool
) -> None:
    tally, seconds = serve_from_many_loops(twin, dispatch)
    print(
        f"\n{twin.name}, {'install_dispatch' if dispatch else 'FastAPI loop'}: "
        f"{tally.requests} requests over {LOOPS} loops in {seconds:.1f} s: "
        f"{tally.errors} errors, {tally.misroutes} misroutes, {tally.wrong_plans} wrong plans"
    )
    assert tally.requests >= REQUESTS
    assert (tally.errors, tally.misroutes, tally.wrong_plans) == (0, 0, 0), tally.examples


def dependency_route(app: FastAPI, path: str) -> Any:
    """The DependencyRoute that serves `path` (an included route's context), its inclusion
    built now."""
    from fastapi.routing import iter_route_contexts

    for context in iter_route_contexts(app.routes):
        if context.path == path:
            app_ = getattr(context, DIRECT_ATTR)
            while not hasattr(app_, "plan_for"):
                app_ = app_.app
            return app_
    raise LookupError(path)


def test_plans_per_override_set_survive_threads_racing_for_them(twin: Twin) -> None:
    """Threads asking one route for its plan under override sets that push each other
    out of the kept plans: every answer is the plan of the set asked for, none raises."""
    app = build_app(twin, dispatch=False)
    route = dependency_route(app, "/a/dep")
    override_sets = [{which: replacement} for replacement in VARIANTS]
    failures: list[Any] = []
    start = threading.Barrier(LOOPS)

    def ask(offset: int) -> None:
        start.wait()
        for number in range(400):
            overrides = override_sets[(number + offset) % len(override_sets)]
            try:
                program = route.plan_for(overrides)
            except Exception as exc:
                failures.append(repr(exc))
                continue
            calls = {op.call for op in program.ops} if program is not None else set()
            if overrides[which] not in calls:
                failures.append(("wrong plan", number))

    threads = [threading.Thread(target=ask, args=(loop * 3,)) for loop in range(LOOPS)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures[:5] == []


def test_plan_built_while_the_overrides_were_emptied_holds_only_without_them(
    twin: Twin,
) -> None:
    """A route asks for its plan under the overrides it found set; another thread may
    empty them before the plan is built. That plan (the one without overrides) must not
    be taken for any set of overrides later: it was, as its build looked nothing up."""
    app = build_app(twin, dispatch=False)
    route = dependency_route(app, "/a/dep")
    emptied: dict[Any, Any] = {}  # what the build reads, once the other thread is done
    built = route.plan_for(emptied)
    assert built is not None and which in {op.call for op in built.ops}
    overridden = route.plan_for({which: VARIANTS[1]})
    assert overridden is not None
    assert VARIANTS[1] in {op.call for op in overridden.ops}
