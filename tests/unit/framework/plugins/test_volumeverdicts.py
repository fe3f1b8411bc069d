"""The volume plugins: records and store (backend/volumes.py), VolumeRestrictions,
NodeVolumeLimits, VolumeBinding and VolumeZone with kube-scheduler v1.34.4's messages, the binding
plan's PV choice, and PreBind against a fake API."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from plumb import prebind
from plumb.backend import objects, snapshot, volumes
from plumb.framework.plugins import (
    nodevolumelimits,
    volumebinding,
    volumerestrictions,
    volumezone,
)
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb.k8s import client as k8s_client
from plumb.testing.builders import PodBuilder, make_node, make_pod
from tests.support.small_clusters import statics

JSON = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
LOCAL = "local-wffc"
NS = "default"

# --- API bodies (shared with tests/integration/test_volume_prebind.py) ------------------------


def pv_body(
    name: str,
    *,
    size: str = "10Gi",
    storage_class: str = LOCAL,
    node: str | None = None,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    claim: tuple[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    csi: tuple[str, str] | None = None,
    phase: str | None = "Available",
) -> JSON:
    """A PV; ``node`` pins it there (a local volume), ``claim`` pre-binds it (namespace, name)."""
    spec: JSON = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": storage_class,
        "persistentVolumeReclaimPolicy": "Retain",
    }
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    else:
        spec["local"] = {"path": f"/mnt/{name}"}
    if node is not None:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                ]
            }
        }
    elif csi is None:
        # A local volume must name its node; any node will do for a test of something else.
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "Exists"}]}
                ]
            }
        }
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    body: JSON = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }
    if phase is not None:
        body["status"] = {"phase": phase}
    return body


def pvc_body(
    name: str,
    namespace: str = NS,
    *,
    size: str = "1Gi",
    storage_class: str | None = LOCAL,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    volume: str = "",
    bound: bool = False,
    uid: str = "",
    owner_uid: str = "",
    annotations: Mapping[str, str] | None = None,
) -> JSON:
    """A claim; ``bound`` makes it fully bound to ``volume`` as the PV controller leaves it."""
    spec: JSON = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume:
        spec["volumeName"] = volume
    metadata: JSON = {"name": name, "namespace": namespace, "annotations": dict(annotations or {})}
    if uid:
        metadata["uid"] = uid
    if bound:
        metadata["annotations"][volumes.BIND_COMPLETED] = "yes"
    if owner_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": owner_uid, "controller": True}
        ]
    body: JSON = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata,
        "spec": spec,
    }
    if bound:
        body["status"] = {"phase": "Bound"}
    return body


def storage_class_body(
    name: str = LOCAL,
    *,
    provisioner: str = volumes.NO_PROVISIONER,
    mode: str = volumes.WAIT_FOR_FIRST_CONSUMER,
    zones: tuple[str, ...] = (),
) -> JSON:
    body: JSON = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        "reclaimPolicy": "Retain",
    }
    if zones:
        body["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": volumezone.ZONE, "values": list(zones)}]}
        ]
    return body


def with_claims(pod: PodBuilder, *claims: str, ephemeral: tuple[str, ...] = ()) -> JSON:
    """The pod's body with a persistentVolumeClaim volume per claim and ephemeral volumes."""
    body = pod.obj()
    volumes_list: list[JSON] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": claim}}
        for i, claim in enumerate(claims)
    ]
    for volume in ephemeral:
        volumes_list.append(
            {
                "name": volume,
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "storageClassName": LOCAL,
                            "resources": {"requests": {"storage": "1Gi"}},
                        }
                    }
                },
            }
        )
    body["spec"]["volumes"] = volumes_list
    return body


# --- helpers ------------------------------------------------------------------------------------


FIVE = statics(*(make_node(f"node-{c}") for c in "abcde"))


def pod_info(body: JSON, uid: str = "pod-uid") -> objects.PodInfo:
    body = copy.deepcopy(body)
    body["metadata"]["uid"] = uid
    return objects.parse_pod(body)


