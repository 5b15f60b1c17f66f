"""MkDocs hook: the benchmark tables checked against bench/results/*.json, and their plots.

The tables are in the pages themselves, between `<!-- table: NAME -->` and
`<!-- /table -->`, written by bench/tables.py (`make tables`) from the results files. The
build fails when a page's table differs from what that script writes from the committed
results, when a block names a file that does not exist, and when a results file is shown
by no page. After each results file's block the hook adds its plot, where the kind of
result has one: an SVG drawn with matplotlib at build time from the data tables.py gives
(`Rendered.plot`) and added to the site as a generated file, never committed.
"""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

BENCH = Path(__file__).resolve().parents[2] / "bench"
PLOT_DIR = "img/bench"

Doc = dict[str, Any]


def _bench_module(path: Path) -> ModuleType:
    """A module of the benchmarks, loaded by its path: bench/ is no package of the docs'
    venv, and the module imports nothing that venv lacks."""
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered first: dataclasses look their module up while the class is made.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# The route-table plot, as `bench/micro.py --routers --plot` draws it.
routetable_plot = _bench_module(BENCH / "micro" / "routetable_plot.py")
tables = _bench_module(BENCH / "tables.py")

_documents: dict[str, Doc] = {}
_plots: dict[str, bytes] = {}


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


# --- MkDocs events -----------------------------------------------------------------------


def draw(plot: Any) -> bytes | None:
    if plot is None:
        return None
    kind, data, extra = plot
    if kind == "bars":
        return plot_bars(data, extra)
    return plot_route_table(data, extra)


def on_pre_build(config: MkDocsConfig) -> None:
    _documents.clear()
    _plots.clear()
    try:
        _documents.update(tables.load_results())
    except tables.TableError as error:
        raise PluginError(str(error)) from error


def on_files(files: Files, config: MkDocsConfig) -> Files:
    # Drawn now, so the plots exist as files before pages link to them.
    shown = set()
    for file in files.documentation_pages():
        page = Path(file.abs_src_path or "").read_text(encoding="utf-8")
        try:
            written = tables.rewrite(page, _documents)
        except tables.TableError as error:
            raise PluginError(f"{file.src_path}: {error}") from error
        if written != page:
            raise PluginError(
                f"{file.src_path}: a benchmark table differs from bench/results (make tables)"
            )
        shown.update(match.group("name") for match in tables.BLOCK.finditer(page))
    if unshown := sorted(set(_documents) - shown):
        raise PluginError(f"bench/results: no page shows {', '.join(unshown)}")
    for name in sorted(shown & set(_documents)):
        svg = draw(tables.render_file(_documents[name]).plot)
        if svg is not None:
            _plots[name] = svg
            uri = f"{PLOT_DIR}/{name.removesuffix('.json')}.svg"
            files.append(File.generated(config, uri, content=svg))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    def with_plot(match: Any) -> str:
        name = match.group("name")
        if name not in _plots:
            return str(match.group(0))
        stem = name.removesuffix(".json")
        return f"{match.group(0)}\n\n![{stem}]({PLOT_DIR}/{stem}.svg)"

    return str(tables.BLOCK.sub(with_plot, markdown))
