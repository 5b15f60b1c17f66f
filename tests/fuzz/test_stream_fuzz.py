"""A short, bounded fuzz run of streaming endpoints, in every test session.

Hypothesis picks the items a generator yields: valid Structs, dicts shaped like them with
fields replaced by arbitrary values, and arbitrary JSON-like values. They are streamed as
JSON Lines and as server-sent events, from typed and untyped, async and sync generators,
on both tiers of both twins, the client staying to the end or leaving after the body was
read. Both twins must send the same messages and let the same exception escape (an
invalid item is a ResponseValidationError mid-stream); a stream that ends normally has
one line or event per item; nothing else may escape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
from fastapi import Depends, FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.sse import EventSourceResponse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raw_asgi import run_on_one_loop as run
from raw_asgi import send_request
from support import delegating_dependency
from twins import PerTwin, Twin

TIERS = ("direct", "delegated")
ROUTES = ("/lines", "/sync-lines", "/untyped-lines", "/events", "/untyped-events")


class Point(msgspec.Struct):
    x: int
    y: int


# The items the next request's generator yields; requests run one at a time.
ITEMS: list[Any] = []


def build(twin: Twin) -> FastAPI:
    app = FastAPI()
    for tier in TIERS:
        dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []
        router = twin.router_class(dependencies=dependencies)

        @router.get("/lines")
        async def lines() -> AsyncIterator[Point]:
            for item in list(ITEMS):
                yield item

        @router.get("/sync-lines")
        def sync_lines() -> Iterator[Point]:
            yield from list(ITEMS)

        @router.get("/untyped-lines")
        async def untyped_lines():  # type: ignore[no-untyped-def]
            for item in list(ITEMS):
                yield item

        @router.get("/events", response_class=EventSourceResponse)
        async def events() -> AsyncIterator[Point]:
            for item in list(ITEMS):
                yield item

        @router.get("/untyped-events", response_class=EventSourceResponse)
        async def untyped_events():  # type: ignore[no-untyped-def]
            for item in list(ITEMS):
                yield item

        app.include_router(router, prefix=f"/{tier}")
    list(iter_route_contexts(app.routes))
    return app


APPS = PerTwin(build)

scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
points = st.builds(Point, st.integers(-(2**63), 2**63 - 1), st.integers(-5, 5))
shaped = st.dictionaries(st.sampled_from(["x", "y", "z"]), values | st.integers(), max_size=3)
items = st.lists(points | shaped | values, max_size=6)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups; SSE raises from a task group."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


async def outcome(twin: str, target: bytes, then: Any) -> tuple[Any, ...]:
    """("reply", the reply) or ("raised", [(type, errors or message) of each exception])."""
    try:
        return ("reply", await send_request(APPS[twin], "GET", target, then=then))
    except Exception as exc:
        found = []
        for leaf in leaves(exc):
            errors = leaf.errors() if hasattr(leaf, "errors") else str(leaf)
            found.append((type(leaf).__name__, repr(errors)))
        return ("raised", found)


def answer(twin: str, target: bytes, then: str) -> tuple[Any, ...]:
    return run(outcome(twin, target, then))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=items, route=st.sampled_from(ROUTES), then=st.sampled_from(["wait", "disconnect"]))
def test_streamed_items_give_the_same_messages_from_both_twins(
    items: list[Any], route: str, then: str
) -> None:
    ITEMS[:] = items
    for tier in TIERS:
        target = f"/{tier}{route}".encode()
        pure = answer("pure", target, then)
        compiled = answer("compiled", target, then)
        assert compiled == pure, f"twins differ on {tier}"
        if pure[0] == "raised":
            assert [name for name, _ in pure[1]] == ["ResponseValidationError"], pure
            continue
        reply = pure[1]
        assert reply.status == 200
        if then == "wait":
            assert reply.finished
            separator = b"\n\n" if "events" in route else b"\n"
            assert reply.body.count(separator) == len(items)
