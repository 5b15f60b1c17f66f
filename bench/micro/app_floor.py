"""The floors: the same apps, but each route is a hand-written raw ASGI endpoint.

`floor`: the endpoints sit where the MsgspecRouter's routes sit, in routers included into
the app. So the floor pays FastAPI's middleware stack and its routing of included routers,
plus the msgspec decoding and encoding every variant must do, and nothing else; the
ratio to the floor is the overhead a router's routes add.

For the route table (--routers) two more references: `app-floor`, the same endpoints as
routes of the app itself (FastAPI's fastest routing), and `bare`, the physical limit: the
same endpoints behind a dict lookup in a bare ASGI app, no FastAPI at all.
"""

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any
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
from .routetable import Item, make_items

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_JSON = (b"content-type", b"application/json")


class ListQuery(msgspec.Struct):
    limit: Annotated[int, Meta(ge=1, le=LIMIT_MAX)] = PAGE_SIZE
    offset: Annotated[int, Meta(ge=0)] = 0


async def _read_body(receive: Receive) -> bytes:
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    # Only reached with a chunked body; the benchmark always sends one message.
    chunks = [body]
    while message.get("more_body", False):
        message = await receive()
        chunks.append(message.get("body", b""))
    return b"".join(chunks)


async def _answer(send: Send, status: int, payload: bytes) -> None:
    headers = [_JSON, (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


class _Endpoint:
    # A class instance, not a function, so that Starlette's Route treats it as a raw ASGI app.
    encoder = msgspec.json.Encoder()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            status, result = await self.handle(scope, receive)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            status, result = 422, {"detail": str(exc)}
        await _answer(send, status, self.encoder.encode(result))

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, object]:
        raise NotImplementedError


class _Validate(_Endpoint):
    decoder = msgspec.json.Decoder(list[City])

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, object]:
        cities = self.decoder.decode(await _read_body(receive))
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
        query = self.decoder.decode(await _read_body(receive))
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
        return 200, self.decoder.decode(await _read_body(receive))


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


class _BareApp:
    """Exact paths in one dict; a path with a trailing {item_id} found by its parent."""

    def __init__(self, size: int) -> None:
        items = make_items()
        self.exact: dict[tuple[str, str], _Endpoint] = {}
        self.with_id: dict[tuple[str, str], _Endpoint] = {}
        for k in range(size):
            self.with_id["GET", f"/r{k}/items"] = _GetItem(items)
            self.exact["POST", f"/r{k}/items"] = _EchoItem()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        method, path = scope["method"], scope["path"]
        endpoint = self.exact.get((method, path))
        if endpoint is None:
            parent, _, last = path.rpartition("/")
            endpoint = self.with_id.get((method, parent)) if last.isdigit() else None
            if endpoint is None:
                await _answer(send, 404, b'{"detail":"Not Found"}')
                return
            scope["path_params"] = {"item_id": int(last)}
        await endpoint(scope, receive, send)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        kind = message["type"].removeprefix("lifespan.")
        await send({"type": f"lifespan.{kind}.complete"})
        if kind == "shutdown":
            return


def build_bare_table_app(size: int) -> _BareApp:
    return _BareApp(size)
