"""The compiled and the pure request path answer every request identically.

One application is built per twin (`twins.PerTwin`), its routes all on that twin, and
hypothesis drives both with the same generated requests:
valid and invalid bodies, content types, chunk splits, path and query values, and
endpoint results that need validation (NaN, subclasses, mixed containers). Status,
headers and body must match byte for byte, and so must any exception that escapes.
"""

from __future__ import annotations

import asyncio
import decimal
import math
from typing import Annotated, Any

import msgspec
from fastapi import Depends, FastAPI, Header, Query
from fastapi.routing import iter_route_contexts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raw_asgi import send_request
from support import delegating_dependency
from twins import PerTwin, Twin, outcome


class City(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=20)]
    population: Annotated[int, msgspec.Meta(ge=0)]
    area: float = 0.0


class BigCity(City):
    district: str = "centre"


class Filter(msgspec.Struct, forbid_unknown_fields=True):
    country: Annotated[str, msgspec.Meta(pattern="^[A-Z]{2}$")]
    limit: Annotated[int, msgspec.Meta(ge=1, le=5)] = 2


RESULTS: list[Any] = [
    City("a", 1),
    City("a", 1, math.nan),
    City("a", 1, math.inf),
    BigCity("b", 2),
    {"name": "c", "population": 3},
    {"name": "", "population": 3},
    [City("a", 1), {"name": "d", "population": 4}],
    [City("a", 1), City("e", 5)],
    None,
    "text",
    {"name": "x", "population": -1},
    decimal.Decimal("1.5"),
]


def build_app(twin: Twin) -> FastAPI:
    cities = twin.router_class()

    @cities.post("/cities/validate")
    async def validate(batch: list[City]) -> dict[str, int]:
        return {"accepted": len(batch)}

    @cities.post("/cities/search", dependencies=[Depends(delegating_dependency)])
    def search(query: Filter, page: int = Query(1, ge=1)) -> list[City]:
        return [City(query.country, page)] * query.limit

    @cities.get("/cities/{city_id}")
    async def one(city_id: int, pick: int = 0, x_mode: str | None = Header(None)) -> City:
        return RESULTS[pick % len(RESULTS)]

    @cities.get("/list")
    async def many(pick: int = 0) -> list[City]:
        return RESULTS[pick % len(RESULTS)]

    @cities.get("/delegated/{city_id}", dependencies=[Depends(delegating_dependency)])
    async def one_delegated(city_id: int, pick: int = 0) -> City | None:
        return RESULTS[pick % len(RESULTS)]

    @cities.get("/untyped")
    async def untyped(pick: int = 0):
        return RESULTS[pick % len(RESULTS)]

    app = FastAPI()
    app.include_router(cities, prefix="/v1")
    list(iter_route_contexts(app.routes))  # build every included route now
    return app


APPS = PerTwin(build_app)


def call(app: FastAPI, method: str, path: str, query: bytes, headers: list, chunks: list) -> Any:
    """What `app` sent, or the exception that escaped it: both twins must raise alike."""
    target = path.encode() + b"?" + query
    return asyncio.run(outcome(send_request(app, method, target, headers, chunks)))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
cities = st.fixed_dictionaries(
    {"name": st.text(max_size=25), "population": st.integers(-5, 10**6)},
    optional={"area": st.floats(allow_nan=False) | st.text(max_size=3)},
)
bodies = st.one_of(
    st.lists(cities, max_size=4).map(msgspec.json.encode),
    st.fixed_dictionaries(
        {"country": st.sampled_from(["DE", "de", "FRA", ""])},
        optional={"limit": st.integers(-1, 7), "extra": st.integers()},
    ).map(msgspec.json.encode),
    json_values.map(msgspec.json.encode),
    st.binary(max_size=40),
    st.sampled_from([b"", b"   ", b"[" * 3000, b'{"a":1}x', b"\xef\xbb\xbf[]", b"[NaN]"]),
)
content_types = st.sampled_from(
    [
        None,
        b"application/json",
        b"Application/JSON; charset=utf-8",
        b"application/vnd.api+json",
        b"text/plain",
        b"",
        b"application/json\xff",
        b"multipart/form-data",
    ]
)
numbers = st.sampled_from(["1", "+5", "05", "1_0", "5.0", "x", "", "-3", "nan", "9" * 25])
paths = st.sampled_from(
    [
        "/v1/cities/validate",
        "/v1/cities/search",
        "/v1/cities/{}",
        "/v1/list",
        "/v1/delegated/{}",
        "/v1/untyped",
    ]
)


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(body[start:point])
        start = point
    pieces.append(body[start:])
    return pieces


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=paths,
    number=numbers,
    pick=st.integers(0, len(RESULTS) - 1),
    body=bodies,
    content_type=content_types,
    cuts=st.lists(st.integers(0, 10_000), max_size=4),
    mode=st.sampled_from([None, b"fast", b"\xe9"]),
    extra_query=st.text(alphabet="ab=&;%+ 1\xe9", max_size=12),
)
def test_twins_answer_every_request_identically(
    path: str,
    number: str,
    pick: int,
    body: bytes,
    content_type: bytes | None,
    cuts: list[int],
    mode: bytes | None,
    extra_query: str,
) -> None:
    method = "POST" if path.endswith(("validate", "search")) else "GET"
    headers = []
    if content_type is not None:
        headers.append((b"content-type", content_type))
    if mode is not None:
        headers.append((b"x-mode", mode))
    query = f"pick={pick}&page={number}&{extra_query}".encode("latin-1")
    request = (method, path.format(number), query, headers, split(body, cuts))
    assert call(APPS["pure"], *request) == call(APPS["compiled"], *request)
