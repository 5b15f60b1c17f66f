"""The benchmark tables of the README and the docs, and the README's picture, written from
bench/results/*.json.

    python bench/tables.py                 # rewrite every table in place, redraw the
                                           # picture if stale (make tables)
    python bench/tables.py --take-anyway   # the same from a city run beyond the limits
    python bench/tables.py --check         # exit 1, naming them, if any table or the
                                           # picture differs

A table lives between two marker lines of its page (README.md or docs/*.md):

    <!-- table: micro-cities.json -->
    ...written by this script...
    <!-- /table -->

A results file's name gives all its tables, under a box with its run record (date, commit,
load, command, machine), as the docs' benchmark page shows them; a view's name (VIEWS)
gives the README's compact tables, each from the newest results file of its kind (by the
run record's date and time). A rerun that writes its --json into bench/results/ is then
shown by `make tables`, and the test suite fails while a page's table differs from what
the committed results give (tests/test_benchmark_tables.py). Figures in the prose around
the tables are the prose's own: reread it after a rerun.

The README's figures, a table (the view `readme-cities`) and a picture (CHART, drawn by
bench/readme_chart.py), come from the newest full city run only if that run kept the
limits LOAD_LIMIT and SCATTER_LIMIT: writing refuses it otherwise, unless --take-anyway,
and the caption then says which limits it broke. `--check` compares only: a page can hold
a run beyond the limits only if someone wrote it with --take-anyway, and its caption says so.

Only the standard library: the docs build (docs/hooks/benchmarks.py) imports this module
by its path to check the pages and to draw the plots from the same data (`Rendered.plot`);
matplotlib is imported only to redraw the README's picture.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import re
import statistics
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BLOCK = re.compile(
    r"^<!-- table: (?P<name>[\w.-]+) -->\n(?P<body>.*?)^<!-- /table -->$",
    re.MULTILINE | re.DOTALL,
)
NO_LOAD = "load not recorded"
# Pairs of the city routes' per-round ratio table.
CITY_PAIRS = (
    ("compiled", "pure"),
    ("compiled", "floor"),
    ("compiled", "litestar"),
    ("compiled", "upstream"),
    ("compiled", "blacksheep"),
    ("compiled", "bare"),
    ("upstream", "floor"),
)
# How the README names the variants, in the order of its columns.
VARIANT_NAMES = {
    "compiled": "compiled",
    "pure": "pure",
    "upstream": "upstream 0.0.4",
    "pydantic": "FastAPI + Pydantic",
    "pydantic-compiled": "Pydantic on MsgspecRouter",
    "pydantic-pure": "Pydantic on MsgspecRouter, pure",
    "litestar": "Litestar",
    "blacksheep": "BlackSheep",
    "floor": "hand-written floor",
    "bare": "bare ASGI",
}
SERVER_NAMES = {"uvicorn": "uvicorn", "granian": "Granian"}
CLOCKS = {"cpu": "CPU", "wall": "wall"}
# The server mode's routes, as the README's table names them.
SERVER_ROUTES = {
    "city-get": "`GET /cities/{id}`",
    "city-validate": "`POST /cities/validate` (100 cities)",
    "city-list": "`GET /cities?limit=100`",
    "city-search": "`POST /cities/search`",
    "two-get": "`GET /two/items/{id}` (two dependencies)",
    "two-post": "`POST /two/items` (two dependencies)",
    "plain-get": "`GET /r0/items/{id}`",
}

Doc = dict[str, Any]
# What the docs build draws under a results file's tables: ("bars", {group: {variant:
# value}}, y label) or ("routes", {route: data}, router counts); None for no plot.
Plot = tuple[str, Any, Any] | None


@dataclass(frozen=True)
class Rendered:
    text: str
    plot: Plot = None


class TableError(Exception):
    """A page names a table that no results file gives."""


def load_results(folder: Path = RESULTS) -> dict[str, Doc]:
    documents = {}
    for path in sorted(folder.glob("*.json")):
        document = json.loads(path.read_text())
        if "run" not in document:
            raise TableError(f"{path}: no 'run' record (date, commit, machine, command)")
        documents[path.name] = document
    return documents


# --- formatting ------------------------------------------------------------------------


def table(columns: list[str], rows: list[list[Any]], right_from: int = 1) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(columns))]
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def stated_load(document: Doc) -> str | None:
    """The load the run record states: its `load`, or the 1-minute load averages it took
    before and after the timings."""
    run = document["run"]
    if run.get("load"):
        return str(run["load"])
    averages = run.get("load_average")
    if averages:
        return f"{averages['before'][0]:.2f} before, {averages['after'][0]:.2f} after"
    return None


def load(document: Doc) -> str:
    """The load the run record states, or that it states none."""
    return stated_load(document) or NO_LOAD


def load_phrase(document: Doc) -> str:
    found = stated_load(document)
    return f"load {found}" if found else NO_LOAD


def provenance(name: str, document: Doc) -> str:
    run = document["run"]
    versions = ", ".join(f"{k} {v}" for k, v in run.get("versions", {}).items() if v)
    python = f"Python {run['python']}" if run.get("python") else ""
    lines = [
        f'??? info "`bench/results/{name}`: measured {run["date"]} at `{run["commit"]}`,'
        f' {load_phrase(document)}"',
        "",
        f"    - command: `{run['command']}`",
        f"    - machine: {run['machine']}",
    ]
    if python or versions:
        lines.append(f"    - {', '.join(part for part in (python, versions) if part)}")
    if document.get("config", {}).get("quick"):
        lines.append("    - a `--quick` smoke run: its timings are not meaningful")
    for key in ("note", "source"):
        if run.get(key):
            lines.append(f"    - {run[key]}")
    return "\n".join(lines)


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    low, middle, high = statistics.quantiles(values, n=4)
    return middle, low, high


def spread(values: list[float]) -> str:
    """The quartiles of per-round ratios, where there are rounds enough."""
    if len(values) < 2:
        return "-"
    _, low, high = _quartiles(values)
    return f"[{low:.2f}, {high:.2f}]"


# --- the results files' tables -----------------------------------------------------------


def city_ratio_quartiles(document: Doc) -> dict[str, dict[str, list[float]]]:
    """Pair -> route -> [median, lower quartile, upper quartile] of the per-round ratios."""
    if "ratio_quartiles" in document:
        found: dict[str, dict[str, list[float]]] = document["ratio_quartiles"]
        return found
    clock = document["config"].get("clock", "cpu")
    found = {}
    for a, b in CITY_PAIRS:
        for route, data in document["routes"].items():
            rounds = data["rounds_us"][clock]
            if a in rounds and b in rounds and len(rounds[a]) >= 2:
                ratios = [x / y for x, y in zip(rounds[a], rounds[b], strict=True)]
                found.setdefault(f"{a}/{b}", {})[route] = list(_quartiles(ratios))
    return found


def pydantic_targets(document: Doc) -> list[str]:
    """The Pydantic routes on MsgspecRouter against FastAPI + Pydantic (micro.py's
    `pydantic_targets`), where the run measured them."""
    targets = document.get("pydantic_targets") or []
    if not targets:
        return []
    rows = [
        [
            target["name"],
            ratio(target["median"]),
            spread(target["rounds"]),
            f"≤ {target['at_most']:g}x: {'met' if target['met'] else 'not met'}",
        ]
        for target in targets
    ]
    return [
        "Pydantic routes on `MsgspecRouter` + `install_dispatch`, targets: medians of the"
        " per-round ratios with their quartiles (lower is faster):\n\n"
        + table(["ratio", "median", "quartiles", "target"], rows)
    ]


def render_micro_cities(document: Doc) -> Rendered:
    parts = []
    groups: dict[str, dict[str, float]] = {}
    for route, data in document["routes"].items():
        rows = [
            [
                variant,
                f"{row['median_us']:.1f}",
                f"{row['iqr_percent']:.1f}%",
                ratio(row.get("ratio_to_upstream")),
                ratio(row.get("ratio_to_floor")),
                ratio(row.get("ratio_to_blacksheep")),
                ratio(row.get("ratio_to_bare")),
            ]
            for variant, row in data["summary"].items()
        ]
        columns = ["variant", "µs/req", "iqr", "vs upstream", "vs floor", "vs blacksheep"]
        parts.append(f"**{data['label']}**\n\n" + table([*columns, "vs bare"], rows))
        groups[route] = {v: row["median_us"] for v, row in data["summary"].items()}
    quartiles = city_ratio_quartiles(document)
    if quartiles:
        routes = list(document["routes"])
        rows = [
            [route]
            + [
                f"{q[route][0]:.2f} [{q[route][1]:.2f}, {q[route][2]:.2f}]" if route in q else "-"
                for q in quartiles.values()
            ]
            for route in routes
        ]
        parts.append(
            "Medians of the per-round ratios, with their quartiles:\n\n"
            + table(["route", *quartiles], rows)
        )
    middleware = document.get("middleware") or []
    if middleware:
        rows = [[found["name"], ratio(found["median"])] for found in middleware]
        parts.append(
            "One user middleware on `GET /cities/{id}`, medians of the per-round ratios:\n\n"
            + table(["ratio", "median"], rows)
        )
    parts += pydantic_targets(document)
    return Rendered("\n\n".join(parts), ("bars", groups, "µs per request (median)"))


def render_micro_stream(document: Doc) -> Rendered:
    items = document["config"].get("items_per_request", 1000)
    parts = []
    groups: dict[str, dict[str, float]] = {}
    for data in document["routes"].values():
        base = next((k for k in data["summary"]["compiled"] if k.startswith("ratio_to_")), None)
        rows = [
            [
                variant,
                f"{row['median_us']:.1f}",
                f"{items / row['median_us'] * 1e6:,.0f}",
                f"{row['iqr_percent']:.1f}%",
                ratio(row.get(base)) if base else "-",
            ]
            for variant, row in data["summary"].items()
        ]
        vs = f"vs {base.removeprefix('ratio_to_')}" if base else "vs"
        parts.append(
            f"**{data['label']}**\n\n" + table(["variant", "µs/req", "items/s", "iqr", vs], rows)
        )
    for route, data in document["routes"].items():
        groups[route] = {v: items / r["median_us"] * 1e6 for v, r in data["summary"].items()}
    return Rendered("\n\n".join(parts), ("bars", groups, "items per second (median)"))


# The route table's columns, as `bench/micro.py --routers` names its cases.
ROUTER_COLUMNS = {
    "get-first": "GET, first router",
    "get-last": "GET, last router",
    "post-first": "POST, first router",
    "post-last": "POST, last router",
}


def render_micro_routers(document: Doc) -> Rendered:
    sizes: list[int] = document["config"]["routers"]
    routes = document["routes"]
    parts = []
    for size in sizes:
        keys = {r: f"{r}@{size}" for r in ROUTER_COLUMNS}
        present = [r for r, key in keys.items() if key in routes]
        variants = list(dict.fromkeys(v for r in present for v in routes[keys[r]]["summary"]))
        rows = []
        for variant in variants:
            cells = [variant]
            for route in present:
                row = routes[keys[route]]["summary"].get(variant)
                cells.append(
                    "-"
                    if row is None
                    else f"{row['median_us']:.1f} ({ratio(row.get('ratio_to_app-floor'))})"
                )
            rows.append(cells)
        columns = ["variant"] + [ROUTER_COLUMNS[r] for r in present]
        plural = "router" if size == 1 else "routers"
        parts.append(f"**{size} {plural}** (the last is `/r{size - 1}`)\n\n" + table(columns, rows))
    targets = document.get("targets")
    if targets:
        rows = [
            [t["label"], ratio(t["median"]), f"[{t['quartiles'][0]:.2f}, {t['quartiles'][1]:.2f}]"]
            for t in targets
        ]
        parts.append(
            "Targets, medians of the per-round ratios with their quartiles (lower is faster):\n\n"
            + table(["ratio", "median", "quartiles"], rows)
        )
    parts += pydantic_targets(document)
    return Rendered("\n\n".join(parts), ("routes", routes, sizes))


DEPS_TITLES = {
    "two-get": "GET, two deps",
    "two-post": "POST, two deps",
    "deep-get": "GET, six deps",
}
OVERRIDE = "-override"


# The references a dependency run's ratios are shown against, where it measured them.
DEPS_BASES = {
    "pydantic": "FastAPI + Pydantic",
    "litestar": "Litestar",
    "blacksheep": "BlackSheep",
    "floor": "the floor",
}


def render_micro_deps(document: Doc) -> Rendered:
    """The dependency mode: each route with and without an unrelated override set, the
    ratios to the references measured (`DEPS_BASES`), and the targets."""
    routes = document["routes"]
    clock = document["config"].get("clock", "cpu")
    plain = [r for r in DEPS_TITLES if r in routes]
    variants = list(dict.fromkeys(v for r in routes.values() for v in r["summary"]))
    rows = []
    for variant in variants:
        cells = [variant]
        for route in plain:
            base = routes[route]["summary"].get(variant)
            over = routes.get(route + OVERRIDE, {}).get("summary", {}).get(variant)
            cells.append(f"{base['median_us']:.1f}" if base else "-")
            cells.append(f"{over['median_us']:.1f}" if over else "-")
            rounds = routes.get(route + OVERRIDE, {}).get("rounds_us", {}).get(clock, {})
            if over and base and variant in rounds:
                mine = routes[route]["rounds_us"][clock][variant]
                ratios = [o / p for o, p in zip(rounds[variant], mine, strict=True)]
                cells.append(ratio(statistics.median(ratios)))
            else:
                cells.append("-")
        rows.append(cells)
    columns = ["variant"]
    for route in plain:
        title = DEPS_TITLES[route]
        columns += [f"{title}: µs/req", "+override", "override/without"]
    parts = [
        "µs per request; *+override*: the same route on an app with an unrelated"
        " `app.dependency_overrides` entry set, and the median per-round ratio of the two.\n\n"
        + table(columns, rows)
    ]
    # The references the run measured, of those the page names.
    bases = [
        base
        for base in DEPS_BASES
        if any(
            row.get(f"ratio_to_{base}") is not None
            for route in plain
            for row in routes[route]["summary"].values()
        )
    ]
    rows = [
        [variant]
        + [
            ratio(routes[route]["summary"].get(variant, {}).get(f"ratio_to_{base}"))
            for route in plain
            for base in bases
        ]
        for variant in variants
    ]
    columns = ["variant"] + [f"{DEPS_TITLES[r]}: vs {b}" for r in plain for b in bases]
    if bases:
        names = [DEPS_BASES[base] for base in bases]
        named = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        parts.append(
            f"Medians of the per-round ratios to {named}, without the override:\n\n"
            + table(columns, rows)
        )
    targets = document.get("targets") or []
    if targets:
        rows = []
        for target in targets:
            _, low, high = _quartiles(target["rounds"])
            verdict = "met" if target["median"] <= target["at_most"] else "not met"
            rows.append(
                [
                    target["name"],
                    ratio(target["median"]),
                    f"[{low:.2f}, {high:.2f}]",
                    f"≤ {target['at_most']:.1f}x: {verdict}",
                ]
            )
        parts.append(
            "Targets for the two-dependency route, medians of the per-round ratios with "
            "their quartiles:\n\n" + table(["ratio", "median", "quartiles", "target"], rows)
        )
    groups = {
        DEPS_TITLES[r]: {v: row["median_us"] for v, row in routes[r]["summary"].items()}
        for r in plain
    }
    plot = ("bars", groups, "µs per request (median), without the override")
    return Rendered("\n\n".join(parts), plot)


def render_formats(document: Doc) -> Rendered:
    rows = [
        [
            case["case"],
            f"{case['median_us']:.1f}",
            f"{case['bytes']}",
            ratio(case.get("ratio_to_json")) if "ratio_to_json" in case else "-",
        ]
        for case in document["cases"]
    ]
    groups: dict[str, dict[str, float]] = {}
    for case in document["cases"]:
        twin, route, fmt = case["case"].split("/")
        groups.setdefault(f"{twin}/{route}", {})[fmt] = case["median_us"]
    text = table(["twin/route/format", "µs/req", "bytes", "vs json"], rows)
    return Rendered(text, ("bars", groups, "µs per request (median)"))


def render_icount(document: Doc) -> Rendered:
    counts: dict[str, dict[str, float]] = document["counts"]
    variants = list(dict.fromkeys(v for row in counts.values() for v in row))
    rows = [
        [route] + [f"{row[v]:,.0f}" if v in row else "-" for v in variants]
        for route, row in counts.items()
    ]
    requests = document.get("meta", {}).get("requests")
    note = f"Instructions per request ({requests:,} counted requests):\n\n" if requests else ""
    text = note + table(["route", *variants], rows)
    if misses := document.get("misses"):
        text += "\n\n" + render_misses(misses)
    return Rendered(text)


def render_misses(misses: dict[str, dict[str, dict[str, float]]]) -> str:
    """icount.py --cache-sim: the simulated misses per request, by route and variant."""
    columns = ["route", "variant", "instructions", "I1 misses", "per 100 instr", "D1 misses"]
    rows = [
        [
            route,
            variant,
            f"{found['instructions']:,.0f}",
            f"{found['I1']:,.0f}",
            f"{100 * found['I1'] / found['instructions']:.2f}",
            f"{found['D1']:,.0f}",
        ]
        for route, by_variant in misses.items()
        for variant, found in by_variant.items()
    ]
    return "Cache misses per request, callgrind's model of this machine's caches:\n\n" + table(
        columns, rows, right_from=2
    )


def render_table(document: Doc) -> Rendered:
    rows = [
        [f"{cell:,}" if isinstance(cell, int) else cell for cell in row] for row in document["rows"]
    ]
    return Rendered(f"**{document['title']}**\n\n" + table(document["columns"], rows, right_from=2))


def render_errors(document: Doc) -> Rendered:
    """bench/errors.py's --json: per case the status and errors of each variant's answer,
    its time and ratios, and the instructions per request where counted."""
    timings = document.get("timings") or {}
    counts = (document.get("icount") or {}).get("counts", {})
    columns = ["variant", "status", "errors", "µs/req", "iqr", "vs pydantic", "vs msgspec errors"]
    columns += ["instr/req", "instr vs pydantic", "instr vs msgspec errors"] if counts else []
    answers_by_case: dict[str, dict[str, Doc]] = {}
    for variant, by_case in document["answers"].items():
        for case, answer in by_case.items():
            answers_by_case.setdefault(case, {})[variant] = answer
    parts = []
    for case, answers in answers_by_case.items():
        timed = timings.get(case, {}).get("summary", {})
        counted = counts.get(case, {})
        rows = []
        for variant, answer in answers.items():
            row = timed.get(variant, {})
            cells = [variant, answer["status"], answer["errors"]]
            cells += (
                [f"{row['median_us']:.1f}", f"{row['iqr_percent']:.1f}%"] if row else ["-", "-"]
            )
            cells += [ratio(row.get("vs_pydantic")), ratio(row.get("vs_msgspec_errors"))]
            if counts:
                base = variant.removesuffix("-fastapi")
                value = counted.get(variant)
                cells.append(f"{value:,.0f}" if value is not None else "-")
                for other in ("pydantic", base):
                    known = value is not None and other != variant and other in counted
                    cells.append(f"{value / counted[other]:.3f}x" if known else "-")
            rows.append(cells)
        label = timings.get(case, {}).get("label", "")
        parts.append(f"**{case}**{f': {label}' if label else ''}\n\n" + table(columns, rows))
    return Rendered("\n\n".join(parts))


def change(found: Doc) -> str:
    """As bench/service/analysis.py prints a change: +12.3% [-4.5%, +30.1%]."""
    text = f"{found['estimate']:+.1%}"
    if found.get("low") is not None and found.get("high") is not None:
        text += f" [{found['low']:+.1%}, {found['high']:+.1%}]"
    return text


def render_service(document: Doc) -> Rendered:
    """bench/service/run.py's --json: one table per pair of variants compared."""
    columns = ["request", "RPS A → B", "RPS change [95% CI]", "CPU µs/resp A → B", "CPU change"]
    parts = []
    results: list[Doc] = document["results"]
    for pair in dict.fromkeys(row["pair"] for row in results):
        rows = [
            [
                row["label"],
                f"{row['rps_a']:,.0f} → {row['rps_b']:,.0f}",
                change(row["rps_change"]),
                f"{row['cpu_a']:,.0f} → {row['cpu_b']:,.0f}",
                change(row["cpu_change"]),
            ]
            for row in results
            if row["pair"] == pair
        ]
        a, b = pair.split(":")
        parts.append(f"**{a} → {b}**\n\n" + table(columns, rows))
    parts += document.get("notes", [])
    return Rendered("\n\n".join(parts))


