"""One benchmark variant in its own process, driven by micro.py.

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
import importlib.metadata
import importlib.util
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import micro_cities
import msgspec
from micro_asgi import Lifespan, Response, WrongAnswer, call, http_scope

# Variants whose bytes must equal msgspec's own encoding. Pydantic formats JSON by itself,
# so for it the parsed values are compared instead.
BYTE_EXACT = {"compiled", "pure", "upstream", "litestar", "floor"}
PREVIEW = 300


class Skip(Exception):
    """The variant's package is not available here; reported, never faked."""


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _load_router_app(variant: str, peers: Path) -> tuple[Callable[..., Any], dict[str, Any]]:
    upstream_dir = (peers / "upstream").resolve()
    if variant == "upstream":
        if not (upstream_dir / "msgspec_fastapi" / "__init__.py").is_file():
            raise Skip(f"msgspec-fastapi is not installed in {upstream_dir}")
        # First on sys.path, so it wins over any msgspec_fastapi in the environment.
        sys.path.insert(0, str(upstream_dir))
    elif importlib.util.find_spec("msgspec_fastapi") is None:
        raise Skip("msgspec_fastapi is not installed in this environment")

    import msgspec_fastapi

    origin = Path(msgspec_fastapi.__file__ or "").resolve()
    implementation = getattr(msgspec_fastapi, "IMPLEMENTATION", None)
    if variant == "upstream":
        if not origin.is_relative_to(upstream_dir):
            raise RuntimeError(f"upstream variant imported {origin}, not from {upstream_dir}")
        if implementation is not None:
            raise RuntimeError(f"{origin} has IMPLEMENTATION, so it is not upstream")
    else:
        if implementation is None:
            raise Skip(f"{origin} is not this project's package (it has no IMPLEMENTATION)")
        if implementation != variant:
            wanted = "MSGSPEC_FASTAPI_PURE=1" if variant == "pure" else "no MSGSPEC_FASTAPI_PURE"
            raise RuntimeError(
                f"msgspec_fastapi.IMPLEMENTATION is {implementation!r} with {wanted}, "
                f"expected {variant!r} ({origin})"
            )

    import micro_app_router

    info = {
        "msgspec_fastapi": getattr(msgspec_fastapi, "__version__", None)
        or _version("msgspec-fastapi"),
        "module": str(origin),
        "implementation": implementation,
    }
    return micro_app_router.build_app, info


def load(variant: str, peers: Path) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The variant's build_app(dataset) and facts about what was imported."""
    if variant in ("compiled", "pure", "upstream"):
        return _load_router_app(variant, peers)
    if variant == "pydantic":
        import micro_app_pydantic

        return micro_app_pydantic.build_app, {}
    if variant == "litestar":
        if importlib.util.find_spec("litestar") is None:
            raise Skip("litestar is not installed in this environment")
        import micro_app_litestar

        return micro_app_litestar.build_app, {"litestar": _version("litestar")}
    if variant == "floor":
        import micro_app_floor

        return micro_app_floor.build_app, {}
    raise ValueError(f"unknown variant {variant!r}")


class Bench:
    """The app under test, its event loop and one prepared request per route."""

    def __init__(self, variant: str, build_app: Callable[..., Any]) -> None:
        self.variant = variant
        data = micro_cities.make_dataset()
        self.cases = micro_cities.make_cases(data)
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
    parser.add_argument("--peers", type=Path, required=True)
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
            build_app, info = load(args.variant, args.peers)
        except Skip as skip:
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
            **{name: _version(name) for name in ("fastapi", "starlette", "msgspec", "pydantic")},
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
