"""The printed tables and the target ratios of the dependency mode (--deps)."""

from __future__ import annotations

import statistics
from typing import Any, TextIO

from .deps import DEPS_VARIANTS, OVERRIDE_SUFFIX, ROUTES
from .ratio_targets import Target, Times, judged_json, print_judged, ratios

# The variants every row's ratios are taken to (summarize() in driver.py).
BASES = ("pydantic", "litestar", "blacksheep", "floor", "bare")
TITLES = {"two-get": "GET, two deps", "two-post": "POST, two deps", "deep-get": "GET, six deps"}

Summary = dict[str, dict[str, dict[str, Any]]]


def _dependency_targets() -> list[Target]:
    """The dependency targets: (name, (variant, case), (variant, case), the most allowed).

    The two-dependency GET has the application entry's targets (0.4x Litestar, 1.0x the
    route written by hand on FastAPI's app, pure 0.8x Litestar); the POST and the
    six-dependency GET keep the dependency plan's (0.5x Litestar, 1.5x that route, pure
    1.0x)."""
    most = {
        "two-get": (0.4, 1.0, 0.8),
        "two-post": (0.5, 1.5, 1.0),
    }
    found: list[Target] = []
    for route, (litestar, floor, pure) in most.items():
        found.append(
            Target(
                f"compiled / litestar, {route}", ("compiled", route), ("litestar", route), litestar
            )
        )
        found.append(
            Target(f"compiled / floor, {route}", ("compiled", route), ("floor", route), floor)
        )
        found.append(
            Target(f"pure / litestar, {route}", ("pure", route), ("litestar", route), pure)
        )
    found.append(
        Target(
            "compiled / litestar, deep-get",
            ("compiled", "deep-get"),
            ("litestar", "deep-get"),
            0.5,
        )
    )
    for route in ROUTES:
        with_override = ("compiled", route + OVERRIDE_SUFFIX)
        name = f"compiled, {route} with the override / without"
        found.append(Target(name, with_override, ("compiled", route), 1.1))
    for route in ROUTES:
        found.append(Target(f"compiled / pure, {route}", ("compiled", route), ("pure", route), 0.8))
    return found


TARGETS = _dependency_targets()


def _cell(value: float | None, width: int, suffix: str = "") -> str:
    shown = "-" if value is None else f"{value:.1f}" if not suffix else f"{value:.2f}{suffix}"
    return f"{shown:>{width}}"


def print_table(out: TextIO, summary: Summary, times: Times) -> None:
    """µs per request with and without the override; then the ratios to Litestar and floor."""
    routes = [r for r in ROUTES if r in summary or r + OVERRIDE_SUFFIX in summary]
    measured = {v for rows in summary.values() for v in rows}
    variants = [v for v in DEPS_VARIANTS if v in measured]
    print(
        "µs/req: median over rounds; +override: the same route on an app with an unrelated\n"
        "app.dependency_overrides entry set; ovr/no: median of the per-round ratios of the two",
        file=out,
    )
    print("\n  " + " " * 18 + "".join(f"{TITLES[r]:>27}" for r in routes), file=out)
    print(
        f"  {'variant':<18}" + f"{'µs/req':>9}{'+override':>10}{'ovr/no':>8}" * len(routes),
        file=out,
    )
    spreads = []
    for variant in variants:
        cells = []
        for route in routes:
            plain = summary.get(route, {}).get(variant)
            override = summary.get(route + OVERRIDE_SUFFIX, {}).get(variant)
            found = ratios(times, (variant, route + OVERRIDE_SUFFIX), (variant, route))
            spreads += [row["iqr_percent"] for row in (plain, override) if row]
            cells.append(_cell(plain["median_us"] if plain else None, 9))
            cells.append(_cell(override["median_us"] if override else None, 10))
            cells.append(_cell(statistics.median(found) if found else None, 8, "x"))
        print(f"  {variant:<18}" + "".join(cells), file=out)
    if spreads:
        print(
            f"  iqr of the rounds, % of the median: median {statistics.median(spreads):.0f}%,"
            f" largest {max(spreads):.0f}%",
            file=out,
        )
    plain_routes = [r for r in routes if r in summary]
    if not plain_routes:
        return
    print("\nmedian of the per-round ratios, without the override", file=out)
    for route in plain_routes:
        print(f"\n  {TITLES[route]:<18}" + "".join(f"{f'vs {b}':>14}" for b in BASES), file=out)
        for variant in variants:
            row = summary[route].get(variant)
            if row is None:
                continue
            cells = "".join(_cell(row.get(f"ratio_to_{base}"), 14, "x") for base in BASES)
            print(f"  {variant:<18}" + cells, file=out)


def print_targets(out: TextIO, times: Times) -> None:
    print_judged(out, "dependency targets", times, TARGETS)


def targets_json(times: Times) -> list[dict[str, Any]]:
    return judged_json(times, TARGETS)
