"""``plumb bench --quick`` end to end, as CI runs it: its own control plane, plumb, kube-scheduler
and the raw binder on every workload, and the report written (to a tmp dir, not docs/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plumb import cli
from plumb_dev.bench import benchruns, workloads

# About 100 s of developer tooling: in `make test-long` (CI runs it), so that `make test` stays
# within its 15 minutes.
pytestmark = [pytest.mark.integration, pytest.mark.long]


def test_quick_bench_places_every_pod_and_writes_the_report(tmp_path: Path) -> None:
    code = cli.main(["bench", "--quick", "--out", str(tmp_path)])

    raw = json.loads((tmp_path / "benchmarks.json").read_text())
    results = {(r["workload"], r["scheduler"]): r for r in raw["results"]}
    expected = workloads.select(None, quick=True, large=False)
    for workload in expected:
        schedulers = benchruns.schedulers_for(workload)
        for scheduler in schedulers:
            q = results[(workload.name, scheduler)]["quality"]
            assert q["measured_pods"] == workload.measured_pods
            assert q["placed"] == workload.measured_pods, (
                f"{scheduler} left {workload.measured_pods - q['placed']} pods of "
                f"{workload.name} unplaced"
            )
        plumb = results[(workload.name, "plumb")]
        assert sum(plumb["quality"]["violations"].values()) == 0, plumb["quality"]["violations"]
        assert plumb["log"]["tracebacks"] == 0, plumb["log"]
        # Every run measured its scheduler's process; the ceiling has none of its own.
        assert plumb["usage"]["cpu_seconds"] > 0
        if workload.trace_ratio is not None:
            # A traced variant is plumb alone (compared with plumb untraced), and it exported.
            assert schedulers == ("plumb",)
            assert (workload.name, "kube-scheduler") not in results
            assert plumb["tracing"]["spans"] > 0, plumb["tracing"]
            # ... alternated with a run of tracing off (one pair in quick mode).
            runs = plumb["alternation"]
            assert [run["tracing"] for run in runs] == [False, True]
            assert runs[0]["spans"] is None
            assert runs[1]["spans"] == plumb["tracing"]["spans"]
            continue
        assert results[(workload.name, "kube-scheduler")]["usage"]["peak_rss_bytes"] > 0
        assert results[(workload.name, "ceiling")]["usage"] is None
        assert (tmp_path / "benchmarks" / f"{workload.name}-bound.png").stat().st_size > 0
        assert (tmp_path / "benchmarks" / f"{workload.name}-latency.png").stat().st_size > 0
    assert code == 0

    # The drain is timed from each scheduler's start, and the ceiling posted its events.
    drain = {s: results[("drain", s)] for s in ("plumb", "kube-scheduler", "ceiling")}
    for result in drain.values():
        assert result["drain"]
        assert result["timing"]["origin"] == "start"
        assert result["timing"]["bind_throughput"] > 0
    assert drain["plumb"]["cpu_ms_per_pod"] > 0
    assert "bind_failures" not in drain["ceiling"]["log"], drain["ceiling"]["log"]
    assert (tmp_path / "benchmarks" / "cost-growth.png").stat().st_size > 0

    markdown = (tmp_path / "benchmarks.md").read_text()
    assert "**Quick run**" in markdown
    assert f"`plumb bench --quick --out {tmp_path}`" in markdown
    for workload in expected:
        assert f"## {workload.name}" in markdown
    assert "## Cost growth" in markdown
    assert "| 16 | drain: throughput" in markdown
    # The zone-spread constraint held for plumb, as the table reports it.
    spread = results[("zone-spread", "plumb")]["quality"]["spread_skew"]
    assert spread
    assert max(spread.values()) <= 1
