"""The floors: the same apps, but each route is a hand-written raw ASGI endpoint.

`floor`: the endpoints sit where the MsgspecRouter's routes sit, in routers included into
the app. So the floor pays FastAPI's middleware stack and its routing of included routers,
plus the msgspec decoding and encoding every variant must do, and nothing else; the
ratio to the floor is the overhead a router's routes add.

`bare`, the physical limit: the same endpoints behind a dict lookup in a bare ASGI app, no
FastAPI at all (the city routes and the route table). For the route table (--routers) one
more reference: `app-floor`, the same endpoints as routes of the app itself (FastAPI's
fastest routing).
"""

from typing import Annotated
from urllib.parse import parse_qsl

import msgspec
from fastapi import APIRouter, FastAPI
from msgspec import Meta
from starlette.routing import Route

from .cities import (
    LIMIT_MAX,
    PAGE_SIZE,
    Accepted,
    City,
    CityPage,
    CitySearch,
    Dataset,
    search,
)
from .floor_asgi import BareApp, Receive, Scope, Send, answer, read_body
from .routetable import Item, make_items


class ListQuery(msgspec.Struct):
    limit: Annotated[int, Meta(ge=1, le=LIMIT_MAX)] = PAGE_SIZE
    offset: Annotated[int, Meta(ge=0)] = 0


class _Endpoint:
    # A class instance, not a function, so that Starlette's Route treats it as a raw ASGI app.
    encoder = msgspec.json.Encoder()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            status, result = await self.handle(scope, receive)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            status, result = 422, {"detail": str(exc)}
        await answer(send, status, self.encoder.encode(result))

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, object]:
        raise NotImplementedError


class _Validate(_Endpoint):
    decoder = msgspec.json.Decoder(list[City])

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, object]:
        cities = self.decoder.decode(await read_body(receive))
        return 200, Accepted(len(cities))


class _List(_Endpoint):
    def __init__(self, data: Dataset) -> None:
        self.cities = data.cities

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, object]:
        # Query values arrive as strings, hence strict=False, as the routers convert them.
        raw = dict(parse_qsl(scope["query_string"].decode("latin-1")))
        query = msgspec.convert(raw, ListQuery, strict=False)
        items = self.cities[query.offset : query.offset + query.limit]
        return 200, CityPage(count=len(items), items=items)


class _Search(_Endpoint):
    decoder = msgspec.json.Decoder(CitySearch)

    def __init__(self, data: Dataset) -> None:
        self.data = data

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, object]:
        query = self.decoder.decode(await read_body(receive))
        data = self.data
        items = search(
            data.cities, data.by_country, query.country, query.min_population, query.limit
        )
        return 200, CityPage(count=len(items), items=items)


class _Get(_Endpoint):
    def __init__(self, data: Dataset) -> None:
        self.by_id = data.by_id

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, object]:
        city_id: int = scope["path_params"]["city_id"]
        city = self.by_id.get(city_id) if city_id >= 1 else None
        if city is None:
            return 404, {"detail": "city not found"}
        return 200, city


def build_app(data: Dataset) -> FastAPI:
    router = APIRouter()
    router.routes.extend(
        [
            Route("/cities/validate", _Validate(), methods=["POST"]),
            Route("/cities", _List(data), methods=["GET"]),
            Route("/cities/search", _Search(data), methods=["POST"]),
            Route("/cities/{city_id:int}", _Get(data), methods=["GET"]),
        ]
    )
    app = FastAPI()
    app.include_router(router)
    return app


def build_bare_app(data: Dataset) -> BareApp:
    app = BareApp(id_name="city_id")
    app.exact["POST", "/cities/validate"] = _Validate()
    app.exact["GET", "/cities"] = _List(data)
    app.exact["POST", "/cities/search"] = _Search(data)
    app.with_id["GET", "/cities"] = _Get(data)
    return app


class _GetItem(_Endpoint):
    def __init__(self, items: dict[int, Item]) -> None:
        self.items = items

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, object]:
        item = self.items.get(scope["path_params"]["item_id"])
        if item is None:
            return 404, {"detail": "item not found"}
        return 200, item


class _EchoItem(_Endpoint):
    decoder = msgspec.json.Decoder(Item)

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, object]:
        return 200, self.decoder.decode(await read_body(receive))


def _table_routes(k: int, items: dict[int, Item]) -> list[Route]:
    # The router prefix written into the path, as MsgspecRouter(prefix=...) and APIRouter's
    # decorators do at registration.
    return [
        Route(f"/r{k}/items/{{item_id:int}}", _GetItem(items), methods=["GET"]),
        Route(f"/r{k}/items", _EchoItem(), methods=["POST"]),
    ]


def build_table_app(size: int) -> FastAPI:
    items = make_items()
    app = FastAPI()
    for k in range(size):
        router = APIRouter()
        router.routes.extend(_table_routes(k, items))
        app.include_router(router)
    return app


def build_app_level_table_app(size: int) -> FastAPI:
    items = make_items()
    app = FastAPI()
    for k in range(size):
        for route in _table_routes(k, items):
            app.add_route(route.path, route.app, methods=sorted(route.methods or ()))
    return app


def build_bare_table_app(size: int) -> BareApp:
    items = make_items()
    app = BareApp()
    for k in range(size):
        app.with_id["GET", f"/r{k}/items"] = _GetItem(items)
        app.exact["POST", f"/r{k}/items"] = _EchoItem()
    return app
