"""--deps --server: the dependency routes behind uvicorn, loaded by wrk, requests per second.

Each variant's --deps app (deps.load(), without the override: the same apps and work as
the in-process mode) runs in a uvicorn process of its own (micro/serve.py: httptools, the
asyncio loop, one process, no access log) on 127.0.0.1, pinned with taskset to the server
core; wrk (one thread, micro/server.lua) runs pinned to the client core, and this driver
beside it. The reference without dependencies, `GET /cities/{id}` (one city), is served by
each variant's app of the city routes, in a server of its own; `--routes plain-get` adds
`GET /r0/items/{id}` on its route-table app of one router (the --routers mode's app;
BlackSheep has none, and is skipped then).

Before anything is timed, every server answers its routes once and the answer is checked
(status, content type, body; Pydantic's parsed) as the in-process mode checks it; under
load wrk checks every response's status and length. Then each (variant, route) is warmed
up, and round after round each route is loaded for a fixed time in every variant, the
variant order rotated by one each round. The table gives medians over rounds of the
requests per second and of the server's CPU time per response (read from /proc, so that
another process on the server core inflates it less), and the medians of the per-round
ratios to Litestar. When the servers stop, each reports the sessions its yield dependency
left open, which must be none.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import msgspec
from common import BENCH, ensure_upstream, free_port, log, run_record

from . import cities, deps, routetable
from .asgi import Case

ROUTE_KEYS = ("two-get", "two-post", "city-get", "plain-get")
DEFAULT_ROUTES = ("two-get", "city-get")
VARIANTS = deps.DEPS_VARIANTS
DEFAULT_VARIANTS = ("compiled", "pure", "pydantic", "litestar", "blacksheep", "floor")
BASE = "litestar"
# The target behind a server: compiled at least 1.3x Litestar's requests per second on the
# two-dependency GET.
TARGET = ("compiled", "two-get", 1.3)
SCRIPT = Path(__file__).resolve().parent / "server.lua"
START_TIMEOUT = 90.0
PREVIEW = 300
PLAIN_CASE = routetable.make_cases(1)[routetable.case_key(1, "get-first")]
CITY_CASE = cities.make_cases(cities.make_dataset())["get"]


@dataclass(frozen=True)
class Route:
    key: str
    app: str  # the app serving it: "deps", "cities" or "table" (see serve.py)
    case: Case

    @property
    def label(self) -> str:
        if self.app == "table":
            return "GET /r0/items/{id}, no dependencies (the route table's app, 1 router)"
        if self.app == "cities":
            return "GET /cities/{id}, one city, no dependencies (the city routes' app)"
        return self.case.label


ROUTES = {
    "two-get": Route("two-get", "deps", deps.CASES["two-get"]),
    "two-post": Route("two-post", "deps", deps.CASES["two-post"]),
    "city-get": Route("city-get", "cities", CITY_CASE),
    "plain-get": Route("plain-get", "table", PLAIN_CASE),
}


class BenchError(Exception):
    """Stops the run: a wrong answer, a failed server or wrk, a broken setup."""


def _routes(text: str | None, parser: argparse.ArgumentParser) -> list[str]:
    if text is None:
        return list(DEFAULT_ROUTES)
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names or set(names) - set(ROUTE_KEYS):
        parser.error(f"--server --routes: choose from {','.join(ROUTE_KEYS)}")
    return [name for name in ROUTE_KEYS if name in names]


def settle(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check the options of the server mode and fill in its defaults."""
    if not args.deps or args.routers is not None or args.stream or args.formats or args.models:
        parser.error("--server is a part of --deps, and of no other mode")
    chosen = args.variants or list(DEFAULT_VARIANTS)
    if unknown := sorted(set(chosen) - set(VARIANTS)):
        parser.error(f"{','.join(unknown)}: not a --deps variant ({','.join(VARIANTS)})")
    args.server_variants = chosen
    args.server_routes = _routes(args.routes, parser)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.duration is None:
        args.duration = 1 if args.quick else 5
    # wrk takes whole seconds.
    args.warmup_seconds = math.ceil(args.warmup_seconds or (1 if args.quick else 2))
    if args.rounds < 1 or args.duration < 1 or args.warmup_seconds < 1 or args.connections < 1:
        parser.error("--rounds, --duration, --warmup-seconds and --connections: at least 1")
    allowed = sorted(os.sched_getaffinity(0))
    if args.cpu is None:
        args.cpu = allowed[0]
    if args.client_cpu is None:
        args.client_cpu = next((cpu for cpu in allowed if cpu != args.cpu), args.cpu)
    for name, cpu in (("--cpu", args.cpu), ("--client-cpu", args.client_cpu)):
        if cpu not in allowed:
            parser.error(f"{name} {cpu} is not one of the usable CPUs {allowed}")
    if args.cpu == args.client_cpu:
        parser.error("--server needs two CPUs: the server's (--cpu) and wrk's (--client-cpu)")


