"""msgspec Structs of the service, used by the msgspec-fastapi variants and by Litestar.

The constraints match schemas_pydantic.py one for one, and both call the same checks.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from checks import city_problem, population_range_problem
from msgspec import Meta

Name = Annotated[str, Meta(min_length=1, max_length=200)]
CountryCode = Annotated[str, Meta(pattern="^[A-Z]{2}$")]
Admin1Code = Annotated[str, Meta(max_length=20)]
Population = Annotated[int, Meta(ge=0)]
PageLimit = Annotated[int, Meta(ge=1, le=500)]


class City(msgspec.Struct):
    id: Annotated[int, Meta(ge=1)]
    name: Name
    country_code: CountryCode
    admin1_code: Admin1Code
    latitude: Annotated[float, Meta(ge=-90.0, le=90.0)]
    longitude: Annotated[float, Meta(ge=-180.0, le=180.0)]
    population: Population
    timezone: Annotated[str, Meta(min_length=1, max_length=40)]
    alternate_names: Annotated[list[Name], Meta(max_length=10)]

    def __post_init__(self) -> None:
        problem = city_problem(self.name, self.alternate_names, self.latitude, self.longitude)
        if problem is not None:
            raise ValueError(problem)


class CityBatch(msgspec.Struct):
    cities: Annotated[list[City], Meta(min_length=1, max_length=1000)]


class Accepted(msgspec.Struct):
    accepted: int


class CityPage(msgspec.Struct):
    offset: int
    limit: int
    items: list[City]


class CitySearch(msgspec.Struct):
    country: CountryCode
    admin1: Annotated[str, Meta(min_length=1, max_length=20)] | None = None
    min_population: Population = 0
    max_population: Population | None = None
    limit: PageLimit = 100

    def __post_init__(self) -> None:
        problem = population_range_problem(self.min_population, self.max_population)
        if problem is not None:
            raise ValueError(problem)


class CitySearchResult(msgspec.Struct):
    query: CitySearch
    items: list[City]
