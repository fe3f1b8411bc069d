"""Python plugins in a scheduling cycle: their rejections are reasons in the FailedScheduling
message and their scores choose the node, beside the built-ins, in both kernels."""

from __future__ import annotations

import pytest

from plumb.backend.cache import clustercache as cache_module
from plumb.extensions import registry
from plumb.framework import cycle, schedconfig, scoring, traces
from plumb.kernel import compiled, contract, reference
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import sample_plugins
from tests.support.small_clusters import cluster, pod

FOUND = registry.of(sample_plugins.RackFilter, sample_plugins.CheapScore, sample_plugins.Gatekeeper)
CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: plumb
  plugins:
    filter: {enabled: [{name: RackFilter}]}
    score: {enabled: [{name: CheapScore, weight: 2}]}
    preFilter: {enabled: [{name: Gatekeeper}]}
"""
KERNELS = [pytest.param(reference.run, id="reference"), pytest.param(compiled.run, id="compiled")]


@pytest.fixture(autouse=True)
def _installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sample plugins stand for what is installed."""
    monkeypatch.setattr(registry, "installed", lambda builtin: FOUND)


def _profile() -> scoring.Profile:
    return schedconfig.parse(CONFIG, extensions=FOUND).profiles[0]


def _cluster() -> cache_module.Cache:
    return cluster(
        [
            make_node("a").label("plumb.test/rack", "a").label("plumb.test/price", "30"),
            make_node("b")
            .capacity(cpu="8")
            .label("plumb.test/rack", "b")
            .label("plumb.test/price", "10"),
            make_node("c").capacity(cpu="8").label("plumb.test/price", "20"),
            make_node("d").label("plumb.test/rack", "a").label("plumb.test/price", "60"),
        ]
    )


def _decide(
    c: cache_module.Cache, kernel: contract.Kernel, *builders: object
) -> list[cycle.Decision]:
    pods = [pod(b, f"uid-{i}") for i, b in enumerate(builders)]  # type: ignore[arg-type]
    prepared = cycle.prepare(pods, c.snapshot(), c, _profile(), now=1.0)
    decisions = list(prepared.early)
    if prepared.compiled is not None:
        result = kernel(prepared.compiled.cluster, prepared.compiled.batch)
        decisions.extend(cycle.explain(prepared.compiled, result))
    return decisions


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_filter_keeps_its_racks_and_the_score_picks_the_cheaper(
    kernel: contract.Kernel,
) -> None:
    (decision,) = _decide(_cluster(), kernel, make_pod("web").req(cpu="100m"))
    # a and d pass RackFilter; CheapScore reversed over them: a 50, d 0 (weight 2).
    assert decision.node == "a"
    assert decision.feasible == 2
    names = traces.score_names(_profile())
    best = dict(zip(names, decision.candidates[0].scores, strict=True))
    assert best["CheapScore"] == 50
    assert dict(zip(names, decision.candidates[1].scores, strict=True))["CheapScore"] == 0


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_pod_no_node_takes_hears_the_plugins_reasons(kernel: contract.Kernel) -> None:
    (decision,) = _decide(_cluster(), kernel, make_pod("huge").req(cpu="5"))
    assert decision.node is None
    # a and d (4 cores) are too small; b and c fail the plugin, checked after the built-ins.
    assert decision.message == (
        "0/4 nodes are available: 1 node(s) had no rack label, 1 node(s) were in another rack, "
        "2 Insufficient cpu."
    )
    assert "RackFilter" in decision.plugins


def test_a_plugin_error_is_an_error_of_that_pod_only() -> None:
    decisions = _decide(_cluster(), reference.run, make_pod("raise-1"), make_pod("web"))
    by_name = {d.pod.name: d for d in decisions}
    failed = by_name["raise-1"]
    assert (failed.node, failed.error) == (None, True)
    assert failed.message == (
        'running "RackFilter" filter plugin: RuntimeError: cannot judge raise-1'
    )
    assert by_name["web"].node == "a"


def test_a_prefilter_refusal_names_no_node() -> None:
    (decision,) = _decide(
        _cluster(), reference.run, make_pod("shut").label("plumb.test/refuse", "PreFilter")
    )
    assert decision.message == "0/4 nodes are available: the gate is closed."
    assert decision.prefiltered
    assert decision.plugins == {"Gatekeeper"}
