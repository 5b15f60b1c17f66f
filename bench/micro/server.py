"""--deps --server: routes behind uvicorn and Granian, loaded by wrk, requests per second.

Each variant's app runs, per server kind (--server-kind: uvicorn, granian or both), in a
server of its own (micro/serve.py: uvicorn with httptools; Granian's ASGI interface with
one worker and one runtime thread; both on the asyncio loop, no access log) on
127.0.0.1, pinned with taskset to the server core; wrk (one thread, micro/server.lua) runs
pinned to the client core, and this driver beside it. The routes: `GET /cities/{id}` (one
Struct, no dependencies) and `POST /cities/validate` (a body of 100 cities validated into
Structs) on the variant's app of the city routes, and the two-dependency GET on its --deps
app (deps.load(), without the override: the same apps and work as the in-process mode).
`--routes` adds the city list (`GET /cities?limit=...`) and search (`POST /cities/search`)
on the city app, the two-dependency POST, and `GET /r0/items/{id}` on the route-table app of
one router (the --routers mode's app; BlackSheep has none, and is skipped then).
pydantic-compiled and pydantic-pure (FastAPI's Pydantic models and endpoints on
MsgspecRouter + install_dispatch) have the city and route-table apps only: they answer the
routes without dependencies, each body checked against the pydantic variant's byte for byte,
and the report judges their target on the GET of one model.

Before anything is timed, every server answers its routes once and the answer is checked
(status, content type, body; Pydantic's parsed) as the in-process mode checks it; under
load wrk checks every response's status and length. Then each (server kind, variant,
route) is warmed up, and round after round each route is loaded for a fixed time under
every server kind in every variant, the variant order rotated by one each round. The
tables give, per server kind, medians over rounds of the requests per second and of the
server's CPU time per response (utime + stime of the server's process tree, read from
/proc, so that another process on the server core inflates it less), and the medians of
the per-round ratios to Litestar. When the servers stop, each reports the sessions its
yield dependency left open, which must be none.
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
from common import BENCH, ensure_upstream, free_ports, load_text, log, run_record, versions

from . import cities, deps, routetable
from .asgi import Case
from .serve import SERVERS
from .worker import PYDANTIC, PYDANTIC_ROUTER_VARIANTS

ROUTE_KEYS = (
    "city-get",
    "city-validate",
    "city-list",
    "city-search",
    "two-get",
    "two-post",
    "plain-get",
)
DEFAULT_ROUTES = ("city-get", "city-validate", "two-get")
VARIANTS = tuple(dict.fromkeys((*deps.DEPS_VARIANTS, *PYDANTIC_ROUTER_VARIANTS)))
DEFAULT_VARIANTS = ("compiled", "pure", "pydantic", "litestar", "blacksheep", "bare")
SERVER_KINDS = SERVERS
BASE = "litestar"
# The target behind each server: compiled at least 1.3x Litestar's requests per second, on
# every route measured.
TARGET = ("compiled", 1.3)
# Shown beside the target: the fastest peer, against compiled.
BESIDE = "blacksheep"
# Pydantic routes on MsgspecRouter: at least 2.5x FastAPI + Pydantic's requests per second
# on the GET of one model (one city, or the route table's four-field item).
PYDANTIC_TARGET = ("pydantic-compiled", 2.5)
PYDANTIC_TARGET_ROUTES = ("city-get", "plain-get")
SCRIPT = Path(__file__).resolve().parent / "server.lua"
# The servers start together on one core: the time allowed grows with their number.
START_TIMEOUT = 60.0
START_TIMEOUT_PER_SERVER = 6.0
PREVIEW = 300
PLAIN_CASE = routetable.make_cases(1)[routetable.case_key(1, "get-first")]
CITY_CASES = cities.make_cases(cities.make_dataset())


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
            what = CITY_DESCRIPTIONS.get(self.key, self.case.label)
            return f"{what}, no dependencies (the city routes' app)"
        return self.case.label


# What the label says of a city route beyond its case's label.
CITY_DESCRIPTIONS = {
    "city-get": "GET /cities/{id}, one city",
    "city-validate": "POST /cities/validate, a body of 100 cities validated into Structs",
}


ROUTES = {
    "city-get": Route("city-get", "cities", CITY_CASES["get"]),
    "city-validate": Route("city-validate", "cities", CITY_CASES["validate"]),
    "city-list": Route("city-list", "cities", CITY_CASES["list"]),
    "city-search": Route("city-search", "cities", CITY_CASES["search"]),
    "two-get": Route("two-get", "deps", deps.CASES["two-get"]),
    "two-post": Route("two-post", "deps", deps.CASES["two-post"]),
    "plain-get": Route("plain-get", "table", PLAIN_CASE),
}


class BenchError(Exception):
    """Stops the run: a wrong answer, a failed server or wrk, a broken setup."""


def serves(variant: str, app: str) -> bool:
    """Whether the variant has this app: the dependency routes are those of the --deps
    variants."""
    return app != "deps" or variant in deps.DEPS_VARIANTS


def _routes(text: str | None, parser: argparse.ArgumentParser) -> list[str]:
    if text is None:
        return list(DEFAULT_ROUTES)
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names or set(names) - set(ROUTE_KEYS):
        parser.error(f"--server --routes: choose from {','.join(ROUTE_KEYS)}")
    return [name for name in ROUTE_KEYS if name in names]


def _kinds(text: str, parser: argparse.ArgumentParser) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names or set(names) - set(SERVER_KINDS):
        parser.error(f"--server-kind: choose from {','.join(SERVER_KINDS)}")
    return [name for name in SERVER_KINDS if name in names]


def settle(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check the options of the server mode and fill in its defaults."""
    if not args.deps or args.routers is not None or args.stream or args.formats or args.models:
        parser.error("--server is a part of --deps, and of no other mode")
    chosen = args.variants or list(DEFAULT_VARIANTS)
    if unknown := sorted(set(chosen) - set(VARIANTS)):
        parser.error(f"{','.join(unknown)}: not a --deps variant ({','.join(VARIANTS)})")
    args.server_variants = chosen
    args.server_routes = _routes(args.routes, parser)
    args.server_kinds = _kinds(args.server_kind, parser)
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


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (the state is the first)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def tree_cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its live descendants (Granian's worker), all their
    threads (the threadpool's and the runtime's too), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                parents.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError, IndexError):
            fields = _stat(current)
            total += int(fields[11]) + int(fields[12])
        pending.extend(parents.get(current, ()))
    return total / os.sysconf("SC_CLK_TCK")