def server_kinds(document: Doc) -> dict[str, Doc]:
    """Per server kind, its routes and targets; a file from before --server-kind has
    uvicorn's routes at its top level."""
    if "servers" in document:
        found: dict[str, Doc] = document["servers"]
        return found
    return {"uvicorn": {"routes": document["routes"]}}


def server_target_cells(kind: str, target: Doc) -> list[str]:
    """A requests/s target behind a server: server, route, ratio, quartiles, by CPU time,
    and the verdict."""
    verdict = "met" if target["met"] else "not met"
    return [
        SERVER_NAMES[kind],
        f"`{target['route']}`",
        ratio(target["rps_vs_base"]),
        spread(target["rounds"]),
        ratio(target["by_cpu"]),
        f"≥ {target['at_least']:g}x: {verdict}",
    ]


def render_server(document: Doc) -> Rendered:
    """`bench/micro.py --deps --server --json`: requests/s and CPU per response under wrk,
    per server kind and route, and the targets."""
    columns = ["variant", "req/s", "vs litestar", "CPU µs/resp", "vs litestar", "p50 ms", "others"]
    kinds = server_kinds(document)
    parts = []
    for kind, found in kinds.items():
        for data in found["routes"].values():
            rows = [
                [
                    variant,
                    f"{row['rps']:,.0f}",
                    ratio(row.get("rps_vs_base")),
                    f"{row['cpu_us']:.1f}",
                    ratio(row.get("cpu_vs_base")),
                    f"{row['p50_ms']:.2f}",
                    f"{row['others']:.0%}",
                ]
                for variant, row in data["summary"].items()
            ]
            parts.append(f"**{SERVER_NAMES[kind]}: {data['label']}**\n\n" + table(columns, rows))
    rows = [
        [
            *server_target_cells(kind, target),
            ratio(target.get(f"blacksheep_rps_vs_{target['variant']}")),
        ]
        for kind, found in kinds.items()
        for target in found.get("targets", [])
    ]
    if rows:
        columns = [
            "server",
            "route",
            "compiled / litestar req/s",
            "quartiles",
            "by CPU time",
            "target",
            "blacksheep / compiled",
        ]
        parts.append(
            "Targets, medians of the per-round ratios (by CPU time: Litestar's CPU time per"
            " response over compiled's):\n\n" + table(columns, rows, right_from=2)
        )
    rows = [
        server_target_cells(kind, target)
        for kind, found in kinds.items()
        for target in found.get("pydantic_targets", [])
    ]
    if rows:
        columns = ["server", "route", "pydantic-compiled / pydantic req/s", "quartiles"]
        parts.append(
            "Pydantic routes on `MsgspecRouter` + `install_dispatch`, target on the GET of one"
            " model: medians of the per-round ratios (by CPU time: FastAPI + Pydantic's CPU"
            " time per response over ours):\n\n"
            + table([*columns, "by CPU time", "target"], rows, right_from=2)
        )
    parts += [f"- {note}" for note in document.get("notes", [])]
    return Rendered("\n\n".join(parts))


