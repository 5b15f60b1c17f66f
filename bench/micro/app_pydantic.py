"""Plain FastAPI with Pydantic models carrying the same constraints as the msgspec Structs.

The city routes and the route table take the router class and a last step for the app, so
that the same models and endpoints also run on MsgspecRouter with install_dispatch (the
variants pydantic-compiled and pydantic-pure, see worker.py); this module never imports
msgspec_fastapi itself, as the worker chooses which twin gets imported.
"""

from collections.abc import AsyncIterator, Callable
from typing import Annotated

import msgspec
from fastapi import APIRouter, FastAPI, HTTPException, Path, Query
from fastapi.sse import EventSourceResponse
from pydantic import BaseModel, Field

from .cities import (
    ADMIN1_MAX,
    COUNTRY_PATTERN,
    FEATURE_PATTERN,
    LIMIT_MAX,
    NAME_MAX,
    PAGE_SIZE,
    TIMEZONE_MAX,
    Dataset,
    index_by_country,
    search,
)
from .routetable import make_items
from .streams import stream_items

Name = Annotated[str, Field(min_length=1, max_length=NAME_MAX)]
Country = Annotated[str, Field(pattern=COUNTRY_PATTERN)]


class CityModel(BaseModel):
    id: Annotated[int, Field(ge=1)]
    name: Name
    ascii_name: Name
    country: Country
    admin1: Annotated[str, Field(max_length=ADMIN1_MAX)] | None = None
    feature_code: Annotated[str, Field(pattern=FEATURE_PATTERN)]
    population: Annotated[int, Field(ge=0)]
    latitude: Annotated[float, Field(ge=-90, le=90)]
    longitude: Annotated[float, Field(ge=-180, le=180)]
    elevation: int | None = None
    timezone: Annotated[str, Field(min_length=1, max_length=TIMEZONE_MAX)]
    alternate_names: list[Name] = []


class CitySearchModel(BaseModel):
    country: Country | None = None
    min_population: Annotated[int, Field(ge=0)] = 0
    limit: Annotated[int, Field(ge=1, le=LIMIT_MAX)] = PAGE_SIZE


class CityPageModel(BaseModel):
    count: int
    items: list[CityModel]


class AcceptedModel(BaseModel):
    accepted: int


class ItemModel(BaseModel):
    id: int
    name: str
    price: float
    tags: list[str] = []


# What the apps are built with: FastAPI's own router, or MsgspecRouter and a step that runs
# once the app has its routes (install_dispatch).
RouterClass = Callable[..., APIRouter]
Finish = Callable[[FastAPI], None]


def build_app(
    data: Dataset, router_class: RouterClass = APIRouter, finish: Finish | None = None
) -> FastAPI:
    # A Pydantic service keeps Pydantic objects in memory, so convert the records once here.
    cities = [CityModel.model_validate(msgspec.to_builtins(c)) for c in data.cities]
    by_id = {c.id: c for c in cities}
    by_country = index_by_country(cities)
    router = router_class()

    @router.post("/cities/validate")
    async def validate_cities(cities: list[CityModel]) -> AcceptedModel:
        return AcceptedModel(accepted=len(cities))

    @router.get("/cities")
    async def list_cities(
        limit: Annotated[int, Query(ge=1, le=LIMIT_MAX)] = PAGE_SIZE,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> CityPageModel:
        items = cities[offset : offset + limit]
        return CityPageModel(count=len(items), items=items)

    @router.post("/cities/search")
    async def search_cities(query: CitySearchModel) -> CityPageModel:
        items = search(cities, by_country, query.country, query.min_population, query.limit)
        return CityPageModel(count=len(items), items=items)

    @router.get("/cities/{city_id}")
    async def get_city(city_id: Annotated[int, Path(ge=1)]) -> CityModel:
        city = by_id.get(city_id)
        if city is None:
            raise HTTPException(status_code=404, detail="city not found")
        return city

    app = FastAPI()
    app.include_router(router)
    if finish is not None:
        finish(app)
    return app


def build_table_app(
    size: int, router_class: RouterClass = APIRouter, finish: Finish | None = None
) -> FastAPI:
    # Pydantic objects in memory, as for the cities.
    items = {i: ItemModel.model_validate(msgspec.to_builtins(v)) for i, v in make_items().items()}
    app = FastAPI()
    for k in range(size):
        router = router_class(prefix=f"/r{k}")

        @router.get("/items/{item_id}")
        async def get_item(item_id: int) -> ItemModel:
            item = items.get(item_id)
            if item is None:
                raise HTTPException(status_code=404, detail="item not found")
            return item

        @router.post("/items")
        async def create_item(item: ItemModel) -> ItemModel:
            return item

        app.include_router(router)
    # After the routers are included, as install_dispatch indexes the finished table.
    if finish is not None:
        finish(app)
    return app


def build_stream_app(
    data: Dataset, router_class: RouterClass = APIRouter, finish: Finish | None = None
) -> FastAPI:
    """FastAPI's JSON Lines and SSE streaming of Pydantic models (--stream), on
    `router_class`."""
    items = [CityModel.model_validate(msgspec.to_builtins(c)) for c in stream_items(data)]
    router = router_class()

    @router.get("/stream/jsonl")
    async def stream_jsonl() -> AsyncIterator[CityModel]:
        for city in items:
            yield city

    @router.get("/stream/sse", response_class=EventSourceResponse)
    async def stream_sse() -> AsyncIterator[CityModel]:
        for city in items:
            yield city

    app = FastAPI()
    app.include_router(router)
    if finish is not None:
        finish(app)
    return app
