"""The control: the service on FastAPI with Pydantic models, FastAPI's standard path."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from database import CityStore
from fastapi import Depends, FastAPI, Query
from pydantic import TypeAdapter
from schemas_pydantic import Accepted, City, CityBatch, CityPage, CitySearch, CitySearchResult
from sqlalchemy.ext.asyncio import AsyncSession

store = CityStore.from_environment()
cities_from_rows = TypeAdapter(list[City])


async def get_session() -> AsyncIterator[AsyncSession]:
    """One database session per request, as in FastAPI's SQL tutorial."""
    async with store.sessions() as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session)]


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    yield
    await store.close()


app = FastAPI(lifespan=lifespan)


@app.post("/cities/validate")
async def validate_cities(batch: CityBatch) -> Accepted:
    return Accepted(accepted=len(batch.cities))


@app.get("/cities")
async def list_cities(
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> CityPage:
    rows = await store.page(session, offset, limit)
    items = cities_from_rows.validate_python(rows, from_attributes=True)
    return CityPage(offset=offset, limit=limit, items=items)


@app.post("/cities/search")
async def search_cities(query: CitySearch, session: SessionDep) -> CitySearchResult:
    rows = await store.search(
        session,
        country=query.country,
        admin1=query.admin1,
        min_population=query.min_population,
        max_population=query.max_population,
        limit=query.limit,
    )
    items = cities_from_rows.validate_python(rows, from_attributes=True)
    return CitySearchResult(query=query, items=items)
