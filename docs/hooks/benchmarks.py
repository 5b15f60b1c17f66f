"""MkDocs hook: the benchmark page's tables and plots, made from bench/results/*.json.

A page asks for a result with a line of its own, `<!-- bench: micro-cities.json -->`; the
hook puts there what the file measured (when, at which commit, on what, with which
command), its tables, and a plot where the kind of result has one. The plots are SVGs
drawn with matplotlib at build time and added to the site as generated files, never
committed. So a rerun that writes its JSON into bench/results/ changes the page, and the
prose around the tables says what to look for, not the numbers.

The files are what the benchmarks write with `--json` (`bench/micro.py` in its city,
route-table and streaming modes, `--formats`, `bench/icount.py`), each with a `run`
record, or a `table` or `service` document for the figures of a tool without `--json`.
A placeholder naming a missing file, and a results file no page shows, fail the build.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

BENCH = Path(__file__).resolve().parents[2] / "bench"
RESULTS = BENCH / "results"
PLACEHOLDER = re.compile(r"^<!-- bench: ([\w.-]+\.json) -->$", re.MULTILINE)
PLOT_DIR = "img/bench"
# Pairs of the city routes' per-round ratio table, as the README printed them.
CITY_PAIRS = (
    ("compiled", "pure"),
    ("compiled", "floor"),
    ("compiled", "litestar"),
    ("compiled", "upstream"),
    ("upstream", "floor"),
)

Doc = dict[str, Any]


def _bench_module(path: Path) -> ModuleType:
    """A module of the benchmarks, loaded by its path: bench/ is no package of the docs'
    venv, and the module imports nothing that venv lacks."""
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The route-table plot and column titles, as `bench/micro.py --routers --plot` draws them.
routetable_plot = _bench_module(BENCH / "micro" / "routetable_plot.py")

_documents: dict[str, Doc] = {}
_plots: dict[str, bytes] = {}
_rendered: dict[str, str] = {}


def load_results() -> dict[str, Doc]:
    documents = {}
    for path in sorted(RESULTS.glob("*.json")):
        document = json.loads(path.read_text())
        if "run" not in document:
            raise PluginError(f"{path}: no 'run' record (date, commit, machine, command)")
        documents[path.name] = document
    return documents


# --- plots -------------------------------------------------------------------------------


def _figure(width: float = 10, height: float = 4) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "msgspec-fastapi"  # the same SVG for the same data
    figure, axis = plt.subplots(1, 1, figsize=(width, height))
    return figure, axis


def _svg(figure: Any) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(figure)
    return buffer.getvalue()


def plot_bars(groups: dict[str, dict[str, float]], ylabel: str) -> bytes:
    """Grouped bars: one group per key of `groups`, one bar per variant within it."""
    figure, axis = _figure()
    variants = list(dict.fromkeys(v for bars in groups.values() for v in bars))
    width = 0.8 / len(variants)
    for index, variant in enumerate(variants):
        xs = [g + index * width for g, bars in enumerate(groups.values()) if variant in bars]
        ys = [bars[variant] for bars in groups.values() if variant in bars]
        axis.bar(xs, ys, width, label=variant)
    axis.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], list(groups))
    axis.set_ylabel(ylabel)
    axis.grid(True, axis="y", alpha=0.3)
    axis.legend(fontsize="small", ncols=min(len(variants), 4))
    return _svg(figure)


def plot_route_table(routes: dict[str, Doc], sizes: list[int]) -> bytes:
    """µs per request against routers in the app, to the last router, log-log."""
    summary = {key: data.get("summary", {}) for key, data in routes.items()}
    return _svg(routetable_plot.figure(summary, sizes))


# --- tables ------------------------------------------------------------------------------


def table(columns: list[str], rows: list[list[Any]], right_from: int = 1) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(columns))]
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def provenance(name: str, document: Doc) -> str:
    run = document["run"]
    versions = ", ".join(f"{k} {v}" for k, v in run.get("versions", {}).items() if v)
    python = f"Python {run['python']}" if run.get("python") else ""
    lines = [
        f'??? info "`bench/results/{name}`: measured {run["date"]} at `{run["commit"]}`"',
        "",
        f"    - command: `{run['command']}`",
        f"    - machine: {run['machine']}",
    ]
    if python or versions:
        lines.append(f"    - {', '.join(part for part in (python, versions) if part)}")
    load = run.get("load_average")
    if load:
        lines.append(
            f"    - load average (1 min) {load['before'][0]:.2f} before the timings, "
            f"{load['after'][0]:.2f} after"
        )
    if document.get("config", {}).get("quick"):
        lines.append("    - a `--quick` smoke run: its timings are not meaningful")
    for key in ("note", "source"):
        if run.get(key):
            lines.append(f"    - {run[key]}")
    return "\n".join(lines)


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    low, middle, high = statistics.quantiles(values, n=4)
    return middle, low, high


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


def render_micro_cities(name: str, document: Doc) -> str:
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
            ]
            for variant, row in data["summary"].items()
        ]
        columns = ["variant", "µs/req", "iqr", "vs upstream", "vs floor"]
        parts.append(f"**{data['label']}**\n\n" + table(columns, rows))
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
    _plots[name] = plot_bars(groups, "µs per request (median)")
    return "\n\n".join(parts)


def render_micro_stream(name: str, document: Doc) -> str:
    items = document["config"].get("items_per_request", 1000)
    parts = []
    groups: dict[str, dict[str, float]] = {}
    for route, data in document["routes"].items():
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
        groups[route] = {v: items / r["median_us"] * 1e6 for v, r in data["summary"].items()}
    _plots[name] = plot_bars(groups, "items per second (median)")
    return "\n\n".join(parts)


def render_micro_routers(name: str, document: Doc) -> str:
    sizes: list[int] = document["config"]["routers"]
    routes = document["routes"]
    parts = []
    for size in sizes:
        keys = {r: routetable_plot.case_key(size, r) for r in routetable_plot.COLUMNS}
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
        columns = ["variant"] + [routetable_plot.COLUMNS[r] for r in present]
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
    _plots[name] = plot_route_table(routes, sizes)
    return "\n\n".join(parts)


DEPS_TITLES = {
    "two-get": "GET, two deps",
    "two-post": "POST, two deps",
    "deep-get": "GET, six deps",
}
OVERRIDE = "-override"


def render_micro_deps(name: str, document: Doc) -> str:
    """The dependency mode: each route with and without an unrelated override set, the
    ratios to Litestar and to the floor, and the targets."""
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
    rows = [
        [variant]
        + [
            ratio(routes[route]["summary"].get(variant, {}).get(f"ratio_to_{base}"))
            for route in plain
            for base in ("litestar", "floor")
        ]
        for variant in variants
    ]
    columns = ["variant"] + [
        f"{DEPS_TITLES[r]}: vs {b}" for r in plain for b in ("litestar", "floor")
    ]
    parts.append(
        "Medians of the per-round ratios to Litestar and to the floor, without the override:"
        "\n\n" + table(columns, rows)
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
    _plots[name] = plot_bars(groups, "µs per request (median), without the override")
    return "\n\n".join(parts)


def render_formats(name: str, document: Doc) -> str:
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
    _plots[name] = plot_bars(groups, "µs per request (median)")
    return table(["twin/route/format", "µs/req", "bytes", "vs json"], rows)


def render_icount(name: str, document: Doc) -> str:
    counts: dict[str, dict[str, float]] = document["counts"]
    variants = list(dict.fromkeys(v for row in counts.values() for v in row))
    rows = [
        [route] + [f"{row[v]:,.0f}" if v in row else "-" for v in variants]
        for route, row in counts.items()
    ]
    requests = document.get("meta", {}).get("requests")
    note = f"Instructions per request ({requests:,} counted requests):\n\n" if requests else ""
    return note + table(["route", *variants], rows)


def render_table(name: str, document: Doc) -> str:
    rows = [
        [f"{cell:,}" if isinstance(cell, int) else cell for cell in row] for row in document["rows"]
    ]
    return f"**{document['title']}**\n\n" + table(document["columns"], rows, right_from=2)


def render_errors(name: str, document: Doc) -> str:
    """`bench/errors.py --json`: per case the status and errors of each variant's answer,
    its time and ratios, and the instructions per request where counted."""
    timings = document.get("timings") or {}
    counts = (document.get("icount") or {}).get("counts", {})
    columns = ["variant", "status", "errors", "µs/req", "iqr", "vs pydantic", "vs msgspec errors"]
    columns += ["instr/req", "instr vs pydantic", "instr vs msgspec errors"] if counts else []
    parts = []
    for case, answers in _cases(document).items():
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
    return "\n\n".join(parts)


def _cases(document: Doc) -> dict[str, dict[str, Doc]]:
    answers: dict[str, dict[str, Doc]] = {}
    for variant, by_case in document["answers"].items():
        for case, answer in by_case.items():
            answers.setdefault(case, {})[variant] = answer
    return answers


def change(found: Doc) -> str:
    """As bench/service/analysis.py prints a change: +12.3% [-4.5%, +30.1%]."""
    text = f"{found['estimate']:+.1%}"
    if found.get("low") is not None and found.get("high") is not None:
        text += f" [{found['low']:+.1%}, {found['high']:+.1%}]"
    return text


def render_service(name: str, document: Doc) -> str:
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
    return "\n\n".join(parts)


def render_server(name: str, document: Doc) -> str:
    """`bench/micro.py --deps --server --json`: requests/s and CPU per response under wrk."""
    columns = ["variant", "req/s", "vs litestar", "CPU µs/resp", "vs litestar", "p50 ms", "others"]
    parts = []
    for data in document["routes"].values():
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
        parts.append(f"**{data['label']}**\n\n" + table(columns, rows))
    parts += [f"- {note}" for note in document.get("notes", [])]
    return "\n\n".join(parts)


def renderer(document: Doc) -> Callable[[str, Doc], str]:
    kind = document.get("benchmark")
    if kind == "micro":
        config = document["config"]
        if config.get("stream"):
            return render_micro_stream
        if config.get("deps"):
            return render_micro_deps
        if config.get("routers"):
            return render_micro_routers
        return render_micro_cities
    known: dict[str, Callable[[str, Doc], str]] = {
        "formats": render_formats,
        "icount": render_icount,
        "table": render_table,
        "errors": render_errors,
        "service": render_service,
        "server": render_server,
    }
    if kind not in known:
        raise PluginError(f"unknown benchmark kind {kind!r}")
    return known[kind]


# --- MkDocs events -----------------------------------------------------------------------


def render(name: str) -> str:
    if name not in _documents:
        raise PluginError(f"bench/results/{name} does not exist")
    document = _documents[name]
    body = renderer(document)(name, document)
    parts = [provenance(name, document), body]
    if name in _plots:
        stem = name.removesuffix(".json")
        parts.append(f"![{stem}]({PLOT_DIR}/{stem}.svg)")
    return "\n\n".join(parts)


def on_pre_build(config: MkDocsConfig) -> None:
    _documents.clear()
    _plots.clear()
    _documents.update(load_results())


def on_files(files: Files, config: MkDocsConfig) -> Files:
    # Render now, so the plots exist as files before pages link to them.
    shown = set()
    for file in files.documentation_pages():
        shown.update(PLACEHOLDER.findall(Path(file.abs_src_path or "").read_text()))
    if unshown := sorted(set(_documents) - shown):
        raise PluginError(f"bench/results: no page shows {', '.join(unshown)}")
    _rendered.clear()
    for name in sorted(shown):
        _rendered[name] = render(name)
    for name, svg in _plots.items():
        uri = f"{PLOT_DIR}/{name.removesuffix('.json')}.svg"
        files.append(File.generated(config, uri, content=svg))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return PLACEHOLDER.sub(lambda match: _rendered[match.group(1)], markdown)
