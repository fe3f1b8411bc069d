"""Cost growth: the points taken from a run's basic-shaped workloads, their table and plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from plumb_dev.bench import costplot


def _result(
    workload: str, scheduler: str, nodes: int, cpu: float | None, rss_mib: int, bound: int = 100
) -> dict[str, Any]:
    usage = None if cpu is None else {"cpu_seconds": cpu, "peak_rss_bytes": rss_mib * 2**20}
    return {
        "workload": workload,
        "scheduler": scheduler,
        "nodes": nodes,
        "timing": {"bound": bound},
        "usage": usage,
    }


RESULTS = [
    _result("xlarge", "plumb", 15000, 30.0, 900, bound=30000),
    _result("xlarge", "kube-scheduler", 15000, 60.0, 1200, bound=30000),
    _result("basic", "plumb", 500, 2.0, 100, bound=2000),
    _result("basic", "kube-scheduler", 500, 4.0, 120, bound=2000),
    _result("basic", "ceiling", 500, None, 0, bound=2000),
    _result("zone-spread", "plumb", 500, 2.0, 100),
    _result("drain", "plumb", 500, 9.0, 100),
]


def test_points_come_from_the_basic_shaped_workloads_by_node_count() -> None:
    points = costplot.points(RESULTS)
    assert [(p.workload, p.scheduler) for p in points] == [
        ("basic", "plumb"),
        ("basic", "kube-scheduler"),
        ("xlarge", "plumb"),
        ("xlarge", "kube-scheduler"),
    ]
    basic = points[0]
    assert (basic.nodes, basic.cpu_ms_per_pod, basic.peak_rss_mib) == (500, 1.0, 100.0)
    assert points[3].cpu_ms_per_pod == pytest.approx(2.0)


def test_the_table_names_each_points_workload_and_gives_the_ratios() -> None:
    lines = costplot.table(costplot.points(RESULTS))
    assert lines[2] == "| 500 | basic (plain pods) | 1.00 | 2.00 | 0.50x | 100 | 120 | 0.83x |"
    assert lines[3].startswith("| 15,000 | xlarge (a third each plain, zone-spread, preferred")
    assert lines[3].endswith("| 1.00 | 2.00 | 0.50x | 900 | 1200 | 0.75x |")


def test_a_point_without_kube_scheduler_has_dashes() -> None:
    lines = costplot.table(costplot.points([_result("large", "plumb", 5000, 10.0, 300, 10000)]))
    assert lines[2] == "| 5,000 | large (plain pods) | 1.00 | - | - | 300 | - | - |"


@pytest.mark.parametrize("count", [1, 4])
def test_the_plot_draws_what_there_is(tmp_path: Path, count: int) -> None:
    points = costplot.points(RESULTS)[:count]
    path = costplot.plot(points, tmp_path / costplot.FILE)
    assert path.read_bytes().startswith(b"\x89PNG")
