"""City data, msgspec types and the four benchmarked requests, shared by every variant.

The data is generated from a fixed seed so that every worker process builds exactly the same
records and the same expected responses without downloading anything.
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Protocol, TypeVar
from urllib.parse import urlencode

import msgspec
from msgspec import Meta

from .asgi import Case

SEED = 20241130
CITY_COUNT = 5000
PAGE_SIZE = 100

# Constraint values live here so that the Pydantic models can use exactly the same ones.
NAME_MAX = 200
ADMIN1_MAX = 20
TIMEZONE_MAX = 40
LIMIT_MAX = 500
COUNTRY_PATTERN = "^[A-Z]{2}$"
FEATURE_PATTERN = "^[A-Z0-9]{3,10}$"

Name = Annotated[str, Meta(min_length=1, max_length=NAME_MAX)]


class City(msgspec.Struct, kw_only=True):
    id: Annotated[int, Meta(ge=1)]
    name: Name
    ascii_name: Name
    country: Annotated[str, Meta(pattern=COUNTRY_PATTERN)]
    admin1: Annotated[str, Meta(max_length=ADMIN1_MAX)] | None = None
    feature_code: Annotated[str, Meta(pattern=FEATURE_PATTERN)]
    population: Annotated[int, Meta(ge=0)]
    latitude: Annotated[float, Meta(ge=-90, le=90)]
    longitude: Annotated[float, Meta(ge=-180, le=180)]
    elevation: int | None = None
    timezone: Annotated[str, Meta(min_length=1, max_length=TIMEZONE_MAX)]
    alternate_names: list[Name] = []


class CitySearch(msgspec.Struct, kw_only=True):
    country: Annotated[str, Meta(pattern=COUNTRY_PATTERN)] | None = None
    min_population: Annotated[int, Meta(ge=0)] = 0
    limit: Annotated[int, Meta(ge=1, le=LIMIT_MAX)] = PAGE_SIZE


class CityPage(msgspec.Struct, kw_only=True):
    count: int
    items: list[City]


class Accepted(msgspec.Struct):
    accepted: int


# Per country: latitude box, longitude box, time zones and a relative weight. DE gets a big
# weight so the search filter finds a full page without scanning most of the list.
_COUNTRIES: dict[str, tuple[tuple[float, float], tuple[float, float], tuple[str, ...], int]] = {
    "DE": ((47.3, 55.0), (5.9, 15.0), ("Europe/Berlin",), 14),
    "FR": ((42.3, 51.1), (-4.8, 8.2), ("Europe/Paris",), 9),
    "IT": ((36.6, 47.1), (6.6, 18.5), ("Europe/Rome",), 7),
    "ES": ((36.0, 43.8), (-9.3, 3.3), ("Europe/Madrid",), 6),
    "PL": ((49.0, 54.8), (14.1, 24.1), ("Europe/Warsaw",), 5),
    "GB": ((50.0, 58.6), (-6.4, 1.8), ("Europe/London",), 6),
    "US": (
        (25.0, 49.0),
        (-124.7, -67.0),
        ("America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles"),
        14,
    ),
    "CA": ((42.0, 60.0), (-130.0, -60.0), ("America/Toronto", "America/Vancouver"), 4),
    "MX": ((14.5, 32.7), (-117.1, -86.7), ("America/Mexico_City",), 4),
    "BR": ((-33.7, 5.2), (-73.9, -34.8), ("America/Sao_Paulo", "America/Manaus"), 6),
    "IN": ((8.1, 35.5), (68.1, 97.4), ("Asia/Kolkata",), 8),
    "CN": ((18.2, 53.5), (73.5, 134.8), ("Asia/Shanghai",), 7),
    "JP": ((24.0, 45.5), (123.0, 145.8), ("Asia/Tokyo",), 4),
    "AU": ((-43.6, -10.7), (113.3, 153.6), ("Australia/Sydney", "Australia/Perth"), 3),
    "NG": ((4.3, 13.9), (2.7, 14.7), ("Africa/Lagos",), 3),
    "RU": ((41.2, 69.0), (27.0, 180.0), ("Europe/Moscow", "Asia/Novosibirsk"), 5),
}

_SYLLABLES = (
    "ber", "lin", "ham", "burg", "mün", "chen", "kö", "ln", "dres", "den", "lei", "pzig",
    "sa", "ra", "to", "ma", "ri", "no", "vi", "la", "go", "sé", "ville", "por", "ta", "ca",
    "del", "mar", "san", "tos", "ki", "yo", "shi", "wa", "ka", "na", "ga", "ya", "ro", "pol",
    "grad", "sk", "ov", "ić", "ton", "field", "ford", "wick", "ham", "bury", "ze", "ñe",
)  # fmt: skip
_PREFIXES = ("", "", "", "", "", "", "Bad ", "San ", "Saint-", "Nova ", "Port ", "Alt-")
_SUFFIXES = ("", "", "", "", "", "", " am See", " an der Oder", "-sur-Mer", " City", " Heights")
_FEATURES = ("PPL", "PPL", "PPL", "PPLA", "PPLA2", "PPLA3", "PPLC")


def _ascii(text: str) -> str:
    # Strip accents the way GeoNames' asciiname column does, without extra dependencies.
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _name(rng: random.Random) -> str:
    stem = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))
    return f"{rng.choice(_PREFIXES)}{stem.capitalize()}{rng.choice(_SUFFIXES)}"


def make_cities(count: int = CITY_COUNT, seed: int = SEED) -> list[City]:
    rng = random.Random(seed)
    codes = list(_COUNTRIES)
    weights = [_COUNTRIES[code][3] for code in codes]
    cities = []
    for index in range(count):
        code = rng.choices(codes, weights)[0]
        (lat_lo, lat_hi), (lon_lo, lon_hi), zones, _ = _COUNTRIES[code]
        name = _name(rng)
        cities.append(
            City(
                id=2_000_000 + index * 37,
                name=name,
                ascii_name=_ascii(name),
                country=code,
                admin1=None if rng.random() < 0.1 else f"{rng.randint(1, 16):02d}",
                feature_code=rng.choice(_FEATURES),
                # Log-uniform, so roughly one city in eight is below 1,000 people.
                population=int(10 ** rng.uniform(2.5, 6.5)),
                latitude=round(rng.uniform(lat_lo, lat_hi), 4),
                longitude=round(rng.uniform(lon_lo, lon_hi), 4),
                elevation=None if rng.random() < 0.3 else rng.randint(-10, 2500),
                timezone=rng.choice(zones),
                alternate_names=[_name(rng) for _ in range(rng.randint(0, 1))],
            )
        )
    return cities


class _HasCountry(Protocol):
    @property
    def country(self) -> str: ...

    @property
    def population(self) -> int: ...


R = TypeVar("R", bound=_HasCountry)


def index_by_country(records: Iterable[R]) -> dict[str, list[R]]:
    index: dict[str, list[R]] = {}
    for record in records:
        index.setdefault(record.country, []).append(record)
    return index


def search(
    records: Sequence[R],
    by_country: dict[str, list[R]],
    country: str | None,
    min_population: int,
    limit: int,
) -> list[R]:
    """The search endpoint's work, identical for msgspec Structs and Pydantic models."""
    pool = records if country is None else by_country.get(country, [])
    found: list[R] = []
    for record in pool:
        if record.population >= min_population:
            found.append(record)
            if len(found) == limit:
                break
    return found