def store_of(
    *,
    pvs: tuple[JSON, ...] = (),
    claims: tuple[JSON, ...] = (),
    classes: tuple[JSON, ...] = (storage_class_body(),),
    csinodes: tuple[JSON, ...] = (),
) -> volumes.Volumes:
    store = volumes.Volumes()
    store.resync_pvs(pvs)
    store.resync_pvcs(claims)
    store.resync_storage_classes(classes)
    store.resync_csinodes(csinodes)
    return store


def names(mask: np.ndarray, cluster: snapshot.NodeStatics = FIVE) -> list[str]:
    return [name for name, failed in zip(cluster.names, mask, strict=True) if failed]


def verdicts_of(
    body: JSON,
    store: volumes.Volumes,
    cluster: snapshot.NodeStatics = FIVE,
    in_use: volumes.ClaimUse = volumes.NOTHING_IN_USE,
) -> volume_plugins.VolumeVerdicts:
    return volume_plugins.verdicts(pod_info(body), cluster, store, in_use)


def message(verdict: volume_plugins.VolumeVerdicts, total: int = 5) -> str:
    """The part of kube-scheduler's FailedScheduling before the PostFilter's words."""
    if verdict.prefilter is not None:
        return f"0/{total} nodes are available: {verdict.prefilter.message}."
    counts = volume_plugins.histogram(verdict)
    parts = sorted(f"{count} {reason}" for reason, count in counts.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


# --- records ------------------------------------------------------------------------------------


def test_a_pv_is_parsed_into_what_the_plugins_read() -> None:
    body = pv_body("pv-a", size="5Gi", node="node-a", claim=("ns", "data"), labels={"x": "y"})
    body["metadata"]["annotations"] = {volumes.BOUND_BY_CONTROLLER: "yes"}
    pv = volumes.parse_pv(body)
    assert pv.capacity == 5 * 2**30
    assert pv.storage_class == LOCAL
    assert pv.access_modes == frozenset({"ReadWriteOnce"})
    assert pv.claim == volumes.ClaimRef(namespace="ns", name="data")
    assert pv.phase == volumes.AVAILABLE
    assert pv.volume_mode == volumes.FILESYSTEM
    assert pv.node_terms is not None
    assert len(pv.node_terms) == 1
    assert pv.labels == {"x": "y"}
    assert pv.bound_by_controller


def test_the_beta_class_annotation_wins_over_the_field() -> None:
    body = pv_body("pv-a")
    body["metadata"]["annotations"] = {volumes.BETA_STORAGE_CLASS: "old"}
    assert volumes.parse_pv(body).storage_class == "old"
    claim = pvc_body("c", storage_class=None, annotations={volumes.BETA_STORAGE_CLASS: "old"})
    assert volumes.parse_claim(claim).storage_class == "old"


def test_an_unreadable_node_affinity_term_matches_no_node() -> None:
    body = pv_body("pv-a")
    body["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = [
        {"matchExpressions": [{"key": HOSTNAME, "operator": "Near", "values": ["a"]}]}
    ]
    pv = volumes.parse_pv(body)
    assert not volumebinding.pv_fits(pv, FIVE).any()


def test_a_claim_is_parsed_with_its_annotations() -> None:
    body = pvc_body(
        "data",
        size="2Gi",
        volume="pv-a",
        bound=True,
        uid="u1",
        annotations={volumes.SELECTED_NODE: "node-b"},
        owner_uid="pod-1",
    )
    claim = volumes.parse_claim(body)
    assert claim.key == "default/data"
    assert claim.uid == "u1"
    assert claim.request == 2 * 2**30
    assert claim.volume_name == "pv-a"
    assert claim.fully_bound
    assert claim.selected_node == "node-b"
    assert claim.controller_uid == "pod-1"
    assert claim.phase == volumes.CLAIM_BOUND
    unnamed = volumes.parse_claim(pvc_body("c", storage_class=None))
    assert unnamed.storage_class is None
    assert unnamed.class_name == ""


def test_storage_classes_and_csinodes_are_parsed() -> None:
    storage_class = volumes.parse_storage_class(
        storage_class_body("fast", provisioner="csi.example", zones=("z1", "z2"))
    )
    assert storage_class.delayed
    assert storage_class.provisioner == "csi.example"
    assert storage_class.allowed_topologies == (
        (("topology.kubernetes.io/zone", frozenset({"z1", "z2"})),),
    )
    csinode = volumes.parse_csinode(
        {
            "metadata": {"name": "node-a"},
            "spec": {
                "drivers": [
                    {"name": "csi.example", "nodeID": "a", "allocatable": {"count": 2}},
                    {"name": "other", "nodeID": "a"},
                ]
            },
        }
    )
    assert csinode.limits == {"csi.example": 2}


def test_a_pods_claims_are_its_pvc_volumes_and_its_ephemeral_ones() -> None:
    pod = pod_info(with_claims(make_pod("web-0"), "data", "logs", ephemeral=("scratch",)))
    assert pod.claims == (
        objects.PodClaim("data"),
        objects.PodClaim("logs"),
        objects.PodClaim("web-0-scratch", ephemeral=True),
    )
    assert objects.parse_pod(make_pod("plain").obj()).claims == ()


# --- the store ----------------------------------------------------------------------------------


def test_the_store_follows_events_and_a_resync_sweeps_what_the_list_lacks() -> None:
    store = store_of(pvs=(pv_body("pv-a"), pv_body("pv-b", storage_class="other")))
    assert [pv.name for pv in store.pvs_of_class(LOCAL)] == ["pv-a"]
    store.on_pv(pv_body("pv-b", storage_class=LOCAL), "pv-b")
    assert [pv.name for pv in store.pvs_of_class(LOCAL)] == ["pv-a", "pv-b"]
    assert store.pvs_of_class("other") == ()
    store.on_pv(None, "pv-a")
    assert store.pv("pv-a") is None
    store.on_pvc(pvc_body("data"), NS, "data")
    assert store.claim(NS, "data") is not None
    store.resync_pvcs([pvc_body("logs")])
    assert store.claim(NS, "data") is None
    assert store.claim(NS, "logs") is not None
    store.resync_pvs([pv_body("pv-c")])
    assert [pv.name for pv in store.pvs_of_class(LOCAL)] == ["pv-c"]
    store.on_storage_class(None, LOCAL)
    assert store.storage_class(LOCAL) is None


def test_an_assumed_binding_holds_until_a_newer_version_arrives() -> None:
    pv = pv_body("pv-a")
    pv["metadata"]["resourceVersion"] = "10"
    claim = pvc_body("data", uid="c1")
    store = store_of(pvs=(pv,), claims=(claim,))
    plan = volume_plugins.plan(
        pod_info(with_claims(make_pod("web"), "data")),
        objects.parse_node(make_node("node-a").obj()),
        store,
    )
    assert [b.pv.name for b in plan.bindings] == ["pv-a"]
    store.assume(plan)
    assumed = store.pv("pv-a")
    assert assumed is not None
    assert assumed.claim == volumes.ClaimRef(namespace=NS, name="data", uid="c1")
    store.on_pv(pv, "pv-a")  # the same version again (a relist): the assumption stays
    assert store.pv("pv-a") == assumed
    store.forget(plan)
    unbound = store.pv("pv-a")
    assert unbound is not None
    assert unbound.claim is None
    store.assume(plan)
    newer = copy.deepcopy(pv)
    newer["metadata"]["resourceVersion"] = "11"
    store.on_pv(newer, "pv-a")
    latest = store.pv("pv-a")
    assert latest is not None
    assert latest.claim is None


def test_in_use_counts_the_claims_of_placed_pods() -> None:
    a = pod_info(with_claims(make_pod("a"), "data", ephemeral=("tmp",)))
    use = volumes.InUse.of([("node-a", a)])
    assert set(use.claims_on("node-a")) == {"default/data", "default/a-tmp"}
    assert use.named_by_a_placed_pod("default/data")
    assert not use.named_by_a_placed_pod("default/a-tmp")
    assert not use.claims_on("node-b")


# --- PreFilter messages -------------------------------------------------------------------------


def test_a_missing_claim_fails_volume_restrictions_prefilter() -> None:
    verdict = verdicts_of(with_claims(make_pod("web"), "data-web-2"), store_of())
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
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store)
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
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store_of(claims=(claim,)))
    assert verdict.prefilter is not None
    assert verdict.prefilter.message == expected