def render_file(document: Doc) -> Rendered:
    kind = document.get("benchmark")
    if kind == "micro":
        config = document["config"]
        if config.get("stream"):
            return render_micro_stream(document)
        if config.get("deps"):
            return render_micro_deps(document)
        if config.get("routers"):
            return render_micro_routers(document)
        return render_micro_cities(document)
    known: dict[str, Callable[[Doc], Rendered]] = {
        "formats": render_formats,
        "icount": render_icount,
        "table": render_table,
        "errors": render_errors,
        "service": render_service,
        "server": render_server,
    }
    if kind not in known:
        raise TableError(f"unknown benchmark kind {kind!r}")
    return known[kind](document)


# --- the README's views --------------------------------------------------------------------


# What a city run must have measured to be the README's table and picture, as for server
# runs below: ours beside the peers and the bare ASGI app, in the README's order.
FULL_CITY_ROUTES = ("validate", "list", "search", "get")
README_VARIANTS = (
    "compiled",
    "pure",
    "pydantic-compiled",
    "pydantic",
    "litestar",
    "blacksheep",
    "bare",
)


def is_city_run(document: Doc) -> bool:
    config = document.get("config", {})
    if document.get("benchmark") != "micro" or any(
        config.get(key) for key in ("stream", "deps", "routers", "quick")
    ):
        return False
    routes = document.get("routes", {})
    for route in FULL_CITY_ROUTES:
        measured = routes.get(route, {}).get("summary", {})
        if not all(variant in measured for variant in README_VARIANTS):
            return False
    return True


