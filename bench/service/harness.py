"""One measured run: a fresh server, checks, a warm-up and a measured window under wrk."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import free_port
from database import DB_URL_ENV
from workload import Sample, Workload

HERE = Path(__file__).resolve().parent
LOAD_SCRIPT = HERE / "load.lua"
START_TIMEOUT = 60.0


class BenchError(RuntimeError):
    """The benchmark cannot go on; the message says why."""


@dataclass(frozen=True)
class Settings:
    """The options of run.py (see its --help)."""

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
    check_only: bool = False


def serve_command(settings: Settings, variant: str) -> list[str]:
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


@dataclass(frozen=True)
class Target:
    """The database that the servers use."""

    url: str
    description: dict[str, Any]
    db_pid: int | None = None  # the PostgreSQL postmaster, whose CPU time is read too


def _stat_cpu_seconds(pid: int | str) -> tuple[int, float]:
    """The parent pid and utime + stime (all threads) of a process, from /proc/<pid>/stat."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # from the state, the 3rd field, on
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU time of the whole process (all its threads)."""
    return _stat_cpu_seconds(pid)[1]


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and its direct children (the PostgreSQL backends)."""
    total = cpu_seconds(pid)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parent, seconds = _stat_cpu_seconds(entry.name)
                if parent == pid:
                    total += seconds
    return total


def core_busy_seconds(cpu: int) -> float:
    """Non-idle time of one core, all processes together (and steal), from /proc/stat."""
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
        *serve_command(settings, variant),
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


def check_wrk(outcome: dict[str, Any], what: str, *, measured: bool = True) -> None:
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
    if measured and outcome["requests"] == 0:
        problems.append("no responses")
    if outcome["checked"] != outcome["requests"]:
        problems.append(f"{outcome['checked']} checked of {outcome['requests']} responses")
    if outcome["pages_wrapped"]:
        problems.append("GET pages repeated within the run: raise --page-window")
    if problems:
        detail = f"\n  first bad response: {outcome['first_bad']}" if outcome["first_bad"] else ""
        raise BenchError(f"{what}: {', '.join(problems)}{detail}")


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


def measure(settings: Settings, run: Run, target: Target, work: Workload, scratch: Path) -> None:
    """Start a fresh server, check it, warm it up, measure it, stop it; fill in ``run``."""
    label = f"{run.pair} {run.route} {run.variant}"
    run_started = time.monotonic()
    state = scratch / f"run-{run.index}.pages"
    with server(settings, run.variant, target.url, scratch / f"run-{run.index}.log") as (pid, port):
        preflight(port, work.samples[run.route], run.variant)
        if settings.warmup:
            warm = wrk(settings, port, run.route, settings.warmup, work.directory, state)
            check_wrk(warm, f"{label} warm-up", measured=False)
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
