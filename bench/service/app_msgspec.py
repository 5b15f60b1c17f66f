"""The service on FastAPI with msgspec Structs and MsgspecRouter.

One module for every msgspec-fastapi variant (upstream 0.0.4, ours pure, ours compiled):
serve.py decides which ``msgspec_fastapi`` is imported before importing this module.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import msgspec
from common import route_index_installer
from database import CityStore
from fastapi import Depends, FastAPI, Query
from schemas_msgspec import Accepted, City, CityBatch, CityPage, CitySearch, CitySearchResult
from sqlalchemy.ext.asyncio import AsyncSession

import msgspec_fastapi
from msgspec_fastapi import MsgspecRouter, install_openapi

store = CityStore.from_environment()


async def get_session() -> AsyncIterator[AsyncSession]:
    """One database session per request, as in FastAPI's SQL tutorial."""
    async with store.sessions() as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session)]


def cities_from_rows(rows: object) -> list[City]:
    return msgspec.convert(rows, list[City], from_attributes=True)


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    yield
    await store.close()


router = MsgspecRouter()


@router.post("/cities/validate")
async def validate_cities(batch: CityBatch) -> Accepted:
    return Accepted(accepted=len(batch.cities))


@router.get("/cities")
async def list_cities(
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> CityPage:
    rows = await store.page(session, offset, limit)
    return CityPage(offset=offset, limit=limit, items=cities_from_rows(rows))


@router.post("/cities/search")
async def search_cities(query: CitySearch, session: SessionDep) -> CitySearchResult:
    rows = await store.search(
        session,
        country=query.country,
        admin1=query.admin1,
        min_population=query.min_population,
        max_population=query.max_population,
        limit=query.limit,
    )
    return CitySearchResult(query=query, items=cities_from_rows(rows))


app = FastAPI(lifespan=lifespan)
app.include_router(router)
install_openapi(app, router)
# The route index where the package has it: ours, not upstream 0.0.4.
install_dispatch = route_index_installer(msgspec_fastapi)
if install_dispatch is not None:
    install_dispatch(app)
