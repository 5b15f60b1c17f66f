"""The requests of the benchmark and the responses expected for them.

The expected responses are computed here from the source data with msgspec, not by the
service, so a variant that answers with other content fails the run. The load generator
checks every response's status and length; the samples below are compared byte for byte
before each measured run.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

import msgspec
from dataset import CityRow, Dataset

PAGE_LIMIT = 100
VALIDATE_BATCH = 100
VALIDATE_BODIES = 8
SEARCH_LIMIT = 100
SEARCH_MIN_POPULATIONS = (1_000, 5_000, 10_000, 50_000)
SEARCH_FILTERS = 64
PAGE_STRIDE = 7919  # a prime: consecutive unique pages lie far apart in the window
ACCEPTED = b'{"accepted":100}'

ROUTES = ("validate", "list", "search")

_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True)
class Sample:
    """One request and what a correct service answers to it."""

    method: str
    path: str
    body: bytes | None
    statuses: tuple[int, ...]  # accepted statuses: 400 (Litestar) or 422 (FastAPI) for errors
    expected: bytes | None = None  # the exact body, for a successful request
    note: str = ""


@dataclass
class Workload:
    directory: Path
    page_window: int
    labels: dict[str, str] = field(default_factory=dict)
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    details: dict[str, object] = field(default_factory=dict)


def _page_prefix(offset: int, limit: int) -> bytes:
    return b'{"offset":%d,"limit":%d,"items":[' % (offset, limit)


def _page(cities: list[CityRow], offset: int) -> bytes:
    return (
        _page_prefix(offset, PAGE_LIMIT) + _encode(cities[offset : offset + PAGE_LIMIT])[1:] + b"}"
    )


def _search_query(country: str, min_population: int) -> dict[str, object]:
    return {
        "country": country,
        "admin1": None,
        "min_population": min_population,
        "max_population": None,
        "limit": SEARCH_LIMIT,
    }


def _reject(method: str, path: str, body: bytes | None, note: str) -> Sample:
    return Sample(method, path, body, statuses=(400, 422), note=note)


def _validate_part(data: Dataset, directory: Path, workload: Workload) -> None:
    ranked = sorted(data.cities, key=lambda c: (-c.population, c.id))
    bodies = [
        _encode({"cities": ranked[i * VALIDATE_BATCH : (i + 1) * VALIDATE_BATCH]})
        for i in range(VALIDATE_BODIES)
    ]
    with (directory / "validate.txt").open("wb") as out:
        out.write(b"%d\n" % len(ACCEPTED))
        for body in bodies:
            out.write(body + b"\n")
    sizes = [len(body) for body in bodies]
    mean_kb = sum(sizes) / len(sizes) / 1000
    workload.labels["validate"] = (
        f"POST /cities/validate, {VALIDATE_BATCH} cities ({mean_kb:.0f} KB), no DB"
    )
    workload.details["validate_body_bytes"] = sizes

    def broken(change: dict[str, object]) -> bytes:
        city = msgspec.to_builtins(ranked[0])
        city.update(change)
        return _encode({"cities": [*msgspec.to_builtins(ranked[1:5]), city]})

    workload.samples["validate"] = [
        Sample("POST", "/cities/validate", bodies[0], (200,), ACCEPTED),
        Sample("POST", "/cities/validate", bodies[-1], (200,), ACCEPTED),
        _reject("POST", "/cities/validate", broken({"name": "   "}), "blank name (Python check)"),
        _reject(
            "POST",
            "/cities/validate",
            broken({"alternate_names": ["Twice", "Twice"]}),
            "repeated alternate name (Python check)",
        ),
        _reject("POST", "/cities/validate", broken({"population": -1}), "negative population"),
        _reject("POST", "/cities/validate", broken({"country_code": "de"}), "country pattern"),
        _reject("POST", "/cities/validate", broken({"latitude": 91.5}), "latitude range"),
        _reject("POST", "/cities/validate", b'{"cities":[]}', "empty batch"),
    ]


def _list_part(data: Dataset, directory: Path, workload: Workload) -> None:
    window = workload.page_window
    cities = data.cities
    if window + PAGE_LIMIT > len(cities):
        raise ValueError(f"page window {window} needs more than {len(cities)} cities")
    if math.gcd(PAGE_STRIDE, window) != 1:
        raise ValueError(f"page window {window} must be coprime with {PAGE_STRIDE}")
    sizes = [len(_encode(city)) for city in cities[: window + PAGE_LIMIT]]
    sums = [0, *accumulate(sizes)]
    lengths = [
        len(_page_prefix(offset, PAGE_LIMIT))
        + sums[offset + PAGE_LIMIT]
        - sums[offset]
        + (PAGE_LIMIT - 1)
        + len(b"]}")
        for offset in range(window + 1)
    ]
    for offset in (0, 1, window // 3, window):  # the arithmetic above against the encoder
        assert lengths[offset] == len(_page(cities, offset)), offset
    with (directory / "pages.txt").open("w") as out:
        out.write(f"{window} {PAGE_STRIDE} {PAGE_LIMIT}\n")
        out.writelines(f"{length}\n" for length in lengths)
    workload.labels["list"] = f"GET /cities?limit={PAGE_LIMIT}, a page of {PAGE_LIMIT} from the DB"
    workload.details["page_bytes_offset_0"] = lengths[0]
    workload.samples["list"] = [
        Sample("GET", f"/cities?limit={PAGE_LIMIT}&offset=0", None, (200,), _page(cities, 0)),
        *(
            Sample(
                "GET",
                f"/cities?limit={PAGE_LIMIT}&offset={offset}",
                None,
                (200,),
                _page(cities, offset),
            )
            for offset in (PAGE_STRIDE % window + 1, window)
        ),
        _reject("GET", "/cities?limit=0", None, "limit below range"),
        _reject("GET", "/cities?limit=100&offset=-1", None, "negative offset"),
    ]


def _search_part(data: Dataset, directory: Path, workload: Workload) -> None:
    by_country: dict[str, list[CityRow]] = defaultdict(list)
    for city in data.cities:
        by_country[city.country_code].append(city)
    for rows in by_country.values():
        rows.sort(key=lambda c: (-c.population, c.id))
    filters: list[tuple[str, int, bytes, bytes]] = []
    for country in sorted(by_country, key=lambda c: (-len(by_country[c]), c)):
        for min_population in SEARCH_MIN_POPULATIONS:
            matches = [c for c in by_country[country] if c.population >= min_population]
            if len(matches) < SEARCH_LIMIT:
                continue
            body = _encode(
                {"country": country, "min_population": min_population, "limit": SEARCH_LIMIT}
            )
            expected = _encode(
                {
                    "query": _search_query(country, min_population),
                    "items": matches[:SEARCH_LIMIT],
                }
            )
            filters.append((country, min_population, body, expected))
        if len(filters) >= SEARCH_FILTERS:
            break
    filters = filters[:SEARCH_FILTERS]
    random.Random(20261130).shuffle(filters)  # consecutive requests ask different countries
    with (directory / "search.txt").open("wb") as out:
        out.write(b"%d\n" % len(filters))
        for country, min_population, body, expected in filters:
            out.write(b"%s:%d\t%d\t%s\n" % (country.encode(), min_population, len(expected), body))
    sizes = [len(f[3]) for f in filters]
    workload.labels["search"] = (
        f"POST /cities/search, {len(filters)} filters, a page of {SEARCH_LIMIT} from the DB"
    )
    workload.details["search_filters"] = len(filters)
    workload.details["search_response_bytes_mean"] = round(sum(sizes) / len(sizes))
    first = filters[0]
    workload.samples["search"] = [
        Sample("POST", "/cities/search", first[2], (200,), first[3]),
        Sample("POST", "/cities/search", filters[-1][2], (200,), filters[-1][3]),
        _reject(
            "POST",
            "/cities/search",
            b'{"country":"DE","min_population":5000,"max_population":10,"limit":100}',
            "population range (Python check)",
        ),
        _reject("POST", "/cities/search", b'{"country":"Germany","limit":100}', "country"),
        _reject("POST", "/cities/search", b'{"country":"DE","limit":501}', "limit above range"),
        _reject("POST", "/cities/search", b'{"country":"DE",', "malformed JSON"),
    ]


def build_workload(data: Dataset, directory: Path, page_window: int) -> Workload:
    """Write the load generator's input files into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    workload = Workload(directory=directory, page_window=page_window)
    _validate_part(data, directory, workload)
    _list_part(data, directory, workload)
    _search_part(data, directory, workload)
    return workload
