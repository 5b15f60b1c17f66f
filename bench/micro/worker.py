"""One benchmark variant in its own process, driven by driver.py (`python -m micro.worker`).

Protocol: one JSON object per line. The worker first writes {"status": "ready", ...},
{"status": "skipped", "reason": ...} or {"status": "error", "message": ...}; then it answers
each command read from stdin ("warmup", "run", "quit") with one line.

Nothing at the top imports FastAPI or an app: which `msgspec_fastapi` (if any) gets imported
depends on the variant, so load() settles sys.path before the first app import.
"""

import argparse
import asyncio
import gc
import hashlib
import importlib.util
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

import msgspec
from common import ROUTER_VARIANTS, Unavailable, import_router_package, version, versions

from . import cities
from .asgi import Lifespan, Response, WrongAnswer, call, http_scope

# Variants whose bytes must equal msgspec's own encoding. Pydantic formats JSON by itself,
# so for it the parsed values are compared instead.
BYTE_EXACT = {"compiled", "pure", "upstream", "litestar", "floor"}
PREVIEW = 300


def load(variant: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The variant's build_app(dataset) and facts about what was imported."""
    if variant in ROUTER_VARIANTS:
        _, package = import_router_package(variant)
        from . import app_router

        return app_router.build_app, {"msgspec_fastapi": package}
    if variant == "pydantic":
        from . import app_pydantic

        return app_pydantic.build_app, {}
    if variant == "litestar":
        if importlib.util.find_spec("litestar") is None:
            raise Unavailable("litestar is not installed in this environment")
        from . import app_litestar

        return app_litestar.build_app, {"litestar": version("litestar")}
    if variant == "floor":
        from . import app_floor

        return app_floor.build_app, {}
    raise ValueError(f"unknown variant {variant!r}")


class Bench:
    """The app under test, its event loop and one prepared request per route."""

    def __init__(self, variant: str, build_app: Callable[..., Any]) -> None:
        self.variant = variant
        data = cities.make_dataset()
        self.cases = cities.make_cases(data)
        self.app = build_app(data)
        # One loop for the worker's life, as a server has; run_until_complete per batch.
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.lifespan = Lifespan(self.app)
        self.loop.run_until_complete(self.lifespan.startup())
        self.scopes = {
            key: http_scope(case.method, case.path, case.query, case.body)
            for key, case in self.cases.items()
        }
        # The exact bytes every later response must repeat, after a first full check.
        self.reference: dict[str, bytes] = {}
        for key, case in self.cases.items():
            response = self.loop.run_until_complete(self._one(key))
            expected = case.expected_body
            if response.status == 200 and variant not in BYTE_EXACT:
                same = msgspec.json.decode(response.body) == msgspec.json.decode(expected)
            else:
                same = response.body == expected
            if response.status != 200 or not same:
                raise WrongAnswer(self._describe(key, response, expected))
            self.reference[key] = response.body

    def fingerprint(self) -> str:
        # The driver checks that all workers generated the same requests and answers.
        digest = hashlib.sha256()
        for key, case in sorted(self.cases.items()):
            digest.update(key.encode() + case.query + case.body + case.expected_body)
        return digest.hexdigest()

    def _describe(self, key: str, response: Response, expected: bytes) -> str:
        return (
            f"{self.variant} answered {self.cases[key].label} wrongly: "
            f"status {response.status}, body {response.body[:PREVIEW]!r}; "
            f"expected status 200, body {expected[:PREVIEW]!r}"
        )

    async def _one(self, key: str) -> Response:
        return await call(self.app, self.scopes[key], self.cases[key].body, self.lifespan.state)

    async def _batch(self, key: str, count: int) -> tuple[int, int]:
        """Wall and CPU nanoseconds for `count` requests."""
        app, scope, body = self.app, self.scopes[key], self.cases[key].body
        state, expected = self.lifespan.state, self.reference[key]
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
        self.loop.run_until_complete(self.lifespan.shutdown())
        self.loop.close()


def serve(bench: Bench, commands: TextIO, reply: Callable[[dict[str, Any]], None]) -> None:
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
        try:
            build_app, info = load(args.variant)
        except Unavailable as skip:
            reply({"status": "skipped", "reason": str(skip)})
            return 0
        bench = Bench(args.variant, build_app)
        gc.collect()
        # The in-memory dataset stands in for a database: keep it out of the collector's
        # full passes, where it would weigh differently on Structs and Pydantic models.
        gc.freeze()
        info.update(
            python=sys.version.split()[0],
            cpu=sorted(os.sched_getaffinity(0)),
            **versions(("fastapi", "starlette", "msgspec", "pydantic")),
        )
        reply({"status": "ready", "info": info, "fingerprint": bench.fingerprint()})
        serve(bench, sys.stdin, reply)
    except Exception as exc:
        traceback.print_exc()
        reply({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
