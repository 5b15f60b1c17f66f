"""Micro benchmark: µs per request of MsgspecRouter and its neighbours, called in-process.

Each variant runs in its own worker process (bench/micro/worker.py), all pinned to one CPU.
The workers build the same apps, check their answers, warm up and size their batches;
then, round after round, each worker in turn times one batch per route. The variant order
is reversed every other round (ABBA), so slow drift of the machine cancels out of the ratios.

Two modes. By default, four city routes in one router: validate, list, search, get, for
our twins, upstream, FastAPI with Pydantic, Litestar, BlackSheep, the floor (hand-written
endpoints on the FastAPI app) and bare (the same endpoints behind a dict lookup in a bare
ASGI app, the physical limit); pydantic-compiled and pydantic-pure, FastAPI with Pydantic's
models and endpoints on MsgspecRouter + install_dispatch, on each twin (their answers
checked against FastAPI's own bytes), whose targets the summary judges
(pydantic_report.py); and, on get only, compiled-mw and pydantic-mw, the same apps with one
user middleware that only calls the next app.
With --routers 1,30,300, the route table: apps of N routers (/r0 .. /r{N-1}, each with
GET /items/{item_id} and POST /items; pydantic, pydantic-compiled and pydantic-pure with a
four-field Pydantic model), requests to the first and to the last router, and
two more references besides the included-router floor: app-floor (the same endpoints as
routes of the app itself) and bare (the same endpoints behind a dict lookup in a bare ASGI
app). --routes then picks among get-first, get-last, post-first, post-last. The MsgspecRouter
variants call msgspec_fastapi.install_dispatch(app) after including the routers, where
this package has it (never upstream); the header says whether it was installed. Two more
variants, compiled-loop and pure-loop, are our twins without install_dispatch: FastAPI's
loop over the routers (routetable.LOOP_VARIANTS).

With --deps, routes whose work is dependencies (bench/micro/deps.py): two dependencies
(a yield session and the current user from the Authorization header) on a GET and a POST,
and six three deep on a GET, each also with an unrelated dependency override set; for
compiled, pure, upstream, pydantic, litestar (Provide), blacksheep (the two-dependency
routes only), floor (the same dependencies called by hand in a raw ASGI route on the
FastAPI app) and bare (the same in a bare ASGI app). The table shows each route with and
without the override, then the ratios to the peers and floors, then the target ratios.

With --stream, streaming routes instead: GET /stream/jsonl and GET /stream/sse, each
answering 1,000 cities from a generator (bench/micro/streams.py), for compiled, pure,
pydantic (FastAPI's own streaming), pydantic-compiled and pydantic-pure (the same Pydantic
endpoints on MsgspecRouter, whose streams must be FastAPI's byte for byte) and litestar;
the table adds items per second. Our variants are skipped, with the reason, while this
msgspec_fastapi cannot stream.

    python bench/micro.py                      # full run, a couple of minutes
    python bench/micro.py --quick              # smoke run of both modes for CI
    python bench/micro.py --variants upstream,floor --routes validate,get --rounds 6
    python bench/micro.py --routers 1,30,300 --rounds 10 --plot bench/results/routers.png
    python bench/micro.py --variants compiled,pydantic,pydantic-compiled,pydantic-pure \
        --routes validate,get       # Pydantic routes on MsgspecRouter, with their targets
    python bench/micro.py --formats            # JSON against MessagePack (micro/formats.py)
    python bench/micro.py --models             # query, form and dependency models (micro/models.py)
    python bench/micro.py --stream --quick     # smoke run of the streaming mode
    python bench/micro.py --deps               # dependencies (micro/deps.py)
    python bench/micro.py --deps --quick --strict   # its smoke run: every variant answers
    python bench/micro.py --deps --server      # behind uvicorn and Granian (micro/server.py)
    python bench/micro.py --deps --server --server-kind granian   # behind Granian only
    python bench/micro.py --deps --server --quick --strict   # its smoke run
"""

import argparse
import importlib.util
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

from common import BENCH, cpu_model, ensure_upstream, load_text, log, run_record, versions

