"""The benchmark report: ratios, the table, the ceiling share, and the files it writes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from plumb.bench import report


def _result(scheduler: str, throughput: float, *, usage: bool = True) -> dict[str, Any]:
    return {
        "workload": "basic",
        "scheduler": scheduler,
        "nodes": 10,
        "initial_pods": 10,
        "timing": {
            "pods": 3,
            "bound": 3,
            "duration": 1.0,
            "throughput": throughput,
            "steady_throughput": math.inf,
            "steady_window": (math.nan, math.nan),
            "latency_p50": 0.2,
            "latency_p90": 0.3,
            "latency_p99": 0.4,
            "creation_rate": 500.0,
        },
        "quality": {
            "measured_pods": 3,
            "placed": 3,
            "nodes": 10,
            "nodes_used_share": 0.3,
            "cpu_utilisation_stddev": 0.01,
            "spread_skew": {"zone": 1},
            "preferred_share": None,
            "violations": {"allocatable": 0, "spread": 0, "anti-affinity": 0},
        },
        "usage": {"cpu_seconds": 1.5, "peak_rss_bytes": 200 * 2**20} if usage else None,
        "bound_curve": [0.1, 0.5, 1.0],
        "latencies": [0.2, 0.3, 0.4],
        "log": {"warnings": 1, "errors": 0, "tracebacks": 0, "samples": ["slow bind"]},
        "wall_seconds": 4.0,
    }


def _context() -> dict[str, Any]:
    return {
        "date": "2026-01-01 00:00 UTC",
        "command": "plumb bench --quick --out docs",
        "mode": "quick",
        "machine": {"cpu": "Test CPU", "cpus": 2, "memory_gib": 8.0, "os": "Linux"},
        "versions": {"plumb": "0.1.0", "kube-scheduler": "Kubernetes v1.34.4"},
    }


@pytest.mark.parametrize(
    ("plumb", "kube", "expected"),
    [
        (300.0, 200.0, "1.50x"),
        (1.0, 0.0, "-"),
        (None, 2.0, "-"),
        (math.nan, 2.0, "-"),
        (2.0, math.inf, "-"),
    ],
)
def test_ratio_is_plumb_over_kube_scheduler(
    plumb: float | None, kube: float | None, expected: str
) -> None:
    assert report.ratio(plumb, kube) == expected


def test_ceiling_share_is_throughput_over_the_ceilings() -> None:
    shared = report.with_ceiling_share(
        [_result("plumb", 300.0), _result("kube-scheduler", 150.0), _result("ceiling", 600.0)]
    )
    assert [r["ceiling_share"] for r in shared] == [50.0, 25.0, None]


def test_table_has_a_row_per_figure_and_skips_empty_ones() -> None:
    results = report.with_ceiling_share(
        [
            _result("plumb", 300.0),
            _result("kube-scheduler", 200.0),
            _result("ceiling", 600.0, usage=False),
        ]
    )
    lines = report.table({r["scheduler"]: r for r in results})
    rows = {line.split("|")[1].strip(): line for line in lines[2:]}
    assert rows["throughput (pods/s)"] == "| throughput (pods/s) | 300.0 | 200.0 | 1.50x | 600.0 |"
    assert rows["latency p99 (ms)"] == "| latency p99 (ms) | 400 | 400 | 1.00x | 400 |"
    # The ceiling runs in the bench process: no CPU or RSS of its own.
    assert rows["scheduler peak RSS (MiB)"].endswith("| 200 | 200 | 1.00x | - |")
    assert rows["share of the ceiling's throughput (%)"].endswith("| 50.0 | 33.3 | 1.50x | - |")
    # No workload here prefers nodes: the row is left out rather than filled with dashes.
    assert "on a preferred node (%)" not in rows


def test_write_produces_markdown_json_and_plots(tmp_path: Path) -> None:
    results = [_result("plumb", 300.0), _result("kube-scheduler", 200.0), _result("ceiling", 600.0)]
    written = report.write(tmp_path, results, _context())
    names = sorted(str(path.relative_to(tmp_path)) for path in written)
    assert names == [
        "benchmarks.json",
        "benchmarks.md",
        "benchmarks/basic-bound.png",
        "benchmarks/basic-latency.png",
    ]
    for path in written:
        assert path.stat().st_size > 0
    assert (tmp_path / "benchmarks/basic-bound.png").read_bytes().startswith(b"\x89PNG")
    markdown = (tmp_path / "benchmarks.md").read_text()
    assert "**Quick run**" in markdown
    assert "`plumb bench --quick --out docs`" in markdown
    assert "Test CPU, 2 CPUs" in markdown
    assert "## basic" in markdown
    assert "`slow bind`" in markdown
    # Strict JSON: inf and nan (not JSON) become null.
    raw = json.loads((tmp_path / "benchmarks.json").read_text(), parse_constant=_refuse)
    timing = raw["results"][0]["timing"]
    assert timing["steady_throughput"] is None
    assert timing["steady_window"] == [None, None]
    assert raw["context"]["command"] == "plumb bench --quick --out docs"


def _refuse(constant: str) -> None:
    raise AssertionError(f"{constant} in the JSON output")


def test_json_keeps_lists_of_numbers_on_one_line() -> None:
    text = report.dumps({"curve": [0.123456, 2.0, math.nan], "names": ["a", "b"], "n": 1})
    assert '"curve": [0.1235,2.0,null]' in text
    # Lists of strings keep one item per line.
    assert '"names": [\n  "a",\n  "b"\n ]' in text
    assert json.loads(text) == {"curve": [0.1235, 2.0, None], "names": ["a", "b"], "n": 1}
