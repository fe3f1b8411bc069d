"""The benchmark's timing math and its /proc readers."""

from __future__ import annotations

import math
import os

import pytest

from plumb.bench import measuring


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
