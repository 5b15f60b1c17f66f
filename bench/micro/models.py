"""--models: a GET with a 5-field query model, a POST of a urlencoded form with a
5-field form model, and a POST of a 5-field JSON body that a dependency takes, ours
against FastAPI's Pydantic query model, form model and body model in a dependency.

One process pinned to one core runs three apps: the routes on a `MsgspecRouter` with
Struct models, on the compiled and on the pure twin (`route_class_for`), and the same
routes on a plain FastAPI router with Pydantic models and `Annotated[Model, Query()]`,
`Annotated[Model, Form()]`, `Depends(get_signup)` (async, as a sync dependency would add
FastAPI's threadpool to both sides). Every answer is checked; each round times one batch
of each (case, variant), the order reversed every other round; the table gives the median
µs per request and the median of the per-round ratios to FastAPI with Pydantic, per case.
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
from fastapi import APIRouter, Depends, FastAPI, Form, Query

from .asgi import ASGIApp, WrongAnswer, call, http_scope
from .inprocess import InProcessBench

VARIANTS = ("compiled", "pure", "pydantic")
CASES = ("query", "form", "dependency")
CASE_LABELS = {
    "query": "GET with a 5-field query model",
    "form": "POST of a 5-field urlencoded form model",
    "dependency": "POST of a 5-field JSON body a dependency takes",
}
QUERY = b"country=DE&min_population=1000&limit=50&offset=100&order=population"
EXPECTED = {
    "country": "DE",
    "min_population": 1000,
    "limit": 50,
    "offset": 100,
    "order": "population",
}


FORM = b"username=ada&email=ada%40example.org&age=36&plan=pro&newsletter=true"
FORM_EXPECTED = {
    "username": "ada",
    "email": "ada@example.org",
    "age": 36,
    "plan": "pro",
    "newsletter": True,
}


class Signup(msgspec.Struct, forbid_unknown_fields=True):
    username: Annotated[str, msgspec.Meta(min_length=3, max_length=32)]
    email: Annotated[str, msgspec.Meta(pattern="^[^@]+@[^@]+$")]
    age: Annotated[int, msgspec.Meta(ge=13, le=150)]
    plan: Literal["free", "pro"] = "free"
    newsletter: bool = False


class SignupModel(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    username: Annotated[str, pydantic.Field(min_length=3, max_length=32)]
    email: Annotated[str, pydantic.Field(pattern="^[^@]+@[^@]+$")]
    age: Annotated[int, pydantic.Field(ge=13, le=150)]
    plan: Literal["free", "pro"] = "free"
    newsletter: bool = False


async def get_signup(signup: Signup) -> Signup:
    return signup


async def get_signup_model(signup: SignupModel) -> SignupModel:
    return signup


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
    from msgspec_fastapi import MsgspecRouter, _select
    from msgspec_fastapi.router import route_class_for

    app = FastAPI()
    if variant == "pydantic":
        plain = APIRouter()

        @plain.get("/cities")
        async def pydantic_cities(f: Annotated[FilterModel, Query()]) -> dict[str, Any]:
            return f.model_dump()

        @plain.post("/signup")
        async def pydantic_signup(form: Annotated[SignupModel, Form()]) -> dict[str, Any]:
            return form.model_dump()

        @plain.post("/signup/json")
        async def pydantic_signup_json(
            signup: Annotated[SignupModel, Depends(get_signup_model)],
        ) -> dict[str, Any]:
            return signup.model_dump()

        app.include_router(plain)
        return app
    module = _select.load_twin(variant)
    if module is None:
        raise RuntimeError(f"the {variant} twin does not import")
    router = MsgspecRouter(route_class=route_class_for(module))

    @router.get("/cities")
    async def cities(f: Annotated[Filter, Query()]) -> dict[str, Any]:
        return msgspec.structs.asdict(f)

    @router.post("/signup")
    async def signup(form: Annotated[Signup, Form()]) -> dict[str, Any]:
        return msgspec.structs.asdict(form)

    @router.post("/signup/json")
    async def signup_json(signup: Annotated[Signup, Depends(get_signup)]) -> dict[str, Any]:
        return msgspec.structs.asdict(signup)

    app.include_router(router)
    return app


def form_scope() -> dict[str, Any]:
    scope = http_scope("POST", "/signup", b"", FORM)
    scope["headers"] = [
        (b"content-type", b"application/x-www-form-urlencoded")
        if name == b"content-type"
        else (name, value)
        for name, value in scope["headers"]
    ]
    return scope


# A case's request: scope, body and the answer it must get.
REQUESTS: dict[str, tuple[dict[str, Any], bytes, dict[str, Any]]] = {
    "query": (http_scope("GET", "/cities", QUERY, b""), b"", EXPECTED),
    "form": (form_scope(), FORM, FORM_EXPECTED),
    "dependency": (
        http_scope("POST", "/signup/json", b"", msgspec.json.encode(FORM_EXPECTED)),
        msgspec.json.encode(FORM_EXPECTED),
        FORM_EXPECTED,
    ),
}


class ModelBench(InProcessBench[tuple[str, str]]):
    def __init__(self, variants: list[str]) -> None:
        super().__init__()
        for variant in variants:
            self.start(variant, build_app(variant))
            for case in CASES:
                self.run((case, variant), 1)  # raises on a wrong answer

    async def _batch(self, key: tuple[str, str], count: int) -> tuple[int, int]:
        case, variant = key
        app, state = self.apps[variant]
        scope, body, expected = REQUESTS[case]
        wall, cpu = time.perf_counter_ns(), time.process_time_ns()
        for _ in range(count):
            # Each request gets its own scope, as from a server: the app writes into it.
            response = await call(app, dict(scope), body, state)
            if response.status != 200 or msgspec.json.decode(response.body) != expected:
                raise WrongAnswer(f"{key}: {response.status} {response.body[:200]!r}")
        return time.perf_counter_ns() - wall, time.process_time_ns() - cpu


def run(args: argparse.Namespace) -> int:
    variants = [name for name in (args.variants or VARIANTS) if name in VARIANTS]
    os.sched_setaffinity(0, {args.cpu})
    bench = ModelBench(variants)
    clock = 0 if args.clock == "wall" else 1
    keys = [(case, variant) for case in CASES for variant in variants]
    counts = {k: bench.size(k, args.warmup_seconds, args.batch_seconds) for k in keys}
    times: dict[tuple[str, str], list[float]] = {k: [] for k in keys}
    for index in range(args.rounds):
        for key in keys if index % 2 == 0 else keys[::-1]:
            times[key].append(bench.run(key, counts[key])[clock] / counts[key] / 1e3)
        log(f"round {index + 1:>2}/{args.rounds} done")
    bench.close()
    meta = versions(("fastapi", "msgspec", "pydantic", "python-multipart"))
    print(
        f"models: query = GET /cities?{QUERY.decode()} (a 5-field query model); form = POST"
        f" /signup with {FORM.decode()} (urlencoded, a 5-field form model); dependency = POST"
        " /signup/json with the same fields as JSON, the body a dependency's; one process"
        f" pinned to CPU {args.cpu}, {args.rounds} rounds, {args.clock} time"
        + (" (--quick: timings are not meaningful)" if args.quick else "")
    )
    print(f"python {sys.version.split()[0]}, " + ", ".join(f"{k} {v}" for k, v in meta.items()))
    print(f"  {'case':<10} {'variant':<10} {'µs/req':>9} {'vs pydantic':>12}")
    for case, variant in keys:
        ratio = "-"
        if (case, "pydantic") in times:
            pairs = zip(times[case, variant], times[case, "pydantic"], strict=True)
            ratio = f"{statistics.median(v / p for v, p in pairs):.2f}x"
        median = statistics.median(times[case, variant])
        print(f"  {case:<10} {variant:<10} {median:>9.1f} {ratio:>12}")
    return 0
