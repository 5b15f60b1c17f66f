"""The benchmark tables of the README and the docs are what bench/tables.py writes from the
committed bench/results/*.json, so that no figure in a table can go stale. No timing here:
the script only formats the files."""

from __future__ import annotations

import copy
import json
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import load_bench_script

ROOT = Path(__file__).resolve().parent.parent
tables = load_bench_script("tables.py")
PAGES = tables.pages(ROOT)


@pytest.fixture(scope="module")
def documents() -> dict[str, Any]:
    found: dict[str, Any] = tables.load_results(ROOT / "bench" / "results")
    return found


def blocks(page: str) -> list[tuple[str, str]]:
    return [(m.group("name"), m.group("body")) for m in tables.BLOCK.finditer(page)]


@pytest.mark.parametrize("path", PAGES, ids=lambda path: path.name)
def test_the_page_tables_are_what_the_script_writes_from_the_results(
    path: Path, documents: dict[str, Any]
) -> None:
    page = path.read_text(encoding="utf-8")
    assert tables.rewrite(page, documents) == page, (
        f"{path.relative_to(ROOT)}: a benchmark table differs from bench/results; run make tables"
    )


def test_the_readme_shows_one_table_the_city_routes() -> None:
    names = [name for name, _ in blocks((ROOT / "README.md").read_text(encoding="utf-8"))]
    assert names == ["readme-cities"]


def test_the_readmes_picture_shows_what_the_results_give(documents: dict[str, Any]) -> None:
    assert (ROOT / tables.CHART).exists()
    assert tables.chart_is_current(ROOT, documents), "the README's picture is stale: make tables"
    assert tables.CHART.as_posix() in (ROOT / "README.md").read_text(encoding="utf-8")


def test_a_changed_figure_makes_the_picture_stale(documents: dict[str, Any]) -> None:
    name = tables.newest(documents, tables.is_city_run)
    changed = copy.deepcopy(documents)
    changed[name]["routes"]["get"]["summary"]["bare"]["median_us"] += 1
    assert not tables.chart_is_current(ROOT, changed)


def test_every_results_file_is_shown_by_a_docs_page(documents: dict[str, Any]) -> None:
    shown = {
        name
        for path in PAGES
        if path.parent.name == "docs"
        for name, _ in blocks(path.read_text(encoding="utf-8"))
    }
    assert sorted(set(documents) - shown) == []


def test_a_changed_figure_changes_the_table(documents: dict[str, Any]) -> None:
    page = (ROOT / "README.md").read_text(encoding="utf-8")
    name = tables.newest(documents, tables.is_city_run)
    changed = copy.deepcopy(documents)
    row = changed[name]["routes"]["get"]["summary"]["compiled"]
    row["median_us"] += 1000
    assert tables.rewrite(page, changed) != page


def test_each_table_states_its_files_machine_commit_date_and_load(
    documents: dict[str, Any],
) -> None:
    for path in PAGES:
        for name, body in blocks(path.read_text(encoding="utf-8")):
            if name in tables.VIEWS:
                file = next(f for f in documents if f"bench/results/{f}`" in body)
            else:
                file = name
            run = documents[file]["run"]
            assert run["machine"] in body, (path.name, name)
            assert run["commit"] in body, (path.name, name)
            assert run["date"] in body, (path.name, name)
            assert tables.load(documents[file]) in body, (path.name, name)


def test_a_file_without_its_load_says_load_not_recorded(documents: dict[str, Any]) -> None:
    name = next(n for n, d in documents.items() if d["benchmark"] == "icount")
    document = copy.deepcopy(documents[name])
    document["run"].pop("load", None)
    assert "load not recorded" in tables.render(name, {name: document})


def _newer_copy(
    documents: dict[str, Any], wanted: Callable[[Any], bool]
) -> tuple[str, dict[str, Any]]:
    """The newest file of the kind `wanted` accepts, and a copy of it dated later."""
    name = tables.newest(documents, wanted)
    newer = copy.deepcopy(documents[name])
    newer["run"]["date"] = "2999-01-01"
    return name, newer


def test_a_view_takes_the_newest_file_of_its_kind(documents: dict[str, Any]) -> None:
    _, newer = _newer_copy(documents, tables.is_city_run)
    newer["routes"]["get"]["summary"]["compiled"]["median_us"] = 12345.6
    both = {**documents, "micro-cities-newer.json": newer}
    assert tables.newest(both, tables.is_city_run) == "micro-cities-newer.json"
    assert "12345.6" in tables.render("readme-cities", both)


def test_a_quick_run_is_never_a_views_source(documents: dict[str, Any]) -> None:
    name, quick = _newer_copy(documents, tables.is_server_run)
    quick["config"]["quick"] = True
    both = {**documents, "server-quick.json": quick}
    assert tables.newest(both, tables.is_server_run) == name


@pytest.mark.parametrize("missing", ["a server", "a route", "a peer"])
def test_a_server_run_of_less_than_the_full_set_is_never_the_readmes(
    documents: dict[str, Any], missing: str
) -> None:
    name, partial = _newer_copy(documents, tables.is_server_run)
    servers = partial["servers"]
    if missing == "a server":
        servers.pop("granian")
    elif missing == "a route":
        servers["uvicorn"]["routes"].pop("city-validate")
    else:
        servers["granian"]["routes"]["two-get"]["summary"].pop("blacksheep")
    both = {**documents, "server-partial.json": partial}
    assert tables.newest(both, tables.is_server_run) == name


