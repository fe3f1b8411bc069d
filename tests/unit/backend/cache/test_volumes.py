"""The volume records and store (backend/cache/volumes.py, csiobjects.py): PVs, claims,
StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities parsed into what the plugins read,
and the store following events, resyncs and assumed bindings.
"""

from __future__ import annotations

import copy

from plumb.backend.cache import csiobjects, volumes
from plumb.backend.records import objects
from plumb.framework.plugins import volumebinding
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import small_clusters
from tests.support.volume_objects import (
    FIVE,
    HOSTNAME,
    LOCAL,
    NS,
    csidriver_body,
    pv_body,
    pvc_body,
    storage_capacity_body,
    storage_class_body,
    store_of,
)

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
    pod = small_clusters.pod(
        make_pod("web-0").claims("data", "logs").ephemeral("scratch", storage_class=LOCAL),
        "pod-uid",
    )
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
        small_clusters.pod(make_pod("web").claims("data"), "pod-uid"),
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
    a = small_clusters.pod(
        make_pod("a").claims("data").ephemeral("tmp", storage_class=LOCAL), "pod-uid"
    )
    use = volumes.InUse.of([("node-a", a)])
    assert set(use.claims_on("node-a")) == {"default/data", "default/a-tmp"}
    assert use.named_by_a_placed_pod("default/data")
    assert not use.named_by_a_placed_pod("default/a-tmp")
    assert not use.claims_on("node-b")


# --- CSIDrivers and CSIStorageCapacities (csiobjects) -------------------------------------------


def test_a_csinode_lists_every_driver_with_or_without_a_limit() -> None:
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
    assert csinode.drivers == {"csi.example", "other"}


def test_a_csidriver_is_read_with_its_two_switches() -> None:
    driver = csiobjects.parse_csidriver(
        csidriver_body("csi.example", storage_capacity=True, prevent_if_missing=True)
    )
    assert (driver.name, driver.storage_capacity, driver.prevent_if_missing) == (
        "csi.example",
        True,
        True,
    )
    plain = csiobjects.parse_csidriver(csidriver_body("csi.example"))
    assert not plain.storage_capacity
    assert not plain.prevent_if_missing


def test_a_storage_capacity_limits_by_its_maximum_volume_size_first() -> None:
    both = csiobjects.parse_storage_capacity(
        storage_capacity_body("c1", "fast", capacity="10Gi", maximum="4Gi", node="node-a")
    )
    assert both.capacity == 10 * 2**30
    assert both.limit == 4 * 2**30
    assert both.holds(4 * 2**30)
    assert not both.holds(4 * 2**30 + 1)
    unset = csiobjects.parse_storage_capacity(storage_capacity_body("c2", "fast", node="a"))
    assert unset.limit is None
    assert not unset.holds(0)  # no capacity reported: nothing fits


def test_a_storage_capacity_reaches_the_nodes_its_topology_selects() -> None:
    on_a = csiobjects.parse_storage_capacity(
        storage_capacity_body("c1", "fast", capacity="1Gi", node="node-a")
    )
    assert on_a.reaches({HOSTNAME: "node-a"})
    assert not on_a.reaches({HOSTNAME: "node-b"})
    nowhere = csiobjects.parse_storage_capacity(storage_capacity_body("c2", "fast", capacity="1"))
    assert not nowhere.reaches({HOSTNAME: "node-a"})
    everywhere = csiobjects.parse_storage_capacity(
        storage_capacity_body("c3", "fast", capacity="1", match_labels={})
    )
    assert everywhere.reaches({})
    broken = storage_capacity_body("c4", "fast", capacity="1")
    broken["nodeTopology"] = {"matchExpressions": [{"key": "k", "operator": "In", "values": []}]}
    assert not csiobjects.parse_storage_capacity(broken).reaches({"k": "v"})


def test_the_store_follows_csidrivers_and_storage_capacities() -> None:
    store = store_of(
        csidrivers=(csidriver_body("csi.example", storage_capacity=True),),
        capacities=(
            storage_capacity_body("b", "fast", capacity="2Gi", node="node-b"),
            storage_capacity_body("a", "fast", capacity="1Gi", node="node-a"),
            storage_capacity_body("x", "slow", capacity="1Gi", node="node-a"),
        ),
    )
    driver = store.csidriver("csi.example")
    assert driver is not None
    assert driver.storage_capacity
    assert [c.name for c in store.capacities_of_class("fast")] == ["a", "b"]
    # A capacity moved to another class leaves the first one's index.
    store.on_storage_capacity(
        storage_capacity_body("a", "slow", capacity="1Gi", node="node-a"), NS, "a"
    )
    assert [c.name for c in store.capacities_of_class("fast")] == ["b"]
    assert [c.name for c in store.capacities_of_class("slow")] == ["a", "x"]
    store.on_storage_capacity(None, NS, "x")
    store.on_csidriver(None, "csi.example")
    assert [c.name for c in store.capacities_of_class("slow")] == ["a"]
    assert store.csidriver("csi.example") is None
    store.resync_storage_capacities([])
    assert store.capacities_of_class("fast") == ()
