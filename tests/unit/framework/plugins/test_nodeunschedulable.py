"""NodeUnschedulable: a cordoned node takes no new pod unless the pod tolerates the cordon."""

from __future__ import annotations

from plumb.backend.cache import snapshot
from plumb.backend.records import objects
from plumb.framework.plugins import nodeunschedulable
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support.small_clusters import statics

CORDON_KEY = "node.kubernetes.io/unschedulable"


CLUSTER = statics(make_node("a-cordoned").unschedulable(), make_node("b-open"))


def failing(pod: PodBuilder, cluster: snapshot.NodeStatics = CLUSTER) -> list[str]:
    fails = nodeunschedulable.filter(objects.parse_pod(pod.obj()), cluster)
    return [name for name, failed in zip(cluster.names, fails, strict=True) if failed]


def test_a_cordoned_node_rejects_an_ordinary_pod() -> None:
    assert failing(make_pod("web")) == ["a-cordoned"]


def test_the_cordon_toleration_lets_the_pod_onto_a_cordoned_node() -> None:
    pod = make_pod("ds").toleration(CORDON_KEY, operator="Exists", effect="NoSchedule")
    assert failing(pod) == []


def test_an_equal_toleration_with_empty_value_also_tolerates_the_cordon() -> None:
    # The taint kube-scheduler checks has an empty value, so Equal "" matches it.
    assert failing(make_pod("ds").toleration(CORDON_KEY, effect="NoSchedule")) == []


def test_a_wildcard_toleration_tolerates_the_cordon() -> None:
    assert failing(make_pod("everywhere").toleration(operator="Exists")) == []


def test_a_toleration_for_another_effect_does_not_tolerate_the_cordon() -> None:
    pod = make_pod("ds").toleration(CORDON_KEY, operator="Exists", effect="NoExecute")
    assert failing(pod) == ["a-cordoned"]


def test_a_toleration_with_a_value_does_not_match_the_valueless_cordon_taint() -> None:
    pod = make_pod("ds").toleration(CORDON_KEY, value="true", effect="NoSchedule")
    assert failing(pod) == ["a-cordoned"]


def test_the_result_is_the_callers_to_modify() -> None:
    pod = objects.parse_pod(make_pod("web").obj())
    fails = nodeunschedulable.filter(pod, CLUSTER)
    fails[:] = False
    assert nodeunschedulable.filter(pod, CLUSTER).tolist() == [True, False]


def test_reason_and_plugin_name_are_kube_schedulers() -> None:
    assert nodeunschedulable.NAME == "NodeUnschedulable"
    assert nodeunschedulable.UNSCHEDULABLE == "node(s) were unschedulable"
    assert nodeunschedulable.UNRESOLVABLE is True
