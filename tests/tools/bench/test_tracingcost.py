"""What tracing costs plumb (issue 31): basic with tracing off beside basic-traced, CPU per pod
judged with the settle counted, and the report's row and section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from plumb_dev.bench import report, tracingcost

TARGET = "tracing on at 10% adds at most 10% CPU per pod in the basic workload"


def _plumb_run(
    workload: str,
    *,
    cpu: float,
    settled: float | None,
    p99: float = 0.4,
    tracing: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A plumb result of benchmarks.json's shape: 1,000 pods bound, ``cpu`` seconds over the
    phase, ``settled`` with the settle."""
    return {
        "workload": workload,
        "scheduler": "plumb",
        "description": workload,
        "nodes": 10,
        "initial_pods": 10,
        "timing": {
            "pods": 1000,
            "bound": 1000,
            "duration": 2.5,
            "throughput": 400.0,
            "steady_throughput": 410.0,
            "steady_window": (0.2, 2.2),
            "latency_p50": 0.2,
            "latency_p90": 0.3,
            "latency_p99": p99,
            "creation_rate": 500.0,
        },
        "quality": {
            "measured_pods": 1000,
            "placed": 1000,
            "nodes": 10,
            "nodes_used_share": 1.0,
            "cpu_utilisation_stddev": 0.0,
            "spread_skew": {},
            "preferred_share": None,
            "violations": {"allocatable": 0},
        },
        "usage": {"cpu_seconds": cpu, "peak_rss_bytes": 200 * 2**20},
        "settled_cpu_seconds": settled,
        "bound_curve": [0.1, 0.5, 1.0],
        "latencies": [0.2, 0.3, 0.4],
        "log": {},
        "wall_seconds": 9.0,
        "tracing": tracing,
    }


RECEIVED = {
    "ratio": 0.1,
    "requests": 3,
    "bytes": 150 * 1024,
    "spans": 812,
    "unreadable": 0,
    "dropped": 0.0,
}