def test_a_lost_or_deleted_claim_fails_prefilter() -> None:
    lost = pvc_body("data", volume="pv-x")
    lost["status"] = {"phase": "Lost"}
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store_of(claims=(lost,)))
    assert verdict.prefilter is not None
    assert verdict.prefilter.message == (
        'persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-x"'
    )
    deleting = pvc_body("data")
    deleting["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store_of(claims=(deleting,)))
    assert verdict.prefilter is not None
    assert verdict.prefilter.message == 'persistentvolumeclaim "data" is being deleted'


def test_ephemeral_claims_must_exist_and_belong_to_the_pod() -> None:
    body = with_claims(make_pod("web"), ephemeral=("scratch",))
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
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store)
    assert verdict.prefilter is not None
    assert verdict.prefilter.plugin == volumezone.NAME
    assert verdict.prefilter.message == 'persistentvolume "pv-gone" not found'


def test_an_ephemeral_bound_claim_whose_pv_is_gone_fails_every_node_in_the_filter() -> None:
    store = store_of(
        claims=(pvc_body("web-scratch", volume="pv-gone", bound=True, owner_uid="pod-uid"),)
    )
    verdict = verdicts_of(with_claims(make_pod("web"), ephemeral=("scratch",)), store)
    assert volume_plugins.histogram(verdict) == {volumebinding.PV_NOT_EXIST: 5}


