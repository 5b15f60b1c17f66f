"""The floor: the same FastAPI app, but each route is a hand-written raw ASGI endpoint.

The endpoints sit where the MsgspecRouter's routes sit: in a router included into the
app. So the floor pays FastAPI's middleware stack and its routing of included routers,
plus the msgspec decoding and encoding every variant must do, and nothing else; the
ratio to the floor is the overhead a router's routes add.
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