@pytest.mark.parametrize("missing", ["a route", "a peer"])
def test_a_city_run_of_less_than_the_full_set_is_never_the_readmes(
    documents: dict[str, Any], missing: str
) -> None:
    name, partial = _newer_copy(documents, tables.is_city_run)
    if missing == "a route":
        partial["routes"].pop("search")
    else:
        partial["routes"]["get"]["summary"].pop("blacksheep")
    both = {**documents, "micro-cities-partial.json": partial}
    assert tables.newest(both, tables.is_city_run) == name


def copy_of_the_pages(root: Path) -> Path:
    """A tree at `root` with this one's pages, picture and results; its results folder."""
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copytree(ROOT / "bench" / "results", root / "bench" / "results")
    shutil.copy(ROOT / "README.md", root / "README.md")
    return root / "bench" / "results"


def test_check_fails_on_a_stale_table_and_writing_fixes_it(tmp_path: Path) -> None:
    results = copy_of_the_pages(tmp_path)
    name = tables.newest(tables.load_results(results), tables.is_server_run)
    document = json.loads((results / name).read_text())
    for found in document["servers"].values():
        for data in found["routes"].values():
            data["summary"]["compiled"]["rps"] *= 2
    (results / name).write_text(json.dumps(document))

    assert tables.main(["--check"], root=tmp_path) == 1
    # Taken anyway: the committed city run may be one beyond the limits.
    assert tables.main(["--take-anyway"], root=tmp_path) == 0
    assert tables.main(["--check"], root=tmp_path) == 0


def test_a_block_naming_a_missing_file_is_an_error(documents: dict[str, Any]) -> None:
    page = "<!-- table: no-such-run.json -->\n<!-- /table -->\n"
    with pytest.raises(tables.TableError, match=r"no-such-run\.json"):
        tables.rewrite(page, documents)


# --- the limits for the README's figures, on fabricated runs -------------------------------


def city_run(load_before: float | None = 0.2, scatter: float = 0.0, rounds: int = 8) -> Any:
    """A full city run whose rounds give every variant compiled's time times a factor, in
    half the rounds less by `scatter` / 2, in the other half more: the interquartile range
    of its ratios to compiled is `scatter` of their median."""
    spread = [1 + scatter * (0.5 if index % 2 else -0.5) for index in range(rounds)]
    routes = {}
    for key in tables.FULL_CITY_ROUTES:
        times = {"compiled": [10.0] * rounds}
        for factor, variant in enumerate(tables.README_VARIANTS[1:], start=2):
            times[variant] = [10.0 * factor * s for s in spread]
        routes[key] = {
            "label": f"GET /{key}",
            "summary": {v: {"median_us": statistics.median(t)} for v, t in times.items()},
            "rounds_us": {"cpu": times},
        }
    return {
        "benchmark": "micro",
        "run": {
            "date": "2999-01-01",
            "commit": "abc1234",
            "command": "python bench/micro.py",
            "machine": "Some CPU, 2 CPUs",
            "load": "a load",
        },
        "meta": {} if load_before is None else {"load_before": [load_before, 0, 0]},
        "config": {"rounds": rounds, "clock": "cpu", "quick": False, "routers": None},
        "routes": routes,
    }


def test_a_quiet_run_keeps_the_limits_and_its_caption_says_so() -> None:
    run = city_run(load_before=tables.LOAD_LIMIT, scatter=0.05)
    assert tables.doubts(run) == []
    caption = tables.render("readme-cities", {"quiet.json": run})
    assert "kept the limits" in caption
    assert "Taken anyway" not in caption


def test_a_run_with_the_load_over_the_limit_is_doubted() -> None:
    (doubt,) = tables.doubts(city_run(load_before=tables.LOAD_LIMIT + 0.01))
    assert doubt.startswith("load average 1.01 before the run")


def test_a_run_without_its_load_before_is_doubted() -> None:
    assert tables.doubts(city_run(load_before=None)) == ["no load average recorded before the run"]


def test_a_run_whose_ratios_scatter_over_the_limit_is_doubted() -> None:
    (doubt,) = tables.doubts(city_run(scatter=0.2))
    assert doubt.startswith("per-round ratios scattering by up to 20% (")
    assert tables.doubts(city_run(scatter=0.14)) == []


def test_make_tables_refuses_a_doubted_run_and_writes_nothing(tmp_path: Path) -> None:
    results = copy_of_the_pages(tmp_path)
    (results / "micro-cities-noisy.json").write_text(json.dumps(city_run(load_before=3.0)))
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert tables.main([], root=tmp_path) == 1
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == readme


def test_taken_anyway_the_caption_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = copy_of_the_pages(tmp_path)
    (results / "micro-cities-noisy.json").write_text(json.dumps(city_run(load_before=3.0)))
    drawn = []
    monkeypatch.setattr(tables, "draw_chart", lambda root, documents: drawn.append(root))
    assert tables.main(["--take-anyway"], root=tmp_path) == 0
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "**Taken anyway**" in readme
    assert "load average 3.00 before the run (limit 1.0)" in readme
    assert "Some CPU, 2 CPUs" in readme and "abc1234" in readme
    assert drawn == [tmp_path]
