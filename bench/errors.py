"""The cost of a 422: µs per rejected request on the micro benchmark's validate route.

Two bodies of 100 cities (the validate route's upload): one with a single bad field, one
with every field of every city bad. Variants: compiled, pure (our router) and FastAPI with
Pydantic models; each runs in its own worker process, all pinned to one CPU, rounds in ABBA
order, medians of CPU time per request, ratios taken per round.

    python bench/errors.py                     # 30 rounds
    python bench/errors.py --rounds 6 --quick  # smoke run, timings meaningless
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

HERE = Path(__file__).resolve().parent
VARIANTS = ("compiled", "pure", "pydantic")
BODIES = ("one bad field", "every field bad")
# Requests per batch, as a share of --requests: the second body is some 40 times dearer.
BATCH_SHARE = {"one bad field": 1.0, "every field bad": 0.1}
BAD_INDEX = 50


def bodies() -> dict[str, bytes]:
    from micro import cities

    data = cities.make_dataset()
    upload = msgspec.to_builtins(data.cities[2000 : 2000 + cities.PAGE_SIZE])
    one = [dict(city) for city in upload]
    one[BAD_INDEX]["population"] = "many"
    wrong = {str: 1, int: "x", float: "x", list: "x"}
    every = [
        {key: wrong.get(type(value), 1) if value is not None else 1 for key, value in city.items()}
        for city in upload
    ]
    return {
        "one bad field": msgspec.json.encode(one),
        "every field bad": msgspec.json.encode(every),
    }


def worker(variant: str, quick: bool) -> None:
    """Answer `name count` lines with the CPU nanoseconds `count` requests took."""
    from common import import_router_package
    from micro import cities
    from micro.asgi import call, http_scope

    if variant == "pydantic":
        from micro import app_pydantic as module
    else:
        import_router_package(variant)
        from micro import app_router as module
    app = module.build_app(cities.make_dataset())
    loop = asyncio.new_event_loop()
    cases = bodies()
    scopes = {name: http_scope("POST", "/cities/validate", b"", raw) for name, raw in cases.items()}
    counts: dict[str, int] = {}
    for name, raw in cases.items():
        response = loop.run_until_complete(call(app, scopes[name], raw, {}))
        detail = msgspec.json.decode(response.body)["detail"]
        if response.status != 422 or detail[0]["loc"][:2] != [
            "body",
            0 if name != BODIES[0] else BAD_INDEX,
        ]:
            raise SystemExit(f"{variant}: wrong answer to {name}: {response.status} {detail[:1]}")
        counts[name] = len(detail)
    print(json.dumps(counts), flush=True)
    for line in sys.stdin:
        name, count = line.rsplit(" ", 1)
        scope, raw = scopes[name], cases[name]

        async def batch(
            n: int = int(count), scope: dict[str, Any] = scope, raw: bytes = raw
        ) -> None:
            for _ in range(n):
                await call(app, scope, raw, {})

        gc.collect()
        start = time.process_time_ns()
        loop.run_until_complete(batch())
        print(time.process_time_ns() - start, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--requests", type=int, default=200, help="requests per batch")
    parser.add_argument("--cpu", type=int, default=1, help="the CPU every worker is pinned to")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.worker:
        os.sched_setaffinity(0, {args.cpu})
        worker(args.worker, args.quick)
        return 0
    requests = 5 if args.quick else args.requests
    workers: dict[str, subprocess.Popen[str]] = {}
    errors: dict[str, dict[str, int]] = {}
    for variant in VARIANTS:
        env = {**os.environ, "MSGSPEC_FASTAPI_PURE": "1" if variant == "pure" else "0"}
        command = [sys.executable, __file__, "--worker", variant, "--cpu", str(args.cpu)]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        assert process.stdout is not None
        errors[variant] = json.loads(process.stdout.readline())
        workers[variant] = process
    times: dict[tuple[str, str], list[float]] = {}
    for round_number in range(args.rounds):
        order = VARIANTS if round_number % 2 == 0 else VARIANTS[::-1]
        for name in BODIES:
            count = max(1, int(requests * BATCH_SHARE[name]))
            for variant in order:
                process = workers[variant]
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write(f"{name} {count}\n")
                process.stdin.flush()
                elapsed = int(process.stdout.readline()) / count / 1000
                times.setdefault((variant, name), []).append(elapsed)
    for process in workers.values():
        assert process.stdin is not None
        process.stdin.close()
        process.wait()
    print(f"422 on POST /cities/validate (100 cities), {args.rounds} rounds, CPU {args.cpu}")
    print("µs/req: median CPU time; vs pydantic: median of per-round ratios")
    for name in BODIES:
        print(f"\n{name}")
        print(f"  {'variant':<10} {'errors':>7} {'µs/req':>9} {'vs pydantic':>12}")
        for variant in VARIANTS:
            ours, theirs = times[(variant, name)], times[("pydantic", name)]
            ratio = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
            print(
                f"  {variant:<10} {errors[variant][name]:>7} {statistics.median(ours):>9.1f}"
                f" {ratio:>11.2f}x"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