def core_busy_seconds(cpu: int) -> float:
    """Non-idle time of one core, every process together, from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            ticks = [int(value) for value in line.split()[1:]]
            return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    raise BenchError(f"core {cpu} is not in /proc/stat")


@dataclass
class Server:
    """One variant's app under one server kind, pinned to the server core."""

    kind: str
    variant: str
    app: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    report_path: Path
    # Per route: the exact length every response must have (checked before the run).
    lengths: dict[str, int] = field(default_factory=dict)
    # Per route: the body of the checked answer.
    bodies: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def start(cls, kind: str, variant: str, app: str, cpu: int, scratch: Path, port: int) -> Server:
        stem = scratch / f"{kind}-{variant}-{app}"
        log_path, report_path = stem.with_suffix(".log"), stem.with_suffix(".json")
        command = ["taskset", "-c", str(cpu), sys.executable, "-m", "micro.serve", variant]
        command += ["--app", app, "--port", str(port), "--report", str(report_path)]
        command += ["--server", kind]
        # The same string hashing in every server and run, as the in-process workers have.
        env = dict(os.environ, PYTHONHASHSEED="0")
        with log_path.open("wb") as output:
            process = subprocess.Popen(
                command, cwd=BENCH, env=env, stdout=output, stderr=subprocess.STDOUT
            )
        return cls(kind, variant, app, port, process, log_path, report_path)

    @property
    def name(self) -> str:
        return f"{self.variant} ({self.app} app, {self.kind})"

    def _tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def _report(self) -> dict[str, Any]:
        with contextlib.suppress(OSError, ValueError):
            found: dict[str, Any] = json.loads(self.report_path.read_text())
            return found
        return {}

    def wait_ready(self, deadline: float, timeout: float) -> str | None:
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
                raise BenchError(f"{self.name} did not listen within {timeout:.0f} s")
            time.sleep(0.05)

    def stop(self) -> dict[str, Any]:
        """Shut the server down as Ctrl-C does; what the app reported on its way out."""
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
            connection.request(case.method, case.target, body=case.body or None, headers=headers)
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
        self.bodies[route.key] = body


