"""The Grafana dashboard in manifests/grafana: every query names only series plumb exports (the
names come from the metric module, so a rename breaks this test), every metric has a panel,
and every panel reads the data source the dashboard's variable picks."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plumb.observability import metrics

DASHBOARD = Path(__file__).parents[3] / "manifests" / "grafana" / "plumb-dashboard.json"
SERIES_NAME = re.compile(r"\bplumb_[a-z0-9_]+\b")
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def _queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable."""
    for panel in _panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield f"variable {variable['name']}", variable["query"]["query"]


def test_every_query_names_only_series_plumb_exports(dashboard: dict[str, Any]) -> None:
    queries = list(_queries(dashboard))
    assert len(queries) >= 15
    for where, expr in queries:
        names = set(SERIES_NAME.findall(expr))
        assert names, f"{where}: {expr!r} reads none of plumb's metrics"
        unknown = names - metrics.SERIES
        assert not unknown, f"{where}: {expr!r} names {sorted(unknown)}, not exported"


def test_every_metric_plumb_exports_has_a_panel(dashboard: dict[str, Any]) -> None:
    used = {
        name
        for panel in _panels(dashboard["panels"])
        for target in panel.get("targets", [])
        for name in SERIES_NAME.findall(target["expr"])
    }
    shown = {
        metric
        for metric, kind in metrics.KINDS.items()
        if (f"{metric}_bucket" if kind == metrics.HISTOGRAM else metric) in used
        or f"{metric}_count" in used
    }
    assert shown == set(metrics.KINDS)


def test_quantiles_come_from_buckets_summed_by_le(dashboard: dict[str, Any]) -> None:
    for where, expr in _queries(dashboard):
        if "histogram_quantile" not in expr:
            continue
        assert re.search(r"sum by \((le|le, [a-z_, ]+)\) \(rate\(plumb_\w+_bucket\{", expr), (
            f"{where}: {expr!r}"
        )


def test_the_panels_cover_the_issue_and_read_the_chosen_data_source(
    dashboard: dict[str, Any],
) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    titles = set()
    ids = set()
    for panel in _panels(dashboard["panels"]):
        ids.add(panel["id"])
        if panel["type"] == "row":
            continue
        titles.add(panel["title"])
        assert panel["datasource"] == DATASOURCE, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert 'instance=~"$instance"' in target["expr"], panel["title"]
    assert len(ids) == len(list(_panels(dashboard["panels"])))  # ids are unique
    assert {
        "Throughput",
        "Attempts by result",
        "Attempt latency (scheduled)",
        "Pod scheduling SLI latency",
        "Pending pods by queue",
        "Kernel time",
        "Binding latency",
        "Policy budgets remaining",
        "Zone health",
        "Cache size",
    } <= titles


def test_the_latency_panels_show_exemplars_that_lead_to_traces(dashboard: dict[str, Any]) -> None:
    histograms = (
        "plumb_scheduling_attempt_duration_seconds_bucket",
        "plumb_pod_scheduling_sli_duration_seconds_bucket",
        "plumb_binding_duration_seconds_bucket",
    )
    for name in histograms:
        panels = [
            panel
            for panel in _panels(dashboard["panels"])
            if any(name in target["expr"] for target in panel.get("targets", []))
        ]
        assert panels, name
        for panel in panels:
            assert panel["type"] == "timeseries"  # the only panel that draws exemplars
            assert any(t.get("exemplar") for t in panel["targets"]), panel["title"]
