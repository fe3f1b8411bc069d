"""Tests for plumb.framework.signatures: which profiles sign pods (kube-scheduler's
OpportunisticBatching, from v1.35), what a signature holds, which pods of a batch continue the
one before them, and the decision that makes (the scene of docs/versions.md)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from plumb.backend.records import objects
from plumb.framework import cycle, emulation, schedconfig, scoring, signatures
from plumb.kernel import compiled, contract, reference
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support.small_clusters import cluster, pod

KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])
NO_SPREAD: dict[str, Any] = {
    "plugins": {"multiPoint": {"disabled": [{"name": "PodTopologySpread"}]}}
}


def profile(
    minor: int = 37, *, gates: dict[str, bool] | None = None, **raw: Any
) -> scoring.Profile:
    """The profile "p" of a KubeSchedulerConfiguration, decided as v1.``minor``."""
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "p", **raw}],
    }
    kube = emulation.emulate(minor, gates)
    return schedconfig.parse(json.dumps(document), kube=kube).profiles[0]


def web(name: str = "web") -> PodBuilder:
    return make_pod(name).scheduler("p").label("app", "web").req(cpu="1", memory="1Gi")


def info(builder: PodBuilder, uid: str = "u") -> objects.PodInfo:
    return pod(builder, uid)


# Profiles ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("minor", [35, 36, 37])
def test_the_default_profile_signs_no_pod(minor: int) -> None:
    # PodTopologySpread's system default constraints refuse every pod.
    assert not signatures.signs(profile(minor))
    assert signatures.signature(info(web()), profile(minor)) is None


@pytest.mark.parametrize(("minor", "signs"), [(34, False), (35, True), (36, True), (37, True)])
def test_without_pod_topology_spread_pods_are_signed_from_v1_35(minor: int, signs: bool) -> None:
    assert signatures.signs(profile(minor, **NO_SPREAD)) is signs


def test_the_gate_turned_off_signs_nothing() -> None:
    off = profile(37, gates={"OpportunisticBatching": False}, **NO_SPREAD)
    assert not signatures.signs(off)


def test_list_defaulting_signs_pods_only_without_default_constraints() -> None:
    def listing(*constraints: dict[str, Any]) -> scoring.Profile:
        args = {"defaultingType": "List", "defaultConstraints": list(constraints)}
        return profile(37, pluginConfig=[{"name": "PodTopologySpread", "args": args}])

    assert signatures.signs(listing())
    zone = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
    assert not signatures.signs(listing(zone))


# Signatures --------------------------------------------------------------------------------------


def test_replicas_share_a_signature_and_their_names_do_not_matter() -> None:
    p = profile(**NO_SPREAD)
    first = signatures.signature(info(web("web-1"), "u1"), p)
    assert first is not None
    assert signatures.signature(info(web("web-2"), "u2"), p) == first


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b.req(cpu="2", memory="1Gi"),
        lambda b: b.label("tier", "front"),
        lambda b: b.toleration("dedicated", value="web", effect="NoSchedule"),
        lambda b: b.node_selector("disk", "ssd"),
        lambda b: b.preferred_node_affinity(10, {"key": "disk", "operator": "Exists"}),
        lambda b: b.images("registry.plumb.test/other:v1"),
    ],
    ids=["requests", "labels", "tolerations", "node selector", "preferred", "images"],
)
def test_what_a_plugin_reads_of_the_pod_changes_its_signature(change: Any) -> None:
    p = profile(**NO_SPREAD)
    assert signatures.signature(info(change(web())), p) != signatures.signature(info(web()), p)


def test_labels_are_left_out_without_inter_pod_affinity() -> None:
    p = profile(
        plugins={
            "multiPoint": {
                "disabled": [{"name": "PodTopologySpread"}, {"name": "InterPodAffinity"}]
            }
        }
    )
    labelled = signatures.signature(info(web().label("tier", "front")), p)
    assert labelled is not None
    assert labelled == signatures.signature(info(web()), p)


def test_tolerations_are_compared_as_a_set() -> None:
    p = profile(**NO_SPREAD)
    one = web().toleration("a", effect="NoSchedule").toleration("b", effect="NoSchedule")
    other = web().toleration("b", effect="NoSchedule").toleration("a", effect="NoSchedule")
    assert signatures.signature(info(one), p) == signatures.signature(info(other), p)


def test_pods_with_pod_affinity_or_spread_constraints_are_not_signed() -> None:
    p = profile(**NO_SPREAD)
    assert signatures.signature(info(web().affinity("zone", {"app": "db"})), p) is None
    assert signatures.signature(info(web().affinity("zone", {"app": "web"}, anti=True)), p) is None
    # Without PodTopologySpread in the profile a pod's own constraints are nobody's business.
    assert signatures.signature(info(web().spread("zone", 1)), p) is not None
    lists = profile(
        pluginConfig=[{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}]
    )
    assert signatures.signature(info(web()), lists) is not None
    assert signatures.signature(info(web().spread("zone", 1)), lists) is None


# Which pods continue the one before -------------------------------------------------------------


def test_consecutive_replicas_continue_the_one_before() -> None:
    pods = [info(web(f"web-{i}"), f"u{i}") for i in range(3)]
    assert signatures.continues(pods, profile(**NO_SPREAD)).tolist() == [False, True, True]
    assert signatures.continues(pods, profile(34, **NO_SPREAD)).tolist() == [False] * 3
    assert signatures.continues(pods, profile(37)).tolist() == [False] * 3


def test_another_signature_a_gap_or_a_nomination_breaks_the_chain() -> None:
    p = profile(**NO_SPREAD)
    a, b, other, c, d = (
        info(web("a"), "ua"),
        info(web("b"), "ub"),
        info(web("x").req(cpu="2"), "ux"),
        info(web("c"), "uc"),
        info(web("d"), "ud"),
    )
    assert signatures.continues([a, b, other, c], p).tolist() == [False, True, False, False]
    # The kernel's batch lacks a pod decided without it (``order`` has it): no continuation.
    assert signatures.continues([a, b, c], p, order=[a, b, other, c]).tolist() == [
        False,
        True,
        False,
    ]
    nominated = dataclasses.replace(c, nominated_node="n1")
    assert signatures.continues([a, nominated, d], p).tolist() == [False, False, False]


# The decision ------------------------------------------------------------------------------------


def _scene() -> list[Any]:
    """docs/versions.md's four nodes (one 1500m pod fills each of 2 cpu)."""

    def node(name: str) -> Any:
        return make_node(name).capacity(cpu="2", memory="4Gi")

    soft = "PreferNoSchedule"
    return [
        node("a").label("x", "yes").label("y", "yes"),
        node("b").label("x", "yes").taint("b", effect=soft),
        node("c"),
        node("d").taint("d1", effect=soft).taint("d2", effect=soft),
    ]


@KERNELS
@pytest.mark.parametrize(("minor", "second"), [(34, "b"), (35, "c"), (36, "c"), (37, "c")])
def test_the_second_pod_takes_the_next_node_of_the_firsts_scores_from_v1_35(
    kernel: contract.Kernel, minor: int, second: str
) -> None:
    c = cluster(_scene())
    builder = web().req(cpu="1500m", memory="1Gi")
    for key in ("x", "y"):
        builder.preferred_node_affinity(50, {"key": key, "operator": "Exists"})
    pods = [info(builder, "u1"), info(builder, "u2")]
    prepared = cycle.prepare(pods, c.snapshot(), c, profile(minor, **NO_SPREAD))
    assert prepared.compiled is not None
    batch = prepared.compiled
    decisions = cycle.explain(batch, kernel(batch.cluster, batch.batch))
    assert [d.node for d in decisions] == ["a", second]
    assert [d.hinted for d in decisions] == [False, minor >= 35]
    # The pod's own scores say b either way.
    assert decisions[1].candidates[0].node == "b"
