"""Instructions per request of the micro benchmark's variants, counted by valgrind.

The timed benchmark (micro.py) answers "how fast", but on a shared machine its rounds
scatter by tens of per cent, which hides differences of a few per cent, such as the one
between the two twins. Counting the instructions a request executes is repeatable to the
last digit for a given build: this script runs each variant in its own process under
callgrind, with address randomisation off and a fixed hash seed, and counts only a batch
of requests (collection is switched on and off around it by valgrind's client requests,
so start-up, imports and warm-up are not counted).

Instructions are not time: cache misses and branch mispredictions are not in them. Use
the ratios beside micro.py's, not instead of them. `--cache-sim` adds callgrind's model of
this machine's caches and prints the misses per request beside the instructions: where
the timed ratios and the instruction ratios disagree, the instruction-cache misses often
say why (a miss costs about as much as ten instructions).

    python bench/icount.py                           # all variants and routes
    python bench/icount.py --variants compiled,pure --routes get --requests 200
    python bench/icount.py --routers 1,300 --routes get-last   # the route-table mode
    python bench/icount.py --formats                 # JSON against MessagePack
    python bench/icount.py --stream --requests 20    # the streaming routes, 1,000 items each
    python bench/icount.py --models                  # query, form and dependency models
    python bench/icount.py --deps                    # the dependency routes (micro --deps)
    python bench/icount.py --deps --server           # the same behind uvicorn (micro --server)
    python bench/icount.py --deps --server --cache-sim --routes deps/two-get   # with misses

With --deps --server, each variant's --deps app runs behind uvicorn (micro/serve.py, the
settings of micro.py --deps --server) inside callgrind, and this script sends it the
requests over a keep-alive connection: the counts include uvicorn's and httptools' work
per request, which the in-process counts leave out.

Needs valgrind (Debian: `apt-get install valgrind`, whose headers come with it) and a C
compiler for the five-line helper that issues the client requests.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import gc
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
from common import BENCH, ensure_upstream, free_port, log, run_record, versions
from micro import cities, deps, formats, models, routetable, streams
from micro.asgi import Case
from micro.driver import CITY_BASES, STREAM_VARIANTS, TABLE_VARIANTS, VARIANTS, parse_sizes
from micro.worker import (
    MIDDLEWARE_ROUTES,
    MIDDLEWARE_VARIANTS,
    PYDANTIC,
    PYDANTIC_ROUTER_VARIANTS,
)

WARMUP_REQUESTS = 200

# valgrind starts without instrumenting (start-up runs several times faster so); these
# switch it on with zeroed counters, and write the batch's counts out before switching off.
HELPER_SOURCE = """
#include <valgrind/callgrind.h>
void icount_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void icount_stop(void) { CALLGRIND_DUMP_STATS_AT("batch"); CALLGRIND_STOP_INSTRUMENTATION; }
"""


def build_helper(folder: Path) -> Path:
    source, library = folder / "icount.c", folder / "libicount.so"
    source.write_text(HELPER_SOURCE)
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    command = [compiler, "-O0", "-shared", "-fPIC", "-o", str(library), str(source)]
    subprocess.run(command, check=True)
    return library


def run_worker(variant: str, route: str, requests: int, library: str) -> None:
    """Inside valgrind: warm the variant up, then count one batch of requests."""
    if route.startswith(MODELS_PREFIX):
        run_models_worker(variant, route.removeprefix(MODELS_PREFIX), requests, library)
        return
    if route.startswith(DEPS_PREFIX):
        run_deps_worker(variant, route.removeprefix(DEPS_PREFIX), requests, library)
        return
    if "/" in route:
        run_formats_worker(variant, route, requests, library)
        return
    from micro import worker

    apps, _ = worker.load(variant)
    # A route-table case (route@size) needs only the app of its own size.
    sizes = [int(route.split("@")[1])] if "@" in route else None
    bench = worker.Bench(variant, apps, sizes, stream=route in streams.ROUTE_KEYS)
    bench.run(route, WARMUP_REQUESTS)
    helper = ctypes.CDLL(library)
    gc.collect()

    async def counted() -> None:
        helper.icount_start()
        await bench._batch(route, requests)  # checks every answer, as in micro.py
        helper.icount_stop()

    bench.loop.run_until_complete(counted())
    bench.close()


def run_formats_worker(twin: str, route: str, requests: int, library: str) -> None:
    """run_worker for a --formats case (`route/format` on `twin`, see micro/formats.py)."""
    bench = formats.FormatBench([twin])
    case = next(case for case in bench.cases if case.key == f"{twin}/{route}")
    bench.run(case, WARMUP_REQUESTS)
    helper = ctypes.CDLL(library)
    gc.collect()

    async def counted() -> None:
        helper.icount_start()
        await bench._batch(case, requests)
        helper.icount_stop()

    bench.loop.run_until_complete(counted())
    bench.close()


# The route key of a --models case: "models/query" (see micro/models.py).
MODELS_PREFIX = "models/"


def run_models_worker(variant: str, case: str, requests: int, library: str) -> None:
    """run_worker for a --models case on `variant`."""
    bench = models.ModelBench([variant])
    bench.run((case, variant), WARMUP_REQUESTS)
    helper = ctypes.CDLL(library)
    gc.collect()

    async def counted() -> None:
        helper.icount_start()
        await bench._batch((case, variant), requests)
        helper.icount_stop()

    bench.loop.run_until_complete(counted())
    bench.close()


# The route key of a --deps case: "deps/two-get" (see micro/deps.py).
DEPS_PREFIX = "deps/"
# The --deps cases --server counts: those of the app without the override.
SERVER_ROUTES = ("two-get", "two-post")
# --deps counts these by default (upstream and bare on request).
DEPS_DEFAULT_VARIANTS = ("compiled", "pure", "pydantic", "litestar", "blacksheep", "floor", "bare")


def run_deps_worker(variant: str, case: str, requests: int, library: str) -> None:
    """run_worker for a --deps case; the bench imports the variant's package itself."""
    bench = deps.DepsBench(variant)
    if case not in bench.cases:
        raise SystemExit(f"{variant} has no case {case} (see deps.answers)")
    bench.run(case, WARMUP_REQUESTS)
    helper = ctypes.CDLL(library)
    gc.collect()

    async def counted() -> None:
        helper.icount_start()
        await bench._batch(case, requests)  # checks every answer and every teardown
        helper.icount_stop()

    bench.loop.run_until_complete(counted())
    bench.close()


