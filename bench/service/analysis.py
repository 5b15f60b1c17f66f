"""Statistics of the benchmark: geometric means, per-block log ratios, t intervals."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Two-sided 95% quantiles of Student's t by degrees of freedom, for when scipy is absent.
_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
    9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
    17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064,
    25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000,
    120: 1.980,
}  # fmt: skip


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError("an interval needs at least two blocks")
    try:
        from scipy.stats import t
    except ImportError:
        pass
    else:
        return float(t.ppf(0.975, df))
    # Between tabulated values take the next smaller df: the wider, conservative quantile.
    return _T975[max(k for k in _T975 if k <= df)]


def geometric_mean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


@dataclass(frozen=True)
class Change:
    """The relative change from A to B: exp(mean log ratio) - 1, with a 95% t interval."""

    estimate: float
    low: float | None
    high: float | None
    blocks: int

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "blocks": self.blocks,
        }


def block_log_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """log(B / A) for one block, from the geometric means of each side's runs."""
    return statistics.fmean(math.log(v) for v in b) - statistics.fmean(math.log(v) for v in a)


def change(log_ratios: Sequence[float]) -> Change:
    n = len(log_ratios)
    mean = statistics.fmean(log_ratios)
    if n < 2:
        return Change(math.expm1(mean), None, None, n)
    half = t975(n - 1) * statistics.stdev(log_ratios) / math.sqrt(n)
    return Change(math.expm1(mean), math.expm1(mean - half), math.expm1(mean + half), n)


def format_change(value: Change) -> str:
    text = f"{value.estimate * 100:+.1f}%"
    if value.low is None or value.high is None:
        return f"{text} [n/a: 1 block]"
    return f"{text} [{value.low * 100:+.1f}%, {value.high * 100:+.1f}%]"
