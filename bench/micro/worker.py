"""One benchmark variant in its own process, driven by driver.py (`python -m micro.worker`).

Protocol: one JSON object per line. The worker first writes {"status": "ready", ...},
{"status": "skipped", "reason": ...} or {"status": "error", "message": ...}; then it answers
each command read from stdin ("warmup", "run", "quit") with one line.

The ready message lists the cases the worker answers. With --deps the worker runs
deps.DepsBench (the dependency routes) instead of Bench.

Nothing at the top imports FastAPI or an app: which `msgspec_fastapi` (if any) gets imported
depends on the variant, so load() (deps.load() with --deps) settles sys.path before the
first app import.
"""

import argparse
import asyncio
import contextlib
import functools
import gc
import hashlib
import importlib.util
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import msgspec
from common import (
    ROUTER_VARIANTS,
    Unavailable,
    import_router_package,
    route_index_installer,
    version,
    versions,
)

from . import cities, deps, routetable, streams
from .asgi import ASGIApp, Case, Lifespan, Response, WrongAnswer, call, http_scope

# Variants whose bytes must equal msgspec's own encoding. Pydantic formats JSON by itself,
# so for it the parsed values are compared instead.
BYTE_EXACT = {
    "compiled",
    "pure",
    "upstream",
    "litestar",
    "blacksheep",
    "floor",
    *routetable.LOOP_VARIANTS,
    "app-floor",
    "bare",
    "compiled-mw",
}
PREVIEW = 300
# A twin's or Pydantic's city app with one user middleware that only calls the next app
# (`@app.middleware("http")`), on the GET of one city only; the value is the variant
# without it.
MIDDLEWARE_VARIANTS = {"compiled-mw": "compiled", "pydantic-mw": "pydantic"}
MIDDLEWARE_ROUTES = ("get",)
# The pydantic variant's models and endpoints (app_pydantic.py) on MsgspecRouter, with
# install_dispatch, on a twin (the value): only the router class differs. Their answers
# must be FastAPI's own, byte for byte, so each worker also builds the pydantic variant's
# apps and checks its first answers against theirs.
PYDANTIC_ROUTER_VARIANTS = {"pydantic-compiled": "compiled", "pydantic-pure": "pure"}
# The variant whose answers those must repeat.
PYDANTIC = "pydantic"


@dataclass(frozen=True)
class Apps:
    """How a variant builds its apps; `cities` is None for the references of --routers
    only, `table` None for the variants of the city routes only; `routes`, where given,
    are the only city routes the variant answers; `reference`, where given, the apps of
    the variant whose exact bytes these must give."""

    cities: Callable[[cities.Dataset], ASGIApp] | None
    table: Callable[[int], ASGIApp] | None
    stream: Callable[[cities.Dataset], ASGIApp] | None = None
    routes: tuple[str, ...] | None = None
    reference: "Apps | None" = None


def with_middleware(build: Callable[[cities.Dataset], Any]) -> Callable[[cities.Dataset], Any]:
    """`build`, its FastAPI app given one user middleware that only calls the next app."""

    def build_with_middleware(data: cities.Dataset) -> Any:
        from fastapi import Request
        from starlette.responses import Response as StarletteResponse

        app = build(data)

        @app.middleware("http")
        async def pass_through(
            request: Request, call_next: Callable[[Request], Any]
        ) -> StarletteResponse:
            response: StarletteResponse = await call_next(request)
            return response

        return app

    return build_with_middleware


