"""The DRA store: which pools a node sees (GatherPools), which devices are taken, and a pod's
claims in kube-scheduler's words."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from plumb.backend.cache import dra
from plumb.backend.cache import journal as journal_module
from plumb.backend.records import draobjects, objects
from tests.support.dra_bodies import DRIVER, claim_body, device, result, selector, slice_body

V1_34 = dra.PoolRules(whole_pool=False, partitionable=False)
V1_36 = dra.PoolRules(counter_slices_everywhere=True)


def node(name: str, **labels: str) -> objects.NodeInfo:
    return objects.NodeInfo(name=name, allocatable={}, labels=labels)


def devices_of(pool: draobjects.Pool) -> list[str]:
    return [d.name for s in pool.slices for d in s.devices]


def store_with(*bodies: dict[str, Any]) -> dra.DraStore:
    store = dra.DraStore()
    for body in bodies:
        store.on_slice(body, body["metadata"]["name"])
    return store


# Which slices a node sees ------------------------------------------------------------------


def test_a_node_sees_its_own_slices_those_selecting_it_and_those_for_all_nodes() -> None:
    store = store_with(
        slice_body("a-local", device("gpu-0"), pool="a", nodeName="node-a"),
        slice_body("b-local", device("gpu-0"), pool="b", nodeName="node-b"),
        slice_body("rack-1", device("nic-0"), pool="rack", nodeSelector=selector("rack", "1")),
        slice_body("shared", device("fpga-0"), pool="everywhere", allNodes=True),
    )
    on_a = store.pools(node("node-a", rack="1"))
    assert [(p.name, devices_of(p)) for p in on_a] == [
        ("a", ["gpu-0"]),
        ("everywhere", ["fpga-0"]),
        ("rack", ["nic-0"]),
    ]
    assert [p.name for p in store.pools(node("node-b", rack="2"))] == ["b", "everywhere"]


def test_a_node_selector_can_name_the_node_by_field() -> None:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}
    store = store_with(slice_body("s", device("d"), nodeSelector={"nodeSelectorTerms": [term]}))
    assert store.pools(node("node-a")) == ()
    assert [p.name for p in store.pools(node("node-b"))] == ["pool-a"]


def test_per_device_node_selection_counts_when_partitionable_devices_are_on() -> None:
    piece = slice_body(
        "s",
        device("d0", nodeName="node-a"),
        device("d1", nodeName="node-b"),
        perDeviceNodeSelection=True,
    )
    store = store_with(piece)
    assert [p.name for p in store.pools(node("node-b"))] == ["pool-a"]
    assert store.pools(node("node-b"), V1_34) == ()


def test_only_the_newest_generation_of_a_pool_is_used() -> None:
    store = store_with(
        slice_body("old", device("gpu-0"), generation=1),
        slice_body("new", device("gpu-9"), generation=2),
    )
    (pool,) = store.pools(node("node-a"))
    assert (pool.generation, devices_of(pool)) == (2, ["gpu-9"])


def test_a_pool_missing_one_of_its_slices_is_incomplete_and_offers_nothing() -> None:
    store = store_with(slice_body("s0", device("gpu-0"), count=2))
    (pool,) = store.pools(node("node-a"))
    assert pool.incomplete
    assert pool.slices == ()
    # v1.34 judged the node's slices alone, and kept them.
    (old,) = store.pools(node("node-a"), V1_34)
    assert old.incomplete
    assert devices_of(old) == ["gpu-0"]


def test_a_pool_spread_over_nodes_is_complete_from_v1_35() -> None:
    store = store_with(
        slice_body("s-a", device("gpu-0"), count=2, nodeName="node-a"),
        slice_body("s-b", device("gpu-1"), count=2, nodeName="node-b"),
    )
    (pool,) = store.pools(node("node-a"))
    assert not pool.incomplete
    assert devices_of(pool) == ["gpu-0"]
    assert pool.other_slices[0].name == "s-b"
    assert store.pools(node("node-a"), V1_34)[0].incomplete


def test_a_pool_being_replaced_elsewhere_is_ignored() -> None:
    store = store_with(
        slice_body("s-a", device("gpu-0"), count=2, generation=1, nodeName="node-a"),
        slice_body("s-b", device("gpu-1"), count=2, generation=2, nodeName="node-b"),
    )
    assert store.pools(node("node-a")) == ()


def test_a_device_name_twice_makes_the_pool_invalid() -> None:
    store = store_with(
        slice_body("s0", device("gpu-0"), count=2),
        slice_body("s1", device("gpu-0"), count=2),
    )
    (pool,) = store.pools(node("node-a"))
    assert pool.invalid == "duplicate device name gpu-0"
    assert pool.slices == ()


def test_counter_sets_are_gathered_apart_and_checked() -> None:
    counters = {"sharedCounters": [{"name": "mem", "counters": {"gb": {"value": "80"}}}]}
    uses = {"consumesCounters": [{"counterSet": "mem", "counters": {"gb": {"value": "10"}}}]}
    counter_slice = slice_body("counters", count=2, nodeName="node-a")
    counter_slice["spec"].update(counters)
    del counter_slice["spec"]["devices"]
    store = store_with(counter_slice, slice_body("parts", device("part-0", **uses), count=2))
    (pool,) = store.pools(node("node-a"))
    assert pool.invalid == ""
    assert devices_of(pool) == ["part-0"]
    assert set(pool.counter_sets) == {"mem"}
    wrong = {"consumesCounters": [{"counterSet": "cpu", "counters": {"gb": {"value": "1"}}}]}
    store.on_slice(slice_body("parts", device("part-0", **wrong), count=2), "parts")
    assert store.pools(node("node-a"))[0].invalid == "counter set cpu not found"


def test_v1_36_gathers_counter_slices_whatever_node_they_name() -> None:
    counter_slice = slice_body("counters", count=2, nodeName="node-b")
    counter_slice["spec"]["sharedCounters"] = [{"name": "mem", "counters": {}}]
    store = store_with(counter_slice, slice_body("parts", device("part-0"), count=2))
    assert set(store.pools(node("node-a"), V1_36)[0].counter_sets) == {"mem"}
    # v1.37: the counter slice is not the node's, but the whole pool is complete all the same.
    (pool,) = store.pools(node("node-a"))
    assert not pool.incomplete
    assert set(pool.counter_sets) == {"mem"}


def test_compatibility_groups_leave_their_slice_out_while_the_gate_is_off() -> None:
    uses = {"consumesCounters": [{"counterSet": "c", "counters": {}, "compatibilityGroups": ["x"]}]}
    store = store_with(
        slice_body("plain", device("d0"), count=2),
        slice_body("grouped", device("d1", **uses), count=2),
    )
    assert store.pools(node("node-a"))[0].incomplete
    # With the gate the slice counts (and its device's counter set must then exist).
    (pool,) = store.pools(node("node-a"), dra.PoolRules(compatibility_groups=True))
    assert not pool.incomplete
    assert pool.invalid == "counter set c not found"


def test_pools_with_binding_conditions_come_last() -> None:
    store = store_with(
        slice_body("a", device("d", bindingConditions=["Attached"]), pool="a"),
        slice_body("b", device("d"), pool="b"),
    )
    assert [p.name for p in store.pools(node("node-a"))] == ["b", "a"]


def test_a_slice_change_is_seen_by_the_next_gathering() -> None:
    store = store_with(slice_body("s", device("gpu-0")))
    assert devices_of(store.pools(node("node-a"))[0]) == ["gpu-0"]
    store.on_slice(slice_body("s", device("gpu-1")), "s")
    assert devices_of(store.pools(node("node-a"))[0]) == ["gpu-1"]
    store.on_slice(None, "s")
    assert store.pools(node("node-a")) == ()


# Devices taken -------------------------------------------------------------------------------


def test_every_allocated_claim_takes_its_devices_but_admin_access_takes_none() -> None:
    store = dra.DraStore()
    store.on_claim(claim_body("c0", results=(result("gpu-0"),)), "ml", "c0")
    admin = claim_body("c1", results=(result("gpu-1", adminAccess=True),))
    store.on_claim(admin, "ml", "c1")
    store.on_claim(claim_body("c2"), "ml", "c2")
    assert store.allocated().devices == {(DRIVER, "pool-a", "gpu-0")}
    store.on_claim(None, "ml", "c0")
    assert store.allocated().devices == frozenset()


def test_shares_count_whole_devices_without_consumable_capacity() -> None:
    store = dra.DraStore()
    shared = result("gpu-0", shareID="s1", consumedCapacity={"memory": "10Gi"})
    store.on_claim(claim_body("c0", results=(shared,)), "ml", "c0")
    gpu = (DRIVER, "pool-a", "gpu-0")
    consumable = store.allocated(consumable=True)
    assert consumable.devices == frozenset()
    assert consumable.shared == {(*gpu, "s1")}
    assert consumable.consumed == {gpu: {"memory": Fraction(10 * 2**30)}}
    assert store.allocated(consumable=False).devices == {gpu}


def test_an_assumed_allocation_holds_its_devices_until_the_watch_shows_it() -> None:
    store = dra.DraStore()
    store.on_claim(claim_body("c0"), "ml", "c0")
    allocation = draobjects.Allocation(
        devices=(
            draobjects.AllocatedDevice(request="gpu", driver=DRIVER, pool="pool-a", device="g0"),
        )
    )
    store.assume("ml/c0", allocation, "pod-1")
    taken = {(DRIVER, "pool-a", "g0")}
    assert store.allocated().devices == taken
    store.on_claim(claim_body("c0", version="2", results=(result("g0"),)), "ml", "c0")
    assert store.pending("ml", "c0") is None
    assert store.allocated().devices == taken
    store.on_claim(claim_body("c0", version="3"), "ml", "c0")  # deallocated
    assert store.allocated().devices == frozenset()


def test_forgetting_an_assumed_allocation_frees_its_devices() -> None:
    store = dra.DraStore()
    store.on_claim(claim_body("c0"), "ml", "c0")
    allocation = draobjects.Allocation(
        devices=(
            draobjects.AllocatedDevice(request="gpu", driver=DRIVER, pool="pool-a", device="g0"),
        )
    )
    store.assume("ml/c0", allocation, "pod-1")
    store.forget_unwritten("ml/c0")
    assert store.allocated().devices == frozenset()


def test_a_written_claim_stands_until_the_watch_brings_its_version() -> None:
    store = dra.DraStore()
    store.on_claim(claim_body("c0", version="5"), "ml", "c0")
    written = draobjects.parse_claim(
        claim_body("c0", version="7", results=(result("g0"),), reserved=("pod-1",))
    )
    store.assume_written(written, "pod-1")
    assert store.claim("ml", "c0") is written
    assert store.claims_reserved_for("pod-1") == ("ml/c0",)
    store.on_claim(claim_body("c0", version="6", results=(result("g0"),)), "ml", "c0")
    assert store.claim("ml", "c0") is written  # an older version than the one written
    store.on_claim(
        claim_body("c0", version="7", results=(result("g0"),), reserved=("pod-1",)), "ml", "c0"
    )
    assert store.pending("ml", "c0") is None
    assert store.allocated().devices == {(DRIVER, "pool-a", "g0")}
    assert store.claims_reserved_for("pod-1") == ("ml/c0",)


def test_a_written_claim_outlives_a_failed_binding_until_the_watch_brings_it() -> None:
    # PreBind wrote the allocation, then the binding failed: the API server holds the
    # allocation, so its device stays taken while the watch has not shown it (a pod decided
    # meanwhile must not be given the same device), and is free once a newer version shows
    # the claim deallocated.
    store = dra.DraStore()
    store.on_claim(claim_body("c0", version="5"), "ml", "c0")
    written = draobjects.parse_claim(
        claim_body("c0", version="7", results=(result("g0"),), reserved=("pod-1",))
    )
    store.assume_written(written, "pod-1")
    store.forget_unwritten("ml/c0")  # Unreserve after the failed binding
    assert store.allocated().devices == {(DRIVER, "pool-a", "g0")}
    assert store.claim("ml", "c0") is written
    store.on_claim(claim_body("c0", version="7", results=(result("g0"),)), "ml", "c0")
    assert store.pending("ml", "c0") is None
    assert store.allocated().devices == {(DRIVER, "pool-a", "g0")}
    store.assume_written(
        draobjects.parse_claim(claim_body("c0", version="9", results=(result("g0"),))), "pod-1"
    )
    store.on_claim(claim_body("c0", version="10"), "ml", "c0")  # deallocated after the write
    assert store.pending("ml", "c0") is None
    assert store.allocated().devices == frozenset()


# A pod's claims ------------------------------------------------------------------------------


def pod(*entries: draobjects.PodResourceClaim, **statuses: str) -> objects.PodInfo:
    return objects.PodInfo(
        uid="pod-uid",
        namespace="ml",
        name="train",
        scheduler_name="plumb",
        node_name="",
        priority=0,
        creation_timestamp="",
        resource_version="1",
        requests={},
        terminal=False,
        deleting=False,
        gated=False,
        resource_claims=entries,
        claim_statuses=statuses,
    )


TEMPLATED = draobjects.PodResourceClaim(name="gpu", template_name="one-gpu")
NAMED = draobjects.PodResourceClaim(name="shared", claim_name="team-gpus")


@pytest.mark.parametrize(
    ("the_pod", "claims", "error"),
    [
        (pod(TEMPLATED), (), 'pod "ml/train": ResourceClaim not created yet'),
        (pod(NAMED), (), 'could not find ResourceClaim "ml/team-gpus"'),
        (
            pod(TEMPLATED, gpu="train-gpu-x"),
            (claim_body("train-gpu-x", owner="someone-else"),),
            "ResourceClaim ml/train-gpu-x was not created for Pod ml/train (Pod is not owner)",
        ),
        (
            pod(NAMED),
            (claim_body("team-gpus", deleting=True),),
            'resourceclaim "team-gpus" is being deleted',
        ),
        (
            pod(draobjects.PodResourceClaim(name="odd")),
            (),
            'pod "ml/train", spec.resourceClaim "odd": none of the supported fields are set',
        ),
    ],
)
def test_a_pod_whose_claims_cannot_be_used_is_told_why_in_kube_schedulers_words(
    the_pod: objects.PodInfo, claims: tuple[dict[str, Any], ...], error: str
) -> None:
    store = dra.DraStore()
    for body in claims:
        store.on_claim(body, "ml", body["metadata"]["name"])
    assert store.pod_claims(the_pod).error == error


def test_a_pod_with_its_claims_made_gets_them_in_spec_order() -> None:
    store = dra.DraStore()
    store.on_claim(claim_body("train-gpu-x", owner="pod-uid"), "ml", "train-gpu-x")
    store.on_claim(claim_body("team-gpus"), "ml", "team-gpus")
    skipped = draobjects.PodResourceClaim(name="none", template_name="t")
    lookup = store.pod_claims(pod(TEMPLATED, NAMED, skipped, gpu="train-gpu-x", none=""))
    assert lookup.error == ""
    assert [(name, claim.name) for name, claim in lookup.claims] == [
        ("gpu", "train-gpu-x"),
        ("shared", "team-gpus"),
    ]


def test_claim_names_follow_the_status_for_templates() -> None:
    assert pod(TEMPLATED, NAMED).resource_claim_names == ("team-gpus",)
    assert pod(TEMPLATED, NAMED, gpu="x").resource_claim_names == ("x", "team-gpus")


# Journal and dumps ---------------------------------------------------------------------------


def test_each_change_is_journalled_and_an_unchanged_object_is_not() -> None:
    journal = journal_module.Journal()
    store = dra.DraStore(journal)
    store.on_slice(slice_body("s", device("d")), "s")
    store.on_slice(slice_body("s", device("d")), "s")  # the same again: nothing changed
    store.on_class({"metadata": {"name": "gpu"}}, "gpu")
    store.on_claim(claim_body("c"), "ml", "c")
    store.on_template({"metadata": {"namespace": "ml", "name": "t"}}, "ml", "t")
    store.assume("ml/c", draobjects.Allocation(), "p")
    kinds = [type(undo).__name__ for _seq, undo in journal.entries()]
    assert kinds == ["Reslice", "Reclass", "Reclaim", "Retemplate", "Repend"]


def test_a_store_restored_from_its_state_answers_the_same() -> None:
    store = store_with(slice_body("s", device("gpu-0")))
    store.on_class({"metadata": {"name": "gpu"}}, "gpu")
    store.on_claim(claim_body("c0", results=(result("gpu-0"),), reserved=("p",)), "ml", "c0")
    store.assume("ml/c1", draobjects.Allocation(), "p")
    copy = dra.DraStore()
    copy.restore(store.state())
    assert copy.state() == store.state()
    assert copy.pools(node("node-a")) == store.pools(node("node-a"))
    assert copy.allocated() == store.allocated()
    assert copy.claims_reserved_for("p") == ("ml/c0",)
