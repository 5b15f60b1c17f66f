"""--formats: the same routes in JSON and in MessagePack, per twin, in one pinned process.

The app is the city app's validate and list routes on a `MsgspecRouter(msgpack=True)`,
built once per twin (`route_class_for`), so both twins run in this one process. A case is
(twin, route, format): validate posts the 100 cities as a JSON or a MessagePack body, list
asks for the page of 100 with `Accept: application/json` or `application/msgpack`. Every
answer is checked against msgspec's own encoding of the expected value. Each round times
one batch of every case, the order reversed every other round; the table gives µs per
request (median over rounds), the bytes of the body that format changes, and the median
of the per-round MessagePack/JSON time ratios of each twin and route. The rows "msgspec"
are the limit: msgspec alone decoding the validate body and encoding the page, no app.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from common import log, run_record, versions

from . import cities
from .asgi import ASGIApp, WrongAnswer, call, http_scope
from .inprocess import InProcessBench

TWINS = ("compiled", "pure")
FLOOR = "msgspec"
ROUTES = ("validate", "list")
FORMATS = ("json", "msgpack")
MSGPACK = "application/msgpack"


@dataclass(frozen=True)
class FormatCase:
    twin: str
    route: str
    format: str
    scope: dict[str, Any]
    body: bytes
    expected: bytes
    # Set for the msgspec rows: the codec's work alone, instead of a request to an app.
    work: Callable[[], object] | None = None

    @property
    def key(self) -> str:
        return f"{self.twin}/{self.route}/{self.format}"

    @property
    def payload(self) -> int:
        """The bytes that depend on the format: the request body, or the response body."""
        return len(self.body) if self.route == "validate" else len(self.expected)


def build_app(data: cities.Dataset, twin: str) -> ASGIApp:
    from fastapi import FastAPI

    from msgspec_fastapi import MsgspecRouter, _select
    from msgspec_fastapi.router import route_class_for

    module = _select.load_twin(twin)
    if module is None:
        raise RuntimeError(f"the {twin} twin does not import")
    router = MsgspecRouter(msgpack=True, route_class=route_class_for(module))

    @router.post("/cities/validate")
    async def validate_cities(items: list[cities.City]) -> cities.Accepted:
        return cities.Accepted(len(items))

    @router.get("/cities")
    async def list_cities(limit: int = cities.PAGE_SIZE) -> cities.CityPage:
        items = data.cities[:limit]
        return cities.CityPage(count=len(items), items=items)

    app = FastAPI()
    app.include_router(router)
    return app


def make_cases(data: cities.Dataset, twin: str) -> list[FormatCase]:
    upload = data.cities[2000 : 2000 + cities.PAGE_SIZE]
    page = cities.CityPage(count=cities.PAGE_SIZE, items=data.cities[: cities.PAGE_SIZE])
    accepted = cities.Accepted(len(upload))
    found = []
    for fmt in FORMATS:
        codec = msgspec.msgpack if fmt == "msgpack" else msgspec.json
        media = MSGPACK if fmt == "msgpack" else "application/json"
        body = codec.encode(upload)
        scope = http_scope("POST", "/cities/validate", b"", body)
        scope["headers"] = [
            (name, media.encode() if name == b"content-type" else value)
            for name, value in scope["headers"]
        ]
        found.append(FormatCase(twin, "validate", fmt, scope, body, msgspec.json.encode(accepted)))
        scope = http_scope("GET", "/cities", f"limit={cities.PAGE_SIZE}".encode(), b"")
        scope["headers"] = [(b"host", b"127.0.0.1:8000"), (b"accept", media.encode())]
        found.append(FormatCase(twin, "list", fmt, scope, b"", codec.encode(page)))
    return found


def make_floor_cases(data: cities.Dataset) -> list[FormatCase]:
    """What msgspec alone does for each case: decode the 100 cities, encode the page."""
    upload = data.cities[2000 : 2000 + cities.PAGE_SIZE]
    page = cities.CityPage(count=cities.PAGE_SIZE, items=data.cities[: cities.PAGE_SIZE])
    found = []
    for fmt in FORMATS:
        codec = msgspec.msgpack if fmt == "msgpack" else msgspec.json
        body = codec.encode(upload)
        decoder = codec.Decoder(list[cities.City])
        encoder = codec.Encoder()
        found.append(
            FormatCase(FLOOR, "validate", fmt, {}, body, b"", lambda d=decoder, b=body: d.decode(b))
        )
        expected = codec.encode(page)
        found.append(
            FormatCase(FLOOR, "list", fmt, {}, b"", expected, lambda e=encoder: e.encode(page))
        )
    return found


class FormatBench(InProcessBench[FormatCase]):
    def __init__(self, twins: list[str]) -> None:
        super().__init__()
        data = cities.make_dataset()
        self.cases: list[FormatCase] = []
        for twin in twins:
            self.start(twin, build_app(data, twin))
            self.cases.extend(make_cases(data, twin))
        self.cases.extend(make_floor_cases(data))
        for case in self.cases:
            self.run(case, 1)  # raises on a wrong answer

    async def _batch(self, case: FormatCase, count: int) -> tuple[int, int]:
        wall, cpu = time.perf_counter_ns(), time.process_time_ns()
        if case.work is not None:
            for _ in range(count):
                case.work()
            return time.perf_counter_ns() - wall, time.process_time_ns() - cpu
        app, state = self.apps[case.twin]
        for _ in range(count):
            response = await call(app, case.scope, case.body, state)
            if response.status != 200 or response.body != case.expected:
                raise WrongAnswer(
                    f"{case.key}: status {response.status}, body {response.body[:200]!r}"
                )
        return time.perf_counter_ns() - wall, time.process_time_ns() - cpu


def run(args: argparse.Namespace) -> int:
    twins = [name for name in (args.variants or TWINS) if name in TWINS]
    if not twins:
        log("--formats measures compiled and pure only")
        return 1
    os.sched_setaffinity(0, {args.cpu})
    bench = FormatBench(twins)
    clock = 0 if args.clock == "wall" else 1
    counts = {
        case.key: bench.size(case, args.warmup_seconds, args.batch_seconds) for case in bench.cases
    }
    times: dict[str, list[float]] = {case.key: [] for case in bench.cases}
    for index in range(args.rounds):
        order = bench.cases if index % 2 == 0 else bench.cases[::-1]
        for case in order:
            count = counts[case.key]
            times[case.key].append(bench.run(case, count)[clock] / count / 1e3)
        log(f"round {index + 1:>2}/{args.rounds} done")
    bench.close()
    summary = summarize(bench.cases, times)
    print_table(args, summary)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        run = run_record(versions(("fastapi", "starlette", "msgspec")))
        document = {"benchmark": "formats", "run": run, "cases": summary, "rounds_us": times}
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


def summarize(cases: list[FormatCase], times: dict[str, list[float]]) -> list[dict[str, Any]]:
    by_key = {case.key: case for case in cases}
    rows = []
    for case in cases:
        row: dict[str, Any] = {
            "case": case.key,
            "median_us": statistics.median(times[case.key]),
            "bytes": case.payload,
        }
        if case.format == "msgpack":
            json_key = by_key[f"{case.twin}/{case.route}/json"].key
            ratios = [m / j for m, j in zip(times[case.key], times[json_key], strict=True)]
            row["ratio_to_json"] = statistics.median(ratios)
        rows.append(row)
    return rows


def print_table(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    meta = versions(("fastapi", "msgspec"))
    print(
        f"formats: JSON and MessagePack, one process pinned to CPU {args.cpu}, {args.rounds}"
        f" rounds, ~{args.batch_seconds:g} s per batch, {args.clock} time"
        + (" (--quick: timings are not meaningful)" if args.quick else "")
    )
    print(f"python {sys.version.split()[0]}, " + ", ".join(f"{k} {v}" for k, v in meta.items()))
    print("bytes: the request body (validate) or the response body (list) in that format")
    print(f"  {'twin/route/format':<26} {'µs/req':>9} {'bytes':>7} {'vs json':>8}")
    for row in rows:
        ratio = row.get("ratio_to_json")
        print(
            f"  {row['case']:<26} {row['median_us']:>9.1f} {row['bytes']:>7}"
            f" {f'{ratio:.2f}x' if ratio is not None else '-':>8}"
        )