def load(variant: str) -> tuple[Apps, dict[str, Any]]:
    """The variant's app builders and facts about what was imported."""
    if variant in ROUTER_VARIANTS:
        _, package = import_router_package(variant)
        from . import app_router

        apps = Apps(app_router.build_app, app_router.build_table_app, app_router.build_stream_app)
        return apps, {"msgspec_fastapi": package, "route_index": app_router.ROUTE_INDEX}
    if twin := routetable.LOOP_VARIANTS.get(variant):
        _, package = import_router_package(twin)
        from . import app_router

        table = functools.partial(app_router.build_table_app, install=False)
        return Apps(None, table), {"msgspec_fastapi": package, "route_index": False}
    if twin := MIDDLEWARE_VARIANTS.get(variant):
        apps, info = load(twin)
        assert apps.cities is not None
        return Apps(with_middleware(apps.cities), None, routes=MIDDLEWARE_ROUTES), info
    if twin := PYDANTIC_ROUTER_VARIANTS.get(variant):
        ours, facts = import_router_package(twin)
        from . import app_pydantic

        install = route_index_installer(ours)
        if install is None:
            raise Unavailable(f"msgspec_fastapi at {facts['file']} has no install_dispatch")
        on_ours = {"router_class": ours.MsgspecRouter, "finish": install}
        reference, _ = load(PYDANTIC)
        apps = Apps(
            functools.partial(app_pydantic.build_app, **on_ours),
            functools.partial(app_pydantic.build_table_app, **on_ours),
            functools.partial(app_pydantic.build_stream_app, **on_ours),
            reference=reference,
        )
        return apps, {"msgspec_fastapi": facts, "route_index": True}
    if variant == PYDANTIC:
        from . import app_pydantic

        apps = Apps(
            app_pydantic.build_app, app_pydantic.build_table_app, app_pydantic.build_stream_app
        )
        return apps, {}
    if variant == "litestar":
        if importlib.util.find_spec("litestar") is None:
            raise Unavailable("litestar is not installed in this environment")
        from . import app_litestar

        apps = Apps(
            app_litestar.build_app, app_litestar.build_table_app, app_litestar.build_stream_app
        )
        return apps, {"litestar": version("litestar")}
    if variant == "blacksheep":
        if importlib.util.find_spec("blacksheep") is None:
            raise Unavailable("blacksheep is not installed in this environment")
        from . import app_blacksheep

        return Apps(app_blacksheep.build_app, None), {"blacksheep": version("blacksheep")}
    from . import app_floor

    if variant == "floor":
        return Apps(app_floor.build_app, app_floor.build_table_app), {}
    if variant == "app-floor":
        return Apps(None, app_floor.build_app_level_table_app), {}
    if variant == "bare":
        return Apps(app_floor.build_bare_app, app_floor.build_bare_table_app), {}
    raise ValueError(f"unknown variant {variant!r}")