from . import (
    cities,
    deps,
    deps_report,
    formats,
    models,
    pydantic_report,
    routetable,
    routetable_report,
    server,
    streams,
)
from .worker import MIDDLEWARE_VARIANTS, PYDANTIC_ROUTER_VARIANTS

# The city routes' variants: the peers, the floor and the bare ASGI app (the physical
# limit), and two with one user middleware on the GET of one city (MIDDLEWARE_VARIANTS).
VARIANTS = (
    "compiled",
    "pure",
    "upstream",
    "pydantic",
    *PYDANTIC_ROUTER_VARIANTS,
    "litestar",
    "blacksheep",
    "floor",
    "bare",
    *MIDDLEWARE_VARIANTS,
)
# The variants with streaming routes (--stream); the first is the base of the ratios.
STREAM_VARIANTS = ("compiled", "pure", "pydantic", "pydantic-compiled", "pydantic-pure", "litestar")
STREAM_BASE = "pydantic"
# The route table's references besides the floor; they have no city routes.
TABLE_VARIANTS = (
    "compiled",
    "pure",
    "upstream",
    "pydantic",
    *PYDANTIC_ROUTER_VARIANTS,
    "litestar",
    "floor",
    *routetable.LOOP_VARIANTS,
    "app-floor",
    "bare",
)
ALL_VARIANTS = (*VARIANTS, *(name for name in TABLE_VARIANTS if name not in VARIANTS))
# The city table's ratio columns.
CITY_BASES = ("upstream", "floor", "bare", "blacksheep")
# --quick without --routers smoke-tests the route table at these sizes too.
QUICK_SIZES = (1, 30)
# cpu: the worker process's CPU time, which other processes sharing the core do not inflate
# (much); wall: elapsed time, the same as CPU time on an otherwise idle core.
CLOCKS = ("cpu", "wall")
VERSIONED = ("fastapi", "starlette", "msgspec", "pydantic", "litestar", "blacksheep")


class BenchError(Exception):
    """Stops the run: a wrong answer, a crashed worker or a broken setup."""


@dataclass(frozen=True)
class Mode:
    """What one set of workers measures: the city routes (sizes None) or a route table."""

    variants: list[str]
    routes: list[str]
    sizes: list[int] | None = None
    stream: bool = False
    deps: bool = False

    @property
    def cases(self) -> list[str]:
        if self.sizes is None:
            return self.routes
        return [routetable.case_key(n, route) for n in self.sizes for route in self.routes]

    def label(self, case: str) -> str:
        if self.stream:
            return streams.ROUTE_LABELS[case]
        if self.deps:
            return deps.CASE_LABELS[case]
        if self.sizes is None:
            return cities.ROUTE_LABELS[case]
        route, size = case.split("@")
        return routetable.route_label(int(size), route)

    @property
    def bases(self) -> tuple[str, ...]:
        """The variants whose per-round ratios go into the summary."""
        if self.stream:
            return (STREAM_BASE,)
        if self.deps:
            return deps_report.BASES
        if self.sizes is None:
            return CITY_BASES
        return ("upstream", "floor", "app-floor", "bare")


def _csv(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",") if name.strip()]
        unknown = sorted(set(names) - set(allowed))
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"choose from {','.join(allowed)}")
        # Keep the canonical order, so tables and ABBA order do not depend on typing order.
        return [name for name in allowed if name in names]

    return parse


def parse_sizes(text: str) -> list[int]:
    """Router counts from `1,30,300`, sorted, each once."""
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        sizes = []
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("give router counts of 1 or more, e.g. 1,30,300")
    return sizes


