"""The MsgspecRouter app, one definition for the compiled, pure and upstream variants.

Which `msgspec_fastapi` gets imported is decided by the worker (sys.path and environment)
before this module is imported, so the three variants run exactly this code.
"""

from typing import Annotated

from fastapi import FastAPI, HTTPException, Path, Query

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


def build_app(data: Dataset) -> FastAPI:
    router = MsgspecRouter()

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
    return app
