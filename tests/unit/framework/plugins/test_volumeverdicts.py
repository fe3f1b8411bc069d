"""The volume plugins: VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone with
kube-scheduler v1.34.4's messages, and the binding plan's PV choice."""

from __future__ import annotations

import numpy as np
import pytest

from plumb.backend.cache import snapshot, volumes
from plumb.backend.records import objects
from plumb.framework.plugins import (
    nodevolumelimits,
    volumebinding,
    volumerestrictions,
    volumezone,
)
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support import small_clusters
from tests.support.volume_objects import (
    FIVE,
    JSON,
    LOCAL,
    NS,
    pv_body,
    pvc_body,
    storage_class_body,
    store_of,
)


def names(mask: np.ndarray, cluster: snapshot.NodeStatics = FIVE) -> list[str]:
    return [name for name, failed in zip(cluster.names, mask, strict=True) if failed]


def verdicts_of(
    builder: PodBuilder,
    store: volumes.Volumes,
    cluster: snapshot.NodeStatics = FIVE,
    in_use: volumes.ClaimUse = volumes.NOTHING_IN_USE,
) -> volume_plugins.VolumeVerdicts:
    return volume_plugins.verdicts(small_clusters.pod(builder, "pod-uid"), cluster, store, in_use)


def message(verdict: volume_plugins.VolumeVerdicts, total: int = 5) -> str:
    """The part of kube-scheduler's FailedScheduling before the PostFilter's words."""
    if verdict.prefilter is not None:
        return f"0/{total} nodes are available: {verdict.prefilter.message}."
    counts = volume_plugins.histogram(verdict)
    parts = sorted(f"{count} {reason}" for reason, count in counts.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


# --- PreFilter messages -------------------------------------------------------------------------


def test_a_missing_claim_fails_volume_restrictions_prefilter() -> None:
    verdict = verdicts_of(make_pod("web").claims("data-web-2"), store_of())
    assert verdict.prefilter == volume_plugins.PreFilterFailure(
        plugin=volumerestrictions.NAME,
        code=volumes.UNSCHEDULABLE_AND_UNRESOLVABLE,
        message='persistentvolumeclaim "data-web-2" not found',
    )
    assert verdict.prefilter.unresolvable
    assert (
        message(verdict) == '0/5 nodes are available: persistentvolumeclaim "data-web-2" not found.'
    )


def test_an_unbound_immediate_claim_fails_volume_binding_prefilter() -> None:
    store = store_of(
        claims=(pvc_body("data", storage_class="fast"),),
        classes=(storage_class_body("fast", mode=volumes.IMMEDIATE),),
    )
    verdict = verdicts_of(make_pod("web").claims("data"), store)
    assert verdict.prefilter is not None
    assert verdict.prefilter.plugin == volumebinding.NAME
    assert verdict.prefilter.message == volumebinding.UNBOUND_IMMEDIATE


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        (pvc_body("data", storage_class=None), volumebinding.UNBOUND_IMMEDIATE),
        (pvc_body("data", storage_class="gone"), volumebinding.UNBOUND_IMMEDIATE),
        (pvc_body("data", volume="pv-x"), volumebinding.UNBOUND_IMMEDIATE),  # pre-bound
    ],
)
def test_claims_kube_scheduler_treats_as_immediate(claim: JSON, expected: str) -> None:
    verdict = verdicts_of(make_pod("web").claims("data"), store_of(claims=(claim,)))
    assert verdict.prefilter is not None
    assert verdict.prefilter.message == expected