def wrk(args: argparse.Namespace, server: Server, route: Route, seconds: int) -> dict[str, Any]:
    """Load one route of one server for `seconds`; wrk's result, every response checked."""
    case = route.case
    command = ["taskset", "-c", str(args.client_cpu), "wrk", "-t1", f"-c{args.connections}"]
    command += [f"-d{seconds}s", "--timeout", "10s", "-s", str(SCRIPT)]
    for name, value in case.headers:
        command += ["-H", f"{name.decode()}: {value.decode()}"]
    command += [f"http://127.0.0.1:{server.port}", "--", case.method, case.target]
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
        tree_cpu_seconds(pid),
        time.monotonic(),
    )
    outcome = wrk(args, server, route, args.duration)
    cpu_after, wall_after = tree_cpu_seconds(pid), time.monotonic()
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
        "load1": os.getloadavg()[0],
    }


# ------------------------------------------------------------------------------ the run


ServerKey = tuple[str, str, str]  # (server kind, variant, app)
# Per server kind, route and variant: the measurements of each round, in round order.
Results = dict[str, dict[str, dict[str, list[dict[str, float]]]]]


def start_servers(
    args: argparse.Namespace, scratch: Path, skipped: dict[str, str]
) -> dict[ServerKey, Server]:
    variants = list(args.server_variants)
    if "upstream" in variants and (reason := ensure_upstream()):
        skipped["upstream"] = reason
        variants.remove("upstream")
    apps = sorted({ROUTES[key].app for key in args.server_routes})
    kinds = args.server_kinds
    keys = [
        (kind, variant, app)
        for kind in kinds
        for variant in variants
        for app in apps
        if serves(variant, app)
    ]
    count = len(keys)
    log(f"starting {count} servers ({', '.join(kinds)}) on CPU {args.cpu}: {', '.join(variants)}")
    for variant in variants:
        if left := [key for key in args.server_routes if not serves(variant, ROUTES[key].app)]:
            log(f"  {variant}: has no dependency routes, {', '.join(left)} not measured")
    servers = {
        key: Server.start(*key, args.cpu, scratch, port)
        for key, port in zip(keys, free_ports(count), strict=True)
    }
    timeout = START_TIMEOUT + START_TIMEOUT_PER_SERVER * count
    deadline = time.monotonic() + timeout
    try:
        for key in list(servers):
            if key not in servers:
                continue  # the variant was skipped when another of its servers did not start
            if reason := servers[key].wait_ready(deadline, timeout):
                variant = key[1]
                skipped[variant] = reason
                log(f"  {variant}: skipped, {reason}")
                for other in [other for other in servers if other[1] == variant]:
                    servers.pop(other).stop()
        for (_, _, app), server in servers.items():
            for route in args.server_routes:
                if ROUTES[route].app == app:
                    server.check(ROUTES[route])
            log(f"  {server.name}: listening on port {server.port}, answers checked")
        check_same_bytes(servers)
    except BaseException:
        for server in servers.values():
            server.stop()
        raise
    return servers


def check_same_bytes(servers: dict[ServerKey, Server]) -> None:
    """The Pydantic routes on MsgspecRouter must answer FastAPI's exact bytes."""
    for (kind, variant, app), server in servers.items():
        reference = servers.get((kind, PYDANTIC, app))
        if variant not in PYDANTIC_ROUTER_VARIANTS or reference is None:
            continue
        for route, body in server.bodies.items():
            if body != reference.bodies[route]:
                raise BenchError(
                    f"{server.name} answered {ROUTES[route].label} with other bytes than"
                    f" {reference.name}: {body[:PREVIEW]!r}; expected"
                    f" {reference.bodies[route][:PREVIEW]!r}"
                )


def run_rounds(
    args: argparse.Namespace, servers: dict[ServerKey, Server], variants: list[str]
) -> Results:
    routes = [ROUTES[key] for key in args.server_routes]
    kinds = args.server_kinds
    for route in routes:
        for kind in kinds:
            for variant in variants:
                if serves(variant, route.app):
                    wrk(args, servers[kind, variant, route.app], route, args.warmup_seconds)
        log(f"  warmed up {route.key}: {args.warmup_seconds} s per server and variant")
    results: Results = {
        kind: {
            route.key: {variant: [] for variant in variants if serves(variant, route.app)}
            for route in routes
        }
        for kind in kinds
    }
    for index in range(args.rounds):
        shift = index % len(variants)
        order = variants[shift:] + variants[:shift]
        for route in routes:
            for kind in kinds:
                cells = []
                for variant in order:
                    if not serves(variant, route.app):
                        continue
                    run = measure(args, servers[kind, variant, route.app], route)
                    results[kind][route.key][variant].append(run)
                    note = f" ({run['others']:.0%} others)" if run["others"] > 0.05 else ""
                    cells.append(f"{variant} {run['rps']:,.0f}{note}")
                log(f"round {index + 1}/{args.rounds} {kind} {route.key} req/s: {', '.join(cells)}")
    return results