def test_a_pod_without_claims_costs_nothing() -> None:
    assert verdicts_of(make_pod("web").obj(), store_of()) is volume_plugins.NO_VERDICTS


# --- VolumeBinding's filter and plan ------------------------------------------------------------


def test_wffc_claims_fit_only_the_nodes_with_an_available_local_pv() -> None:
    store = store_of(
        pvs=(pv_body("pv-b", node="node-b"), pv_body("pv-d", node="node-d")),
        claims=(pvc_body("data-web-0"),),
    )
    verdict = verdicts_of(with_claims(make_pod("web-0"), "data-web-0"), store)
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
    verdict = verdicts_of(with_claims(make_pod("web-2"), "data-web-2"), store)
    assert message(verdict) == (
        "0/5 nodes are available: 5 node(s) didn't find available persistent volumes to bind."
    )


def test_a_bound_pv_pinned_to_a_node_fails_the_others() -> None:
    store = store_of(
        pvs=(pv_body("pv-c", node="node-c", claim=(NS, "data"), phase="Bound"),),
        claims=(pvc_body("data", volume="pv-c", bound=True),),
    )
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store)
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
    pod = pod_info(with_claims(make_pod("web"), "data"))
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
    body = with_claims(make_pod("web"), "big", "small")
    verdict = verdicts_of(body, store)
    # node-b has one PV for two claims; the others none.
    assert names(verdict.failing(5)) == ["node-b", "node-c", "node-d", "node-e"]
    plan = volume_plugins.plan(
        pod_info(body), objects.parse_node(make_node("node-a").obj()), store, verdict
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
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store)
    assert names(verdict.failing(5)) == ["node-a", "node-b", "node-d", "node-e"]


