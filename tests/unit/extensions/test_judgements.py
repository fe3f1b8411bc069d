"""The plugins' verdicts on one pod: what they answer, checked, or the error that ends the
pod's attempt in kube-scheduler's words."""

from __future__ import annotations

import numpy as np
import pytest

from plumb.extensions import enabling, interface, judgements, registry
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import sample_plugins
from tests.support.small_clusters import cluster, pod

FOUND = registry.of(sample_plugins.RackFilter, sample_plugins.CheapScore, sample_plugins.Gatekeeper)


def _enabled(name: str, points: set[str], weight: int = 0, args: object = None) -> enabling.Enabled:
    return enabling.enable(FOUND.plugins[name], frozenset(points), weight, args)


def _plugins(*enabled: enabling.Enabled) -> judgements.Plugins:
    return [(e, enabling.instance(e, FOUND)) for e in enabled]


def _view() -> interface.NodeView:
    nodes = [
        make_node("a").label("plumb.test/rack", "a").label("plumb.test/price", "30"),
        make_node("b").label("plumb.test/rack", "b").label("plumb.test/price", "10"),
        make_node("c").label("plumb.test/price", "20"),
        make_node("d").label("plumb.test/rack", "a").label("plumb.test/price", "60"),
    ]
    return judgements.node_view(cluster(nodes).snapshot(), now=1_000.0)


RACK = _enabled("RackFilter", {interface.FILTER})
CHEAP = _enabled("CheapScore", {interface.SCORE}, weight=2)


def _judge(name: str, *enabled: enabling.Enabled) -> judgements.Judgement:
    view = _view()
    return judgements.judge(
        judgements.pod_view(pod(make_pod(name), name)), view, _plugins(*enabled)
    )


def test_a_filter_rejects_nodes_with_its_reasons_and_a_score_gives_raw_scores() -> None:
    found = _judge("web", RACK, CHEAP)
    assert found.failure is None
    assert found.refused is None
    by_reason = {r.reason: (r.fails.tolist(), r.unresolvable) for r in found.rejections}
    assert by_reason == {
        "node(s) had no rack label": ([False, False, True, False], True),
        "node(s) were in another rack": ([False, True, False, False], False),
    }
    assert found.scores["CheapScore"].tolist() == [30, 10, 20, 60]
    assert found.nodes == ("a", "b", "c", "d")


def test_scores_are_normalised_over_the_nodes_every_filter_passed() -> None:
    raw = np.array([30, 10, 20, 60], dtype=np.int64)
    passing = np.array([True, False, False, True])
    # Reversed over a and d: 100 - raw * 100 // 60.
    assert judgements.normalised(raw, interface.REVERSED, passing).tolist() == [50, 84, 67, 0]
    assert judgements.normalised(raw, interface.HIGHEST, passing).tolist() == [50, 16, 33, 100]
    zero = np.zeros(4, dtype=np.int64)
    assert judgements.normalised(zero, interface.REVERSED, passing).tolist() == [100] * 4


@pytest.mark.parametrize(
    ("name", "message", "why"),
    [
        (
            "raise-1",
            'running "RackFilter" filter plugin: RuntimeError: cannot judge raise-1',
            judgements.RAISED,
        ),
        (
            "wrong-1",
            'running "RackFilter" filter plugin: answered ndarray, not a FilterRejection, a '
            "list of them or None",
            judgements.MALFORMED,
        ),
    ],
)
def test_a_filter_that_raises_or_answers_wrong_fails_the_pod(
    name: str, message: str, why: str
) -> None:
    failure = _judge(name, RACK, CHEAP).failure
    assert failure is not None
    assert (failure.plugin, failure.point, failure.message, failure.why) == (
        "RackFilter",
        interface.FILTER,
        message,
        why,
    )


def test_a_score_of_the_wrong_length_fails_the_pod_in_the_score_words() -> None:
    failure = _judge("wrong-2", CHEAP).failure
    assert failure is not None
    assert failure.message == (
        'running Score plugins: plugin "CheapScore" failed with: scores are int64[5], not one '
        "integer per node (int[4])"
    )


class _Loud(interface.Plugin):
    name = "Loud"

    def score(self, pod: interface.PodView, nodes: interface.NodeView) -> object:
        return np.full(len(nodes), 150)


def test_a_score_beyond_100_is_kube_schedulers_invalid_score() -> None:
    found = registry.of(_Loud)
    enabled = enabling.enable(found.plugins["Loud"], frozenset({interface.SCORE}), 1, None)
    judged = judgements.judge(
        judgements.pod_view(pod(make_pod("web"), "web")),
        _view(),
        [(enabled, enabling.instance(enabled, found))],
    )
    assert judged.failure is not None
    assert judged.failure.message == (
        'applying score defaultWeights on Score plugins: plugin "Loud" returns an invalid score '
        "150, it should in the range of [0, 100] after normalizing"
    )


def test_a_prefilter_status_refuses_the_pod_before_any_node() -> None:
    gate = _enabled("Gatekeeper", {interface.PRE_FILTER})
    found = judgements.judge(
        judgements.pod_view(pod(make_pod("web").label("plumb.test/refuse", "PreFilter"), "w")),
        _view(),
        _plugins(gate, RACK),
    )
    assert found.refused == ("Gatekeeper", interface.Status("the gate is closed"))
    assert found.rejections == ()  # no Filter runs after a PreFilter refused


def test_the_view_serves_labels_annotations_and_resources_read_only() -> None:
    nodes = [
        make_node("a").capacity(cpu="4").annotate("plumb.test/window", "x"),
        make_node("b").capacity(cpu="2"),
    ]
    c = cluster(nodes, bound=[make_pod("resident").node("a").req(cpu="1")])
    view = judgements.node_view(c.snapshot(), now=5.0)
    assert view.annotation("plumb.test/window").tolist() == ["x", ""]
    assert view.allocatable("cpu").tolist() == [4000, 2000]
    assert view.requested("cpu").tolist() == [1000, 0]
    assert view.allocatable("example.com/gpu").tolist() == [0, 0]
    assert view.now == 5.0
    with pytest.raises(ValueError, match="read-only"):
        view.requested("cpu")[0] = 7