# What a server run must have measured to be the README's table: a run of fewer (a
# check of one route, say) is shown only where a page names its file.
FULL_SERVER_ROUTES = ("city-get", "city-validate", "two-get")
FULL_SERVER_VARIANTS = ("compiled", "pure", "litestar", "blacksheep")


def is_server_run(document: Doc) -> bool:
    if document.get("benchmark") != "server" or "servers" not in document:
        return False
    if document["config"].get("quick") or set(document["servers"]) != set(SERVER_NAMES):
        return False
    for found in document["servers"].values():
        for route in FULL_SERVER_ROUTES:
            measured = found["routes"].get(route, {}).get("summary", {})
            if not all(variant in measured for variant in FULL_SERVER_VARIANTS):
                return False
    return True


def newest(documents: dict[str, Doc], wanted: Callable[[Doc], bool]) -> str:
    """The name of the newest results file `wanted` accepts, by its run's date and time."""
    found = [name for name, document in documents.items() if wanted(document)]
    if not found:
        raise TableError("no results file of the kind the view shows")
    return max(
        found,
        key=lambda name: (
            documents[name]["run"]["date"],
            documents[name]["run"].get("time", ""),
            name,
        ),
    )


def source(name: str, document: Doc) -> str:
    run = document["run"]
    return (
        f"`{run['command']}` on {run['machine']} at `{run['commit']}` on {run['date']}"
        f" (`bench/results/{name}`), {load_phrase(document)}"
    )