def _pair(off: float, on: float, **traced: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """basic and basic-traced, with ``off`` and ``on`` CPU seconds (settle included) for 1,000
    pods: ms per pod are those figures; the phase alone is 0.1 s less."""
    return (
        _plumb_run("basic", cpu=off - 0.1, settled=off, p99=0.5),
        _plumb_run(
            "basic-traced",
            cpu=on - 0.1,
            settled=on,
            p99=0.55,
            tracing={**RECEIVED, **traced},
        ),
    )


def test_the_cost_compares_cpu_per_pod_with_the_settle_counted() -> None:
    found = tracingcost.cost(*_pair(1.00, 1.08))
    assert found is not None
    assert (found.cpu_off, found.cpu_on, found.settled) == (1.0, 1.08, True)
    assert found.phase_off == pytest.approx(0.9)
    assert found.phase_on == pytest.approx(0.98)
    assert (found.increase_percent, found.met) == (8.0, True)
    assert (found.spans, found.requests, found.kib, found.dropped) == (812, 3, 150.0, 0.0)
    assert (found.p99_off_ms, found.p99_on_ms) == (500.0, 550.0)


@pytest.mark.parametrize(
    ("on", "increase", "met"),
    [(1.10, 10.0, True), (1.101, 10.0, True), (1.106, 11.0, False), (0.95, -5.0, True)],
)
def test_the_verdict_is_on_the_printed_figures(on: float, increase: float, met: bool) -> None:
    found = tracingcost.cost(*_pair(1.00, on))
    assert found is not None
    assert (found.increase_percent, found.met) == (increase, met)


def test_without_settle_figures_the_measured_phase_is_compared() -> None:
    off, on = _pair(1.0, 1.2)
    off["settled_cpu_seconds"] = None
    found = tracingcost.cost(off, on)
    assert found is not None
    assert not found.settled
    assert (f"{found.cpu_off:.2f}", f"{found.cpu_on:.2f}") == ("0.90", "1.10")
    assert "(measured phase)" in tracingcost.figures(found)


def test_without_either_run_there_is_no_cost() -> None:
    off, on = _pair(1.0, 1.1)
    assert tracingcost.cost(None, on) is None
    assert tracingcost.cost(off, None) is None
    on["usage"], on["settled_cpu_seconds"] = None, None
    assert tracingcost.cost(off, on) is None


def test_the_figures_state_cpu_the_change_p99_spans_and_drops() -> None:
    found = tracingcost.cost(*_pair(1.0, 1.08, dropped=2.0))
    assert found is not None
    assert tracingcost.figures(found, 3.0) == (
        "1.00 → 1.08 ms/pod (phase + 3 s settle): +8.0% (measured phase alone 0.90 → 0.98); "
        "p99 500 → 550 ms; 812 spans received, 2 dropped"
    )
    unread = tracingcost.cost(*_pair(1.0, 1.08, dropped=None))
    assert unread is not None
    assert tracingcost.figures(unread).endswith("812 spans received, - dropped")


def _sections(*runs: dict[str, Any]) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    return [(run["workload"], {"plumb": run}) for run in runs]


def _issue_31(sections: list[tuple[str, dict[str, dict[str, Any]]]]) -> report.TargetVerdict:
    (verdict,) = [v for v in report.targets(sections, [], 3.0) if v.issue == 31]
    return verdict


@pytest.mark.parametrize(("on", "status"), [(1.08, report.MET), (1.2, report.NOT_MET)])
def test_the_report_judges_issue_31_on_basic_and_basic_traced(on: float, status: str) -> None:
    verdict = _issue_31(_sections(*_pair(1.0, on)))
    assert (verdict.target, verdict.status) == (TARGET, status)
    assert verdict.figures.startswith(f"1.00 → {on:.2f} ms/pod (phase + 3 s settle)")


def test_without_basic_traced_issue_31_is_not_measured() -> None:
    basic, _ = _pair(1.0, 1.0)
    verdict = _issue_31(_sections(basic))
    assert (verdict.status, verdict.figures) == (report.NOT_MEASURED, report.MISSING)


def _context(command: str, **more: float) -> dict[str, Any]:
    """A bench run's context as the report reads it."""
    return {
        "date": "2026-01-01 00:00 UTC",
        "command": command,
        "mode": "full",
        "machine": {"cpu": "Test CPU", "cpus": 2, "memory_gib": 8.0, "os": "Linux"},
        "versions": {"plumb": "0.1.0"},
        **more,
    }


def test_the_report_has_a_tracing_section(tmp_path: Path) -> None:
    context = _context("plumb bench --workloads basic,basic-traced", settle_seconds=3.0)
    report.write(tmp_path, list(_pair(1.0, 1.08)), context)
    markdown = (tmp_path / "benchmarks.md").read_text()
    assert f"| 31 | {TARGET} | 1.00 → 1.08 ms/pod (phase + 3 s settle): +8.0%" in markdown
    assert "## basic-traced" in markdown
    assert "## Tracing cost" in markdown
    assert "| scheduler CPU ms per bound pod, phase + 3 s after | 1.00 | 1.08 | +8.0% |" in (
        markdown
    )
    assert "| latency p99 (ms) | 500 | 550 | +10.0% |" in markdown
    assert "- spans received: 812 in 3 requests (150 KiB)" in markdown
    assert "- plumb_trace_spans_dropped_total after the phase: 0" in markdown
    assert tracingcost.TEST in markdown


def test_a_report_without_the_traced_run_says_tracing_was_not_measured(tmp_path: Path) -> None:
    context = _context("plumb bench --workloads basic")
    report.write(tmp_path, [_pair(1.0, 1.0)[0]], context)
    markdown = (tmp_path / "benchmarks.md").read_text()
    assert "## Tracing cost\n\nNot measured in this run" in markdown


def _run(tracing: bool, settled_ms: float, *, p99: float = 0.4) -> dict[str, Any]:
    """One entry of a traced workload's alternation (``benchruns.alternated``'s shape)."""
    return {
        "tracing": tracing,
        "cpu_ms_per_pod": settled_ms - 0.1,
        "settled_cpu_ms_per_pod": settled_ms,
        "latency_p99": p99,
        "throughput": 400.0,
        "creation_rate": 410.0,
        "spans": 1400 if tracing else None,
        "dropped": 0.0 if tracing else None,
    }


# off on, on off, off on: an outlier each way, which the medians leave out.
ALTERNATION = [
    _run(False, 1.00),
    _run(True, 1.04),
    _run(True, 1.40, p99=0.9),
    _run(False, 0.90),
    _run(False, 1.02),
    _run(True, 1.05),
]


def _alternated(runs: list[dict[str, Any]]) -> dict[str, Any]:
    traced = _plumb_run("basic-traced", cpu=0.95, settled=1.05, tracing=RECEIVED)
    return {**traced, "alternation": runs}


def test_a_traced_workload_alternates_tracing_off_and_on() -> None:
    from plumb_dev.bench import benchruns

    assert benchruns.tracing_order(3) == [False, True, True, False, False, True]
    assert benchruns.tracing_order(1) == [False, True]


def test_with_the_alternation_the_medians_are_compared_not_the_baseline_run() -> None:
    baseline = _plumb_run("basic", cpu=0.5, settled=0.6)  # far off: not used
    found = tracingcost.cost(baseline, _alternated(ALTERNATION))
    assert found is not None
    assert (found.cpu_off, found.cpu_on, found.settled) == (1.00, 1.05, True)
    assert (found.phase_off, found.phase_on) == pytest.approx((0.90, 0.95))
    assert (found.p99_off_ms, found.p99_on_ms) == (400.0, 400.0)
    assert found.increase_percent == 5.0
    assert found.met
    assert "(phase + 3 s settle, medians of 3 runs each): +5.0%" in tracingcost.figures(found, 3)
    # Only the traced runs: no comparison.
    assert tracingcost.cost(None, _alternated([r for r in ALTERNATION if r["tracing"]])) is None


def test_the_section_lists_every_run_of_the_alternation(tmp_path: Path) -> None:
    context = _context("plumb bench --workloads basic-traced", settle_seconds=3.0)
    report.write(tmp_path, [_alternated(ALTERNATION)], context)
    markdown = (tmp_path / "benchmarks.md").read_text()
    assert f"| 31 | {TARGET} | 1.00 → 1.05 ms/pod (phase + 3 s settle, medians of 3 runs" in (
        markdown
    )
    assert "| tracing off (median) | tracing on (median) | change |" in markdown
    assert "| 3 | on | 1.40 | 1.30 | 900 | 400.0 | 410 | 1400 |" in markdown
    assert "| 4 | off | 0.90 | 0.80 | 400 | 400.0 | 410 | - |" in markdown
    assert "- spans received (the traced run of median CPU): 812 in 3 requests" in markdown
