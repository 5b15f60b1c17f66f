"""Targets stated as a most allowed ratio of two measured times, judged by the median of the
per-round ratios (rounds run every variant in turn, so drift between rounds cancels out).

A target names two (variant, case) pairs; a run that measured both judges it as met or not
met; a run that left either out does not show it.
"""

from __future__ import annotations

import statistics
from typing import Any, NamedTuple, TextIO

# Per case, per variant: µs per request of each round, in round order.
Times = dict[str, dict[str, list[float]]]


class Target(NamedTuple):
    name: str
    measured: tuple[str, str]  # (variant, case)
    against: tuple[str, str]
    most: float


def ratios(times: Times, a: tuple[str, str], b: tuple[str, str]) -> list[float] | None:
    """Per-round ratios of (variant, case) a to b, or None if either was not measured."""
    first = times.get(a[1], {}).get(a[0])
    second = times.get(b[1], {}).get(b[0])
    if not first or not second:
        return None
    return [x / y for x, y in zip(first, second, strict=True)]


def measured(times: Times, targets: list[Target]) -> list[tuple[Target, list[float]]]:
    """The targets this run measured, each with its per-round ratios."""
    found = []
    for target in targets:
        found_ratios = ratios(times, target.measured, target.against)
        if found_ratios is not None:
            found.append((target, found_ratios))
    return found


def _most(value: float) -> str:
    # 1.0x and 0.5x as the dependency targets always printed them; 0.15x in full.
    return f"{value:.1f}" if round(value, 1) == value else f"{value:.2f}"


def print_judged(out: TextIO, title: str, times: Times, targets: list[Target]) -> None:
    """One line a measured target: median [quartiles], the most allowed, met or not met."""
    rows = measured(times, targets)
    if not rows:
        return
    print(f"\n{title}: median of the per-round ratios [quartiles], lower is faster", file=out)
    width = max(len(target.name) for target, _ in rows)
    for target, found in rows:
        median = statistics.median(found)
        low, _, high = statistics.quantiles(found, n=4) if len(found) > 1 else (median,) * 3
        verdict = "met" if median <= target.most else "not met"
        print(
            f"  {target.name:<{width}}  {median:5.2f}x  [{low:.2f}, {high:.2f}]"
            f"   target <= {_most(target.most)}x: {verdict}",
            file=out,
        )


def judged_json(times: Times, targets: list[Target]) -> list[dict[str, Any]]:
    return [
        {
            "name": target.name,
            "at_most": target.most,
            "median": statistics.median(found),
            "met": statistics.median(found) <= target.most,
            "rounds": found,
        }
        for target, found in measured(times, targets)
    ]
