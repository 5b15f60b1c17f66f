"""The cost of a 422: the same failing requests to FastAPI with Pydantic and to our router,
with msgspec's errors (the default) and with `errors="fastapi"`, on both twins.

Cases, on the micro benchmark's city routes: a body of 100 cities (`list[City]`, the
validate route's upload) with one bad field, the same with every field of every city bad,
the valid body cut short by a byte (malformed JSON, found at its end), the body with one
bad field cut short (msgspec stops at the field, FastAPI at the end), a query parameter
that is not an int (`GET /cities?limit=abc`), and the valid body (the request the option
must not slow).
Variants: `compiled` and `pure` (msgspec's errors), `compiled-fastapi` and `pure-fastapi`
(`MsgspecRouter(errors="fastapi")`), `pydantic` (plain FastAPI with Pydantic models).

Before timing, every variant's answer to every case is checked: a `-fastapi` variant must
send the very bytes FastAPI with Pydantic sends, the twins of one setting the same bytes,
and msgspec's errors their documented shape (422 at the bad city, 400 for malformed JSON).

Timings: each variant in its own worker process, all pinned to one CPU, rounds in ABBA
order, medians of CPU time per request, ratios taken per round; the load average is
recorded before and after. Instruction counts (`--icount`, needs valgrind): each variant
and case in its own process under callgrind, as bench/icount.py counts, one batch of
requests after a warm-up; repeatable where the timings on a shared machine are not.

    python bench/errors.py                         # 20 rounds
    python bench/errors.py --icount --json bench/results/errors.json
    python bench/errors.py --rounds 0 --icount     # instruction counts only
    python bench/errors.py --rounds 2 --quick      # smoke run, timings meaningless
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

HERE = Path(__file__).resolve().parent
# variant -> (twin, errors=) for ours, (None, None) for FastAPI with Pydantic.
VARIANTS: dict[str, tuple[str | None, str | None]] = {
    "compiled": ("compiled", None),
    "pure": ("pure", None),
    "compiled-fastapi": ("compiled", "fastapi"),
    "pure-fastapi": ("pure", "fastapi"),
    "pydantic": (None, None),
}
BASE = "pydantic"
BAD_INDEX = 50
VALID = "valid"


@dataclass(frozen=True)
class Case:
    label: str
    method: str = "POST"
    path: str = "/cities/validate"
    query: bytes = b""
    # Requests per batch, as a share of --requests: the every-field body is some 40 times
    # dearer than the others.
    share: float = 1.0


CASES = {
    "one bad field": Case("100 cities, city 50's population a string"),
    "every field bad": Case("100 cities, every field of every city wrong", share=0.1),
    "malformed JSON": Case("100 valid cities, the body cut short by one byte"),
    "bad field, cut short": Case("one bad field, the body cut short by one byte"),
    "bad query": Case("GET /cities?limit=abc", "GET", "/cities", b"limit=abc"),
    VALID: Case("100 valid cities (200)"),
}
MALFORMED = ("malformed JSON", "bad field, cut short")


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
        "malformed JSON": msgspec.json.encode(upload)[:-1],
        "bad field, cut short": msgspec.json.encode(one)[:-1],
        "bad query": b"",
        VALID: msgspec.json.encode(upload),
    }


def build_app(variant: str) -> Any:
    """The variant's city app; call it before anything imports msgspec_fastapi."""
    from common import import_router_package
    from micro import cities

    twin, errors = VARIANTS[variant]
    if twin is None:
        from micro import app_pydantic

        return app_pydantic.build_app(cities.make_dataset())
    import_router_package(twin)
    from micro import app_router

    return app_router.build_app(cities.make_dataset(), errors=errors)


class Requests:
    """The cases' requests to one app, on a loop of its own."""

    def __init__(self, variant: str) -> None:
        from micro.asgi import http_scope

        self.app = build_app(variant)
        self.loop = asyncio.new_event_loop()
        self.bodies = bodies()
        self.scopes = {
            name: http_scope(case.method, case.path, case.query, self.bodies[name])
            for name, case in CASES.items()
        }

    def answers(self) -> dict[str, dict[str, Any]]:
        """Each case's status, digest of the body, number of errors and first error."""
        from micro.asgi import call

        found = {}
        for name in CASES:
            response = self.loop.run_until_complete(
                call(self.app, self.scopes[name], self.bodies[name], {})
            )
            detail = msgspec.json.decode(response.body).get("detail")
            found[name] = {
                "status": response.status,
                "sha256": hashlib.sha256(response.body).hexdigest(),
                "errors": len(detail) if isinstance(detail, list) else 1 if detail else 0,
                "first": detail[0] if isinstance(detail, list) else detail,
            }
        return found

    async def batch(self, name: str, count: int) -> None:
        from micro.asgi import call

        scope, body = self.scopes[name], self.bodies[name]
        for _ in range(count):
            await call(self.app, scope, body, {})


