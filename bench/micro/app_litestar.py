"""Litestar serving the same msgspec Structs, for comparison with another msgspec framework."""

from collections.abc import AsyncIterator
from typing import Annotated

import msgspec
from litestar import Litestar, Router, get, post
from litestar.exceptions import NotFoundException
from litestar.params import Parameter
from litestar.response import ServerSentEvent, Stream

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
from .streams import stream_items


def build_app(dataset: Dataset) -> Litestar:
    # Litestar reserves the handler argument name `data` for the request body.
    cities, by_id, by_country = dataset.cities, dataset.by_id, dataset.by_country

    # Litestar answers POST with 201 by default; the other variants answer 200.
    @post("/cities/validate", status_code=200)
    async def validate_cities(data: list[City]) -> Accepted:
        return Accepted(len(data))

    @get("/cities")
    async def list_cities(
        limit: Annotated[int, Parameter(ge=1, le=LIMIT_MAX)] = PAGE_SIZE,
        offset: Annotated[int, Parameter(ge=0)] = 0,
    ) -> CityPage:
        items = cities[offset : offset + limit]
        return CityPage(count=len(items), items=items)

    @post("/cities/search", status_code=200)
    async def search_cities(data: CitySearch) -> CityPage:
        items = search(cities, by_country, data.country, data.min_population, data.limit)
        return CityPage(count=len(items), items=items)

    @get("/cities/{city_id:int}")
    async def get_city(city_id: Annotated[int, Parameter(ge=1)]) -> City:
        city = by_id.get(city_id)
        if city is None:
            raise NotFoundException("city not found")
        return city

    return Litestar(route_handlers=[validate_cities, list_cities, search_cities, get_city])


def build_table_app(size: int) -> Litestar:
    items = make_items()
    routers = []
    for k in range(size):
        # Fresh handlers per router, as N resources written apart would have.
        @get("/items/{item_id:int}")
        async def get_item(item_id: int) -> Item:
            item = items.get(item_id)
            if item is None:
                raise NotFoundException("item not found")
            return item

        @post("/items", status_code=200)
        async def create_item(data: Item) -> Item:
            return data

        routers.append(Router(path=f"/r{k}", route_handlers=[get_item, create_item]))
    return Litestar(route_handlers=routers)


def build_stream_app(dataset: Dataset) -> Litestar:
    """Litestar's Stream (JSON Lines, msgspec-encoded) and ServerSentEvent (--stream).

    Litestar has no typed generator endpoints: the handler returns a response that
    iterates a generator of bytes, each City encoded with msgspec.
    """
    items = stream_items(dataset)
    encode = msgspec.json.Encoder().encode

    async def lines() -> AsyncIterator[bytes]:
        for city in items:
            yield encode(city) + b"\n"

    async def events() -> AsyncIterator[bytes]:
        for city in items:
            yield encode(city)

    @get("/stream/jsonl")
    async def stream_jsonl() -> Stream:
        return Stream(lines(), media_type="application/jsonl")

    @get("/stream/sse")
    async def stream_sse() -> ServerSentEvent:
        return ServerSentEvent(events())

    return Litestar(route_handlers=[stream_jsonl, stream_sse])
