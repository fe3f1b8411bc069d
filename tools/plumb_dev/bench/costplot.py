"""Cost growth: what one bound pod costs the scheduler (CPU milliseconds, and peak RSS) against
the cluster's node count, plumb beside kube-scheduler, from the basic-shaped workloads of a run
(basic at 500 nodes, large at 5,000, xlarge at 15,000); a table and a two-panel plot.

Pure but for ``plot``, which writes the PNG (matplotlib imported there, never at start-up).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plumb_dev.bench import measuring

JSON = dict[str, Any]
FILE = "cost-growth.png"
WORKLOADS = {
    "basic": "basic (plain pods)",
    "large": "large (plain pods)",
    "xlarge": "xlarge (a third each plain, zone-spread, preferred-affinity)",
}
"""The workloads a point is taken from, and how the table names what they schedule."""
SCHEDULERS = ("plumb", "kube-scheduler")
METHOD = (
    "Scheduler CPU ms per bound pod and peak RSS against the node count, one point per "
    "basic-shaped workload of this run (basic: 500 nodes, large: 5,000, xlarge: 15,000); "
    "xlarge's point is over its whole mix, since a process's CPU cannot be split by pod. "
    "A run without `--large` or `--xlarge` has fewer points."
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CostPoint:
    """One scheduler's cost on one workload."""

    workload: str
    nodes: int
    scheduler: str
    cpu_ms_per_pod: float | None
    peak_rss_mib: float | None


def points(results: Sequence[JSON]) -> list[CostPoint]:
    """The cost points of results (benchmarks.json's), by node count then scheduler."""
    out = []
    for result in results:
        if result["workload"] not in WORKLOADS or result["scheduler"] not in SCHEDULERS:
            continue
        usage = result.get("usage") or {}
        bound = result["timing"]["bound"]
        cpu = usage.get("cpu_seconds")
        rss = usage.get("peak_rss_bytes")
        out.append(
            CostPoint(
                workload=result["workload"],
                nodes=result["nodes"],
                scheduler=result["scheduler"],
                cpu_ms_per_pod=measuring.cpu_ms_per_pod(cpu, bound),
                peak_rss_mib=rss / 1024**2 if rss is not None else None,
            )
        )
    return sorted(out, key=lambda p: (p.nodes, SCHEDULERS.index(p.scheduler)))


def _cell(value: float | None, fmt: str) -> str:
    return fmt.format(value) if value is not None and math.isfinite(value) else "-"


def _ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or not theirs:
        return "-"
    return f"{ours / theirs:.2f}x"


def table(cost_points: Sequence[CostPoint]) -> list[str]:
    """The markdown table of the points: a row per workload, both schedulers and their ratio."""
    lines = [
        "| nodes | workload | plumb CPU ms/pod | kube-scheduler CPU ms/pod | ratio "
        "| plumb peak RSS (MiB) | kube-scheduler peak RSS (MiB) | ratio |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    by_workload: dict[str, dict[str, CostPoint]] = {}
    for point in cost_points:
        by_workload.setdefault(point.workload, {})[point.scheduler] = point
    for workload, of in by_workload.items():
        ours, theirs = of.get("plumb"), of.get("kube-scheduler")
        nodes = next(iter(of.values())).nodes
        cpu = [p.cpu_ms_per_pod if p else None for p in (ours, theirs)]
        rss = [p.peak_rss_mib if p else None for p in (ours, theirs)]
        lines.append(
            f"| {nodes:,} | {WORKLOADS[workload]} | {_cell(cpu[0], '{:.2f}')} | "
            f"{_cell(cpu[1], '{:.2f}')} | {_ratio(*cpu)} | {_cell(rss[0], '{:.0f}')} | "
            f"{_cell(rss[1], '{:.0f}')} | {_ratio(*rss)} |"
        )
    return lines


def plot(cost_points: Sequence[CostPoint], path: Path) -> Path:
    """Two panels, CPU ms per pod and peak RSS against nodes, a line per scheduler, each point
    labelled with its workload; written as a PNG to path."""
    import matplotlib

    matplotlib.use("Agg")  # no display: write PNG files only
    from matplotlib import pyplot

    figure, (cpu_axes, rss_axes) = pyplot.subplots(1, 2, figsize=(10, 4))
    panels = (
        (cpu_axes, "cpu_ms_per_pod", "scheduler CPU ms per bound pod"),
        (rss_axes, "peak_rss_mib", "scheduler peak RSS (MiB)"),
    )
    for axes, field, label in panels:
        for scheduler in SCHEDULERS:
            mine = [p for p in cost_points if p.scheduler == scheduler]
            shown = [(p, getattr(p, field)) for p in mine if getattr(p, field) is not None]
            if not shown:
                continue
            axes.plot(
                [p.nodes for p, _ in shown], [v for _, v in shown], marker="o", label=scheduler
            )
            for point, value in shown:
                axes.annotate(
                    point.workload,
                    (point.nodes, value),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=8,
                )
        nodes = sorted({p.nodes for p in cost_points})
        values = [v for p in cost_points if (v := getattr(p, field)) is not None]
        axes.set_xscale("log")
        # Ticks at the node counts measured, read as numbers rather than powers of ten.
        axes.set_xticks(nodes, [f"{n:,}" for n in nodes])
        axes.minorticks_off()
        axes.set_xlim(nodes[0] / 2, nodes[-1] * 2)
        axes.set_xlabel("nodes")
        axes.set_ylabel(label)
        axes.set_ylim(0, max(values, default=1.0) * 1.2 or 1.0)
        axes.set_title(f"{label} against nodes")
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return path