def test_dynamic_provisioning_follows_the_class_topology() -> None:
    cluster = statics(*(make_node(f"node-{c}").zone(f"z{i}") for i, c in enumerate("abc")))
    store = store_of(
        claims=(pvc_body("data", storage_class="fast"),),
        classes=(storage_class_body("fast", provisioner="csi.example", zones=("z1",)),),
    )
    body = with_claims(make_pod("web"), "data")
    verdict = verdicts_of(body, store, cluster)
    assert names(verdict.failing(3), cluster) == ["node-a", "node-c"]
    node_b = objects.parse_node(make_node("node-b").zone("z1").obj())
    plan = volume_plugins.plan(pod_info(body), node_b, store, verdict)
    assert [c.name for c in plan.provisions] == ["data"]
    assert plan.bindings == ()
    with pytest.raises(ValueError, match="didn't find available persistent volumes"):
        volume_plugins.plan(
            pod_info(body), objects.parse_node(make_node("node-a").zone("z0").obj()), store
        )


def test_a_claim_with_a_selected_node_fits_that_node_only() -> None:
    store = store_of(
        claims=(
            pvc_body("data", storage_class="fast", annotations={volumes.SELECTED_NODE: "node-e"}),
        ),
        classes=(storage_class_body("fast", provisioner="csi.example"),),
    )
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store)
    assert names(verdict.failing(5)) == ["node-a", "node-b", "node-c", "node-d"]