# --- the README's figures, from a quiet run only ---------------------------------------------

# The limits a run must keep for the README's figures, written only here: the 1-minute load
# average before the run, and the scatter of its per-round ratios (each shown variant's
# time over compiled's in the same round, route by route), as the interquartile range of
# those ratios over their median. `make tables` refuses a run beyond either unless told
# to take it anyway (--take-anyway), and the figures' caption then says which it broke.
LOAD_LIMIT = 1.0
SCATTER_LIMIT = 0.15


def load_before(document: Doc) -> float | None:
    """The 1-minute load average the run recorded before its timings."""
    before = document.get("meta", {}).get("load_before")
    return float(before[0]) if before else None


def widest_scatter(document: Doc) -> tuple[float, str] | None:
    """The largest scatter of the per-round ratios to compiled among the README's variants,
    and which ratio on which route it is; None for a run of fewer than two rounds."""
    clock = document["config"].get("clock", "cpu")
    widest: tuple[float, str] | None = None
    for data in document["routes"].values():
        rounds = data["rounds_us"][clock]
        for variant in README_VARIANTS[1:]:
            ratios = [v / c for v, c in zip(rounds[variant], rounds["compiled"], strict=True)]
            if len(ratios) < 2:
                return None
            median, low, high = _quartiles(ratios)
            scatter = (high - low) / median
            if widest is None or scatter > widest[0]:
                widest = (scatter, f"{VARIANT_NAMES[variant]} over compiled, {data['label']}")
    return widest


