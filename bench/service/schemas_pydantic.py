"""Pydantic models of the control variant; the same constraints as schemas_msgspec.py."""

from __future__ import annotations

from typing import Annotated, Self

from checks import city_problem, population_range_problem
from pydantic import BaseModel, ConfigDict, Field, model_validator

Name = Annotated[str, Field(min_length=1, max_length=200)]
CountryCode = Annotated[str, Field(pattern="^[A-Z]{2}$")]
Admin1Code = Annotated[str, Field(max_length=20)]
Population = Annotated[int, Field(ge=0)]
PageLimit = Annotated[int, Field(ge=1, le=500)]


class City(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: Annotated[int, Field(ge=1)]
    name: Name
    country_code: CountryCode
    admin1_code: Admin1Code
    latitude: Annotated[float, Field(ge=-90.0, le=90.0)]
    longitude: Annotated[float, Field(ge=-180.0, le=180.0)]
    population: Population
    timezone: Annotated[str, Field(min_length=1, max_length=40)]
    alternate_names: Annotated[list[Name], Field(max_length=10)]

    @model_validator(mode="after")
    def _check_record(self) -> Self:
        problem = city_problem(self.name, self.alternate_names, self.latitude, self.longitude)
        if problem is not None:
            raise ValueError(problem)
        return self


class CityBatch(BaseModel):
    cities: Annotated[list[City], Field(min_length=1, max_length=1000)]


class Accepted(BaseModel):
    accepted: int


class CityPage(BaseModel):
    offset: int
    limit: int
    items: list[City]


class CitySearch(BaseModel):
    country: CountryCode
    admin1: Annotated[str, Field(min_length=1, max_length=20)] | None = None
    min_population: Population = 0
    max_population: Population | None = None
    limit: PageLimit = 100

    @model_validator(mode="after")
    def _check_range(self) -> Self:
        problem = population_range_problem(self.min_population, self.max_population)
        if problem is not None:
            raise ValueError(problem)
        return self


class CitySearchResult(BaseModel):
    query: CitySearch
    items: list[City]