def summarize(by_route: dict[str, dict[str, list[dict[str, float]]]]) -> dict[str, Any]:
    """One server kind's results: per route and variant, medians and ratios to BASE."""
    summary: dict[str, Any] = {}
    for route, by_variant in by_route.items():
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


def pydantic_targets(
    by_route: dict[str, dict[str, list[dict[str, float]]]],
) -> list[dict[str, Any]]:
    """PYDANTIC_TARGET under one server kind: the median of the per-round ratios of the
    requests per second to FastAPI + Pydantic's, on each GET of one model measured."""
    variant, least = PYDANTIC_TARGET
    found = []
    for route in PYDANTIC_TARGET_ROUTES:
        runs = by_route.get(route, {})
        if not runs.get(variant) or not runs.get(PYDANTIC):
            continue
        rps = [r["rps"] / b["rps"] for r, b in zip(runs[variant], runs[PYDANTIC], strict=True)]
        cpu = [
            b["cpu_us"] / r["cpu_us"] for r, b in zip(runs[variant], runs[PYDANTIC], strict=True)
        ]
        median = statistics.median(rps)
        found.append(
            {
                "route": route,
                "variant": variant,
                "base": PYDANTIC,
                "rps_vs_base": median,
                "rounds": rps,
                "by_cpu": statistics.median(cpu),
                "at_least": least,
                "met": median >= least,
            }
        )
    return found


SERVER_LABELS = {
    "uvicorn": "uvicorn (httptools, asyncio loop, 1 process, no access log)",
    "granian": "Granian (--interface asgi, 1 worker, 1 runtime thread, asyncio loop, HTTP/1,"
    " no access log)",
}