def worker(variant: str) -> None:
    """Print the answers, then answer `name count` lines with the CPU nanoseconds `count`
    requests took."""
    requests = Requests(variant)
    print(json.dumps(requests.answers()), flush=True)
    for line in sys.stdin:
        name, count = line.rsplit(" ", 1)
        gc.collect()
        start = time.process_time_ns()
        requests.loop.run_until_complete(requests.batch(name, int(count)))
        print(time.process_time_ns() - start, flush=True)


def icount_worker(variant: str, name: str, count: int, warmup: int, library: str) -> None:
    """Inside valgrind: warm up, then count one batch (bench/icount.py's helper)."""
    requests = Requests(variant)
    requests.loop.run_until_complete(requests.batch(name, warmup))
    helper = ctypes.CDLL(library)
    gc.collect()

    async def counted() -> None:
        helper.icount_start()
        await requests.batch(name, count)
        helper.icount_stop()

    requests.loop.run_until_complete(counted())


def check_answers(answers: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """What is wrong with the variants' answers (see the module docstring)."""
    problems = []

    def expect(ok: bool, variant: str, name: str, what: str) -> None:
        if not ok:
            found = answers[variant][name]
            problems.append(
                f"{variant}, {name}: {what}; got {found['status']} {found['first']!r:.300}"
            )

    for variant in answers:
        twin, errors = VARIANTS[variant]
        for name in CASES:
            got = answers[variant][name]
            base = answers[BASE][name]
            if name == VALID or errors == "fastapi":
                same = (got["status"], got["sha256"]) == (base["status"], base["sha256"])
                expect(same, variant, name, f"not FastAPI's answer ({base['status']})")
            elif twin is not None:
                status = 400 if name in MALFORMED else 422
                expect(got["status"] == status, variant, name, f"expected {status}")
            if twin == "pure":
                twin_answer = answers[variant.replace("pure", "compiled")][name]
                expect(got == twin_answer, variant, name, "the twins differ")
        first = answers[variant]["one bad field"]["first"]
        expect(first["loc"][:2] == ["body", BAD_INDEX], variant, "one bad field", "wrong loc")
    expect(answers[BASE][VALID]["status"] == 200, BASE, VALID, "expected 200")
    return problems


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    low, middle, high = statistics.quantiles(values, n=4)
    return low, middle, high


def time_variants(
    variants: list[str], rounds: int, requests: int, cpu: int
) -> tuple[dict[str, Any], dict[str, dict[str, dict[str, Any]]]]:
    """The answers, and per case the per-round µs per request and their summary."""
    workers: dict[str, subprocess.Popen[str]] = {}
    answers: dict[str, dict[str, dict[str, Any]]] = {}
    for variant in variants:
        command = [sys.executable, __file__, "--worker", variant, "--cpu", str(cpu)]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert process.stdout is not None
        answers[variant] = json.loads(process.stdout.readline())
        workers[variant] = process
    times: dict[str, dict[str, list[float]]] = {name: {} for name in CASES}
    try:
        for round_number in range(rounds):
            order = variants if round_number % 2 == 0 else variants[::-1]
            for name, case in CASES.items():
                count = max(1, int(requests * case.share))
                for variant in order:
                    process = workers[variant]
                    assert process.stdin is not None and process.stdout is not None
                    process.stdin.write(f"{name} {count}\n")
                    process.stdin.flush()
                    elapsed = int(process.stdout.readline()) / count / 1000
                    times[name].setdefault(variant, []).append(elapsed)
    finally:
        for process in workers.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait()
    results = {}
    for name, case in CASES.items():
        summary = {}
        for variant in variants if rounds else ():
            ours = times[name][variant]
            low, median, high = quartiles(ours)
            row = {"median_us": median, "iqr_percent": 100 * (high - low) / median}
            for key, base in (("vs_pydantic", BASE), ("vs_msgspec_errors", _default(variant))):
                if base in times[name] and base != variant:
                    ratios = [a / b for a, b in zip(ours, times[name][base], strict=True)]
                    row[key] = statistics.median(ratios)
            summary[variant] = row
        results[name] = {
            "label": case.label,
            "requests_per_batch": max(1, int(requests * case.share)),
            "summary": summary,
            "rounds_us": times[name],
        }
    return results, answers


def _default(variant: str) -> str:
    """The variant with msgspec's errors that a `-fastapi` variant is compared with."""
    return variant.removesuffix("-fastapi")


def count_instructions(
    variants: list[str], requests: int, warmup: int, jobs: int
) -> dict[str, dict[str, float]]:
    """Instructions per request of each variant and case, under callgrind."""
    from concurrent.futures import ThreadPoolExecutor

    from icount import build_helper, read_total

    if shutil.which("valgrind") is None:
        raise SystemExit("--icount needs valgrind (Debian: apt-get install valgrind)")
    folder = Path(tempfile.mkdtemp(prefix="errors-icount-"))
    library = build_helper(folder)
    plan = [(name, variant) for name in CASES for variant in variants]

    def one(name: str, variant: str) -> float:
        count = max(1, int(requests * CASES[name].share))
        out = folder / f"callgrind.{variant}.{name.replace(' ', '-')}"
        command = ["setarch", "-R"] if shutil.which("setarch") else []
        command += ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        command += [f"--callgrind-out-file={out}", sys.executable, __file__, "--icount-worker"]
        command += [variant, name, str(count), str(max(1, int(warmup * CASES[name].share)))]
        command += [str(library)]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{variant} {name} failed under valgrind:\n{result.stderr[-3000:]}")
        print(f"  counted {variant}, {name}", file=sys.stderr, flush=True)
        return read_total(out) / count

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {key: pool.submit(one, *key) for key in plan}
        counts: dict[str, dict[str, float]] = {}
        for (name, variant), future in futures.items():
            counts.setdefault(name, {})[variant] = future.result()
    shutil.rmtree(folder)
    return counts


def print_timings(results: dict[str, Any], answers: dict[str, Any], variants: list[str]) -> None:
    print("µs/req: median CPU time; iqr: of the rounds; vs x: median of per-round ratios")
    for name, data in results.items():
        print(f"\n{name}: {data['label']}")
        print(
            f"  {'variant':<17} {'status':>6} {'errors':>7} {'µs/req':>9} {'iqr':>6}"
            f" {'vs pydantic':>12} {'vs msgspec errors':>18}"
        )
        for variant in variants:
            row, answer = data["summary"][variant], answers[variant][name]
            cells = [
                f"{row[key]:.2f}x" if key in row else "-"
                for key in ("vs_pydantic", "vs_msgspec_errors")
            ]
            print(
                f"  {variant:<17} {answer['status']:>6} {answer['errors']:>7}"
                f" {row['median_us']:>9.1f} {row['iqr_percent']:>5.1f}% {cells[0]:>12}"
                f" {cells[1]:>18}"
            )


def print_counts(counts: dict[str, dict[str, float]], variants: list[str]) -> None:
    print("\ninstructions per request, counted by callgrind")
    print(f"  {'case':<16} " + " ".join(f"{v:>17}" for v in variants))
    for name, row in counts.items():
        print(f"  {name:<16} " + " ".join(f"{row[v]:>17,.0f}" for v in variants))
    print("\nratios of the counts")
    for name, row in counts.items():
        cells = [
            f"{variant}/{base} {row[variant] / row[base]:.3f}x"
            for variant in variants
            for base in (BASE, _default(variant))
            if base != variant and base in row and not (base == BASE and name == VALID)
        ]
        print(f"  {name:<16} " + ", ".join(cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds (0: none)")
    parser.add_argument("--requests", type=int, default=200, help="requests per timed batch")
    parser.add_argument("--cpu", type=int, default=1, help="the CPU every worker is pinned to")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--icount", action="store_true", help="count instructions (valgrind)")
    parser.add_argument("--icount-requests", type=int, default=100, help="counted per case")
    parser.add_argument("--jobs", type=int, default=1, help="valgrind processes at once")
    parser.add_argument("--quick", action="store_true", help="5 requests per batch")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--icount-worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.worker:
        os.sched_setaffinity(0, {args.cpu})
        worker(args.worker)
        return 0
    if args.icount_worker:
        variant, name, count, warmup, library = args.icount_worker
        icount_worker(variant, name, int(count), int(warmup), library)
        return 0
    variants = [variant for variant in args.variants.split(",") if variant]
    if set(variants) - set(VARIANTS) or BASE not in variants:
        parser.error(f"variants are some of {', '.join(VARIANTS)}, {BASE} among them")
    for variant in variants:
        if variant.startswith("pure") and variant.replace("pure", "compiled") not in variants:
            parser.error(f"{variant} is checked against its compiled twin: add that too")
    requests = 5 if args.quick else args.requests
    load_before = os.getloadavg()
    results, answers = time_variants(variants, args.rounds, requests, args.cpu)
    load_after = os.getloadavg()
    problems = check_answers(answers)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print(f"{len(variants)} variants' answers checked: the -fastapi ones send FastAPI's bytes")
    if args.rounds:
        print(f"\n{args.rounds} rounds on CPU {args.cpu}; load average before"
              f" {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)")  # fmt: skip
        print_timings(results, answers, variants)
    counts = None
    if args.icount:
        counts = count_instructions(variants, args.icount_requests, 20, args.jobs)
        print_counts(counts, variants)
    if args.json:
        from common import run_record, versions

        run = run_record(versions(["fastapi", "starlette", "pydantic", "msgspec"]))
        run["load_average"] = {"before": list(load_before), "after": list(load_after)}
        shown = {
            variant: {
                name: {"status": answer["status"], "errors": answer["errors"]}
                for name, answer in answers[variant].items()
            }
            for variant in variants
        }
        counted = {
            name: max(1, int(args.icount_requests * case.share)) for name, case in CASES.items()
        }
        document = {
            "benchmark": "errors",
            "run": run,
            "config": {
                "rounds": args.rounds,
                "requests": requests,
                "cpu": args.cpu,
                "quick": args.quick,
                "variants": variants,
            },
            "answers": shown,
            "timings": results if args.rounds else None,
            "icount": None if counts is None else {"requests": counted, "counts": counts},
        }
        args.json.write_text(json.dumps(document, indent=1) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
