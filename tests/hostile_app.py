"""One application that hostile-input tests send their requests to.

Every route exists twice: under `/direct` on the direct tier and under `/delegated` on the
delegated tier (a dependency only FastAPI solves keeps a route there), except that the form
route (`/form`, in `ALWAYS_DELEGATED`) runs on the delegated tier under both prefixes.
`build_app(twin)` puts the whole application on one twin (a `twins.Twin`), so that the
same request can be sent to the pure and to the compiled request path; `APPS` holds one
such app per twin.

The bad-input table, the fuzzer, the leak test and the real-server test all use it; the
server test starts it in a subprocess with `uvicorn hostile_app:app` (tests/ on the path).
For that test the app says on stderr when its lifespan starts and ends (`LIFESPAN_LINES`)
and when an endless stream (`/ticks`) is closed (`TICKS_CLOSED`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import enum
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import msgspec
from fastapi import Body, Depends, FastAPI, Form, Header, Path, Query, UploadFile
from fastapi.routing import iter_route_contexts
from fastapi.sse import EventSourceResponse
from support import delegating_dependency
from twins import PerTwin, Twin

from msgspec_fastapi import MsgspecRouter
from msgspec_fastapi.router import MsgspecRoute

TIERS = ("direct", "delegated")


# The body limit of the /small routes (enforced by FastAPI from 0.164, by us before).
SMALL_LIMIT = 64
# The body limit of the /form routes.
FORM_LIMIT = 4096
# Routes that run on the delegated tier whatever their prefix: forms are parsed FastAPI's way.
ALWAYS_DELEGATED = ("/form",)
# What the app writes to stderr as its lifespan starts and ends, and when a /ticks stream's
# generator is closed (the real-server test reads them in the server's log).
LIFESPAN_LINES = ("hostile_app: lifespan started", "hostile_app: lifespan ended")
TICKS_CLOSED = "hostile_app: ticks closed"


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(msgspec.Struct):
    x: int
    y: int


class Filter(msgspec.Struct, forbid_unknown_fields=True):
    """A query model with the /items route's parameters."""

    q: str | None = None
    n: int | None = None
    flag: bool = False
    when: datetime.date | None = None
    tags: list[str] = []


class Signup(msgspec.Struct, forbid_unknown_fields=True):
    """The /form route's form model."""

    name: str
    age: int = 0
    tags: list[str] = []
    avatar: UploadFile | None = None


class Tokens(msgspec.Struct):
    x_token: str | None = None


class Cat(msgspec.Struct, tag="cat"):
    lives: int


class Dog(msgspec.Struct, tag="dog"):
    good: bool


class Everything(msgspec.Struct, forbid_unknown_fields=True):
    """One field of each kind a body can hold."""

    text: str
    count: int
    ratio: float
    flag: bool
    items: list[int]
    scores: dict[str, int]
    color: Color
    when: datetime.datetime
    ident: uuid.UUID
    maybe: int | None
    point: Point
    pet: Cat | Dog


EVERYTHING: dict[str, Any] = {
    "text": "Lyon",
    "count": 3,
    "ratio": 0.5,
    "flag": True,
    "items": [1, 2],
    "scores": {"a": 1},
    "color": "red",
    "when": "2024-05-06T07:08:09Z",
    "ident": "12345678-1234-5678-1234-567812345678",
    "maybe": None,
    "point": {"x": 1, "y": 2},
    "pet": {"type": "cat", "lives": 9},
}


class Small(msgspec.Struct):
    name: str


# What /pick/{index} returns: valid and invalid values for a `list[Point]` response, so
# that response validation (and its ResponseValidationError) is exercised too.
PICKS: list[Any] = [
    [Point(1, 2)],
    [Point(1, 2), {"x": 3, "y": 4}],
    [{"x": 1}],
    [Point(1, 2), "not a point"],
    (Point(5, 6),),
    None,
    [],
]