def print_formats_table(counts: dict[str, dict[str, float]], twins: list[str]) -> None:
    print("instructions per request, counted by callgrind; vs json: MessagePack/JSON")
    print(f"  {'twin/route':<20} {'json':>11} {'msgpack':>11} {'vs json':>8}")
    for twin in twins:
        for route in formats.ROUTES:
            if f"{route}/json" not in counts or f"{route}/msgpack" not in counts:
                continue  # --routes left one format out
            json_count = counts[f"{route}/json"][twin]
            msgpack_count = counts[f"{route}/msgpack"][twin]
            print(
                f"  {twin + '/' + route:<20} {json_count:>11,.0f} {msgpack_count:>11,.0f}"
                f" {msgpack_count / json_count:>7.2f}x"
            )


def read_events(out_prefix: Path) -> dict[str, int]:
    """The event totals of the dumped batch (callgrind writes it to `<prefix>.1`): `Ir`,
    the instructions, and with --cache-sim the misses (`I1mr`, `D1mr`, `D1mw`, ...)."""
    names: list[str] = []
    for line in Path(f"{out_prefix}.1").read_text().splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith("totals:") or line.startswith("summary:"):
            return dict(zip(names, map(int, line.split()[1:]), strict=True))
    raise RuntimeError(f"no totals in {out_prefix}.1")


def read_total(out_prefix: Path) -> int:
    """The instruction total of the dumped batch."""
    return read_events(out_prefix)["Ir"]


def per_request(out_prefix: Path, requests: int) -> dict[str, float]:
    """Each event of the dumped batch per request."""
    return {name: total / requests for name, total in read_events(out_prefix).items()}


def valgrind(cache_sim: bool) -> list[str]:
    """callgrind's command line, instrumenting nothing until the helper says so."""
    command = ["setarch", "-R"] if shutil.which("setarch") else []
    command += ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
    if cache_sim:
        command.append("--cache-sim=yes")
    return command


def count(
    variant: str, route: str, requests: int, library: Path, folder: Path, cache_sim: bool = False
) -> dict[str, float]:
    """Events per request (see read_events) of `variant` on `route`, in process."""
    out_prefix = folder / f"callgrind.{variant}.{route.replace('/', '.')}"
    run_in_process(variant, route, requests, library, out_prefix, cache_sim)
    return per_request(out_prefix, requests)


