"""The benchmark report: ratios, the table, the ceiling share, and the files it writes."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from plumb.bench import kernelbench, report


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


# Targets and the kernel micro-benchmark ------------------------------------------------------


def _kernel_row(nodes: int = 5000, batch_us: float = 18.0, reference_us: float = 4000.0) -> Any:
    figures = kernelbench.KernelFigures(
        nodes=nodes,
        resident_pods=4 * nodes,
        pods=256,
        batch_size=32,
        reference_pods=8,
        repeats=5,
        numba_single_us=2 * batch_us,
        numba_batch_us=batch_us,
        reference_us=reference_us,
        placed=256,
        feasible_share=0.25,
        rejected_share={"static": 0.5, "resources": 0.0, "spread_skew": 0.25},
    )
    return kernelbench.as_dict(figures)


def _sections(*results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    shared = report.with_ceiling_share(list(results))
    names = list(dict.fromkeys(r["workload"] for r in shared))
    return [(name, {r["scheduler"]: r for r in shared if r["workload"] == name}) for name in names]


def _verdicts(
    sections: list[tuple[str, dict[str, Any]]], kernel: list[Any] | None = None
) -> dict[str, report.Verdict]:
    return {v.target: v for v in report.targets(sections, kernel or [])}


def _with(result: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of a result with ``timing__x`` / ``quality__x`` / ``usage__x`` / ``workload``."""
    out = copy.deepcopy(result)
    for name, value in changes.items():
        if "__" in name:
            part, key = name.split("__")
            out[part][key] = value
        else:
            out[name] = value
    return out


THROUGHPUT = "basic: throughput at least 1.5x kube-scheduler's"
CEILING = "basic: throughput at least 70% of the ceiling's"


@pytest.mark.parametrize(
    ("ours", "theirs", "ceiling", "versus", "share"),
    [
        (300.0, 200.0, 400.0, "met", "met"),  # exactly 1.5x, 75%
        (299.0, 200.0, 500.0, "met", "not met"),  # 1.495x, printed 1.50x: judged as printed
        (290.0, 200.0, 410.0, "not met", "met"),  # 1.45x; 70.7%
        (350.0, 200.0, 600.0, "met", "not met"),  # 1.75x; 58.3%
    ],
)
def test_basic_throughput_targets_are_judged_as_printed(
    ours: float, theirs: float, ceiling: float, versus: str, share: str
) -> None:
    sections = _sections(
        _result("plumb", ours), _result("kube-scheduler", theirs), _result("ceiling", ceiling)
    )
    verdicts = _verdicts(sections)
    assert verdicts[THROUGHPUT].status == versus
    assert verdicts[CEILING].status == share
    assert f"{ours:.1f} vs {theirs:.1f} pods/s" in verdicts[THROUGHPUT].figures


def test_without_a_basic_run_the_throughput_targets_are_not_measured() -> None:
    other = [_with(_result(s, 100.0), workload="zone-spread") for s in report.SCHEDULERS]
    verdicts = _verdicts(_sections(*other))
    assert verdicts[THROUGHPUT].status == report.NOT_MEASURED
    assert verdicts[CEILING].status == report.NOT_MEASURED


def test_p99_latency_is_judged_per_workload() -> None:
    sections = _sections(
        _with(_result("plumb", 300.0), timing__latency_p99=0.4004),
        _result("kube-scheduler", 200.0),
        _with(_result("plumb", 300.0), workload="zone-spread", timing__latency_p99=0.5),
        _with(_result("kube-scheduler", 200.0), workload="zone-spread"),
    )
    verdicts = _verdicts(sections)
    # 400.4 ms is printed as 400, like kube-scheduler's 400: at most, as far as anyone can see.
    assert verdicts["basic: p99 latency at most kube-scheduler's"].status == report.MET
    spread = verdicts["zone-spread: p99 latency at most kube-scheduler's"]
    assert (spread.status, spread.figures) == (report.NOT_MET, "500 vs 400 ms")


def test_placement_is_as_good_when_no_figure_is_worse_and_nothing_is_violated() -> None:
    verdicts = _verdicts(_sections(_result("plumb", 300.0), _result("kube-scheduler", 200.0)))
    verdict = verdicts["basic: placement at least as good as kube-scheduler's, no violations"]
    assert verdict.status == report.MET
    assert verdict.figures == (
        "violations 0; placed 3 vs 3; max skew 1 vs 1; cpu utilisation stddev 0.0100 vs 0.0100"
    )


@pytest.mark.parametrize(
    ("change", "worse"),
    [
        (
            {"quality__violations": {"allocatable": 0, "spread": 1, "anti-affinity": 0}},
            "violations",
        ),
        ({"quality__spread_skew": {"zone": 2}}, "max skew"),
        ({"quality__placed": 2}, "placed"),
        ({"quality__cpu_utilisation_stddev": 0.0102}, "cpu utilisation stddev"),
        ({"quality__preferred_share": 0.5}, "on a preferred node (%)"),
    ],
)
def test_placement_is_not_as_good_when_a_figure_is_worse(
    change: dict[str, Any], worse: str
) -> None:
    kube = _with(_result("kube-scheduler", 200.0), quality__preferred_share=0.6)
    plumb = _with(_result("plumb", 300.0), **{"quality__preferred_share": 0.6, **change})
    verdict = _verdicts(_sections(plumb, kube))[
        "basic: placement at least as good as kube-scheduler's, no violations"
    ]
    assert verdict.status == report.NOT_MET
    assert verdict.figures.endswith(f"(worse: {worse})")