def _stream_mode(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Mode:
    if args.routers is not None:
        parser.error("--stream and --routers are separate modes")
    chosen = args.variants or list(STREAM_VARIANTS)
    if unknown := sorted(set(chosen) - set(STREAM_VARIANTS)):
        has = ",".join(STREAM_VARIANTS)
        parser.error(f"{','.join(unknown)}: no streaming routes (--stream has {has})")
    routes = _csv(streams.ROUTE_KEYS)(args.routes) if args.routes else streams.ROUTE_KEYS
    return Mode(chosen, list(routes), stream=True)


def _deps_mode(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Mode:
    if args.routers is not None or args.stream:
        parser.error("--deps, --stream and --routers are separate modes")
    chosen = args.variants or list(deps.DEPS_VARIANTS)
    if unknown := sorted(set(chosen) - set(deps.DEPS_VARIANTS)):
        has = ",".join(deps.DEPS_VARIANTS)
        parser.error(f"{','.join(unknown)}: no dependency routes (--deps has {has})")
    routes = _csv(deps.CASE_KEYS)(args.routes) if args.routes else deps.CASE_KEYS
    return Mode(chosen, list(routes), deps=True)


def _modes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Mode]:
    if args.deps:
        return [_deps_mode(parser, args)]
    if args.stream:
        return [_stream_mode(parser, args)]
    chosen = args.variants or list(ALL_VARIANTS)
    modes = []
    if args.routers is None:
        only_table = sorted(set(chosen) - set(VARIANTS))
        if args.variants and only_table and not args.quick:
            parser.error(f"{','.join(only_table)}: only with --routers")
        routes = _csv(cities.ROUTE_KEYS)(args.routes) if args.routes else cities.ROUTE_KEYS
        city_variants = [name for name in chosen if name in VARIANTS]
        if city_variants:
            modes.append(Mode(city_variants, list(routes)))
    if args.routers is not None or args.quick:
        only_cities = sorted(set(chosen) - set(TABLE_VARIANTS))
        if args.variants and only_cities and args.routers is not None:
            parser.error(f"{','.join(only_cities)}: no route-table app (not with --routers)")
        table_routes = routetable.ROUTE_KEYS
        if args.routes and args.routers is not None:
            table_routes = _csv(routetable.ROUTE_KEYS)(args.routes)
        table_variants = [name for name in chosen if name in TABLE_VARIANTS]
        if table_variants:
            sizes = args.routers or list(QUICK_SIZES)
            modes.append(Mode(table_variants, list(table_routes), sizes))
    return modes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: tiny batches, 2 rounds, timings meaningless; without --routers, the"
        f" city routes and then the route table with {','.join(map(str, QUICK_SIZES))} routers",
    )
    parser.add_argument("--rounds", type=int, help="timed rounds (default 24, 2 with --quick)")
    parser.add_argument(
        "--routers",
        type=parse_sizes,
        metavar="N,N,...",
        help="the route-table mode: apps of this many routers each (e.g. 1,30,300)",
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help=f"the streaming mode: {', '.join(streams.ROUTE_LABELS.values())}; items per second",
    )
    parser.add_argument(
        "--deps",
        action="store_true",
        help="the dependency mode: two dependencies (GET, POST) and six (GET), each also"
        " with an unrelated override set; with Litestar, the floor and a bare ASGI app",
    )
    parser.add_argument(
        "--server",
        action="store_true",
        help="with --deps: each variant's app behind uvicorn and Granian pinned to --cpu"
        " (default the first CPU), loaded by wrk pinned to --client-cpu; requests/s and CPU"
        " time per response (micro/server.py)",
    )
    parser.add_argument(
        "--server-kind",
        default=",".join(server.SERVER_KINDS),
        metavar="KIND[,KIND]",
        help=f"--server: the servers, {' or '.join(server.SERVER_KINDS)} or both, comma-separated"
        " (default both, measured in the same rounds)",
    )
    parser.add_argument(
        "--duration", type=int, help="--server: seconds wrk loads each route per round (5)"
    )
    parser.add_argument(
        "--connections", type=int, default=20, help="--server: wrk's connections (default 20)"
    )
    parser.add_argument("--client-cpu", type=int, help="--server: wrk's CPU (default the other)")
    parser.add_argument(
        "--variants",
        type=_csv(ALL_VARIANTS),
        help=f"{','.join(VARIANTS)}; with --routers"
        f" {','.join(TABLE_VARIANTS)}; with --deps {','.join(deps.DEPS_VARIANTS)}"
        " (default: all)",
    )
    parser.add_argument(
        "--routes",
        help=f"{','.join(cities.ROUTE_KEYS)}; with --routers"
        f" {','.join(routetable.ROUTE_KEYS)}; with --deps {','.join(deps.CASE_KEYS)};"
        f" with --deps --server {','.join(server.ROUTE_KEYS)} (default: all; --server:"
        f" {','.join(server.DEFAULT_ROUTES)})",
    )
    parser.add_argument(
        "--models",
        action="store_true",
        help="a GET with a 5-field query model, a POST of a 5-field form model and of a JSON"
        " body a dependency takes: compiled, pure, FastAPI's Pydantic models",
    )
    parser.add_argument(
        "--formats",
        action="store_true",
        help="JSON against MessagePack on the validate and list routes, compiled and pure",
    )
    parser.add_argument(
        "--cpu",
        type=int,
        help="CPU to pin every worker to (default: the last); --server: the servers' CPU"
        " (default: the first)",
    )
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
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="FILE",
        help="route-table mode: draw µs/req against routers into FILE (needs matplotlib:"
        " pip install -r bench/requirements-plot.txt)",
    )
    args = parser.parse_args(argv)
    if args.server:
        server.settle(parser, args)
        return args
    try:
        args.modes = _modes(parser, args)
    except argparse.ArgumentTypeError as error:
        parser.error(f"--routes: {error}")
    if not args.modes:
        parser.error("no variant to measure")
    if args.plot and not any(mode.sizes for mode in args.modes):
        parser.error("--plot needs the route-table mode (--routers)")
    # Checked before the run, not after minutes of it.
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib: pip install -r bench/requirements-plot.txt")
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
    # The cases this variant answers (Litestar has no override cases in --deps).
    cases: set[str] = field(default_factory=set)

    @classmethod
    def start(
        cls,
        variant: str,
        cpu: int,
        sizes: list[int] | None,
        stream: bool = False,
        deps: bool = False,
    ) -> "Worker":
        # The same string hashing in every worker and run, one less source of noise.
        env = dict(os.environ, PYTHONHASHSEED="0")
        # Run from bench/, so that the worker imports the package and common.py from there.
        command = [sys.executable, "-m", "micro.worker", variant, "--cpu", str(cpu)]
        if sizes is not None:
            command += ["--routers", ",".join(map(str, sizes))]
        if stream:
            command.append("--stream")
        if deps:
            command.append("--deps")
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