class Bench:
    """The apps under test, one event loop and one prepared request per case.

    Without `sizes`, one app with the four city routes; with them, one route-table app per
    size, each with its four cases (routetable.case_key() names them).
    """

    def __init__(
        self, variant: str, apps: Apps, sizes: list[int] | None = None, stream: bool = False
    ) -> None:
        self.variant = variant
        # The reference variant's first answers, which ours must repeat byte for byte.
        same_as: dict[str, bytes] = {}
        if apps.reference is not None:
            reference = Bench(PYDANTIC, apps.reference, sizes, stream)
            same_as = reference.reference
            reference.close()
        groups: list[tuple[ASGIApp, dict[str, Case]]] = []
        # Every case of the mode, answered or not: the fingerprint covers them all, so that
        # a variant of fewer routes still proves it generated the same data.
        self.all_cases: dict[str, Case] = {}
        if stream:
            if apps.stream is None:
                raise Unavailable(f"{variant} has no streaming app")
            data = cities.make_dataset()
            with self._streaming():
                groups.append((apps.stream(data), streams.make_cases(data)))
        elif sizes is None:
            if apps.cities is None:
                raise ValueError(f"{variant} exists only with --routers")
            data = cities.make_dataset()
            city_cases = cities.make_cases(data)
            self.all_cases.update(city_cases)
            if apps.routes is not None:
                city_cases = {key: city_cases[key] for key in apps.routes}
            groups.append((apps.cities(data), city_cases))
        else:
            if apps.table is None:
                raise ValueError(f"{variant} has no route-table app")
            groups.extend((apps.table(size), routetable.make_cases(size)) for size in sizes)
        # One loop for the worker's life, as a server has; run_until_complete per batch.
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.lifespans: list[Lifespan] = []
        self.cases: dict[str, Case] = {}
        self.targets: dict[str, tuple[ASGIApp, dict[str, Any]]] = {}
        for app, cases in groups:
            lifespan = Lifespan(app)
            self.loop.run_until_complete(lifespan.startup())
            self.lifespans.append(lifespan)
            self.cases.update(cases)
            for key, case in cases.items():
                self.all_cases.setdefault(key, case)
            self.targets.update((key, (app, lifespan.state)) for key in cases)
        self.scopes = {
            key: http_scope(case.method, case.path, case.query, case.body)
            for key, case in self.cases.items()
        }
        # The exact bytes every later response must repeat, after a first full check.
        self.reference: dict[str, bytes] = {}
        for key, case in self.cases.items():
            if isinstance(case, streams.StreamCase):
                with self._streaming():
                    body = self._check_stream(key, case)
                if key in same_as and body != same_as[key]:
                    raise WrongAnswer(
                        self._describe_bytes(key, body, same_as[key], f"{PYDANTIC}'s")
                    )
                self.reference[key] = body
                continue
            response = self.loop.run_until_complete(self._one(key))
            expected = case.expected_body
            if response.status == 200 and variant not in BYTE_EXACT:
                same = msgspec.json.decode(response.body) == msgspec.json.decode(expected)
            else:
                same = response.body == expected
            if response.status != 200 or not same:
                raise WrongAnswer(self._describe(key, response, expected))
            if key in same_as and response.body != same_as[key]:
                raise WrongAnswer(
                    self._describe_bytes(key, response.body, same_as[key], f"{PYDANTIC}'s")
                )
            self.reference[key] = response.body

    def _check_stream(self, key: str, case: streams.StreamCase) -> bytes:
        """The first answer, parsed back into items: the framing may differ, not the items."""
        response = self.loop.run_until_complete(self._one(key))
        if response.status != 200 or not case.same_items(response.body):
            raise WrongAnswer(self._describe(key, response, case.expected_body))
        return response.body

    @contextlib.contextmanager
    def _streaming(self) -> Iterator[None]:
        """Our router's variants are skipped, not failed, while this msgspec_fastapi cannot
        stream (registration raises, or a request does or answers wrongly); --strict makes
        the driver fail on the skip."""
        try:
            yield
        except Exception as error:
            if self.variant not in ROUTER_VARIANTS:
                raise
            reason = f"{type(error).__name__}: {str(error)[:120]}"
            raise Unavailable(f"this msgspec_fastapi does not stream ({reason})") from error

    def fingerprint(self) -> str:
        # The driver checks that all workers generated the same requests and answers.
        digest = hashlib.sha256()
        for key, case in sorted(self.all_cases.items()):
            digest.update(key.encode() + case.query + case.body + case.expected_body)
        return digest.hexdigest()

    def _describe(self, key: str, response: Response, expected: bytes) -> str:
        return (
            f"{self.variant} answered {self.cases[key].label} wrongly: "
            f"status {response.status}, body {response.body[:PREVIEW]!r}; "
            f"expected status 200, body {expected[:PREVIEW]!r}"
        )

    def _describe_bytes(self, key: str, body: bytes, expected: bytes, whose: str) -> str:
        """Where an answer of the right value parts from the bytes it must repeat (a page of
        cities differs far beyond a preview of its start)."""
        at = next(
            (i for i, (a, b) in enumerate(zip(body, expected, strict=False)) if a != b),
            min(len(body), len(expected)),
        )
        start = max(0, at - PREVIEW // 2)
        return (
            f"{self.variant} answered {self.cases[key].label} with other bytes than {whose}"
            f" from byte {at} (of {len(body)}, expected {len(expected)}): from byte {start},"
            f" {body[start : start + PREVIEW]!r}; expected {expected[start : start + PREVIEW]!r}"
        )

    async def _one(self, key: str) -> Response:
        app, state = self.targets[key]
        return await call(app, self.scopes[key], self.cases[key].body, state)

    async def _batch(self, key: str, count: int) -> tuple[int, int]:
        """Wall and CPU nanoseconds for `count` requests."""
        (app, state), scope, body = self.targets[key], self.scopes[key], self.cases[key].body
        expected = self.reference[key]
        wall, cpu = time.perf_counter_ns(), time.process_time_ns()
        for _ in range(count):
            response = await call(app, scope, body, state)
            # Checked inside the timed loop: a bytes comparison, the same cost for everyone.
            if response.status != 200 or response.body != expected:
                raise WrongAnswer(self._describe(key, response, expected))
        return time.perf_counter_ns() - wall, time.process_time_ns() - cpu

    def run(self, key: str, count: int) -> tuple[int, int]:
        # Start each timed batch from a clean heap, so no batch pays for earlier garbage.
        gc.collect()
        return self.loop.run_until_complete(self._batch(key, count))

    def warm_up(self, key: str, seconds: float, target: float) -> tuple[int, float]:
        """Run for `seconds`, then size a batch to take about `target` seconds."""
        count, spent, per_request = 1, 0, 0.0
        while True:
            elapsed, _ = self.loop.run_until_complete(self._batch(key, count))
            spent += elapsed
            per_request = elapsed / count
            if spent >= seconds * 1e9 and elapsed >= min(target, 0.05) * 1e9:
                break
            if elapsed < 0.05e9:
                count *= 2
        return max(1, round(target * 1e9 / per_request)), per_request / 1000

    def close(self) -> None:
        for lifespan in self.lifespans:
            self.loop.run_until_complete(lifespan.shutdown())
        self.loop.close()


def serve(
    bench: Bench | deps.DepsBench, commands: TextIO, reply: Callable[[dict[str, Any]], None]
) -> None:
    for line in commands:
        command = json.loads(line)
        op = command["op"]
        if op == "warmup":
            count, micros = bench.warm_up(command["route"], command["seconds"], command["target"])
            reply({"count": count, "us": micros})
        elif op == "run":
            wall, cpu = bench.run(command["route"], command["count"])
            reply({"wall_ns": wall, "cpu_ns": cpu})
        elif op == "quit":
            bench.close()
            reply({"status": "bye"})
            return
        else:
            raise ValueError(f"unknown command {op!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("variant")
    parser.add_argument("--cpu", type=int, required=True)
    parser.add_argument("--routers", help="route-table sizes, comma-separated (else the cities)")
    parser.add_argument("--stream", action="store_true", help="the streaming routes (streams.py)")
    parser.add_argument("--deps", action="store_true", help="the dependency routes (deps.py)")
    args = parser.parse_args()

    # Before anything else, so every thread the process starts later inherits the pinning.
    os.sched_setaffinity(0, {args.cpu})
    # The protocol gets its own copy of stdout; fd 1 then points at stderr, so a stray print
    # from an app or a library cannot corrupt it.
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def reply(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")

    try:
        sizes = [int(size) for size in args.routers.split(",")] if args.routers else None
        bench: Bench | deps.DepsBench
        try:
            if args.deps:
                bench = deps.DepsBench(args.variant)
                info = bench.info
            else:
                apps, info = load(args.variant)
                bench = Bench(args.variant, apps, sizes, args.stream)
        except Unavailable as skip:
            reply({"status": "skipped", "reason": str(skip)})
            return 0
        gc.collect()
        # The in-memory dataset stands in for a database: keep it out of the collector's
        # full passes, where it would weigh differently on Structs and Pydantic models.
        gc.freeze()
        info.update(
            python=sys.version.split()[0],
            cpu=sorted(os.sched_getaffinity(0)),
            **versions(("fastapi", "starlette", "msgspec", "pydantic")),
        )
        ready = {"info": info, "fingerprint": bench.fingerprint(), "cases": list(bench.cases)}
        reply({"status": "ready", **ready})
        serve(bench, sys.stdin, reply)
    except Exception as exc:
        traceback.print_exc()
        reply({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