@dataclass(frozen=True)
class Dataset:
    cities: list[City]
    by_id: dict[int, City]
    by_country: dict[str, list[City]]


def make_dataset() -> Dataset:
    cities = make_cities()
    return Dataset(cities, {c.id: c for c in cities}, index_by_country(cities))


# Short names for the command line, and the labels the table shows.
ROUTE_LABELS = {
    "validate": "POST /cities/validate",
    "list": f"GET /cities?limit={PAGE_SIZE}",
    "search": "POST /cities/search",
    "get": "GET /cities/{id}",
}
ROUTE_KEYS = tuple(ROUTE_LABELS)
SEARCH_FILTER = CitySearch(country="DE", min_population=1000, limit=PAGE_SIZE)


def make_cases(data: Dataset) -> dict[str, Case]:
    # A different slice from the list page, so the two routes do not share objects.
    upload = data.cities[2000 : 2000 + PAGE_SIZE]
    wanted = SEARCH_FILTER
    found = search(
        data.cities, data.by_country, wanted.country, wanted.min_population, wanted.limit
    )
    assert len(found) == PAGE_SIZE, "the generated data has too few matches for the search"
    one = data.cities[1234]
    page = data.cities[:PAGE_SIZE]
    cases = [
        Case(
            "validate",
            "POST",
            "/cities/validate",
            b"",
            msgspec.json.encode(upload),
            Accepted(len(upload)),
            ROUTE_LABELS["validate"],
        ),
        Case(
            "list",
            "GET",
            "/cities",
            urlencode({"limit": PAGE_SIZE}).encode(),
            b"",
            CityPage(count=len(page), items=page),
            ROUTE_LABELS["list"],
        ),
        Case(
            "search",
            "POST",
            "/cities/search",
            b"",
            msgspec.json.encode(SEARCH_FILTER),
            CityPage(count=len(found), items=found),
            ROUTE_LABELS["search"],
        ),
        Case("get", "GET", f"/cities/{one.id}", b"", b"", one, ROUTE_LABELS["get"]),
    ]
    return {case.key: case for case in cases}
