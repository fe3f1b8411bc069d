"""The benchmark's timing math and its /proc readers."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from plumb_dev.bench import measuring


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert measuring.percentile(values, 0.50) == 50.0
    assert measuring.percentile(values, 0.90) == 90.0
    assert measuring.percentile(values, 0.99) == 99.0
    assert measuring.percentile(values, 1.0) == 100.0
    assert measuring.percentile([3.0, 1.0, 2.0], 0.0) == 1.0
    assert math.isnan(measuring.percentile([], 0.5))


def test_percentile_rejects_a_percentage() -> None:
    with pytest.raises(ValueError, match=r"0\.99 is p99"):
        measuring.percentile([1.0], 99)


def test_timing_counts_from_the_first_create_to_the_last_binding() -> None:
    # Ten pods created 0.1 s apart from t=100, each bound 0.5 s after its create.
    created = {f"pod-{i}": 100 + i / 10 for i in range(10)}
    answered = {name: at + 0.01 for name, at in created.items()}
    bound = {name: at + 0.5 for name, at in created.items()}
    timed = measuring.timing(created, bound, answered)
    assert timed.pods == 10
    assert timed.bound == 10
    assert timed.duration == pytest.approx(1.4)
    assert timed.throughput == pytest.approx(10 / 1.4)
    assert timed.latency_p50 == pytest.approx(0.5)
    assert timed.latency_p99 == pytest.approx(0.5)
    # The steady window runs from the 1st (10%) to the 9th (90%) bound pod: 8 pods in 0.8 s.
    assert timed.steady_window == pytest.approx((0.5, 1.3))
    assert timed.steady_throughput == pytest.approx(10.0)
    assert timed.creation_rate == pytest.approx(10 / 0.91)


def test_timing_leaves_unbound_pods_out_of_latency_but_counts_them_as_pods() -> None:
    created = {"a": 0.0, "b": 0.0, "c": 0.0}
    bound = {"a": 1.0, "b": 3.0, "other-namespace-pod": 0.5}
    timed = measuring.timing(created, bound, created)
    assert (timed.pods, timed.bound) == (3, 2)
    assert timed.latency_p99 == 3.0
    assert timed.throughput == pytest.approx(2 / 3.0)
    # The 90% pod (the third) never bound: no steady window to report.
    assert timed.steady_throughput == 0.0
    assert all(math.isnan(edge) for edge in timed.steady_window)


def test_timing_needs_created_pods() -> None:
    with pytest.raises(ValueError, match="no measured pods"):
        measuring.timing({}, {}, {})


def test_curves_are_sorted_and_relative_to_the_first_create() -> None:
    created = {"a": 10.0, "b": 10.5}
    bound = {"a": 12.0, "b": 11.0}
    assert measuring.bound_curve(created, bound) == [1.0, 2.0]
    assert measuring.latencies(created, bound) == [0.5, 2.0]


def test_cpu_seconds_survive_a_command_name_with_spaces_and_parentheses() -> None:
    # Fields 14 and 15 (utime, stime) are 250 and 50 ticks.
    stat = "4242 (py (thon) x) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 3 0 99"
    assert measuring.parse_cpu_seconds(stat, 100) == pytest.approx(3.0)


def test_peak_rss_is_vmhwm_in_bytes() -> None:
    status = "Name:\tpython\nVmPeak:\t  900 kB\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"
    assert measuring.parse_peak_rss(status) == 2048 * 1024
    with pytest.raises(ValueError, match="VmHWM"):
        measuring.parse_peak_rss("Name:\tkthreadd\n")


def test_process_meter_reads_this_process() -> None:
    meter = measuring.ProcessMeter(os.getpid())
    sum(i * i for i in range(200_000))  # burn a little CPU
    usage = meter.usage()
    assert usage.cpu_seconds >= 0.0
    assert usage.peak_rss_bytes > 10 * 1024 * 1024


def test_a_drain_is_timed_from_the_schedulers_start() -> None:
    # Started at t=50; the first pod bound 2 s later, then one every 0.5 s.
    bound = {f"pod-{i}": 52.0 + i / 2 for i in range(5)}
    timed = measuring.drain_timing(50.0, 5, bound)
    assert timed.origin == "start"
    assert (timed.pods, timed.bound) == (5, 5)
    assert timed.duration == pytest.approx(4.0)
    assert timed.throughput == pytest.approx(5 / 4.0)
    assert timed.first_bind == pytest.approx(2.0)
    # First bind → last bind: 4 more pods in 2 s, the start-up left out.
    assert timed.bind_throughput == pytest.approx(2.0)
    # Every pod's latency runs from the start, not from its create.
    assert timed.latency_p50 == pytest.approx(3.0)
    assert timed.latency_p99 == pytest.approx(4.0)
    # The pods were all created before the start: no creation rate to compare against.
    assert math.isnan(timed.creation_rate)


def test_a_drain_with_unbound_pods_counts_them_as_pods() -> None:
    timed = measuring.drain_timing(0.0, 3, {"a": 1.0})
    assert (timed.pods, timed.bound) == (3, 1)
    assert timed.bind_throughput is None
    nothing = measuring.drain_timing(0.0, 3, {})
    assert (nothing.bound, nothing.throughput, nothing.first_bind) == (0, 0.0, None)
    with pytest.raises(ValueError, match="pods=0"):
        measuring.drain_timing(0.0, 0, {})


def test_the_other_workloads_time_from_each_create() -> None:
    timed = measuring.timing({"a": 0.0}, {"a": 1.0}, {"a": 0.1})
    assert (timed.origin, timed.bind_throughput, timed.first_bind) == ("create", None, None)


@pytest.mark.parametrize(
    ("cpu_seconds", "bound", "expected"),
    [(3.0, 2000, 1.5), (0.5, 1, 500.0), (None, 10, None), (1.0, 0, None)],
)
def test_cpu_ms_per_pod_is_cpu_over_bound_pods(
    cpu_seconds: float | None, bound: int, expected: float | None
) -> None:
    assert measuring.cpu_ms_per_pod(cpu_seconds, bound) == expected


def test_a_meter_since_the_start_counts_all_the_processes_cpu(tmp_path: Path) -> None:
    process = tmp_path / "42"
    process.mkdir()
    ticks = os.sysconf("SC_CLK_TCK")
    (process / "stat").write_text(f"42 (plumb) S 1 42 42 0 -1 0 0 0 0 0 {3 * ticks} {ticks} 0")
    (process / "status").write_text("VmHWM:\t  1024 kB\n")
    from_now = measuring.ProcessMeter(42, tmp_path)
    since_start = measuring.ProcessMeter(42, tmp_path, since_start=True)
    (process / "stat").write_text(f"42 (plumb) S 1 42 42 0 -1 0 0 0 0 0 {5 * ticks} {ticks} 0")
    assert from_now.usage().cpu_seconds == pytest.approx(2.0)
    assert since_start.usage().cpu_seconds == pytest.approx(6.0)
    assert since_start.usage().peak_rss_bytes == 1024 * 1024