def tier_router(tier: str, router_class: type[MsgspecRouter] = MsgspecRouter) -> MsgspecRouter:
    """The hostile routes, on `tier`."""
    dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []
    router = router_class(dependencies=dependencies)

    @router.post("/everything")
    async def everything(body: Everything) -> Everything:
        return body

    @router.post("/anything")
    async def anything(value: Any = Body()) -> Any:
        return value

    @router.post("/optional")
    def optional(point: Point | None = None) -> dict[str, Any]:
        return {"point": point}

    @router.post("/parts")
    async def parts(point: Point, count: Annotated[int, Body()], page: int = 1) -> dict[str, int]:
        return {"x": point.x, "count": count, "page": page}

    @router.post("/small", max_body_size=SMALL_LIMIT)
    async def small(body: Small) -> Small:
        return body

    @router.get("/items/{item_id}")
    async def item(
        item_id: int,
        q: str | None = None,
        n: int | None = None,
        flag: bool = False,
        when: datetime.date | None = None,
        tags: list[str] = Query([]),
        x_token: str | None = Header(None),
    ) -> dict[str, Any]:
        return {
            "item_id": item_id,
            "q": q,
            "n": n,
            "flag": flag,
            "when": when,
            "tags": tags,
            "x_token": x_token,
        }

    @router.get("/filter")
    async def filter_items(
        f: Annotated[Filter, Query()], h: Annotated[Tokens, Header()]
    ) -> dict[str, Any]:
        return {"filter": f, "token": h.x_token}

    @router.post("/form", max_body_size=FORM_LIMIT)
    async def form(data: Annotated[Signup, Form()]) -> dict[str, Any]:
        avatar = data.avatar
        size = None if avatar is None else len(await avatar.read())
        return {"name": data.name, "age": data.age, "tags": data.tags, "avatar": size}

    @router.get("/pick/{index}")
    async def pick(index: int) -> list[Point]:
        return PICKS[index % len(PICKS)]

    @router.get("/lines/{count}")
    async def lines(count: Annotated[int, Path(le=1000)]) -> AsyncIterator[Point]:
        for i in range(count):
            yield Point(i, -i)

    @router.get("/sync-lines/{count}")
    def sync_lines(count: Annotated[int, Path(le=1000)]) -> Iterator[Point]:
        for i in range(count):
            yield Point(i, -i)

    @router.get("/events/{count}", response_class=EventSourceResponse)
    async def events(count: Annotated[int, Path(le=1000)]) -> AsyncIterator[Point]:
        for i in range(count):
            yield Point(i, -i)

    @router.get("/ticks")
    async def ticks() -> AsyncIterator[Point]:
        """Endless: only the client going away ends it."""
        try:
            i = 0
            while True:
                yield Point(i, -i)
                i += 1
                await asyncio.sleep(0.01)
        finally:
            print(TICKS_CLOSED, file=sys.stderr, flush=True)

    @router.get("/bad-lines")
    async def bad_lines() -> AsyncIterator[Point]:
        yield Point(1, 2)
        yield {"x": "not a number"}  # type: ignore[misc]

    @router.get("/words/{word}")
    async def word(word: Annotated[str, Path(max_length=12)]) -> dict[str, str]:
        return {"word": word}

    return router


@contextlib.asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    print(LIFESPAN_LINES[0], file=sys.stderr, flush=True)
    yield
    print(LIFESPAN_LINES[1], file=sys.stderr, flush=True)


def build_app(twin: Twin | None = None) -> FastAPI:
    """The application, with every route on `twin` (by default the twin the package chose)."""
    router_class = twin.router_class if twin is not None else MsgspecRouter
    app = FastAPI(lifespan=lifespan)
    for tier in TIERS:
        app.include_router(tier_router(tier, router_class), prefix=f"/{tier}")
    list(iter_route_contexts(app.routes))  # build every included route now
    return app


def route_tiers(app: FastAPI) -> dict[str, str]:
    """Full path of each msgspec route -> the tier it runs on."""
    return {
        context.path: context.route.tier
        for context in iter_route_contexts(app.routes)
        if isinstance(context.route, MsgspecRoute)
    }


app = build_app()
APPS = PerTwin(build_app)
