"""Micro benchmark: µs per request of MsgspecRouter and its neighbours, called in-process.

Each variant runs in its own worker process (bench/micro/worker.py), all pinned to one CPU. The
workers build the same four routes, check their answers, warm up and size their batches;
then, round after round, each worker in turn times one batch per route. The variant order
is reversed every other round (ABBA), so slow drift of the machine cancels out of the ratios.

    python bench/micro.py                      # full run, a couple of minutes
    python bench/micro.py --quick              # smoke run for CI, timings meaningless
    python bench/micro.py --variants upstream,floor --routes validate,get --rounds 6
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from common import BENCH, ensure_upstream, log, versions

from .cities import ROUTE_KEYS, ROUTE_LABELS

VARIANTS = ("compiled", "pure", "upstream", "pydantic", "litestar", "floor")
# cpu: the worker process's CPU time, which other processes sharing the core do not inflate
# (much); wall: elapsed time, the same as CPU time on an otherwise idle core.
CLOCKS = ("cpu", "wall")
VERSIONED = ("fastapi", "starlette", "msgspec", "pydantic", "litestar")


class BenchError(Exception):
    """Stops the run: a wrong answer, a crashed worker or a broken setup."""


def _csv(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",") if name.strip()]
        unknown = sorted(set(names) - set(allowed))
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"choose from {','.join(allowed)}")
        # Keep the canonical order, so tables and ABBA order do not depend on typing order.
        return [name for name in allowed if name in names]

    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: tiny batches, 2 rounds, timings meaningless",
    )
    parser.add_argument("--rounds", type=int, help="timed rounds (default 24, 2 with --quick)")
    parser.add_argument(
        "--variants", type=_csv(VARIANTS), default=list(VARIANTS), help=",".join(VARIANTS)
    )
    parser.add_argument(
        "--routes", type=_csv(ROUTE_KEYS), default=list(ROUTE_KEYS), help=",".join(ROUTE_KEYS)
    )
    parser.add_argument("--cpu", type=int, help="CPU to pin every worker to (default: the last)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write all results here")
    parser.add_argument(
        "--batch-seconds", type=float, help="target time of one timed batch (default 0.1)"
    )
    parser.add_argument(
        "--warmup-seconds", type=float, help="warm-up per route and variant (default 0.5)"
    )
    parser.add_argument(
        "--clock", choices=CLOCKS, default="cpu", help="time the table is based on (default cpu)"
    )
    parser.add_argument(
        "--strict", action="store_true", help="fail instead of skipping a missing variant"
    )
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 2 if args.quick else 24
    if args.batch_seconds is None:
        # Short batches and many rounds: a burst from another process spoils few pairs, and
        # the median of the per-round ratios drops them.
        args.batch_seconds = 0.005 if args.quick else 0.1
    if args.warmup_seconds is None:
        args.warmup_seconds = 0.02 if args.quick else 0.5
    allowed = sorted(os.sched_getaffinity(0))
    if args.cpu is None:
        args.cpu = allowed[-1]
    if args.cpu not in allowed:
        parser.error(f"--cpu {args.cpu} is not one of the usable CPUs {allowed}")
    if args.rounds < 1 or args.batch_seconds <= 0 or args.warmup_seconds < 0:
        parser.error("--rounds must be at least 1 and the times positive")
    return args


@dataclass
class Worker:
    variant: str
    process: subprocess.Popen[str]
    info: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def start(cls, variant: str, cpu: int) -> "Worker":
        # The same string hashing in every worker and run, one less source of noise.
        env = dict(os.environ, PYTHONHASHSEED="0")
        # Run from bench/, so that the worker imports the package and common.py from there.
        command = [sys.executable, "-m", "micro.worker", variant, "--cpu", str(cpu)]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=BENCH
        )
        return cls(variant, process)

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise BenchError(f"worker {self.variant} exited (code {code}); see its stderr above")
        message: dict[str, Any] = json.loads(line)
        if message.get("status") == "error":
            raise BenchError(f"worker {self.variant} failed: {message['message']}")
        return message

    def ask(self, op: str, **fields: object) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.process.stdin.flush()
        return self.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                self.ask("quit")
                self.process.wait(timeout=10)
            except (BenchError, OSError, subprocess.TimeoutExpired):
                self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _iqr_percent(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    low, _, high = statistics.quantiles(values, n=4)
    return 100 * (high - low) / statistics.median(values)


def summarize(times: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, dict[str, Any]]]:
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for route, by_variant in times.items():
        summary[route] = {}
        for variant, values in by_variant.items():
            row: dict[str, Any] = {
                "median_us": statistics.median(values),
                "iqr_percent": _iqr_percent(values),
            }
            for base in ("upstream", "floor"):
                if base in by_variant:
                    # Ratios within each round first, so drift between rounds cancels out.
                    ratios = [v / b for v, b in zip(values, by_variant[base], strict=True)]
                    row[f"ratio_to_{base}"] = statistics.median(ratios)
                    row[f"round_ratios_to_{base}"] = ratios
            summary[route][variant] = row
    return summary


def print_table(
    out: TextIO,
    summary: dict[str, dict[str, dict[str, Any]]],
    args: argparse.Namespace,
    skipped: dict[str, str],
    meta: dict[str, Any],
) -> None:
    versions = ", ".join(f"{name} {meta[name]}" for name in VERSIONED if meta.get(name))
    print(
        f"micro benchmark: in-process ASGI, all variants pinned to CPU {args.cpu}, "
        f"{args.rounds} rounds, ~{args.batch_seconds:g} s per batch, {args.clock} time"
        + (" (--quick: timings are not meaningful)" if args.quick else ""),
        file=out,
    )
    print(f"python {meta['python']}, {versions}; {meta['cpu_model']}", file=out)
    print(
        "µs/req: median over rounds; iqr: interquartile range of the rounds, % of the median;"
        " vs x: median of the per-round time ratios to x, lower is faster",
        file=out,
    )
    for route, rows in summary.items():
        print(f"\n{ROUTE_LABELS[route]}", file=out)
        print(
            f"  {'variant':<10} {'µs/req':>9} {'iqr':>6} {'vs upstream':>12} {'vs floor':>9}",
            file=out,
        )
        for variant, row in rows.items():
            up = row.get("ratio_to_upstream")
            floor = row.get("ratio_to_floor")
            print(
                f"  {variant:<10} {row['median_us']:>9.1f} {row['iqr_percent']:>5.1f}%"
                f" {f'{up:.2f}x' if up is not None else '-':>12}"
                f" {f'{floor:.2f}x' if floor is not None else '-':>9}",
                file=out,
            )
    if skipped:
        print(file=out)
    for variant, reason in skipped.items():
        print(f"skipped {variant}: {reason}", file=out)


def start_workers(args: argparse.Namespace, skipped: dict[str, str]) -> list[Worker]:
    variants = list(args.variants)
    if "upstream" in variants and (reason := ensure_upstream()):
        skipped["upstream"] = reason
        variants.remove("upstream")
    log(f"starting {len(variants)} workers on CPU {args.cpu}: {', '.join(variants)}")
    # Started together: setup is not timed, and each worker then waits for its commands.
    pending = [Worker.start(variant, args.cpu) for variant in variants]
    ready: list[Worker] = []
    try:
        fingerprints = {}
        for worker in pending:
            message = worker.read()
            if message["status"] == "skipped":
                skipped[worker.variant] = message["reason"]
                worker.process.wait()
                log(f"  {worker.variant}: skipped, {message['reason']}")
                continue
            worker.info = message["info"]
            fingerprints[worker.variant] = message["fingerprint"]
            ready.append(worker)
            log(f"  {worker.variant}: ready, answers checked")
        if len(set(fingerprints.values())) > 1:
            raise BenchError(f"workers generated different data: {fingerprints}")
    except BaseException:
        for worker in pending:
            worker.kill()
        raise
    if args.strict and skipped:
        for worker in ready:
            worker.stop()
        raise BenchError(f"--strict and variants were skipped: {', '.join(skipped)}")
    return ready


def warm_up(workers: list[Worker], args: argparse.Namespace) -> None:
    # One worker at a time, so calibration never shares the CPU with another worker.
    for worker in workers:
        parts = []
        for route in args.routes:
            answer = worker.ask(
                "warmup", route=route, seconds=args.warmup_seconds, target=args.batch_seconds
            )
            worker.counts[route] = answer["count"]
            parts.append(f"{route} {answer['us']:.1f} µs x{answer['count']}")
        log(f"  warmed up {worker.variant}: {', '.join(parts)}")


def run_rounds(workers: list[Worker], args: argparse.Namespace) -> dict[str, Any]:
    """Per clock, route and variant: µs per request of each round, in round order."""
    times: dict[str, dict[str, dict[str, list[float]]]] = {
        clock: {route: {worker.variant: [] for worker in workers} for route in args.routes}
        for clock in CLOCKS
    }
    orders = []
    width = max(len(worker.variant) for worker in workers)
    for index in range(args.rounds):
        started = time.perf_counter()
        # ABBA: every other round runs the variants in reverse order.
        order = workers if index % 2 == 0 else workers[::-1]
        orders.append([worker.variant for worker in order])
        for route in args.routes:
            wall_total = cpu_total = 0
            for worker in order:
                count = worker.counts[route]
                answer = worker.ask("run", route=route, count=count)
                for clock in CLOCKS:
                    times[clock][route][worker.variant].append(answer[f"{clock}_ns"] / count / 1e3)
                wall_total += answer["wall_ns"]
                cpu_total += answer["cpu_ns"]
            line = "  ".join(
                f"{worker.variant:>{width}} {times[args.clock][route][worker.variant][-1]:8.1f}"
                for worker in workers
            )
            # Wall time well above CPU time means another process took turns on the CPU.
            shared = 100 * (wall_total / max(cpu_total, 1) - 1)
            note = f"  (wall {shared:+.0f}% over CPU: CPU shared)" if shared > 5 else ""
            log(f"round {index + 1:>2}/{args.rounds} {route:<8} µs/req: {line}{note}")
        log(f"round {index + 1:>2}/{args.rounds} took {time.perf_counter() - started:.1f} s")
    return {"times": times, "orders": orders}


def write_json(
    args: argparse.Namespace,
    meta: dict[str, Any],
    summary: dict[str, dict[str, dict[str, Any]]],
    rounds: dict[str, Any],
    workers: list[Worker],
    skipped: dict[str, str],
) -> None:
    config = {
        name: getattr(args, name)
        for name in ("rounds", "batch_seconds", "warmup_seconds", "quick", "clock", "cpu")
    }
    variants: dict[str, Any] = {
        worker.variant: {"status": "ok", "info": worker.info, "batch": worker.counts}
        for worker in workers
    }
    variants.update(
        {name: {"status": "skipped", "reason": reason} for name, reason in skipped.items()}
    )
    routes = {
        route: {
            "label": ROUTE_LABELS[route],
            "summary": rows,
            "rounds_us": {clock: rounds["times"][clock][route] for clock in CLOCKS},
        }
        for route, rows in summary.items()
    }
    result = {
        "meta": meta,
        "config": config,
        "variants": variants,
        "round_orders": rounds["orders"],
        "routes": routes,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    log(f"results written to {args.json}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    # Keep the driver off the benchmark CPU when another one is free; it mostly sleeps anyway.
    others = set(os.sched_getaffinity(0)) - {args.cpu}
    if others:
        os.sched_setaffinity(0, others)
    skipped: dict[str, str] = {}
    workers: list[Worker] = []
    try:
        workers = start_workers(args, skipped)
        if not workers:
            raise BenchError("no variant could run")
        warm_up(workers, args)
        rounds = run_rounds(workers, args)
    except BenchError as error:
        log(f"error: {error}")
        return 1
    finally:
        for worker in workers:
            worker.stop()

    summary = summarize(rounds["times"][args.clock])
    meta: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu": args.cpu,
        "cpu_count": os.cpu_count(),
        **versions(VERSIONED),
    }
    log(f"done in {time.perf_counter() - started:.0f} s")
    print_table(sys.stdout, summary, args, skipped, meta)
    if args.json:
        write_json(args, meta, summary, rounds, workers, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