def doubts(document: Doc) -> list[str]:
    """Why a run's figures may not be the README's: the limits it breaks; none if it keeps
    them."""
    found = []
    load = load_before(document)
    if load is None:
        found.append("no load average recorded before the run")
    elif load > LOAD_LIMIT:
        found.append(f"load average {load:.2f} before the run (limit {LOAD_LIMIT:.1f})")
    widest = widest_scatter(document)
    if widest is None:
        found.append("fewer than two rounds, so no scatter to judge")
    elif widest[0] > SCATTER_LIMIT:
        scatter, where = widest
        found.append(
            f"per-round ratios scattering by up to {scatter:.0%} ({where}; limit"
            f" {SCATTER_LIMIT:.0%}, interquartile range over median)"
        )
    return found


def taken_anyway(document: Doc) -> str:
    """What the caption says of a run shown although it breaks the limits; "" if it keeps
    them."""
    found = doubts(document)
    if not found:
        return ""
    return (
        "**Taken anyway** (`make tables TABLES_ARGS=--take-anyway`) from a run beyond the"
        f" limits for these figures: {'; '.join(found)}."
    )


def city_figures(documents: dict[str, Doc]) -> tuple[str, dict[str, dict[str, float]]]:
    """The README's source for the city routes, and µs per request by route and variant."""
    name = newest(documents, is_city_run)
    routes = documents[name]["routes"]
    figures = {
        data["label"]: {v: data["summary"][v]["median_us"] for v in README_VARIANTS}
        for data in routes.values()
    }
    return name, figures


