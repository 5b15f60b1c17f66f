"""The MsgspecRouter apps, one definition for the compiled, pure and upstream variants.

Which `msgspec_fastapi` gets imported is decided by the worker (sys.path and environment)
before this module is imported, so the three variants run exactly this code.
"""

from collections.abc import AsyncIterator
from typing import Annotated

from common import route_index_installer
from fastapi import FastAPI, HTTPException, Path, Query
from fastapi.sse import EventSourceResponse

import msgspec_fastapi
from msgspec_fastapi import MsgspecRouter, install_openapi

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

# The compiled route index where this package has it (never upstream 0.0.4).
_install_dispatch = route_index_installer(msgspec_fastapi)
ROUTE_INDEX = _install_dispatch is not None


def build_app(data: Dataset, errors: str | None = None) -> FastAPI:
    """The city routes; `errors` is the router's `errors=` where given (bench/errors.py),
    left out otherwise, since upstream 0.0.4 has no such option."""
    router = MsgspecRouter() if errors is None else MsgspecRouter(errors=errors)

    @router.post("/cities/validate")
    async def validate_cities(cities: list[City]) -> Accepted:
        return Accepted(len(cities))

    @router.get("/cities")
    async def list_cities(
        limit: Annotated[int, Query(ge=1, le=LIMIT_MAX)] = PAGE_SIZE,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> CityPage:
        items = data.cities[offset : offset + limit]
        return CityPage(count=len(items), items=items)

    @router.post("/cities/search")
    async def search_cities(query: CitySearch) -> CityPage:
        items = search(
            data.cities, data.by_country, query.country, query.min_population, query.limit
        )
        return CityPage(count=len(items), items=items)

    @router.get("/cities/{city_id}")
    async def get_city(city_id: Annotated[int, Path(ge=1)]) -> City:
        city = data.by_id.get(city_id)
        if city is None:
            raise HTTPException(status_code=404, detail="city not found")
        return city

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    if _install_dispatch is not None:
        _install_dispatch(app)
    return app


def build_table_app(size: int, install: bool = True) -> FastAPI:
    """N routers; `install=False` leaves out install_dispatch (routetable.LOOP_VARIANTS)."""
    items = make_items()
    app = FastAPI()
    for k in range(size):
        router = MsgspecRouter(prefix=f"/r{k}")

        @router.get("/items/{item_id}")
        async def get_item(item_id: int) -> Item:
            item = items.get(item_id)
            if item is None:
                raise HTTPException(status_code=404, detail="item not found")
            return item

        @router.post("/items")
        async def create_item(item: Item) -> Item:
            return item

        app.include_router(router)
    # One call after the routers are included: the index is built from the finished table.
    if install and _install_dispatch is not None:
        _install_dispatch(app)
    return app


def build_stream_app(data: Dataset) -> FastAPI:
    """The streaming mode: generator endpoints, the public API only (--stream).

    Until MsgspecRouter streams, registering or answering these fails, and the worker
    reports the variant as skipped (or failed, with --strict).
    """
    items = stream_items(data)
    router = MsgspecRouter()

    @router.get("/stream/jsonl")
    async def stream_jsonl() -> AsyncIterator[City]:
        for city in items:
            yield city

    @router.get("/stream/sse", response_class=EventSourceResponse)
    async def stream_sse() -> AsyncIterator[City]:
        for city in items:
            yield city

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    if _install_dispatch is not None:
        _install_dispatch(app)
    return app
