"""The service on Litestar with the same msgspec Structs."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import msgspec
from database import CityStore
from litestar import Litestar, get, post
from litestar.di import Provide
from litestar.params import Parameter
from schemas_msgspec import Accepted, City, CityBatch, CityPage, CitySearch, CitySearchResult
from sqlalchemy.ext.asyncio import AsyncSession

store = CityStore.from_environment()


async def provide_session() -> AsyncIterator[AsyncSession]:
    """One database session per request: the same generator as the FastAPI variants'."""
    async with store.sessions() as session:
        yield session


def cities_from_rows(rows: object) -> list[City]:
    return msgspec.convert(rows, list[City], from_attributes=True)


@asynccontextmanager
async def lifespan(_: Litestar) -> AsyncIterator[None]:
    yield
    await store.close()


# Litestar answers POST with 201 by default; the other variants answer 200.
@post("/cities/validate", status_code=200)
async def validate_cities(data: CityBatch) -> Accepted:
    return Accepted(accepted=len(data.cities))


@get("/cities")
async def list_cities(
    session: AsyncSession,
    limit: Annotated[int, Parameter(ge=1, le=500)] = 100,
    offset: Annotated[int, Parameter(ge=0, le=10_000_000)] = 0,
) -> CityPage:
    rows = await store.page(session, offset, limit)
    return CityPage(offset=offset, limit=limit, items=cities_from_rows(rows))


@post("/cities/search", status_code=200)
async def search_cities(data: CitySearch, session: AsyncSession) -> CitySearchResult:
    rows = await store.search(
        session,
        country=data.country,
        admin1=data.admin1,
        min_population=data.min_population,
        max_population=data.max_population,
        limit=data.limit,
    )
    return CitySearchResult(query=data, items=cities_from_rows(rows))


app = Litestar(
    route_handlers=[validate_cities, list_cities, search_cities],
    dependencies={"session": Provide(provide_session)},
    lifespan=[lifespan],
)