# ------------------------------------------------------------------------------ processes


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, all its threads (the threadpool's too), from /proc."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def core_busy_seconds(cpu: int) -> float:
    """Non-idle time of one core, every process together, from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            ticks = [int(value) for value in line.split()[1:]]
            return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    raise BenchError(f"core {cpu} is not in /proc/stat")


@dataclass
class Server:
    """One variant's app under uvicorn, pinned to the server core."""

    variant: str
    app: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    report_path: Path
    # Per route: the exact length every response must have (checked before the run).
    lengths: dict[str, int] = field(default_factory=dict)

    @classmethod
    def start(cls, variant: str, app: str, cpu: int, scratch: Path) -> Server:
        port = free_port()
        stem = scratch / f"{variant}-{app}"
        log_path, report_path = stem.with_suffix(".log"), stem.with_suffix(".json")
        command = ["taskset", "-c", str(cpu), sys.executable, "-m", "micro.serve", variant]
        command += ["--app", app, "--port", str(port), "--report", str(report_path)]
        # The same string hashing in every server and run, as the in-process workers have.
        env = dict(os.environ, PYTHONHASHSEED="0")
        with log_path.open("wb") as output:
            process = subprocess.Popen(
                command, cwd=BENCH, env=env, stdout=output, stderr=subprocess.STDOUT
            )
        return cls(variant, app, port, process, log_path, report_path)

    @property
    def name(self) -> str:
        return f"{self.variant} ({self.app} app)"

    def _tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def _report(self) -> dict[str, Any]:
        with contextlib.suppress(OSError, ValueError):
            found: dict[str, Any] = json.loads(self.report_path.read_text())
            return found
        return {}

    def wait_ready(self, deadline: float) -> str | None:
        """None once it listens; the reason if the variant is unavailable (a skip)."""
        while True:
            if self.process.poll() is not None:
                if reason := self._report().get("skipped"):
                    return str(reason)
                raise BenchError(
                    f"{self.name} exited with {self.process.returncode}:\n{self._tail()}"
                )
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return None
            if time.monotonic() > deadline:
                raise BenchError(f"{self.name} did not listen within {START_TIMEOUT:.0f} s")
            time.sleep(0.05)

    def stop(self) -> dict[str, Any]:
        """Shut uvicorn down as Ctrl-C does; what the server reported on its way out."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return {"error": "did not stop within 15 s: killed"}
        return self._report()

    def check(self, route: Route) -> None:
        """One request, its answer checked as the in-process mode checks it."""
        case = route.case
        headers = {name.decode(): value.decode() for name, value in case.headers}
        if case.body:
            headers["Content-Type"] = "application/json"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(case.method, case.path, body=case.body or None, headers=headers)
            response = connection.getresponse()
            body = response.read()
            content_type = response.getheader("content-type")
        finally:
            connection.close()
        expected = case.expected_body
        same = response.status == 200 and (
            body == expected
            if self.variant in deps.BYTE_EXACT
            else msgspec.json.decode(body) == msgspec.json.decode(expected)
        )
        if not same or content_type != "application/json":
            raise BenchError(
                f"{self.name} answered {route.label} wrongly: status {response.status},"
                f" content-type {content_type!r}, body {body[:PREVIEW]!r};"
                f" expected 200, application/json, {expected[:PREVIEW]!r}"
            )
        self.lengths[route.key] = len(body)


def wrk(args: argparse.Namespace, server: Server, route: Route, seconds: int) -> dict[str, Any]:
    """Load one route of one server for `seconds`; wrk's result, every response checked."""
    case = route.case
    command = ["taskset", "-c", str(args.client_cpu), "wrk", "-t1", f"-c{args.connections}"]
    command += [f"-d{seconds}s", "--timeout", "10s", "-s", str(SCRIPT)]
    for name, value in case.headers:
        command += ["-H", f"{name.decode()}: {value.decode()}"]
    command += [f"http://127.0.0.1:{server.port}", "--", case.method, case.path]
    command.append(str(server.lengths[route.key]))
    if case.body:
        command.append(case.body.decode())
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=seconds + 60, check=False
    )
    lines = result.stdout.splitlines()
    found = [line for line in lines if line.startswith("WRK_RESULT ")]
    if result.returncode != 0 or not found:
        raise BenchError(f"wrk failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    outcome: dict[str, Any] = json.loads(found[-1].removeprefix("WRK_RESULT "))
    problems = [
        f"{key}={outcome[key]}"
        for key in outcome
        if key.startswith(("errors_", "bad_")) and outcome[key]
    ]
    if outcome["requests"] == 0:
        problems.append("no responses")
    if outcome["checked"] != outcome["requests"]:
        problems.append(f"{outcome['checked']} checked of {outcome['requests']} responses")
    if problems:
        bad = [line.removeprefix("WRK_FIRST_BAD ") for line in lines if "WRK_FIRST_BAD" in line]
        detail = f"; first bad response: {bad[0]}" if bad else ""
        raise BenchError(f"{server.name}, {route.key}: {', '.join(problems)}{detail}")
    return outcome


def measure(args: argparse.Namespace, server: Server, route: Route) -> dict[str, float]:
    """One timed window: requests/s, the server's CPU µs per response, the others' share."""
    pid = server.process.pid
    core_before, cpu_before, wall_before = (
        core_busy_seconds(args.cpu),
        cpu_seconds(pid),
        time.monotonic(),
    )
    outcome = wrk(args, server, route, args.duration)
    cpu_after, wall_after = cpu_seconds(pid), time.monotonic()
    core_after = core_busy_seconds(args.cpu)
    responses = int(outcome["requests"])
    busy, window = cpu_after - cpu_before, wall_after - wall_before
    return {
        "rps": responses / (outcome["duration_us"] / 1e6),
        "cpu_us": busy / responses * 1e6,
        # About 1 when the server saturates its core; less when others took turns on it.
        "utilization": busy / window,
        "others": max(0.0, (core_after - core_before - busy) / window),
        "p50_ms": outcome["latency_p50_us"] / 1000,
        "p99_ms": outcome["latency_p99_us"] / 1000,
        "responses": responses,
    }


# ------------------------------------------------------------------------------ the run


def start_servers(
    args: argparse.Namespace, scratch: Path, skipped: dict[str, str]
) -> dict[tuple[str, str], Server]:
    variants = list(args.server_variants)
    if "upstream" in variants and (reason := ensure_upstream()):
        skipped["upstream"] = reason
        variants.remove("upstream")
    apps = sorted({ROUTES[key].app for key in args.server_routes})
    log(f"starting {len(variants) * len(apps)} servers on CPU {args.cpu}: {', '.join(variants)}")
    servers = {
        (variant, app): Server.start(variant, app, args.cpu, scratch)
        for variant in variants
        for app in apps
    }
    deadline = time.monotonic() + START_TIMEOUT
    try:
        for variant, app in list(servers):
            if (variant, app) not in servers:
                continue  # the variant was skipped when its other app did not start
            if reason := servers[variant, app].wait_ready(deadline):
                skipped[variant] = reason
                log(f"  {variant}: skipped, {reason}")
                for key in [key for key in servers if key[0] == variant]:
                    servers.pop(key).stop()
        for (_, app), server in servers.items():
            for key in args.server_routes:
                if ROUTES[key].app == app:
                    server.check(ROUTES[key])
            log(f"  {server.name}: listening on port {server.port}, answers checked")
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    return servers


def run_rounds(
    args: argparse.Namespace, servers: dict[tuple[str, str], Server], variants: list[str]
) -> dict[str, dict[str, list[dict[str, float]]]]:
    """Per route and variant, the measurements of each round, in round order."""
    routes = [ROUTES[key] for key in args.server_routes]
    for route in routes:
        for variant in variants:
            wrk(args, servers[variant, route.app], route, args.warmup_seconds)
        log(f"  warmed up {route.key}: {args.warmup_seconds} s per variant")
    results: dict[str, dict[str, list[dict[str, float]]]] = {
        route.key: {variant: [] for variant in variants} for route in routes
    }
    for index in range(args.rounds):
        shift = index % len(variants)
        order = variants[shift:] + variants[:shift]
        for route in routes:
            cells = []
            for variant in order:
                run = measure(args, servers[variant, route.app], route)
                results[route.key][variant].append(run)
                note = f" ({run['others']:.0%} others)" if run["others"] > 0.05 else ""
                cells.append(f"{variant} {run['rps']:,.0f}{note}")
            log(f"round {index + 1}/{args.rounds} {route.key} req/s: {', '.join(cells)}")
    return results


def summarize(results: dict[str, dict[str, list[dict[str, float]]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for route, by_variant in results.items():
        base = by_variant.get(BASE)
        rows = {}
        for variant, runs in by_variant.items():
            row: dict[str, Any] = {
                name: statistics.median(run[name] for run in runs)
                for name in ("rps", "cpu_us", "utilization", "others", "p50_ms", "p99_ms")
            }
            if base:
                # Ratios within each round first, so drift between rounds cancels out.
                rps = [r["rps"] / b["rps"] for r, b in zip(runs, base, strict=True)]
                cpu = [r["cpu_us"] / b["cpu_us"] for r, b in zip(runs, base, strict=True)]
                row["rps_vs_base"], row["cpu_vs_base"] = (
                    statistics.median(rps),
                    statistics.median(cpu),
                )
                row["round_rps_vs_base"] = rps
            rows[variant] = row
        summary[route] = rows
    return summary


def print_report(
    out: TextIO,
    args: argparse.Namespace,
    summary: dict[str, Any],
    loads: tuple[tuple[float, ...], tuple[float, ...]],
    sessions: dict[str, Any],
    skipped: dict[str, str],
) -> None:
    before, after = (", ".join(f"{x:.2f}" for x in load) for load in loads)
    print(
        f"server benchmark (--deps --server): uvicorn (httptools, asyncio loop, 1 process, no"
        f" access log) pinned to CPU {args.cpu}, wrk -t1 -c{args.connections} pinned to CPU"
        f" {args.client_cpu}; {args.rounds} round(s) of {args.duration} s per variant and route,"
        f" order rotated" + (" (--quick: figures are not meaningful)" if args.quick else ""),
        file=out,
    )
    print(f"load average before {before}, after {after}", file=out)
    print(
        f"req/s and CPU µs/resp (the server's CPU time per response): medians over rounds;"
        f" vs {BASE}: median of the per-round ratios (req/s: higher is faster; CPU: lower is);"
        f" others: share of the server core other processes took",
        file=out,
    )
    for key, rows in summary.items():
        print(f"\n{ROUTES[key].label}", file=out)
        print(
            f"  {'variant':<10} {'req/s':>9} {f'vs {BASE}':>12} {'CPU µs/resp':>12}"
            f" {f'vs {BASE}':>12} {'p50 ms':>7} {'others':>7}",
            file=out,
        )
        for variant, row in rows.items():
            rps_ratio, cpu_ratio = row.get("rps_vs_base"), row.get("cpu_vs_base")
            print(
                f"  {variant:<10} {row['rps']:>9,.0f}"
                f" {f'{rps_ratio:.2f}x' if rps_ratio is not None else '-':>12}"
                f" {row['cpu_us']:>12.1f}"
                f" {f'{cpu_ratio:.2f}x' if cpu_ratio is not None else '-':>12}"
                f" {row['p50_ms']:>7.2f} {row['others']:>6.0%}",
                file=out,
            )
    variant, route, least = TARGET
    row = summary.get(route, {}).get(variant, {})
    if (ratio := row.get("rps_vs_base")) is not None:
        rounds = ", ".join(f"{r:.2f}" for r in row["round_rps_vs_base"])
        verdict = "met" if ratio >= least else "not met"
        print(
            f"\ntarget, requests/s behind uvicorn: {variant} / {BASE}, {route}: {ratio:.2f}x"
            f" (rounds {rounds}); target >= {least:.1f}x: {verdict}",
            file=out,
        )
        # On a shared core requests/s also measure the others' share; CPU time less so.
        by_cpu = 1 / row["cpu_vs_base"]
        print(
            f"  the same by the server's CPU time per response ({BASE}'s / {variant}'s):"
            f" {by_cpu:.2f}x",
            file=out,
        )
    if sessions:
        shown = ", ".join(f"{name} {count}" for name, count in sessions.items())
        print(f"sessions left open when the servers stopped: {shown}", file=out)
    if skipped:
        print(file=out)
    for name, reason in skipped.items():
        print(f"skipped {name}: {reason}", file=out)


def run(args: argparse.Namespace, meta: dict[str, Any]) -> int:
    started = time.perf_counter()
    skipped: dict[str, str] = {}
    servers: dict[tuple[str, str], Server] = {}
    sessions: dict[str, Any] = {}
    loads_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="micro-server-") as scratch:
        try:
            servers = start_servers(args, Path(scratch), skipped)
            if args.strict and skipped:
                raise BenchError(f"--strict and variants were skipped: {', '.join(skipped)}")
            variants = [v for v in args.server_variants if v not in skipped]
            if not variants:
                raise BenchError("no variant could run")
            results = run_rounds(args, servers, variants)
        except BenchError as error:
            log(f"error: {error}")
            return 1
        finally:
            for (variant, app), server in servers.items():
                report = server.stop()
                if app == "deps":
                    sessions[variant] = report.get(
                        "sessions_open", report.get("error", "no report")
                    )
    failed = {name: count for name, count in sessions.items() if count != 0}
    loads = (loads_before, os.getloadavg())
    summary = summarize(results)
    log(f"done in {time.perf_counter() - started:.0f} s")
    print_report(sys.stdout, args, summary, loads, sessions, skipped)
    if args.json:
        config = {
            name: getattr(args, name)
            for name in ("rounds", "duration", "warmup_seconds", "connections", "cpu", "client_cpu")
        }
        result = {
            "benchmark": "server",
            "run": run_record(
                {
                    name: meta.get(name)
                    for name in ("fastapi", "msgspec", "uvicorn", "litestar", "blacksheep")
                }
            ),
            "meta": {**meta, "load_before": loads[0], "load_after": loads[1]},
            "config": {**config, "server": True, "routes": args.server_routes},
            "skipped": skipped,
            "sessions_open": sessions,
            "routes": {
                key: {"label": ROUTES[key].label, "summary": summary[key], "rounds": results[key]}
                for key in results
            },
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        log(f"results written to {args.json}")
    if failed:
        log(f"error: sessions left open: {failed}")
        return 1
    return 0