def test_the_per_node_and_vectorised_paths_agree() -> None:
    pvs = (pv_body("pv-b", node="node-b"), pv_body("pv-d", node="node-d", size="1Gi"))
    claims = (pvc_body("one", size="2Gi"),)
    store = store_of(pvs=pvs, claims=claims)
    pod = pod_info(with_claims(make_pod("web"), "one"))
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
    holder = pod_info(with_claims(make_pod("holder"), "data"), uid="holder")
    use = volumes.InUse.of([("node-c", holder)])
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store, in_use=use)
    (only,) = verdict.filters
    assert only.plugin == volumerestrictions.NAME
    assert not only.unresolvable
    assert message(verdict) == (
        "0/5 nodes are available: 5 node(s) unavailable due to PersistentVolumeClaim with "
        "ReadWriteOncePod access mode already in-use by another pod."
    )
    assert verdicts_of(with_claims(make_pod("web"), "data"), store).filters[0].plugin == (
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
    holder = pod_info(with_claims(make_pod("holder"), "one"), uid="holder")
    use = volumes.InUse.of([("node-a", holder)])
    verdict = verdicts_of(with_claims(make_pod("web"), "two"), store, in_use=use)
    (only,) = verdict.filters
    assert only.plugin == nodevolumelimits.NAME
    assert not only.unresolvable
    assert names(only.fails) == ["node-a"]
    assert only.reason == "node(s) exceed max volume count"
    # The volume the node has already does not count twice.
    again = verdicts_of(with_claims(make_pod("web"), "one"), store, in_use=use)
    assert again.filters == ()


def test_volume_zone_keeps_a_pod_in_its_pvs_zones() -> None:
    cluster = statics(
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
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store, cluster)
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
    cluster = statics(make_node("a").zone("z1"), make_node("b").zone("z2"))
    pv = pv_body("pv", node="a", labels={volumezone.ZONE: "z2"}, claim=(NS, "data"))
    store = store_of(pvs=(pv,), claims=(pvc_body("data", volume="pv", bound=True),))
    verdict = verdicts_of(with_claims(make_pod("web"), "data"), store, cluster)
    # b fails VolumeBinding (node affinity) and is not counted again by VolumeZone; a fails zone.
    assert [(v.plugin, names(v.fails, cluster)) for v in verdict.filters] == [
        (volumebinding.NAME, ["b"]),
        (volumezone.NAME, ["a"]),
    ]


# --- PreBind ------------------------------------------------------------------------------------


class FakeApi:
    """PVs and PVCs by name; ``controller`` runs after each poll's reads, as the PV controller."""

    def __init__(self, pvs: list[JSON], claims: list[JSON]) -> None:
        self.pvs = {p["metadata"]["name"]: p for p in pvs}
        self.claims = {c["metadata"]["name"]: c for c in claims}
        self.patches: list[tuple[str, str, JSON]] = []
        self.version = 100

    def _answer(self, body: JSON | None) -> k8s_client.ApiResponse:
        if body is None:
            return k8s_client.ApiResponse(status=404, body={"message": "not found"})
        return k8s_client.ApiResponse(status=200, body=copy.deepcopy(body))

    def _patch(self, kind: str, body: JSON | None, patch: JSON) -> k8s_client.ApiResponse:
        self.patches.append((kind, body["metadata"]["name"] if body else "", patch))
        if body is None:
            return self._answer(None)
        wanted = patch.get("metadata", {}).get("resourceVersion")
        if wanted is not None and wanted != body["metadata"].get("resourceVersion"):
            message = f'Operation cannot be fulfilled on {kind} "{body["metadata"]["name"]}"'
            return k8s_client.ApiResponse(status=409, body={"message": message})
        annotations = patch.get("metadata", {}).get("annotations") or {}
        body["metadata"].setdefault("annotations", {}).update(annotations)
        body["spec"].update(patch.get("spec") or {})
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        return self._answer(body)

    async def get_persistent_volume(self, *, name: str) -> k8s_client.ApiResponse:
        return self._answer(self.pvs.get(name))

    async def patch_persistent_volume(self, *, name: str, patch: JSON) -> k8s_client.ApiResponse:
        return self._patch("persistentvolumes", self.pvs.get(name), patch)

    async def get_persistent_volume_claim(
        self, *, namespace: str, name: str
    ) -> k8s_client.ApiResponse:
        return self._answer(self.claims.get(name))

    async def patch_persistent_volume_claim(
        self, *, namespace: str, name: str, patch: JSON
    ) -> k8s_client.ApiResponse:
        return self._patch("persistentvolumeclaims", self.claims.get(name), patch)

    def complete(self) -> None:
        """What the PV controller does with a PV whose claimRef names a claim."""
        for pv in self.pvs.values():
            ref = pv["spec"].get("claimRef")
            claim = self.claims.get(ref["name"]) if ref else None
            if claim is not None:
                claim["spec"]["volumeName"] = pv["metadata"]["name"]
                claim["metadata"]["annotations"][volumes.BIND_COMPLETED] = "yes"


def _planned() -> tuple[FakeApi, volumes.BindingPlan]:
    pv = pv_body("pv-b", node="node-b")
    pv["metadata"]["resourceVersion"] = "7"
    claim = pvc_body("data", uid="c1")
    claim["metadata"]["resourceVersion"] = "8"
    store = store_of(pvs=(pv,), claims=(claim,))
    plan = volume_plugins.plan(
        pod_info(with_claims(make_pod("web"), "data")),
        objects.parse_node(make_node("node-b").obj()),
        store,
    )
    return FakeApi([copy.deepcopy(pv)], [copy.deepcopy(claim)]), plan


NODE_B = {HOSTNAME: "node-b"}


def _run(
    api: FakeApi,
    plan: volumes.BindingPlan,
    *,
    labels: Mapping[str, str] | None = NODE_B,
    exists: bool = True,
    polls_before_bound: int = 1,
    bind_timeout: float = 30.0,
) -> prebind.PreBindResult:
    polls = 0

    async def sleep(_: float) -> None:
        nonlocal polls
        polls += 1
        if polls == polls_before_bound:
            api.complete()

    watched = prebind.Watched(pod_exists=lambda: exists, node_labels=lambda: labels)
    return asyncio.run(
        prebind.prebind(api, plan, watched, bind_timeout=bind_timeout, interval=0, sleep=sleep)
    )


def test_prebind_binds_the_pv_to_its_claim_and_waits_for_the_controller() -> None:
    api, plan = _planned()
    assert _run(api, plan, polls_before_bound=3) == prebind.OK
    ((kind, name, patch),) = api.patches
    assert (kind, name) == ("persistentvolumes", "pv-b")
    assert patch == {
        "metadata": {
            "resourceVersion": "7",
            "annotations": {volumes.BOUND_BY_CONTROLLER: "yes"},
        },
        "spec": {
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": NS,
                "name": "data",
                "uid": "c1",
                "resourceVersion": "8",
            }
        },
    }