def test_a_lost_or_deleted_claim_fails_prefilter() -> None:
    lost = pvc_body("data", volume="pv-x")
    lost["status"] = {"phase": "Lost"}
    verdict = verdicts_of(make_pod("web").claims("data"), store_of(claims=(lost,)))
    assert verdict.prefilter is not None
    assert verdict.prefilter.message == (
        'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-x"'
    )
    deleting = pvc_body("data")
    deleting["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    verdict = verdicts_of(make_pod("web").claims("data"), store_of(claims=(deleting,)))
    assert verdict.prefilter is not None
    assert verdict.prefilter.message == 'persistentvolumeclaim "data" is being deleted'


def test_ephemeral_claims_must_exist_and_belong_to_the_pod() -> None:
    body = make_pod("web").ephemeral("scratch", storage_class=LOCAL)
    verdict = verdicts_of(body, store_of())
    assert verdict.prefilter is not None
    assert verdict.prefilter.plugin == volumebinding.NAME
    assert verdict.prefilter.message == (
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "web-scratch"'
    )
    someone_elses = store_of(claims=(pvc_body("web-scratch", owner_uid="other"),))
    verdict = verdicts_of(body, someone_elses)
    assert verdict.prefilter is not None
    assert verdict.prefilter.message == (
        "PVC default/web-scratch was not created for pod default/web (pod is not owner)"
    )
    own = store_of(claims=(pvc_body("web-scratch", owner_uid="pod-uid"),), pvs=(pv_body("p"),))
    assert verdicts_of(body, own).prefilter is None


def test_a_bound_claim_whose_pv_is_gone_fails_volume_zone_prefilter() -> None:
    store = store_of(claims=(pvc_body("data", volume="pv-gone", bound=True),))
    verdict = verdicts_of(make_pod("web").claims("data"), store)
    assert verdict.prefilter is not None
    assert verdict.prefilter.plugin == volumezone.NAME
    assert verdict.prefilter.message == 'persistentvolume "pv-gone" not found'


def test_an_ephemeral_bound_claim_whose_pv_is_gone_fails_every_node_in_the_filter() -> None:
    store = store_of(
        claims=(pvc_body("web-scratch", volume="pv-gone", bound=True, owner_uid="pod-uid"),)
    )
    verdict = verdicts_of(make_pod("web").ephemeral("scratch", storage_class=LOCAL), store)
    assert volume_plugins.histogram(verdict) == {volumebinding.PV_NOT_EXIST: 5}


def test_a_pod_without_claims_costs_nothing() -> None:
    assert verdicts_of(make_pod("web"), store_of()) is volume_plugins.NO_VERDICTS


# --- VolumeBinding's filter and plan ------------------------------------------------------------


def test_wffc_claims_fit_only_the_nodes_with_an_available_local_pv() -> None:
    store = store_of(
        pvs=(pv_body("pv-b", node="node-b"), pv_body("pv-d", node="node-d")),
        claims=(pvc_body("data-web-0"),),
    )
    verdict = verdicts_of(make_pod("web-0").claims("data-web-0"), store)
    assert verdict.prefilter is None
    assert verdict.needs_plan
    (only,) = verdict.filters
    assert only.plugin == volumebinding.NAME
    assert only.unresolvable
    assert names(only.fails) == ["node-a", "node-c", "node-e"]
    assert message(verdict) == (
        "0/5 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
    )


def test_no_pv_left_for_a_third_replica() -> None:
    store = store_of(
        pvs=(
            pv_body("pv-b", node="node-b", claim=(NS, "data-web-0")),
            pv_body("pv-d", node="node-d", claim=(NS, "data-web-1")),
        ),
        claims=(pvc_body("data-web-2"),),
    )
    verdict = verdicts_of(make_pod("web-2").claims("data-web-2"), store)
    assert message(verdict) == (
        "0/5 nodes are available: 5 node(s) didn't find available persistent volumes to bind."
    )


def test_a_bound_pv_pinned_to_a_node_fails_the_others() -> None:
    store = store_of(
        pvs=(pv_body("pv-c", node="node-c", claim=(NS, "data"), phase="Bound"),),
        claims=(pvc_body("data", volume="pv-c", bound=True),),
    )
    verdict = verdicts_of(make_pod("web").claims("data"), store)
    assert not verdict.needs_plan
    assert message(verdict) == (
        "0/5 nodes are available: 4 node(s) didn't match PersistentVolume's node affinity."
    )


def test_the_plan_takes_the_smallest_pv_that_fits() -> None:
    store = store_of(
        pvs=(
            pv_body("big", size="100Gi", node="node-a"),
            pv_body("small", size="5Gi", node="node-a"),
            pv_body("too-small", size="1Gi", node="node-a"),
            pv_body("elsewhere", size="3Gi", node="node-b"),
            pv_body("rwx", size="3Gi", node="node-a", modes=("ReadWriteMany",)),
        ),
        claims=(pvc_body("data", size="2Gi", uid="c1"),),
    )
    pod = small_clusters.pod(make_pod("web").claims("data"), "pod-uid")
    node = objects.parse_node(make_node("node-a").obj())
    plan = volume_plugins.plan(pod, node, store)
    assert [(b.claim.name, b.pv.name) for b in plan.bindings] == [("data", "small")]
    assert plan.provisions == ()
    assert plan.node == "node-a"
    assert not plan.empty


def test_claims_are_matched_smallest_first_and_each_pv_taken_once() -> None:
    store = store_of(
        pvs=(
            pv_body("pv-5", size="5Gi", node="node-a"),
            pv_body("pv-10", size="10Gi", node="node-a"),
            pv_body("pv-b", size="10Gi", node="node-b"),
        ),
        claims=(pvc_body("big", size="8Gi"), pvc_body("small", size="4Gi")),
    )
    body = make_pod("web").claims("big", "small")
    verdict = verdicts_of(body, store)
    # node-b has one PV for two claims; the others none.
    assert names(verdict.failing(5)) == ["node-b", "node-c", "node-d", "node-e"]
    plan = volume_plugins.plan(
        small_clusters.pod(body, "pod-uid"),
        objects.parse_node(make_node("node-a").obj()),
        store,
        verdict,
    )
    assert sorted((b.claim.name, b.pv.name) for b in plan.bindings) == [
        ("big", "pv-10"),
        ("small", "pv-5"),
    ]


def test_a_pv_pre_bound_to_the_claim_is_the_only_one_considered() -> None:
    store = store_of(
        pvs=(
            pv_body("mine", size="50Gi", node="node-c", claim=(NS, "data")),
            pv_body("other", size="2Gi", node="node-a"),
        ),
        claims=(pvc_body("data"),),
    )
    verdict = verdicts_of(make_pod("web").claims("data"), store)
    assert names(verdict.failing(5)) == ["node-a", "node-b", "node-d", "node-e"]


def test_dynamic_provisioning_follows_the_class_topology() -> None:
    cluster = small_clusters.statics(
        *(make_node(f"node-{c}").zone(f"z{i}") for i, c in enumerate("abc"))
    )
    store = store_of(
        claims=(pvc_body("data", storage_class="fast"),),
        classes=(storage_class_body("fast", provisioner="csi.example", zones=("z1",)),),
    )
    body = make_pod("web").claims("data")
    verdict = verdicts_of(body, store, cluster)
    assert names(verdict.failing(3), cluster) == ["node-a", "node-c"]
    node_b = objects.parse_node(make_node("node-b").zone("z1").obj())
    plan = volume_plugins.plan(small_clusters.pod(body, "pod-uid"), node_b, store, verdict)
    assert [c.name for c in plan.provisions] == ["data"]
    assert plan.bindings == ()
    with pytest.raises(ValueError, match="didn't find available persistent volumes"):
        volume_plugins.plan(
            small_clusters.pod(body, "pod-uid"),
            objects.parse_node(make_node("node-a").zone("z0").obj()),
            store,
        )


def test_a_claim_with_a_selected_node_fits_that_node_only() -> None:
    store = store_of(
        claims=(
            pvc_body("data", storage_class="fast", annotations={volumes.SELECTED_NODE: "node-e"}),
        ),
        classes=(storage_class_body("fast", provisioner="csi.example"),),
    )
    verdict = verdicts_of(make_pod("web").claims("data"), store)
    assert names(verdict.failing(5)) == ["node-a", "node-b", "node-c", "node-d"]


def test_the_per_node_and_vectorised_paths_agree() -> None:
    pvs = (pv_body("pv-b", node="node-b"), pv_body("pv-d", node="node-d", size="1Gi"))
    claims = (pvc_body("one", size="2Gi"),)
    store = store_of(pvs=pvs, claims=claims)
    pod = small_clusters.pod(make_pod("web").claims("one"), "pod-uid")
    _, claimed = volumebinding.prefilter(pod, store)
    fast = volumebinding.filter(FIVE, store, claimed)
    slow: dict[str, list[str]] = {}
    for node in FIVE.nodes:
        candidates = [volumebinding._candidates(c, store) for c in claimed.delayed]
        for reason in volumebinding._find(
            node.name, node.labels, claimed, candidates, store, {}
        ).reasons:
            slow.setdefault(reason, []).append(node.name)
    assert {reason: names(mask) for reason, mask in fast.items()} == slow


# --- VolumeRestrictions, NodeVolumeLimits, VolumeZone -------------------------------------------


def test_a_read_write_once_pod_claim_in_use_fails_every_node_resolvably() -> None:
    store = store_of(
        pvs=(pv_body("pv-c", node="node-c", claim=(NS, "data"), modes=("ReadWriteOncePod",)),),
        claims=(pvc_body("data", volume="pv-c", bound=True, modes=("ReadWriteOncePod",)),),
    )
    holder = small_clusters.pod(make_pod("holder").claims("data"), "holder")
    use = volumes.InUse.of([("node-c", holder)])
    verdict = verdicts_of(make_pod("web").claims("data"), store, in_use=use)
    (only,) = verdict.filters
    assert only.plugin == volumerestrictions.NAME
    assert not only.unresolvable
    assert message(verdict) == (
        "0/5 nodes are available: 5 node(s) unavailable due to PersistentVolumeClaim with "
        "ReadWriteOncePod access mode already in-use by another pod."
    )
    assert verdicts_of(make_pod("web").claims("data"), store).filters[0].plugin == (
        volumebinding.NAME  # not in use: only the PV's node affinity remains
    )


def test_a_driver_at_its_attach_limit_fails_the_node() -> None:
    csinode = {
        "metadata": {"name": "node-a"},
        "spec": {"drivers": [{"name": "csi.example", "allocatable": {"count": 1}}]},
    }
    store = store_of(
        pvs=(
            pv_body("pv-1", csi=("csi.example", "h1"), claim=(NS, "one"), phase="Bound"),
            pv_body("pv-2", csi=("csi.example", "h2"), claim=(NS, "two"), phase="Bound"),
        ),
        claims=(
            pvc_body("one", volume="pv-1", bound=True),
            pvc_body("two", volume="pv-2", bound=True),
        ),
        csinodes=(csinode,),
    )
    holder = small_clusters.pod(make_pod("holder").claims("one"), "holder")
    use = volumes.InUse.of([("node-a", holder)])
    verdict = verdicts_of(make_pod("web").claims("two"), store, in_use=use)
    (only,) = verdict.filters
    assert only.plugin == nodevolumelimits.NAME
    assert not only.unresolvable
    assert names(only.fails) == ["node-a"]
    assert only.reason == "node(s) exceed max volume count"
    # The volume the node has already does not count twice.
    again = verdicts_of(make_pod("web").claims("one"), store, in_use=use)
    assert again.filters == ()


def test_volume_zone_keeps_a_pod_in_its_pvs_zones() -> None:
    cluster = small_clusters.statics(
        make_node("a").zone("z1"),
        make_node("b").zone("z2"),
        make_node("c").zone("z3"),
        make_node("d"),  # no topology label: passes
        make_node("e").label(volumezone.BETA_ZONE, "z3"),
    )
    labels = {volumezone.BETA_ZONE: "z1__z2"}  # a beta key: the GA label of a node counts
    store = store_of(
        pvs=(pv_body("pv", csi=("csi.example", "h"), labels=labels, claim=(NS, "data")),),
        claims=(pvc_body("data", volume="pv", bound=True),),
    )
    verdict = verdicts_of(make_pod("web").claims("data"), store, cluster)
    (only,) = verdict.filters
    assert only.plugin == volumezone.NAME
    assert only.reason == "node(s) had no available volume zone"
    assert names(only.fails, cluster) == ["c", "e"]


def test_plugins_come_in_kube_schedulers_order_each_node_under_the_first() -> None:
    assert volume_plugins.PLUGINS == (
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
    )
    cluster = small_clusters.statics(make_node("a").zone("z1"), make_node("b").zone("z2"))
    pv = pv_body("pv", node="a", labels={volumezone.ZONE: "z2"}, claim=(NS, "data"))
    store = store_of(pvs=(pv,), claims=(pvc_body("data", volume="pv", bound=True),))
    verdict = verdicts_of(make_pod("web").claims("data"), store, cluster)
    # b fails VolumeBinding (node affinity) and is not counted again by VolumeZone; a fails zone.
    assert [(v.plugin, names(v.fails, cluster)) for v in verdict.filters] == [
        (volumebinding.NAME, ["b"]),
        (volumezone.NAME, ["a"]),
    ]
