"""--models: a GET with a 5-field query model, ours against FastAPI's Pydantic query model.

One process pinned to one core runs three apps: the route on a `MsgspecRouter` with a
Struct query model, on the compiled and on the pure twin (`route_class_for`), and the same
route on a plain FastAPI router with a Pydantic model and `Annotated[Model, Query()]`.
Every answer is checked; each round times one batch of each variant, the order reversed
every other round; the table gives the median µs per request and the median of the
per-round ratios to FastAPI with Pydantic.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Annotated, Any, Literal

import msgspec
import pydantic
from common import log, versions
from fastapi import APIRouter, FastAPI, Query

from .asgi import ASGIApp, WrongAnswer, call, http_scope
from .inprocess import InProcessBench

VARIANTS = ("compiled", "pure", "pydantic")
QUERY = b"country=DE&min_population=1000&limit=50&offset=100&order=population"
EXPECTED = {
    "country": "DE",
    "min_population": 1000,
    "limit": 50,
    "offset": 100,
    "order": "population",
}


class Filter(msgspec.Struct, forbid_unknown_fields=True):
    country: Annotated[str, msgspec.Meta(pattern="^[A-Z]{2}$")]
    min_population: Annotated[int, msgspec.Meta(ge=0)] = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 100
    offset: Annotated[int, msgspec.Meta(ge=0)] = 0
    order: Literal["name", "population"] = "name"


class FilterModel(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    country: Annotated[str, pydantic.Field(pattern="^[A-Z]{2}$")]
    min_population: Annotated[int, pydantic.Field(ge=0)] = 0
    limit: Annotated[int, pydantic.Field(ge=1, le=500)] = 100
    offset: Annotated[int, pydantic.Field(ge=0)] = 0
    order: Literal["name", "population"] = "name"


def build_app(variant: str) -> ASGIApp:
    from msgspec_fastapi import MsgspecRouter, _impl
    from msgspec_fastapi.router import route_class_for

    app = FastAPI()
    if variant == "pydantic":
        plain = APIRouter()

        @plain.get("/cities")
        async def pydantic_cities(f: Annotated[FilterModel, Query()]) -> dict[str, Any]:
            return f.model_dump()

        app.include_router(plain)
        return app
    module = _impl.load_twin(variant)
    if module is None:
        raise RuntimeError(f"the {variant} twin does not import")
    router = MsgspecRouter(route_class=route_class_for(module))

    @router.get("/cities")
    async def cities(f: Annotated[Filter, Query()]) -> dict[str, Any]:
        return msgspec.structs.asdict(f)

    app.include_router(router)
    return app


class ModelBench(InProcessBench[str]):
    def __init__(self, variants: list[str]) -> None:
        super().__init__()
        self.scope = http_scope("GET", "/cities", QUERY, b"")
        for variant in variants:
            self.start(variant, build_app(variant))
            self.run(variant, 1)  # raises on a wrong answer

    async def _batch(self, variant: str, count: int) -> tuple[int, int]:
        app, state = self.apps[variant]
        wall, cpu = time.perf_counter_ns(), time.process_time_ns()
        for _ in range(count):
            response = await call(app, self.scope, b"", state)
            if response.status != 200 or msgspec.json.decode(response.body) != EXPECTED:
                raise WrongAnswer(f"{variant}: {response.status} {response.body[:200]!r}")
        return time.perf_counter_ns() - wall, time.process_time_ns() - cpu


def run(args: argparse.Namespace) -> int:
    variants = [name for name in (args.variants or VARIANTS) if name in VARIANTS]
    os.sched_setaffinity(0, {args.cpu})
    bench = ModelBench(variants)
    clock = 0 if args.clock == "wall" else 1
    counts = {v: bench.size(v, args.warmup_seconds, args.batch_seconds) for v in variants}
    times: dict[str, list[float]] = {v: [] for v in variants}
    for index in range(args.rounds):
        for variant in variants if index % 2 == 0 else variants[::-1]:
            times[variant].append(
                bench.run(variant, counts[variant])[clock] / counts[variant] / 1e3
            )
        log(f"round {index + 1:>2}/{args.rounds} done")
    bench.close()
    meta = versions(("fastapi", "msgspec", "pydantic"))
    print(
        f"models: GET /cities?{QUERY.decode()} (a 5-field query model), one process pinned to"
        f" CPU {args.cpu}, {args.rounds} rounds, {args.clock} time"
        + (" (--quick: timings are not meaningful)" if args.quick else "")
    )
    print(f"python {sys.version.split()[0]}, " + ", ".join(f"{k} {v}" for k, v in meta.items()))
    print(f"  {'variant':<10} {'µs/req':>9} {'vs pydantic':>12}")
    for variant in variants:
        ratio = "-"
        if "pydantic" in times:
            pairs = zip(times[variant], times["pydantic"], strict=True)
            ratio = f"{statistics.median(v / p for v, p in pairs):.2f}x"
        print(f"  {variant:<10} {statistics.median(times[variant]):>9.1f} {ratio:>12}")
    return 0
