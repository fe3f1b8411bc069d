"""TaintToleration: NoSchedule and NoExecute taints keep out pods that do not tolerate them;
untolerated PreferNoSchedule taints only count against the node in the score."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from plumb.backend.cache import snapshot
from plumb.backend.records import objects, specs
from plumb.framework.plugins import tainttoleration
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support.small_clusters import statics

CLUSTER = statics(
    make_node("plain"),
    make_node("gpu").taint("dedicated", "gpu", "NoSchedule"),
    make_node("draining").taint("maintenance", "", "NoExecute"),
    make_node("spot").taint("spot", "true", "PreferNoSchedule"),
)


def reasons(pod: PodBuilder, cluster: snapshot.NodeStatics = CLUSTER) -> dict[str, str]:
    """Node name to the first untolerated taint that blocks it, for the nodes that fail."""
    fails, first = tainttoleration.filter(objects.parse_pod(pod.obj()), cluster)
    assert fails.dtype == np.bool_
    assert first.dtype == np.int32
    assert ((first == tainttoleration.NO_TAINT) == ~fails).all()
    return {
        name: cluster.distinct_taints[first[i]].describe()
        for i, name in enumerate(cluster.names)
        if fails[i]
    }


def scores(pod: PodBuilder, cluster: snapshot.NodeStatics = CLUSTER) -> dict[str, int]:
    raw = tainttoleration.score_raw(objects.parse_pod(pod.obj()), cluster)
    return dict(zip(cluster.names, raw.tolist(), strict=True))


def test_no_schedule_and_no_execute_taints_block_an_intolerant_pod() -> None:
    assert reasons(make_pod("web")) == {
        "gpu": "{dedicated: gpu}",
        "draining": "{maintenance: }",
    }


def test_prefer_no_schedule_does_not_block_but_counts_in_the_score() -> None:
    assert "spot" not in reasons(make_pod("web"))
    assert scores(make_pod("web")) == {"draining": 0, "gpu": 0, "plain": 0, "spot": 1}


def test_an_empty_key_with_exists_tolerates_every_taint() -> None:
    pod = make_pod("agent").toleration(operator="Exists")
    assert reasons(pod) == {}
    assert not any(scores(pod).values())


def test_exists_tolerates_any_value_of_the_key() -> None:
    assert "gpu" not in reasons(make_pod("ml").toleration("dedicated", operator="Exists"))


def test_equal_needs_the_same_value() -> None:
    assert "gpu" not in reasons(make_pod("ml").toleration("dedicated", value="gpu"))
    assert "gpu" in reasons(make_pod("ml").toleration("dedicated", value="cpu"))


def test_an_empty_effect_tolerates_every_effect_of_the_key() -> None:
    cluster = statics(
        make_node("n").taint("k", "v", "NoSchedule").taint("k", "v", "PreferNoSchedule")
    )
    pod = make_pod("p").toleration("k", value="v")
    assert reasons(pod, cluster) == {}
    assert scores(pod, cluster) == {"n": 0}


def test_a_no_schedule_toleration_does_not_cover_no_execute() -> None:
    pod = make_pod("p").toleration("maintenance", operator="Exists", effect="NoSchedule")
    assert "draining" in reasons(pod)


def test_a_no_schedule_toleration_does_not_cover_prefer_no_schedule() -> None:
    pod = make_pod("p").toleration("spot", operator="Exists", effect="NoSchedule")
    assert scores(pod)["spot"] == 1
    pod = make_pod("p").toleration("spot", operator="Exists", effect="PreferNoSchedule")
    assert scores(pod)["spot"] == 0


def test_the_reason_names_the_first_untolerated_taint_in_the_nodes_own_order() -> None:
    cluster = statics(
        make_node("n1").taint("ok", "1").taint("b", "2", "NoExecute").taint("c", "3"),
        make_node("n2").taint("c", "3").taint("ok", "1").taint("b", "2", "NoExecute"),
    )
    pod = make_pod("p").toleration("ok", operator="Exists")
    assert reasons(pod, cluster) == {
        "n1": "{b: 2}",
        "n2": "{c: 3}",
    }


def test_prefer_no_schedule_taints_are_counted_per_node() -> None:
    cluster = statics(
        make_node("one").taint("x", effect="PreferNoSchedule"),
        make_node("two")
        .taint("x", effect="PreferNoSchedule")
        .taint("y", effect="PreferNoSchedule"),
        make_node("none"),
    )
    assert scores(make_pod("p"), cluster) == {"none": 0, "one": 1, "two": 2}
    assert scores(make_pod("p").toleration("y", operator="Exists"), cluster)["two"] == 1


def test_an_untainted_cluster_rejects_nothing() -> None:
    cluster = statics(make_node("a"), make_node("b"))
    fails, first = tainttoleration.filter(objects.parse_pod(make_pod("p").obj()), cluster)
    assert not fails.any()
    assert first.tolist() == [tainttoleration.NO_TAINT] * 2
    assert first.dtype == np.int32


TAINTS = [
    specs.Taint(key, value, effect)
    for key, value, effect in itertools.product(
        ["a", "b"], ["", "x"], ["NoSchedule", "PreferNoSchedule", "NoExecute"]
    )
]
TOLERATIONS = list(
    itertools.product(
        ["", "a"], ["Equal", "Exists"], ["", "x"], ["", "NoSchedule", "PreferNoSchedule"]
    )
)
TAINTED = statics(
    *(make_node(f"n{i:02}").taint(t.key, t.value, t.effect) for i, t in enumerate(TAINTS))
)


@pytest.mark.parametrize(("key", "operator", "value", "effect"), TOLERATIONS)
def test_the_columns_agree_with_toleration_tolerates(
    key: str, operator: str, value: str, effect: str
) -> None:
    # One node per taint, so a node fails exactly when its one taint is untolerated.
    pod = objects.parse_pod(
        make_pod("p").toleration(key, operator=operator, value=value, effect=effect).obj()
    )
    (toleration,) = pod.scheduling.tolerations
    fails, _ = tainttoleration.filter(pod, TAINTED)
    counted = tainttoleration.score_raw(pod, TAINTED)
    for i, taint in enumerate(TAINTS):
        untolerated = not toleration.tolerates(taint)
        assert fails[i] == (untolerated and taint.effect != "PreferNoSchedule"), taint
        assert counted[i] == int(untolerated and taint.effect == "PreferNoSchedule"), taint


def test_reason_and_plugin_name_are_kube_schedulers() -> None:
    assert tainttoleration.NAME == "TaintToleration"
    # v1.34.4 no longer names the taint (checked against the real binary in
    # tests/integration/test_plugin_parity.py).
    assert tainttoleration.UNTOLERATED == "node(s) had untolerated taint(s)"
    assert tainttoleration.UNRESOLVABLE is True
    assert (tainttoleration.SCORE_WEIGHT, tainttoleration.SCORE_REVERSED) == (3, True)