def city_caption(name: str, document: Doc) -> str:
    config, run = document["config"], document["run"]
    versions = run.get("versions", {})
    caption = (
        f"µs per request, lower is faster (median of {config['rounds']} interleaved rounds,"
        f" {CLOCKS[config['clock']]} time, one pinned core, in-process ASGI), FastAPI"
        f" {versions.get('fastapi', '?')}, msgspec {versions.get('msgspec', '?')};"
        f" {source(name, document)}."
    )
    return f"{caption} {taken_anyway(document) or within_limits()}"


def within_limits() -> str:
    return (
        f"The run kept the limits for these figures: load average before it at most"
        f" {LOAD_LIMIT:.1f}, per-round ratios to compiled scattering by at most"
        f" {SCATTER_LIMIT:.0%} (interquartile range over median)."
    )


def view_cities(documents: dict[str, Doc]) -> str:
    name, figures = city_figures(documents)
    rows = [
        [f"`{label}`"] + [f"{by_variant[v]:.1f}" for v in README_VARIANTS]
        for label, by_variant in figures.items()
    ]
    columns = ["route", *(VARIANT_NAMES[v] for v in README_VARIANTS)]
    return city_caption(name, documents[name]) + "\n\n" + table(columns, rows)


# The README's picture of the same figures (bench/readme_chart.py draws it; matplotlib), and
# the PNG text chunk that records what it shows, so that a stale picture is found without
# drawing it again.
CHART = Path("docs") / "img" / "cities.png"
CHART_KEY = "msgspec-fastapi figures"
CHART_CODE = Path(__file__).with_name("readme_chart.py")


def chart_note(name: str, document: Doc) -> str:
    """The picture's caption, in plain text: how, where and when the run measured."""
    config, run = document["config"], document["run"]
    lines = [
        f"Median of {config['rounds']} interleaved rounds, {CLOCKS[config['clock']]} time, one"
        f" pinned core, in-process ASGI. {run['machine']}, commit {run['commit']},"
        f" {run['date']}, {load_phrase(document)} (bench/results/{name})."
    ]
    if found := doubts(document):
        lines.append("Taken anyway, beyond the limits for these figures: " + "; ".join(found))
    return "\n".join(lines)


def chart_stamp(documents: dict[str, Doc]) -> str:
    """What the picture must show: its source, caption and figures, as one JSON text."""
    name, figures = city_figures(documents)
    stamp = {
        "source": name,
        "note": chart_note(name, documents[name]),
        "variants": [VARIANT_NAMES[v] for v in README_VARIANTS],
        # The drawing code too: a picture drawn by an older version of it is stale.
        "drawn_by": hashlib.sha256(CHART_CODE.read_bytes()).hexdigest()[:16],
        "figures": {
            label: [round(by[v], 1) for v in README_VARIANTS] for label, by in figures.items()
        },
    }
    return json.dumps(stamp, sort_keys=True)