def test_prebind_of_an_empty_plan_writes_nothing() -> None:
    api, _plan = _planned()
    empty = volumes.BindingPlan(namespace=NS, pod="web", pod_uid="u", node="node-b")
    assert _run(api, empty) == prebind.OK
    assert api.patches == []


def test_prebind_fails_when_the_pv_changed_since_the_decision() -> None:
    api, plan = _planned()
    api.pvs["pv-b"]["metadata"]["resourceVersion"] = "9"
    result = _run(api, plan)
    assert not result.ok
    assert result.message == (
        'running PreBind plugin "VolumeBinding": Operation cannot be fulfilled on '
        'persistentvolumes "pv-b"'
    )


def test_prebind_fails_on_its_deadline_and_when_the_claim_ref_is_reset() -> None:
    api, plan = _planned()
    result = _run(api, plan, polls_before_bound=10**6, bind_timeout=0)
    assert result.message == (
        'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    )
    api, plan = _planned()

    async def reset(_: float) -> None:
        api.pvs["pv-b"]["spec"]["claimRef"] = None

    watched = prebind.Watched(pod_exists=lambda: True, node_labels=lambda: NODE_B)
    result = asyncio.run(prebind.prebind(api, plan, watched, sleep=reset))
    assert result.message == (
        'running PreBind plugin "VolumeBinding": binding volumes: ClaimRef got reset for pv "pv-b"'
    )


def test_prebind_gives_up_when_the_pod_is_gone_or_the_node_no_longer_fits() -> None:
    api, plan = _planned()
    assert "pod does not exist any more" in _run(api, plan, exists=False).message
    api, plan = _planned()
    result = _run(api, plan, labels={HOSTNAME: "node-x"}, polls_before_bound=5)
    assert result.message == (
        'running PreBind plugin "VolumeBinding": binding volumes: pv "pv-b" node affinity '
        'doesn\'t match node "node-b": no matching NodeSelectorTerms'
    )


def test_prebind_asks_for_provisioning_with_the_selected_node() -> None:
    claim = pvc_body("data", storage_class="fast", uid="c1")
    claim["metadata"]["resourceVersion"] = "3"
    store = store_of(
        claims=(claim,), classes=(storage_class_body("fast", provisioner="csi.example"),)
    )
    plan = volume_plugins.plan(
        pod_info(with_claims(make_pod("web"), "data")),
        objects.parse_node(make_node("node-b").obj()),
        store,
    )
    provisioned = pv_body("pvc-c1", csi=("csi.example", "h"), claim=(NS, "data"), phase="Bound")
    api = FakeApi([], [copy.deepcopy(claim)])

    async def provision(_: float) -> None:
        api.pvs["pvc-c1"] = provisioned
        api.complete()

    watched = prebind.Watched(pod_exists=lambda: True, node_labels=lambda: NODE_B)
    assert asyncio.run(prebind.prebind(api, plan, watched, sleep=provision)) == prebind.OK
    ((kind, name, patch),) = api.patches
    assert (kind, name) == ("persistentvolumeclaims", "data")
    assert patch == {
        "metadata": {"resourceVersion": "3", "annotations": {volumes.SELECTED_NODE: "node-b"}}
    }
    # A provisioner that gives up removes the annotation: the pod is retried.
    api = FakeApi([], [copy.deepcopy(claim)])

    async def give_up(_: float) -> None:
        api.claims["data"]["metadata"]["annotations"].pop(volumes.SELECTED_NODE, None)

    result = asyncio.run(prebind.prebind(api, plan, watched, sleep=give_up))
    assert result.message == (
        'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC '
        '"data"'
    )
