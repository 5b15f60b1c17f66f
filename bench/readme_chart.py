"""The README's picture: µs per request on the micro benchmark's city routes, one panel per
route, ours (compiled and pure) beside the peers and the bare ASGI app.

bench/tables.py (`make tables`) chooses the run and calls `draw`; this module only draws,
with matplotlib (bench/requirements-plot.txt, pinned so that the same figures give the
same file).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

# Ours in blue, the other frameworks in grey, the bare ASGI app (no framework) light.
OURS = {"compiled": "#1f5fa8", "pure": "#6b9bd1"}
PEER = "#8c8c8c"
BARE = "#cfcfcf"


def colour(variant: str) -> str:
    if variant in OURS:
        return OURS[variant]
    return BARE if variant == "bare ASGI" else PEER


def draw(
    path: Path,
    figures: dict[str, dict[str, float]],
    note: str,
    metadata: dict[str, str],
) -> None:
    """Horizontal bars of `figures` (route -> variant -> µs per request) into the PNG at
    `path`, `note` under them and `metadata` in its text chunks."""
    variants = list(next(iter(figures.values())))
    figure, axes = plt.subplots(1, len(figures), figsize=(12, 3.6), sharey=True)
    positions = range(len(variants))
    for axis, (route, by_variant) in zip(axes, figures.items(), strict=True):
        values = [by_variant[v] for v in variants]
        axis.barh(positions, values, color=[colour(v) for v in variants])
        axis.set_title(route, fontsize=10)
        axis.set_xlim(0, max(values) * 1.3)
        axis.tick_params(axis="x", labelsize=8)
        axis.grid(True, axis="x", alpha=0.3)
        for y, value in zip(positions, values, strict=True):
            axis.text(value, y, f" {value:.1f}", va="center", fontsize=8)
    axes[0].set_yticks(list(positions), variants)
    axes[0].invert_yaxis()  # compiled on top; the axes share it
    figure.suptitle("µs per request, lower is faster", fontsize=11)
    figure.text(0.01, 0.01, note, fontsize=7.5, ha="left", va="bottom", wrap=True)
    lines = note.count("\n") + 1
    figure.tight_layout(rect=(0, 0.05 + 0.04 * lines, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=100, metadata={"Software": None, **metadata})
    plt.close(figure)
