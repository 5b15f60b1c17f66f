"""Per-record checks written in Python, shared by the msgspec and the Pydantic models.

Each function returns a message when the record is invalid and None when it is valid;
the models raise ValueError with it, which both libraries report as a validation error.
"""

from __future__ import annotations

from collections.abc import Sequence


def city_problem(
    name: str, alternate_names: Sequence[str], latitude: float, longitude: float
) -> str | None:
    if not name.strip():
        return "name must not be blank"
    seen: set[str] = set()
    for alternate in alternate_names:
        if not alternate.strip():
            return "alternate names must not be blank"
        if alternate == name:
            return "alternate names must differ from the name"
        if alternate in seen:
            return "alternate names must be distinct"
        seen.add(alternate)
    if latitude == 0.0 and longitude == 0.0:
        return "coordinates (0, 0) are a placeholder, not a place"
    return None


def population_range_problem(min_population: int, max_population: int | None) -> str | None:
    if max_population is not None and max_population < min_population:
        return "max_population must not be less than min_population"
    return None
