"""The pure half of ``make metrics-plot``: canned /metrics pages (rendered by the real metric
module) parsed, turned into the dashboard's series as its PromQL would, and drawn."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from plumb.observability import metrics
from plumb_dev.bench import metricsplot


def _page(m: metrics.Metrics) -> metricsplot.Samples:
    return metricsplot.parse(m.render().decode())


def test_histogram_quantile_interpolates_as_promql_does() -> None:
    buckets = [(0.001, 0.0), (0.002, 0.0), (0.004, 10.0), (math.inf, 10.0)]
    assert metricsplot.histogram_quantile(0.5, buckets) == pytest.approx(0.003)
    assert metricsplot.histogram_quantile(0.99, buckets) == pytest.approx(0.00398)
    # A rank in +Inf answers the highest finite bound; no observations answer NaN.
    assert metricsplot.histogram_quantile(0.99, [(0.001, 1.0), (math.inf, 10.0)]) == 0.001
    assert math.isnan(metricsplot.histogram_quantile(0.5, [(0.001, 0.0), (math.inf, 0.0)]))
    # The first bucket's lower bound is 0.
    assert metricsplot.histogram_quantile(0.5, [(0.002, 4.0), (math.inf, 4.0)]) == 0.001


def test_rates_and_quantiles_come_from_the_scrapes_differences() -> None:
    m = metrics.Metrics()
    scrapes = [metricsplot.Scrape(at=0.0, samples=_page(m))]
    for _ in range(10):
        m.attempt(metrics.SCHEDULED, 0.003)
    m.attempt(metrics.UNSCHEDULABLE, 0.5)
    scrapes.append(metricsplot.Scrape(at=1.0, samples=_page(m)))
    for _ in range(20):
        m.attempt(metrics.SCHEDULED, 0.003)
    scrapes.append(metricsplot.Scrape(at=2.0, samples=_page(m)))

    scheduled = metricsplot.rate(scrapes, metrics.SCHEDULE_ATTEMPTS, result="scheduled")
    assert math.isnan(scheduled[0])
    assert scheduled[1:] == [10.0, 15.0]  # over the window back to the first scrape
    every = metricsplot.rate(scrapes, metrics.SCHEDULE_ATTEMPTS)  # summed over results
    assert every[1:] == [11.0, 15.5]
    p50 = metricsplot.quantile(scrapes, 0.5, metrics.ATTEMPT_DURATION, result="scheduled")
    assert math.isnan(p50[0])
    assert p50[2] == pytest.approx(0.003)
    slowest = metricsplot.quantile(scrapes, 0.99, metrics.ATTEMPT_DURATION, result="unschedulable")
    assert 0.256 < slowest[1] <= 0.512


def test_the_plot_draws_the_dashboards_panels(tmp_path: Path) -> None:
    m = metrics.Metrics()
    m.gauge_from(metrics.PENDING_PODS, "pending", ("queue",), lambda: {("unschedulable",): 2.0})
    m.gauge_from(metrics.CACHE_SIZE, "cache", ("type",), lambda: {("nodes",): 3.0})
    scrapes = []
    for second in range(8):
        for _ in range(second):
            m.attempt(metrics.SCHEDULED, 0.01)
            m.pod_scheduled(0.02, 1)
            m.binding(metrics.BOUND, 0.005)
        m.kernel_run(0.001)
        scrapes.append(metricsplot.Scrape(at=float(second), samples=_page(m)))

    panels = metricsplot.panels(scrapes)
    titles = [title for title, _, _ in panels]
    assert titles == [
        "Throughput",
        "Attempts by result",
        "Attempt latency (scheduled)",
        "Pod scheduling SLI latency",
        "Pending pods by queue",
        "Kernel time per run (mean)",
        "Binding latency (bound)",
        "Cache size",
    ]
    lines = {title: series for title, _, series in panels}
    assert all(len(v) == len(scrapes) for s in lines.values() for v in s.values())
    assert lines["Pending pods by queue"]["unschedulable"] == [2.0] * len(scrapes)
    assert lines["Cache size"]["nodes"] == [3.0] * len(scrapes)
    assert lines["Kernel time per run (mean)"]["mean"][-1] == pytest.approx(1.0)  # ms

    path = metricsplot.plot(
        scrapes, tmp_path / "out" / "metrics.png", title="canned", marks=[(3.0, "an event")]
    )
    assert path.read_bytes().startswith(b"\x89PNG")