def _iqr_percent(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    low, _, high = statistics.quantiles(values, n=4)
    return 100 * (high - low) / statistics.median(values)


def _quartiles(values: list[float]) -> list[float]:
    if len(values) < 2:
        return [values[0], values[0]]
    low, _, high = statistics.quantiles(values, n=4)
    return [low, high]


def summarize(
    times: dict[str, dict[str, list[float]]], bases: tuple[str, ...]
) -> dict[str, dict[str, dict[str, Any]]]:
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for route, by_variant in times.items():
        summary[route] = {}
        for variant, values in by_variant.items():
            row: dict[str, Any] = {
                "median_us": statistics.median(values),
                "iqr_percent": _iqr_percent(values),
            }
            for base in bases:
                if base in by_variant:
                    # Ratios within each round first, so drift between rounds cancels out.
                    ratios = [v / b for v, b in zip(values, by_variant[base], strict=True)]
                    row[f"ratio_to_{base}"] = statistics.median(ratios)
                    row[f"round_ratios_to_{base}"] = ratios
            summary[route][variant] = row
    return summary


def print_header(out: TextIO, args: argparse.Namespace, meta: dict[str, Any]) -> None:
    versions = ", ".join(f"{name} {meta[name]}" for name in VERSIONED if meta.get(name))
    print(
        f"micro benchmark: in-process ASGI, all variants pinned to CPU {args.cpu}, "
        f"{args.rounds} rounds, ~{args.batch_seconds:g} s per batch, {args.clock} time"
        + (" (--quick: timings are not meaningful)" if args.quick else ""),
        file=out,
    )
    print(f"python {meta['python']}, {versions}; {meta['cpu_model']}", file=out)


def route_index_note(workers: list[Worker]) -> str:
    """Whether our variants ran with the compiled route index (install_dispatch)."""
    ours = [w for w in workers if w.variant in ("compiled", "pure", *PYDANTIC_ROUTER_VARIANTS)]
    with_index = [w.variant for w in ours if w.info.get("route_index")]
    loop = [w.variant for w in workers if w.variant in routetable.LOOP_VARIANTS]
    without = f"; not in {', '.join(loop)} (FastAPI's loop)" if loop else ""
    if with_index:
        installed = ", ".join(with_index)
        return f"route index (msgspec_fastapi.install_dispatch): installed in {installed}{without}"
    if ours:
        return "route index: not installed (this msgspec_fastapi has no install_dispatch)"
    return f"route index: not installed{without}" if loop else "route index: no variant of ours ran"


def print_table(
    out: TextIO,
    summary: dict[str, dict[str, dict[str, Any]]],
    mode: Mode,
    skipped: dict[str, str],
    times: dict[str, dict[str, list[float]]],
) -> None:
    print(
        "µs/req: median over rounds; iqr: interquartile range of the rounds, % of the median;"
        " vs x: median of the per-round time ratios to x, lower is faster",
        file=out,
    )
    columns = "".join(f"{f'vs {base}':>14}" for base in CITY_BASES)
    width = max(11, *(len(variant) for rows in summary.values() for variant in rows))
    for route, rows in summary.items():
        print(f"\n{mode.label(route)}", file=out)
        print(f"  {'variant':<{width}} {'µs/req':>9} {'iqr':>6}{columns}", file=out)
        for variant, row in rows.items():
            cells = "".join(
                f"{f'{ratio:.2f}x' if (ratio := row.get(f'ratio_to_{base}')) else '-':>14}"
                for base in CITY_BASES
            )
            print(
                f"  {variant:<{width}} {row['median_us']:>9.1f} {row['iqr_percent']:>5.1f}%"
                + cells,
                file=out,
            )
    found = middleware_ratios(times)
    if found:
        print(
            "\none user middleware (@app.middleware('http') calling the next app), GET"
            " /cities/{id}: median of the per-round ratios [quartiles]",
            file=out,
        )
        width = max(len(name) for name, _ in found)
        for name, ratios in found:
            low, high = _quartiles(ratios)
            print(
                f"  {name:<{width}}  {statistics.median(ratios):.2f}x [{low:.2f}, {high:.2f}]",
                file=out,
            )
    print_skipped(out, skipped)


def middleware_ratios(times: dict[str, dict[str, list[float]]]) -> list[tuple[str, list[float]]]:
    """The middleware variants against the same app without it, and ours against Pydantic
    with and without it: (name, per-round ratios), for the pairs this run measured."""
    by_variant = times.get("get", {})
    pairs = [(f"{mw} / {plain}", mw, plain) for mw, plain in MIDDLEWARE_VARIANTS.items()]
    pairs += [
        ("compiled-mw / pydantic-mw", "compiled-mw", "pydantic-mw"),
        ("compiled / pydantic (no middleware)", "compiled", "pydantic"),
    ]
    found = []
    for name, first, second in pairs:
        if by_variant.get(first) and by_variant.get(second):
            ratios = [a / b for a, b in zip(by_variant[first], by_variant[second], strict=True)]
            found.append((name, ratios))
    return found


def print_stream_table(
    out: TextIO,
    summary: dict[str, dict[str, dict[str, Any]]],
    mode: Mode,
    skipped: dict[str, str],
) -> None:
    print(
        f"µs/req: median over rounds, {streams.STREAM_COUNT} items per request; items/s: "
        f"{streams.STREAM_COUNT} / (µs/req); iqr: interquartile range of the rounds, % of the"
        f" median; vs {STREAM_BASE}: median of the per-round time ratios, lower is faster",
        file=out,
    )
    base_column = f"vs {STREAM_BASE}"
    for route, rows in summary.items():
        print(f"\n{mode.label(route)}", file=out)
        print(
            f"  {'variant':<10} {'µs/req':>9} {'items/s':>11} {'iqr':>6} {base_column:>12}",
            file=out,
        )
        for variant, row in rows.items():
            ratio = row.get(f"ratio_to_{STREAM_BASE}")
            per_second = streams.STREAM_COUNT / (row["median_us"] / 1e6)
            print(
                f"  {variant:<10} {row['median_us']:>9.1f} {per_second:>11,.0f}"
                f" {row['iqr_percent']:>5.1f}%"
                f" {f'{ratio:.2f}x' if ratio is not None else '-':>12}",
                file=out,
            )
    print_skipped(out, skipped)


def print_skipped(out: TextIO, skipped: dict[str, str]) -> None:
    if skipped:
        print(file=out)
    for variant, reason in skipped.items():
        print(f"skipped {variant}: {reason}", file=out)


def start_workers(args: argparse.Namespace, mode: Mode, skipped: dict[str, str]) -> list[Worker]:
    variants = list(mode.variants)
    if "upstream" in variants and (reason := ensure_upstream()):
        skipped["upstream"] = reason
        variants.remove("upstream")
    log(f"starting {len(variants)} workers on CPU {args.cpu}: {', '.join(variants)}")
    # Started together: setup is not timed, and each worker then waits for its commands.
    pending = [
        Worker.start(variant, args.cpu, mode.sizes, mode.stream, mode.deps) for variant in variants
    ]
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
            worker.cases = set(message["cases"])
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


def warm_up(workers: list[Worker], cases: list[str], args: argparse.Namespace) -> None:
    # One worker at a time, so calibration never shares the CPU with another worker.
    for worker in workers:
        parts = []
        for route in cases:
            if route not in worker.cases:
                continue
            answer = worker.ask(
                "warmup", route=route, seconds=args.warmup_seconds, target=args.batch_seconds
            )
            worker.counts[route] = answer["count"]
            parts.append(f"{route} {answer['us']:.1f} µs x{answer['count']}")
        log(f"  warmed up {worker.variant}: {', '.join(parts)}")


def run_rounds(workers: list[Worker], cases: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Per clock, route and variant: µs per request of each round, in round order."""
    times: dict[str, dict[str, dict[str, list[float]]]] = {
        clock: {
            route: {worker.variant: [] for worker in workers if route in worker.cases}
            for route in cases
        }
        for clock in CLOCKS
    }
    orders = []
    width = max(len(worker.variant) for worker in workers)
    case_width = max(len(case) for case in cases)
    for index in range(args.rounds):
        started = time.perf_counter()
        # ABBA: every other round runs the variants in reverse order.
        order = workers if index % 2 == 0 else workers[::-1]
        orders.append([worker.variant for worker in order])
        for route in cases:
            wall_total = cpu_total = 0
            for worker in order:
                if route not in worker.cases:
                    continue
                count = worker.counts[route]
                answer = worker.ask("run", route=route, count=count)
                for clock in CLOCKS:
                    times[clock][route][worker.variant].append(answer[f"{clock}_ns"] / count / 1e3)
                wall_total += answer["wall_ns"]
                cpu_total += answer["cpu_ns"]
            line = "  ".join(
                f"{worker.variant:>{width}} {times[args.clock][route][worker.variant][-1]:8.1f}"
                for worker in workers
                if route in worker.cases
            )
            # Wall time well above CPU time means another process took turns on the CPU.
            shared = 100 * (wall_total / max(cpu_total, 1) - 1)
            note = f"  (wall {shared:+.0f}% over CPU: CPU shared)" if shared > 5 else ""
            log(f"round {index + 1:>2}/{args.rounds} {route:<{case_width}} µs/req: {line}{note}")
        log(f"round {index + 1:>2}/{args.rounds} took {time.perf_counter() - started:.1f} s")
    return {"times": times, "orders": orders}


def write_json(
    path: Path,
    args: argparse.Namespace,
    mode: Mode,
    meta: dict[str, Any],
    summary: dict[str, dict[str, dict[str, Any]]],
    rounds: dict[str, Any],
    workers: list[Worker],
    skipped: dict[str, str],
    loads: tuple[tuple[float, ...], tuple[float, ...]],
) -> None:
    config = {
        name: getattr(args, name)
        for name in ("rounds", "batch_seconds", "warmup_seconds", "quick", "clock", "cpu")
    }
    config["routers"] = mode.sizes
    if mode.stream:
        config["stream"] = True
        config["items_per_request"] = streams.STREAM_COUNT
    if mode.deps:
        config["deps"] = True
    variants: dict[str, Any] = {
        worker.variant: {"status": "ok", "info": worker.info, "batch": worker.counts}
        for worker in workers
    }
    variants.update(
        {name: {"status": "skipped", "reason": reason} for name, reason in skipped.items()}
    )
    routes = {
        route: {
            "label": mode.label(route),
            "summary": rows,
            "rounds_us": {clock: rounds["times"][clock][route] for clock in CLOCKS},
        }
        for route, rows in summary.items()
    }
    record = run_record({name: meta.get(name) for name in VERSIONED})
    record["load"] = load_text(loads)
    result = {
        "benchmark": "micro",
        "run": record,
        "meta": {**meta, "load_before": loads[0], "load_after": loads[1]},
        "config": config,
        "variants": variants,
        "round_orders": rounds["orders"],
        "routes": routes,
    }
    if mode.sizes is not None:
        found = routetable_report.targets(rounds["times"][args.clock], mode.sizes)
        result["targets"] = [
            {"label": label, "median": statistics.median(ratios), "quartiles": _quartiles(ratios)}
            for label, ratios in found
        ]
    if mode.deps:
        result["targets"] = deps_report.targets_json(rounds["times"][args.clock])
    if mode.sizes is None and not mode.stream and not mode.deps:
        result["middleware"] = [
            {"name": name, "median": statistics.median(ratios), "rounds": ratios}
            for name, ratios in middleware_ratios(rounds["times"][args.clock])
        ]
    if not mode.stream and not mode.deps:
        pydantic = pydantic_report.targets_json(rounds["times"][args.clock], mode.sizes)
        if pydantic:
            result["pydantic_targets"] = pydantic
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    log(f"results written to {path}")


def run_mode(
    args: argparse.Namespace, mode: Mode, meta: dict[str, Any], json_path: Path | None
) -> int:
    started = time.perf_counter()
    load_before = os.getloadavg()
    skipped: dict[str, str] = {}
    workers: list[Worker] = []
    try:
        workers = start_workers(args, mode, skipped)
        if not workers:
            raise BenchError("no variant could run")
        warm_up(workers, mode.cases, args)
        rounds = run_rounds(workers, mode.cases, args)
    except BenchError as error:
        log(f"error: {error}")
        return 1
    finally:
        for worker in workers:
            worker.stop()

    loads = (load_before, os.getloadavg())
    times = rounds["times"][args.clock]
    summary = summarize(times, mode.bases)
    log(f"done in {time.perf_counter() - started:.0f} s")
    print_header(sys.stdout, args, meta)
    if mode.stream:
        print_stream_table(sys.stdout, summary, mode, skipped)
    elif mode.deps:
        print(route_index_note(workers), file=sys.stdout)
        deps_report.print_table(sys.stdout, summary, times)
        deps_report.print_targets(sys.stdout, times)
        print_skipped(sys.stdout, skipped)
    elif mode.sizes is None:
        print_table(sys.stdout, summary, mode, skipped, times)
        pydantic_report.print_targets(sys.stdout, times, None)
    else:
        sizes = ", ".join(map(str, mode.sizes))
        print(f"route table: {sizes} routers; {route_index_note(workers)}", file=sys.stdout)
        routetable_report.print_tables(sys.stdout, summary, mode.sizes)
        routetable_report.print_targets(sys.stdout, routetable_report.targets(times, mode.sizes))
        pydantic_report.print_targets(sys.stdout, times, mode.sizes)
        print_skipped(sys.stdout, skipped)
        if args.plot:
            routetable_report.plot(args.plot, summary, mode.sizes)
            log(f"plot written to {args.plot}")
    if json_path:
        write_json(json_path, args, mode, meta, summary, rounds, workers, skipped, loads)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Keep the driver off the benchmark CPU when another one is free; it mostly sleeps anyway.
    others = set(os.sched_getaffinity(0)) - {args.cpu}
    if others:
        os.sched_setaffinity(0, others)
    meta: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu": args.cpu,
        "cpu_count": os.cpu_count(),
        **versions(VERSIONED),
    }
    if args.server:
        return server.run(args, meta)
    if args.formats:
        return formats.run(args)
    if args.models:
        return models.run(args)
    for index, mode in enumerate(args.modes):
        json_path = args.json
        # Two modes (--quick): the route table's results beside the cities', not over them.
        if json_path and index > 0:
            json_path = json_path.with_stem(f"{json_path.stem}-routers")
        if index > 0:
            print(file=sys.stdout)
        code = run_mode(args, mode, meta, json_path)
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
