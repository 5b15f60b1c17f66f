"""The printed tables, the target ratios and the plot of the route-table mode (--routers)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, TextIO

from .routetable import ROUTE_KEYS, case_key, routers_phrase
from .routetable_plot import COLUMNS, figure

# The base of the ratio in every cell: FastAPI's fastest routing, same endpoint work.
BASE = "app-floor"

Times = dict[str, dict[str, list[float]]]


def print_tables(
    out: TextIO, summary: dict[str, dict[str, dict[str, Any]]], sizes: list[int]
) -> None:
    """One table per size: µs per request and the ratio to the app-level floor, per route."""
    print(
        f"cells: µs/req (median over rounds) and the median per-round ratio to {BASE};"
        " first: requests to /r0, last: to the last router",
        file=out,
    )
    for size in sizes:
        keys = {route: case_key(size, route) for route in ROUTE_KEYS}
        cases = {route: summary[key] for route, key in keys.items() if key in summary}
        if not cases:
            continue
        variants = list(dict.fromkeys(variant for rows in cases.values() for variant in rows))
        print(f"\n{routers_phrase(size)} (the last is /r{size - 1})", file=out)
        header = "".join(f"{COLUMNS[route]:>16}" for route in cases)
        width = max(13, *(len(variant) + 1 for variant in variants))
        print(f"  {'variant':<{width}}{header}", file=out)
        spreads = []
        for variant in variants:
            cells = []
            for rows in cases.values():
                row = rows.get(variant)
                if row is None:
                    cells.append(f"{'-':>16}")
                    continue
                spreads.append(row["iqr_percent"])
                ratio = row.get(f"ratio_to_{BASE}")
                shown = f"{ratio:.2f}x" if ratio is not None else "-"
                cells.append(f"{row['median_us']:>9.1f} {shown:>6}")
            print(f"  {variant:<{width}}{''.join(cells)}", file=out)
        # One line instead of an iqr column per route: how far apart the rounds were.
        print(
            f"  iqr of the rounds, % of the median: median {statistics.median(spreads):.0f}%,"
            f" largest {max(spreads):.0f}%",
            file=out,
        )


def _ratios(times: Times, a: tuple[str, str], b: tuple[str, str]) -> list[float] | None:
    """Per-round ratios of (variant, case) a to b, or None if either was not measured."""
    first = times.get(a[1], {}).get(a[0])
    second = times.get(b[1], {}).get(b[0])
    if first is None or second is None:
        return None
    return [x / y for x, y in zip(first, second, strict=True)]


def targets(times: Times, sizes: list[int]) -> list[tuple[str, list[float]]]:
    """The comparisons the route index is judged by, each with its per-round ratios."""
    small, big = min(sizes), max(sizes)
    wanted: list[tuple[str, tuple[str, str], tuple[str, str]]] = []
    for method in ("get", "post"):
        last_big, last_small = case_key(big, f"{method}-last"), case_key(small, f"{method}-last")
        name = method.upper()
        if big != small:
            wanted.append(
                (
                    f"compiled, {name} last of {routers_phrase(big)} / of {routers_phrase(small)}",
                    ("compiled", last_big),
                    ("compiled", last_small),
                )
            )
        wanted += [
            (
                f"compiled / litestar, {name} last of {routers_phrase(big)}",
                ("compiled", last_big),
                ("litestar", last_big),
            ),
            (
                f"compiled / app-floor, {name} with {routers_phrase(small)}",
                ("compiled", last_small),
                ("app-floor", last_small),
            ),
            (
                f"compiled / pure, {name} last of {routers_phrase(big)}",
                ("compiled", last_big),
                ("pure", last_big),
            ),
            (
                f"compiled / compiled-loop (install_dispatch), {name} last of"
                f" {routers_phrase(big)}",
                ("compiled", last_big),
                ("compiled-loop", last_big),
            ),
            (
                f"pure / pure-loop (install_dispatch), {name} last of {routers_phrase(big)}",
                ("pure", last_big),
                ("pure-loop", last_big),
            ),
            (
                f"compiled / bare (the physical limit), {name} last of {routers_phrase(big)}",
                ("compiled", last_big),
                ("bare", last_big),
            ),
        ]
    found = []
    for label, a, b in wanted:
        ratios = _ratios(times, a, b)
        if ratios is not None:
            found.append((label, ratios))
    return found


def print_targets(out: TextIO, found: list[tuple[str, list[float]]]) -> None:
    if not found:
        return
    print("\ntargets: median of the per-round ratios [quartiles], lower is faster", file=out)
    width = max(len(label) for label, _ in found)
    for label, ratios in found:
        spread = ""
        if len(ratios) > 1:
            low, _, high = statistics.quantiles(ratios, n=4)
            spread = f"  [{low:.2f}, {high:.2f}]"
        print(f"  {label:<{width}}  {statistics.median(ratios):7.2f}x{spread}", file=out)


def plot(path: Path, summary: dict[str, dict[str, dict[str, Any]]], sizes: list[int]) -> None:
    """µs per request against routers, GET and POST to the last router, one line a variant."""
    import matplotlib.pyplot as plt

    drawn = figure(summary, sizes)
    drawn.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    drawn.savefig(path, dpi=120)
    plt.close(drawn)