def test_better_placement_figures_meet_the_target() -> None:
    plumb = _with(
        _result("plumb", 300.0),
        quality__spread_skew={"zone": 0},
        quality__cpu_utilisation_stddev=0.0001,
        quality__preferred_share=1.0,
    )
    kube = _with(_result("kube-scheduler", 200.0), quality__preferred_share=0.9)
    verdict = _verdicts(_sections(plumb, kube))[
        "basic: placement at least as good as kube-scheduler's, no violations"
    ]
    assert verdict.status == report.MET
    assert "on a preferred node (%) 100.0 vs 90.0" in verdict.figures


KERNEL_SPEED = "kernel: at most 20 µs per pod at 5,000 nodes"
KERNEL_VERSUS = "kernel: at least 100x the reference at 5,000 nodes"


@pytest.mark.parametrize(
    ("batch_us", "reference_us", "speed", "versus"),
    [
        (18.0, 4000.0, report.MET, report.MET),
        (20.04, 2000.0, report.MET, report.MET),  # printed 20.0 µs, 100x
        (20.1, 1900.0, report.NOT_MET, report.NOT_MET),
        (35.0, 30000.0, report.NOT_MET, report.MET),
    ],
)
def test_kernel_targets_are_judged_at_5000_nodes(
    batch_us: float, reference_us: float, speed: str, versus: str
) -> None:
    rows = [_kernel_row(500, 1.0, 100.0), _kernel_row(5000, batch_us, reference_us)]
    verdicts = _verdicts([], rows)
    assert verdicts[KERNEL_SPEED].status == speed
    assert verdicts[KERNEL_VERSUS].status == versus
    assert verdicts[KERNEL_SPEED].figures.startswith(f"{batch_us:.1f} µs/pod in batches of 32")


def test_kernel_targets_without_5000_nodes_are_not_measured() -> None:
    verdicts = _verdicts([], [_kernel_row(500, 1.0, 100.0)])
    assert verdicts[KERNEL_SPEED].status == report.NOT_MEASURED
    assert verdicts[KERNEL_VERSUS].status == report.NOT_MEASURED


MEMORY = "large (5,000 nodes, 10,000 pods): plumb's peak RSS at most kube-scheduler's"


def test_peak_rss_is_judged_on_the_large_workload_only() -> None:
    assert _verdicts(_sections(_result("plumb", 1.0)))[MEMORY].status == report.NOT_MEASURED
    large = [
        _with(_result("plumb", 1.0), workload="large", usage__peak_rss_bytes=250 * 2**20),
        _with(_result("kube-scheduler", 1.0), workload="large"),
    ]
    verdict = _verdicts(_sections(*large))[MEMORY]
    assert (verdict.status, verdict.figures) == (report.NOT_MET, "250 vs 200 MiB")


def test_the_report_states_the_targets_and_the_kernel_figures(tmp_path: Path) -> None:
    results = [_result("plumb", 300.0), _result("kube-scheduler", 200.0), _result("ceiling", 600.0)]
    kernel = [_kernel_row(500, 2.0, 900.0), _kernel_row(5000, 25.0, 9000.0)]
    report.write(tmp_path, results, _context(), kernel)
    markdown = (tmp_path / "benchmarks.md").read_text()
    assert "## Targets" in markdown
    assert f"| {THROUGHPUT} | 300.0 vs 200.0 pods/s: 1.50x | **met** |" in markdown
    assert f"| {CEILING} | 300.0 of 600.0 pods/s: 50.0% | **not met** |" in markdown
    assert f"| {KERNEL_SPEED} | 25.0 µs/pod in batches of 32 (50.0 one pod per call) |" in (
        markdown
    )
    assert f"| {MEMORY} | - | not measured in this run |" in markdown
    assert "(4 met, 2 not met, 1 not measured)" in markdown
    assert "smoke-test sizes" in markdown  # the context says quick
    assert "## Kernel micro-benchmark" in markdown
    assert "| 5,000 | 50.0 | 25.0 | 9,000 | 180x | 360x | 256 / 8 | 25.0 |" in markdown
    raw = json.loads((tmp_path / "benchmarks.json").read_text())
    assert [row["nodes"] for row in raw["kernel"]] == [500, 5000]
    assert raw["kernel"][1]["batch_speedup"] == 360.0


def test_a_report_without_kernel_figures_says_so(tmp_path: Path) -> None:
    report.write(tmp_path, [_result("plumb", 300.0)], _context())
    markdown = (tmp_path / "benchmarks.md").read_text()
    assert "## Kernel micro-benchmark\n\nNot run, or it failed" in markdown
    assert f"| {KERNEL_SPEED} | - | not measured in this run |" in markdown