def targets(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The target on each route under one server kind, with BESIDE's ratio to compiled."""
    variant, least = TARGET
    found = []
    for route, rows in summary.items():
        row = rows.get(variant, {})
        if (ratio := row.get("rps_vs_base")) is None:
            continue
        entry = {
            "route": route,
            "variant": variant,
            "rps_vs_base": ratio,
            "rounds": row["round_rps_vs_base"],
            # On a shared core requests/s also measure the others' share; CPU time less so.
            "by_cpu": 1 / row["cpu_vs_base"],
            "at_least": least,
            "met": ratio >= least,
        }
        if (peer := rows.get(BESIDE)) is not None:
            entry[f"{BESIDE}_rps_vs_{variant}"] = peer["rps"] / row["rps"]
        found.append(entry)
    return found


def print_pydantic_targets(out: TextIO, results: Results) -> None:
    found = {kind: pydantic_targets(by_route) for kind, by_route in results.items()}
    if not any(found.values()):
        return
    variant, least = PYDANTIC_TARGET
    print(
        f"\ntarget: {variant} / {PYDANTIC} requests/s >= {least:.1f}x on the GET of one model"
        " (median of the per-round ratios)",
        file=out,
    )
    for kind, rows in found.items():
        for row in rows:
            rounds = ", ".join(f"{r:.2f}" for r in row["rounds"])
            print(
                f"  {kind:<8} {row['route']:<14} {row['rps_vs_base']:.2f}x"
                f" ({'met' if row['met'] else 'not met'}; rounds {rounds}; by CPU time"
                f" {row['by_cpu']:.2f}x)",
                file=out,
            )


def print_report(
    out: TextIO,
    args: argparse.Namespace,
    results: Results,
    summaries: dict[str, dict[str, Any]],
    loads: tuple[tuple[float, ...], tuple[float, ...]],
    sessions: dict[str, Any],
    skipped: dict[str, str],
) -> None:
    before, after = (", ".join(f"{x:.2f}" for x in load) for load in loads)
    print(
        f"server benchmark (--deps --server): servers pinned to CPU {args.cpu}, wrk -t1"
        f" -c{args.connections} pinned to CPU {args.client_cpu}; {args.rounds} round(s) of"
        f" {args.duration} s per server, variant and route, order rotated"
        + (" (--quick: figures are not meaningful)" if args.quick else ""),
        file=out,
    )
    print(f"load average before {before}, after {after}", file=out)
    print(
        f"req/s and CPU µs/resp (the server's CPU time per response): medians over rounds;"
        f" vs {BASE}: median of the per-round ratios (req/s: higher is faster; CPU: lower is);"
        f" others: share of the server core other processes took",
        file=out,
    )
    for kind, summary in summaries.items():
        print(f"\n=== {SERVER_LABELS[kind]}", file=out)
        for key, rows in summary.items():
            width = max(10, *(len(variant) for variant in rows))
            print(f"\n{ROUTES[key].label}", file=out)
            print(
                f"  {'variant':<{width}} {'req/s':>9} {f'vs {BASE}':>12} {'CPU µs/resp':>12}"
                f" {f'vs {BASE}':>12} {'p50 ms':>7} {'others':>7}",
                file=out,
            )
            for variant, row in rows.items():
                rps_ratio, cpu_ratio = row.get("rps_vs_base"), row.get("cpu_vs_base")
                print(
                    f"  {variant:<{width}} {row['rps']:>9,.0f}"
                    f" {f'{rps_ratio:.2f}x' if rps_ratio is not None else '-':>12}"
                    f" {row['cpu_us']:>12.1f}"
                    f" {f'{cpu_ratio:.2f}x' if cpu_ratio is not None else '-':>12}"
                    f" {row['p50_ms']:>7.2f} {row['others']:>6.0%}",
                    file=out,
                )
    found_targets = {kind: targets(summary) for kind, summary in summaries.items()}
    if any(found_targets.values()):
        print(
            f"\ntarget: compiled / {BASE} requests/s >= {TARGET[1]:.1f}x on every route", file=out
        )
    for kind, measured in found_targets.items():
        for found in measured:
            rounds = ", ".join(f"{r:.2f}" for r in found["rounds"])
            beside = found.get(f"{BESIDE}_rps_vs_{found['variant']}")
            peer = f"; {BESIDE} / compiled {beside:.2f}x" if beside is not None else ""
            print(
                f"  {kind:<8} {found['route']:<14} {found['rps_vs_base']:.2f}x"
                f" ({'met' if found['met'] else 'not met'}; rounds {rounds}; by CPU time"
                f" {found['by_cpu']:.2f}x{peer})",
                file=out,
            )
    print_pydantic_targets(out, results)
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
    servers: dict[ServerKey, Server] = {}
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
            for (kind, variant, app), server in servers.items():
                report = server.stop()
                if app == "deps":
                    sessions[f"{kind} {variant}"] = report.get(
                        "sessions_open", report.get("error", "no report")
                    )
    failed = {name: count for name, count in sessions.items() if count != 0}
    loads = (loads_before, os.getloadavg())
    summaries = {kind: summarize(by_route) for kind, by_route in results.items()}
    log(f"done in {time.perf_counter() - started:.0f} s")
    print_report(sys.stdout, args, results, summaries, loads, sessions, skipped)
    if args.json:
        write_json(args, meta, results, summaries, loads, sessions, skipped)
    if failed:
        log(f"error: sessions left open: {failed}")
        return 1
    return 0


def write_json(
    args: argparse.Namespace,
    meta: dict[str, Any],
    results: Results,
    summaries: dict[str, dict[str, Any]],
    loads: tuple[tuple[float, ...], tuple[float, ...]],
    sessions: dict[str, Any],
    skipped: dict[str, str],
) -> None:
    config = {
        name: getattr(args, name)
        for name in (
            "rounds",
            "duration",
            "warmup_seconds",
            "connections",
            "cpu",
            "client_cpu",
            "quick",
        )
    }
    record = run_record(
        {
            **{name: meta.get(name) for name in ("fastapi", "msgspec", "litestar", "blacksheep")},
            **versions(("uvicorn", "httptools", "granian")),
        }
    )
    record["load"] = load_text(loads)
    result = {
        "benchmark": "server",
        "run": record,
        "meta": {**meta, "load_before": loads[0], "load_after": loads[1]},
        "config": {
            **config,
            "server": True,
            "server_kinds": args.server_kinds,
            "routes": args.server_routes,
        },
        "skipped": skipped,
        "sessions_open": sessions,
        "servers": {
            kind: {
                "label": SERVER_LABELS[kind],
                "targets": targets(summaries[kind]),
                "pydantic_targets": pydantic_targets(by_route),
                "routes": {
                    key: {
                        "label": ROUTES[key].label,
                        "summary": summaries[kind][key],
                        "rounds": by_route[key],
                    }
                    for key in by_route
                },
            }
            for kind, by_route in results.items()
        },
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    log(f"results written to {args.json}")
