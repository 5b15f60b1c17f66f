"""Summaries of the runs: the table printed at the end and the JSON document."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import analysis
from harness import Run, Settings
from workload import Workload

LOW_UTILIZATION = 0.9  # below this share of its core, the server was not the bottleneck
OTHERS_NOTICE = 0.05  # from this share of the server core, other processes are mentioned


@dataclass
class Row:
    pair: str
    route: str
    label: str
    rps_a: float
    rps_b: float
    rps_change: analysis.Change
    cpu_a: float
    cpu_b: float
    cpu_change: analysis.Change
    utilization_min: float


def summarize(runs: Sequence[Run], pairs: Sequence[tuple[str, str]], work: Workload) -> list[Row]:
    rows = []
    for a, b in pairs:
        pair = f"{a}:{b}"
        for route in dict.fromkeys(r.route for r in runs if r.pair == pair):
            mine = [r for r in runs if r.pair == pair and r.route == route]
            rps_ratios, cpu_ratios = [], []
            for round_ in sorted({r.round for r in mine}):
                block = [r for r in mine if r.round == round_]
                side_a = [r for r in block if r.variant == a]
                side_b = [r for r in block if r.variant == b]
                rps_ratios.append(
                    analysis.block_log_ratio([r.rps for r in side_a], [r.rps for r in side_b])
                )
                cpu_ratios.append(
                    analysis.block_log_ratio([r.cpu_us for r in side_a], [r.cpu_us for r in side_b])
                )
            all_a = [r for r in mine if r.variant == a]
            all_b = [r for r in mine if r.variant == b]
            rows.append(
                Row(
                    pair=pair,
                    route=route,
                    label=work.labels[route],
                    rps_a=analysis.geometric_mean([r.rps for r in all_a]),
                    rps_b=analysis.geometric_mean([r.rps for r in all_b]),
                    rps_change=analysis.change(rps_ratios),
                    cpu_a=statistics.fmean(r.cpu_us for r in all_a),
                    cpu_b=statistics.fmean(r.cpu_us for r in all_b),
                    cpu_change=analysis.change(cpu_ratios),
                    utilization_min=min(r.utilization for r in mine),
                )
            )
    return rows


def render_table(rows: Sequence[Row]) -> str:
    header = ("Request", "RPS A -> B", "RPS change [95% CI]", "CPU µs/resp A -> B", "CPU change")
    lines: list[str] = []
    for pair in dict.fromkeys(row.pair for row in rows):
        a, b = pair.split(":")
        table = [header]
        for row in (r for r in rows if r.pair == pair):
            table.append(
                (
                    row.label,
                    f"{row.rps_a:,.0f} -> {row.rps_b:,.0f}",
                    analysis.format_change(row.rps_change),
                    f"{row.cpu_a:,.0f} -> {row.cpu_b:,.0f}",
                    analysis.format_change(row.cpu_change),
                )
            )
        widths = [max(len(line[i]) for line in table) for i in range(len(header))]
        lines.append(f"{a} -> {b}")
        for line in table:
            lines.append(
                "  " + "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True))
            )
        lines.append("")
    return "\n".join(lines).rstrip()


def notes(runs: Sequence[Run]) -> list[str]:
    """Warnings about runs that the server core did not limit, or that shared it."""
    lines = []
    low = [r for r in runs if r.utilization < LOW_UTILIZATION]
    if low:
        lines.append(
            f"Note: in {len(low)} of {len(runs)} runs the server used less than"
            f" {LOW_UTILIZATION:.0%} of its core: something else limited them"
            " (the client, the database or other load on the machine)."
        )
    shared = [r for r in runs if r.others_on_server_core >= OTHERS_NOTICE]
    if shared:
        worst = max(r.others_on_server_core for r in shared)
        lines.append(
            f"Note: in {len(shared)} of {len(runs)} runs other processes used at least"
            f" {OTHERS_NOTICE:.0%} of the server core (up to {worst:.0%}): the machine was busy,"
            " so compare with care."
        )
    return lines


def write_json(
    path: Path,
    *,
    settings: Settings,
    machine: dict[str, Any],
    database: dict[str, Any],
    work: Workload,
    variants: dict[str, dict[str, Any]],
    rows: Sequence[Row],
    runs: Sequence[Run],
    run: dict[str, Any],
) -> None:
    document = {
        "benchmark": "service",
        "run": run,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
        "machine": machine,
        "database": database,
        "workload": {"labels": work.labels, **work.details},
        "variants": variants,
        "results": [asdict(row) for row in rows],
        "runs": [asdict(run) for run in runs],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
