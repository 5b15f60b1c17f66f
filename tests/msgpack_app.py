"""One application with MessagePack routes, for the msgpack table, twin comparison and fuzzer.

Every route exists twice, as in `hostile_app`: under `/direct` on the direct tier and under
`/delegated` on the delegated tier (a dependency only FastAPI solves keeps a route
there). The router
has `msgpack=True`; `/plain` turns it off for itself. `build_app(twin)` puts the whole
application on one twin; `APPS` holds one such app per twin.

No route echoes an untyped body back: a MessagePack extension value decodes as
`msgspec.msgpack.Ext`, which JSON cannot encode, and that would be the route's failure,
not the request path's. `/anything` answers with the name of the decoded value's type.
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any

import msgspec
from fastapi import Body, Depends, FastAPI
from fastapi.routing import iter_route_contexts
from support import delegating_dependency
from twins import PerTwin, Twin

from msgspec_fastapi import MsgspecRouter
from msgspec_fastapi.router import MsgspecRoute

TIERS = ("direct", "delegated")

# The body limit of the /small route.
SMALL_LIMIT = 64


class Point(msgspec.Struct):
    x: int
    y: int


class City(msgspec.Struct):
    name: str
    population: int


class Cat(msgspec.Struct, tag="cat"):
    lives: int


class Dog(msgspec.Struct, tag="dog"):
    good: bool


class Record(msgspec.Struct, forbid_unknown_fields=True):
    """Fields whose MessagePack forms differ from JSON's: bytes, datetimes, floats, unions."""

    blob: bytes
    when: datetime.datetime
    ratio: float
    tags: list[str]
    scores: dict[str, int]
    maybe: int | None
    pet: Cat | Dog


class Holder(msgspec.Struct):
    payload: Any


class Small(msgspec.Struct):
    name: str


CITY: dict[str, Any] = {"name": "Oslo", "population": 700000}
RECORD: dict[str, Any] = {
    "blob": b"\x00\xff",
    "when": datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.UTC),
    "ratio": 0.5,
    "tags": ["a"],
    "scores": {"a": 1},
    "maybe": None,
    "pet": {"type": "cat", "lives": 9},
}


def tier_router(tier: str, router_class: type[MsgspecRouter] = MsgspecRouter) -> MsgspecRouter:
    """The msgpack routes, on `tier`."""
    dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []
    router = router_class(dependencies=dependencies, msgpack=True)

    @router.post("/city")
    async def city(body: City) -> City:
        return body

    @router.post("/cities")
    async def cities(body: list[City]) -> list[City]:
        return body

    @router.post("/record")
    async def record(body: Record) -> dict[str, Any]:
        return {"blob": len(body.blob), "year": body.when.year, "pet": type(body.pet).__name__}

    @router.post("/anything")
    async def anything(value: Any = Body()) -> str:
        return type(value).__name__

    @router.post("/holder")
    async def holder(body: Holder) -> str:
        return type(body.payload).__name__

    @router.post("/optional")
    async def optional(point: Point | None = None) -> dict[str, Any]:
        return {"point": point}

    @router.post("/parts")
    async def parts(point: Point, count: Annotated[int, Body()], page: int = 1) -> dict[str, int]:
        return {"x": point.x, "count": count, "page": page}

    @router.post("/small", max_body_size=SMALL_LIMIT)
    async def small(body: Small) -> Small:
        return body

    @router.post("/created", status_code=201)
    async def created(body: City) -> City:
        return body

    @router.post("/nothing", status_code=204)
    async def nothing(body: City) -> None:
        return None

    @router.get("/town")
    async def town() -> City:
        return City("Oslo", 700000)

    @router.post("/plain", msgpack=False)
    async def plain(body: City) -> City:
        return body

    return router


def build_app(twin: Twin | None = None) -> FastAPI:
    """The application, with every route on `twin` (by default the twin the package chose)."""
    router_class = twin.router_class if twin is not None else MsgspecRouter
    app = FastAPI()
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


APPS = PerTwin(build_app)