def run_in_process(
    variant: str,
    route: str,
    requests: int,
    library: Path,
    out_prefix: Path,
    cache_sim: bool = False,
    options: tuple[str, ...] = (),
    environ: dict[str, str] | None = None,
) -> None:
    """Run the worker of `variant` on `route` under callgrind (with valgrind's further
    `options`, in `environ`, os.environ by default) for one counted batch of `requests`,
    dumped to `<out_prefix>.1`."""
    env = dict(os.environ if environ is None else environ, PYTHONHASHSEED="0")
    command = [*valgrind(cache_sim), *options, f"--callgrind-out-file={out_prefix}"]
    command += [sys.executable, __file__, "--worker", variant, route, str(requests), str(library)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{variant} {route} failed under valgrind:\n{result.stderr[-3000:]}")


@functools.cache
def city_cases() -> dict[str, Case]:
    """The city routes' requests and answers, built once (the data set takes a while)."""
    return cities.make_cases(cities.make_dataset())


# --deps --server: requests to a server before counting (after its start-up).
SERVER_WARMUP = 300
SERVER_START_TIMEOUT = 300.0


def count_server(
    variant: str, route: str, requests: int, library: Path, folder: Path, cache_sim: bool = False
) -> dict[str, float]:
    """Events per request of `variant`'s --deps app behind uvicorn, under callgrind; every
    answer checked against the expected one."""
    return per_request(run_server(variant, route, requests, library, folder, cache_sim), requests)


def run_server(
    variant: str,
    route: str,
    requests: int,
    library: Path,
    folder: Path,
    cache_sim: bool = False,
    options: tuple[str, ...] = (),
    environ: dict[str, str] | None = None,
    server_kind: str = "uvicorn",
) -> Path:
    """Run `variant`'s app of `route` behind `server_kind` (micro/serve.py's uvicorn or
    granian) under callgrind (with valgrind's further `options`, in `environ`, os.environ
    by default) for one counted batch of `requests`; the prefix of the batch's dump
    (`<prefix>.1`). A `deps/` route is served by the variant's --deps app, a city route
    (`get`, `list`, `validate`, `search`) by its app of the city routes. Each process
    writes its own file, named by its pid (Granian forks its worker, which valgrind
    follows), and only the one serving the requests holds the batch."""
    if route.startswith(DEPS_PREFIX):
        app, case = "deps", deps.CASES[route.removeprefix(DEPS_PREFIX)]
    else:
        app, case = "cities", city_cases()[route]
    out_prefix = folder / f"callgrind.server.{variant}.{case.key}"
    port = free_port()
    report = folder / f"server.{variant}.{case.key}.json"
    env = dict(os.environ if environ is None else environ, PYTHONHASHSEED="0")
    command = [*valgrind(cache_sim), *options]
    command += [f"--callgrind-out-file={out_prefix}.%p", sys.executable, "-m", "micro.serve"]
    command += [variant, "--app", app, "--port", str(port), "--report", str(report)]
    command += ["--server", server_kind]
    command += ["--icount", f"{library}:{SERVER_WARMUP}:{requests}"]
    log_path = folder / f"server.{variant}.{case.key}.log"
    with log_path.open("wb") as output:
        server = subprocess.Popen(
            command, cwd=BENCH, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"{variant} server exited:\n{log_path.read_text()[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{variant} server did not listen") from None
                time.sleep(0.2)
        headers = {name.decode(): value.decode() for name, value in case.headers}
        if case.body:
            headers["Content-Type"] = "application/json"
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        expected = case.expected_body
        for _ in range(SERVER_WARMUP + requests):
            connection.request(case.method, case.target, body=case.body or None, headers=headers)
            response = connection.getresponse()
            body = response.read()
            same = (
                body == expected
                if variant in deps.BYTE_EXACT
                else msgspec.json.decode(body) == msgspec.json.decode(expected)
            )
            if response.status != 200 or not same:
                raise RuntimeError(f"{variant} {route}: {response.status} {body[:300]!r}")
        connection.close()
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
        server.wait(timeout=120)
    (batch,) = out_prefix.parent.glob(f"{out_prefix.name}.*.1")
    return batch.with_suffix("")


def label(case: str) -> str:
    if case.startswith(MODELS_PREFIX):
        return models.CASE_LABELS[case.removeprefix(MODELS_PREFIX)]
    if case.startswith(DEPS_PREFIX):
        return deps.CASE_LABELS[case.removeprefix(DEPS_PREFIX)]
    if case in streams.ROUTE_LABELS:
        return streams.ROUTE_LABELS[case]
    if "@" not in case:
        return cities.ROUTE_LABELS[case]
    route, size = case.split("@")
    return f"{routetable.route_label(int(size), route)} ({routetable.routers_phrase(int(size))})"


def print_table(counts: dict[str, dict[str, float]], variants: list[str], table: bool) -> None:
    bases = ("floor", "app-floor") if table else CITY_BASES
    if all(route in streams.ROUTE_KEYS or route.startswith(MODELS_PREFIX) for route in counts):
        bases = ("pydantic",)
    if all(route.startswith(DEPS_PREFIX) for route in counts):
        bases = ("litestar", "blacksheep", "floor", "bare", "pure")
    if set(variants) & set(PYDANTIC_ROUTER_VARIANTS):
        # The Pydantic routes on MsgspecRouter against FastAPI's and against our msgspec route.
        bases = (*bases, PYDANTIC, "compiled")
    width = max(11, *(len(variant) for variant in variants))
    print("instructions per request, counted by callgrind (lower is fewer); vs x: ratio to x")
    for route, by_variant in counts.items():
        print(f"\n{label(route)}")
        print(
            f"  {'variant':<{width}} {'instr/req':>11} "
            + " ".join(f"{f'vs {b}':>12}" for b in bases)
        )
        for variant in variants:
            if variant not in by_variant:
                continue
            value = by_variant[variant]
            cells = [f"  {variant:<{width}} {value:>11,.0f}"]
            for base in bases:
                ratio = value / by_variant[base] if base in by_variant else None
                cells.append(f"{ratio:>11.3f}x" if ratio is not None else f"{'-':>12}")
            print(" ".join(cells))


# --cache-sim: callgrind's miss events, added up into the columns printed.
MISS_KINDS = {"I1": ("I1mr",), "D1": ("D1mr", "D1mw"), "LL": ("ILmr", "DLmr", "DLmw")}


def misses_of(events: dict[str, float]) -> dict[str, float]:
    """Misses per request by cache: first-level instruction and data, last-level."""
    return {kind: sum(events[name] for name in names) for kind, names in MISS_KINDS.items()}


def print_misses(misses: dict[str, dict[str, dict[str, float]]], variants: list[str]) -> None:
    """--cache-sim: the misses per request beside the instructions."""
    print("\nsimulated cache misses per request (callgrind's model of this machine's caches)")
    width = max(11, *(len(variant) for variant in variants))
    for route, by_variant in misses.items():
        print(f"\n{label(route)}")
        heads = f"{'I1 misses':>10} {'per 100 instr':>14} {'D1 misses':>10} {'LL':>6}"
        print(f"  {'variant':<{width}} {heads}")
        for variant in variants:
            if variant not in by_variant:
                continue
            found = by_variant[variant]
            rate = 100 * found["I1"] / found["instructions"]
            print(
                f"  {variant:<{width}} {found['I1']:>10,.0f} {rate:>14.2f} {found['D1']:>10,.0f}"
                f" {found['LL']:>6,.0f}"
            )


def print_override_ratios(counts: dict[str, dict[str, float]], variants: list[str]) -> None:
    """--deps: each route's count with the unrelated override set over its count without."""
    lines = []
    for route in deps.ROUTES:
        plain = counts.get(DEPS_PREFIX + route, {})
        override = counts.get(DEPS_PREFIX + route + deps.OVERRIDE_SUFFIX, {})
        cells = [
            f"{v} {override[v] / plain[v]:.2f}x" for v in variants if v in plain and v in override
        ]
        if cells:
            lines.append(f"  {route:<9} " + ", ".join(cells))
    if lines:
        print("\nwith the unrelated override set / without it")
        print("\n".join(lines))


def _unanswered(variant: str, route: str) -> bool:
    """A case the variant does not have (a --deps override case on Litestar, the
    six-dependency route on BlackSheep, a city route other than GET with the user
    middleware): not counted."""
    if variant in MIDDLEWARE_VARIANTS:
        return route not in MIDDLEWARE_ROUTES
    case = route.removeprefix(DEPS_PREFIX)
    return route.startswith(DEPS_PREFIX) and not deps.answers(variant, case)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        variant, route, requests, library = sys.argv[2:6]
        run_worker(variant, route, int(requests), library)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--routers", help="route-table mode: router counts, e.g. 1,300 (see bench/micro.py)"
    )
    parser.add_argument(
        "--variants",
        help=f"default {','.join(VARIANTS)}; with --routers {','.join(TABLE_VARIANTS)}",
    )
    parser.add_argument(
        "--routes",
        help=f"default {','.join(cities.ROUTE_KEYS)};"
        f" with --routers {','.join(routetable.ROUTE_KEYS)}",
    )
    parser.add_argument(
        "--formats",
        action="store_true",
        help="JSON against MessagePack on validate and list, compiled and pure (micro --formats)",
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help="the streaming routes (micro --stream): compiled, pure, pydantic, litestar",
    )
    parser.add_argument(
        "--models",
        action="store_true",
        help="the query, form and dependency model cases (micro --models): compiled, pure,"
        " pydantic",
    )
    parser.add_argument(
        "--deps",
        action="store_true",
        help="the dependency routes (micro --deps): by default "
        f"{', '.join(DEPS_DEFAULT_VARIANTS)}; also upstream",
    )
    parser.add_argument(
        "--server",
        action="store_true",
        help="with --deps: behind uvicorn, two-get and two-post (micro --deps --server)",
    )
    parser.add_argument(
        "--cache-sim",
        action="store_true",
        help="also simulate the caches and print the misses per request (slower)",
    )
    parser.add_argument("--requests", type=int, default=1000, help="counted requests per run")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path, help="write the counts here")
    args = parser.parse_args()
    table = args.routers is not None
    known_variants = TABLE_VARIANTS if table else VARIANTS
    known_routes = routetable.ROUTE_KEYS if table else cities.ROUTE_KEYS
    if args.stream:
        known_variants, known_routes = STREAM_VARIANTS, streams.ROUTE_KEYS
    if args.formats:
        known_variants = formats.TWINS
        known_routes = tuple(f"{r}/{f}" for r in formats.ROUTES for f in formats.FORMATS)
    if args.models:
        known_variants = models.VARIANTS
        known_routes = tuple(MODELS_PREFIX + case for case in models.CASES)
    if args.deps:
        known_variants = deps.DEPS_VARIANTS
        known_routes = tuple(DEPS_PREFIX + case for case in deps.CASE_KEYS)
        if args.server:
            known_routes = tuple(DEPS_PREFIX + case for case in SERVER_ROUTES)
    elif args.server:
        parser.error("--server is a part of --deps")
    default_variants = DEPS_DEFAULT_VARIANTS if args.deps else known_variants
    variants = [v for v in (args.variants or ",".join(default_variants)).split(",") if v]
    routes = [r for r in (args.routes or ",".join(known_routes)).split(",") if r]
    unknown = sorted(set(variants) - set(known_variants)) + sorted(set(routes) - set(known_routes))
    if unknown or args.requests < 1:
        parser.error(f"unknown variants or routes {unknown}, or --requests below 1")
    if table:
        try:
            sizes = parse_sizes(args.routers)
        except argparse.ArgumentTypeError as error:
            parser.error(f"--routers: {error}")
        routes = [routetable.case_key(size, route) for size in sizes for route in routes]
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (Debian: apt-get install valgrind)")
    if "upstream" in variants and (reason := ensure_upstream()) is not None:
        log(f"upstream skipped: {reason}")
        variants.remove("upstream")
    with tempfile.TemporaryDirectory(prefix="icount-") as tmp:
        folder = Path(tmp)
        library = build_helper(folder)
        jobs = [(v, r) for r in routes for v in variants if not _unanswered(v, r)]
        log(f"{len(jobs)} runs under valgrind, {args.jobs} at a time, up to a minute each")
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            counter = count_server if args.server else count
            futures = {
                job: pool.submit(counter, *job, args.requests, library, folder, args.cache_sim)
                for job in jobs
            }
            counts: dict[str, dict[str, float]] = {route: {} for route in routes}
            misses: dict[str, dict[str, dict[str, float]]] = {route: {} for route in routes}
            for (variant, route), future in futures.items():
                events = future.result()
                counts[route][variant] = events["Ir"]
                if args.cache_sim:
                    misses[route][variant] = {"instructions": events["Ir"], **misses_of(events)}
                log(f"{variant} {route}: {counts[route][variant]:,.0f} instructions per request")
    if args.formats:
        print_formats_table(counts, variants)
    else:
        print_table(counts, variants, table)
    if args.deps:
        print_override_ratios(counts, variants)
    if args.cache_sim:
        print_misses(misses, variants)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {"requests": args.requests, "python": sys.version.split()[0]}
        if args.server:
            meta["server"] = "uvicorn (httptools, asyncio loop), as micro.py --deps --server"
        versioned = ("fastapi", "starlette", "msgspec", "pydantic", "litestar", "blacksheep")
        run = run_record(versions(versioned))
        document = {"benchmark": "icount", "run": run, "meta": meta, "counts": counts}
        if args.cache_sim:
            document["misses"] = misses
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
