"""Tests for the Python plugins' micro-benchmark (plumb_dev.bench.plugintimings): the example
plugins are called once per pod through plumb's path, a missing one is not measured, a wrong
judgement fails the run. No timing is asserted: only that the figures exist and are positive."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plumb.extensions import enabling, interface, judgements, registry
from plumb_dev.bench import plugintimings

NAMES = [example.name for example in plugintimings.EXAMPLES]


def _need_examples() -> None:
    missing = set(NAMES) - set(registry.discover().usable())
    if missing:
        pytest.skip(reason=f"example plugins not installed (make install): {sorted(missing)}")


def test_each_example_is_called_once_per_pod_and_timed() -> None:
    _need_examples()
    figures = plugintimings.measure(60, pods=10, cycle=4, repeats=2)
    assert [f.plugin for f in figures] == NAMES
    assert [f.point for f in figures] == [interface.SCORE, interface.FILTER]
    for timings in figures:
        assert timings.version
        assert (timings.nodes, timings.pods, timings.cycle, timings.repeats) == (60, 10, 4, 2)
        assert timings.calls == {timings.point: 10}  # not 600: once per pod, not per node
        assert timings.steady_us is not None
        assert timings.steady_us > 0
        assert timings.first_us is not None
        assert timings.first_us > 0
        assert timings.pod_view_us is not None
        assert timings.pod_view_us > 0


def test_the_counters_are_taken_off_the_plugin_afterwards() -> None:
    _need_examples()
    plugintimings.measure(20, pods=2, cycle=2, repeats=1)
    found = registry.discover()
    for example in plugintimings.EXAMPLES:
        installed = found.usable()[example.name]
        enabled = enabling.enable(installed, frozenset({example.point}), example.weight, None)
        plugin = enabling.instance(enabled, found)
        assert interface.METHODS[example.point] not in vars(plugin)


def test_one_pod_per_cycle_has_only_first_calls() -> None:
    _need_examples()
    figures = plugintimings.measure(20, pods=3, cycle=1, repeats=1)
    assert all(f.steady_us is None and f.first_us is not None for f in figures)


def test_a_missing_example_is_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "discover", lambda builtin=(): registry.EMPTY)
    figures = plugintimings.measure(20, pods=4, cycle=2, repeats=1)
    assert [f.plugin for f in figures] == NAMES
    assert all(f.version is None and f.steady_us is None and not f.calls for f in figures)


def test_a_filter_rejecting_other_nodes_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    _need_examples()
    # At 05:00 a week later the other half of the windows is open: not the nodes expected.
    monkeypatch.setattr(plugintimings, "NOW", plugintimings.NOW + 7 * 86400 - 7 * 3600)
    with pytest.raises(plugintimings.WrongJudgement, match="not the 3 in a maintenance window"):
        plugintimings.measure(60, pods=2, cycle=2, repeats=1)


def test_the_cluster_prices_most_nodes_and_opens_half_the_windows() -> None:
    snap = plugintimings.cluster(100)
    view = judgements.node_view(snap, plugintimings.NOW)
    prices = view.label(plugintimings.PRICE_LABEL)
    windows = view.annotation(plugintimings.WINDOW_ANNOTATION)
    assert (prices == "").sum() == 2  # nodes 49 and 99
    assert len(set(prices.tolist()) - {""}) == 20
    assert (windows != "").sum() == 10
    opened = [plugintimings.in_window(i) for i in range(100)]
    assert sum(opened) == 5
    assert np.array_equal(windows != "", np.arange(100) % 10 == 0)
    assert len(set(windows.tolist()) - {""}) == 10  # five of each kind


def test_the_child_prints_a_json_line_per_example(capsys: pytest.CaptureFixture[str]) -> None:
    _need_examples()
    argv = ["--nodes", "30", "--pods", "3", "--cycle", "2", "--repeats", "1"]
    assert plugintimings.main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["plugin"] for line in lines] == NAMES
    assert [line["calls"] for line in lines] == [{"Score": 3}, {"Filter": 3}]


def test_a_bad_size_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert plugintimings.main(["--nodes", "30", "--pods", "0"]) == 1
    assert "need nodes, pods, cycle and repeats > 0" in capsys.readouterr().err
