"""Database access shared by every variant of the service.

Each variant reads the same rows with the same SQLAlchemy ORM queries, in a session its
routes take from a `yield` dependency over `CityStore.sessions`, as FastAPI's SQL tutorial
does (on Litestar a `Provide` of the same generator). The variants differ only in the
models that the rows are converted to and in how requests and responses are handled.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from models import City
from sqlalchemy import select
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

DB_URL_ENV = "BENCH_DB_URL"
# One pooled connection per load-generator connection, so no request waits for the pool.
POOL_SIZE = 20


def sqlite_url(path: Path, *, read_only: bool) -> str:
    if read_only:
        return f"sqlite+aiosqlite:///file:{path.resolve()}?mode=ro&uri=true"
    return f"sqlite+aiosqlite:///{path.resolve()}"


def postgres_url(host: str, port: int, user: str, database: str) -> str:
    return f"postgresql+asyncpg://{user}@{host}:{port}/{database}"


def make_engine(url: str) -> AsyncEngine:
    return create_async_engine(url, pool_size=POOL_SIZE, max_overflow=0)


class CityStore:
    """The queries of the service; one instance per server process."""

    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def from_environment(cls) -> CityStore:
        return cls(os.environ[DB_URL_ENV])

    @staticmethod
    async def page(session: AsyncSession, offset: int, limit: int) -> Sequence[City]:
        statement = select(City).order_by(City.id).offset(offset).limit(limit)
        return (await session.scalars(statement)).all()

    @staticmethod
    async def search(
        session: AsyncSession,
        *,
        country: str,
        admin1: str | None,
        min_population: int,
        max_population: int | None,
        limit: int,
    ) -> Sequence[City]:
        statement = select(City).where(
            City.country_code == country, City.population >= min_population
        )
        if max_population is not None:
            statement = statement.where(City.population <= max_population)
        if admin1 is not None:
            statement = statement.where(City.admin1_code == admin1)
        statement = statement.order_by(City.population.desc(), City.id).limit(limit)
        return (await session.scalars(statement)).all()

    async def close(self) -> None:
        await self.engine.dispose()
