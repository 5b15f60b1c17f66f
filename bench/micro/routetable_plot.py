"""The route-table mode's plot and column titles, drawn for `bench/micro.py --routers
--plot` (routetable_report.py) and for the docs' benchmark page (docs/hooks/benchmarks.py).

The docs' hook loads this file by its path, in the docs' own venv: it imports nothing but
the standard library and matplotlib (only when drawing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

COLUMNS = {
    "get-first": "GET first",
    "get-last": "GET last",
    "post-first": "POST first",
    "post-last": "POST last",
}

# Case key -> variant -> that variant's summary row (its "median_us" plotted).
Summary = Mapping[str, Mapping[str, Mapping[str, Any]]]


def case_key(size: int, route: str) -> str:
    """A route-table case: one of the routes (COLUMNS) in an app of `size` routers."""
    return f"{route}@{size}"


def figure(summary: Summary, sizes: Sequence[int]) -> Any:
    """µs per request against routers in the app, GET and POST to the last router, one
    line a variant, both axes logarithmic: a matplotlib figure the caller saves."""
    import matplotlib

    matplotlib.use("Agg")  # a file only; no display needed
    import matplotlib.pyplot as plt

    drawn, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for axis, route in zip(axes, ("get-last", "post-last"), strict=True):
        rows = [summary.get(case_key(size, route), {}) for size in sizes]
        variants = list(dict.fromkeys(variant for row in rows for variant in row))
        for variant in variants:
            points = [
                (size, row[variant]["median_us"])
                for size, row in zip(sizes, rows, strict=True)
                if variant in row
            ]
            axis.plot(*zip(*points, strict=True), marker="o", label=variant)
        # A flat line and one growing with N both stay readable, and the references (bare
        # at a few µs) stay apart from the rest.
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xticks(sizes, [str(size) for size in sizes])
        axis.minorticks_off()
        axis.set_xlabel("routers in the app")
        axis.set_title(f"{COLUMNS[route]} router")
        axis.grid(True, alpha=0.3)
    axes[0].set_ylabel("µs per request (median, log scale)")
    axes[0].legend(fontsize="small")
    return drawn