def png_text(path: Path) -> dict[str, str]:
    """The tEXt chunks of a PNG file."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise TableError(f"{path} is not a PNG file")
    found, at = {}, 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        at += 12 + length
    return found


def chart_is_current(root: Path, documents: dict[str, Doc]) -> bool:
    path = root / CHART
    return path.exists() and png_text(path).get(CHART_KEY) == chart_stamp(documents)


def view_servers(documents: dict[str, Doc]) -> str:
    name = newest(documents, is_server_run)
    document = documents[name]
    kinds = server_kinds(document)
    variants = [
        v
        for v in VARIANT_NAMES
        if any(v in r["summary"] for found in kinds.values() for r in found["routes"].values())
    ]
    rows = []
    for kind, found in kinds.items():
        for key, data in found["routes"].items():
            summary = data["summary"]
            compiled = summary.get("compiled", {})
            rows.append(
                [SERVER_ROUTES.get(key, f"`{key}`"), SERVER_NAMES[kind]]
                + [f"{summary[v]['rps']:,.0f}" if v in summary else "-" for v in variants]
                + [
                    ratio(compiled.get("rps_vs_base")),
                    ratio(1 / compiled["cpu_vs_base"]) if "cpu_vs_base" in compiled else "-",
                ]
            )
    config = document["config"]
    caption = (
        f"Requests per second behind a server (median of {config['rounds']} rounds of"
        f" {config['duration']} s; the server pinned to one core, wrk -t1"
        f" -c{config['connections']} on the other); the last two columns are the medians of"
        f" the per-round ratios, compiled over Litestar by requests/s and by CPU time per"
        f" response; {source(name, document)}:"
    )
    columns = [
        "route",
        "server",
        *(VARIANT_NAMES[v] for v in variants),
        "compiled / Litestar",
        "by CPU time",
    ]
    return caption + "\n\n" + table(columns, rows, right_from=2)


VIEWS: dict[str, Callable[[dict[str, Doc]], str]] = {
    "readme-cities": view_cities,
    "servers-summary": view_servers,
}


# --- pages -------------------------------------------------------------------------------


def render(name: str, documents: dict[str, Doc]) -> str:
    """What the block `name` holds: a view, or a results file's box and tables."""
    if name in VIEWS:
        return VIEWS[name](documents)
    if name not in documents:
        raise TableError(f"bench/results/{name} does not exist")
    document = documents[name]
    return provenance(name, document) + "\n\n" + render_file(document).text


def rewrite(page: str, documents: dict[str, Doc]) -> str:
    """`page` with every table block holding what `render` writes."""

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        return f"<!-- table: {name} -->\n\n{render(name, documents)}\n\n<!-- /table -->"

    return BLOCK.sub(fill, page)


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def stale_pages(root: Path, documents: dict[str, Doc], write: bool = False) -> list[str]:
    """The pages below `root` whose tables differ from what `documents` give; rewritten if
    `write`."""
    stale = []
    for path in pages(root):
        text = path.read_text(encoding="utf-8")
        written = rewrite(text, documents)
        if written != text:
            stale.append(path.relative_to(root).as_posix())
            if write:
                path.write_text(written, encoding="utf-8")
    return stale


def draw_chart(root: Path, documents: dict[str, Doc]) -> None:
    """The README's picture, drawn by bench/readme_chart.py (loaded by its path, as this
    module is by the docs build and the tests: only here is matplotlib needed)."""
    spec = importlib.util.spec_from_file_location("bench_readme_chart", CHART_CODE)
    assert spec is not None and spec.loader is not None
    chart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chart)
    name, figures = city_figures(documents)
    named = {route: {VARIANT_NAMES[v]: us for v, us in by.items()} for route, by in figures.items()}
    chart.draw(
        root / CHART,
        named,
        chart_note(name, documents[name]),
        {CHART_KEY: chart_stamp(documents)},
    )


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if a table or the README's picture differs",
    )
    parser.add_argument(
        "--take-anyway",
        action="store_true",
        help="write the README's figures from a run beyond the limits (load average before"
        f" it over {LOAD_LIMIT:.1f}, per-round ratios scattering by over {SCATTER_LIMIT:.0%});"
        " their caption says so",
    )
    args = parser.parse_args(argv)
    documents = load_results(root / "bench" / "results")
    if args.check:
        stale = stale_pages(root, documents)
        if not chart_is_current(root, documents):
            stale.append(CHART.as_posix())
        if stale:
            print(f"tables differ from bench/results in: {', '.join(stale)} (make tables)")
            return 1
        return 0
    name = newest(documents, is_city_run)
    if (found := doubts(documents[name])) and not args.take_anyway:
        print(
            f"refused: bench/results/{name} is beyond the limits for the README's figures:"
            f" {'; '.join(found)}. Rerun it on a quiet machine, or take it anyway"
            " (make tables TABLES_ARGS=--take-anyway; the caption then says so).",
            file=sys.stderr,
        )
        return 1
    stale = stale_pages(root, documents, write=True)
    if not chart_is_current(root, documents):
        draw_chart(root, documents)
        stale.append(CHART.as_posix())
    if stale:
        print(f"rewritten from bench/results: {', '.join(stale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
