"""The structured allocator: the devices kube-scheduler gives a pod's claims on one node, and the
words its Filter says when it cannot, per release.

Cases come from k8s.io/dynamic-resource-allocation structured/internal/allocatortesting
(allocator_testing.go, v0.37.2 and earlier): same slices, classes and claims, same devices
chosen, same error text. Pools are gathered by the DRA store, as the plugin will."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import pytest

from plumb.backend.cache import dra
from plumb.backend.cache import journal as journal_module
from plumb.backend.records import draobjects, objects, specs
from plumb.framework import emulation
from plumb.framework.devices import allocator
from plumb.k8s import quantities

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A, CLASS_B = "class-a", "class-b"
NODE_1 = objects.NodeInfo(
    name="node-1", allocatable={}, labels={"region": "region-1", "planet": "earth"}
)
NODE_2 = objects.NodeInfo(
    name="node-2", allocatable={}, labels={"region": "region-2", "planet": "earth"}
)
LOCAL_1 = (("metadata.name", "In", ("node-1",)),)


# --- builders (allocator_testing.go's, in plumb's records) -----------------------------------


def q(text: str) -> draobjects.Quantity:
    return draobjects.Quantity(quantities.parse(text), text)


def device(name: str, **fields: Any) -> draobjects.Device:
    """``memory="2Gi"`` sets that capacity; other keyword arguments are Device's fields."""
    memory = fields.pop("memory", None)
    if memory is not None:
        fields["capacity"] = {"memory": draobjects.Capacity(q(memory))}
    return draobjects.Device(name=name, **fields)


def uses(counter_set: str, **counters: str) -> draobjects.CounterConsumption:
    return draobjects.CounterConsumption(counter_set, {k: q(v) for k, v in counters.items()})


def counters(name: str, **values: str) -> draobjects.CounterSet:
    return draobjects.CounterSet(name, {k: q(v) for k, v in values.items()})


def on_node(name: str) -> draobjects.NodeSelection:
    return draobjects.NodeSelection(node_name=name)


def labelled(key: str, *values: str) -> draobjects.NodeSelection:
    term = specs.NodeSelectorTerm(expressions=(specs.Requirement(key, "In", values),))
    return draobjects.NodeSelection(terms=(term,))


ALL_NODES = draobjects.NodeSelection(all_nodes=True)
PER_DEVICE = draobjects.NodeSelection(terms=())
ON_NODE_1 = on_node("node-1")


def slice_(
    name: str,
    *devices: draobjects.Device,
    where: draobjects.NodeSelection = ON_NODE_1,
    pool: str = "pool-1",
    driver: str = DRIVER_A,
    count: int = 1,
    generation: int = 1,
    shared: tuple[draobjects.CounterSet, ...] = (),
) -> draobjects.ResourceSlice:
    return draobjects.ResourceSlice(
        name=name,
        driver=driver,
        pool=pool,
        generation=generation,
        slice_count=count,
        selection=where,
        per_device_node_selection=where is PER_DEVICE,
        devices=devices,
        shared_counters=shared,
        resource_version="1",
    )


def klass(name: str, driver: str, *configs: str) -> draobjects.DeviceClass:
    return draobjects.DeviceClass(
        name=name,
        selectors=(f'device.driver == "{driver}"',),
        config=tuple(
            draobjects.Opaque(driver=driver, parameters={c: f"{c}Value"}) for c in configs
        ),
    )


def spec(cls: str, count: int = 1, *selectors: str, **fields: Any) -> draobjects.RequestSpec:
    return draobjects.RequestSpec(device_class=cls, count=count, selectors=selectors, **fields)


def req(
    name: str, cls: str, count: int = 1, *selectors: str, **fields: Any
) -> draobjects.DeviceRequest:
    return draobjects.DeviceRequest(name=name, exactly=spec(cls, count, *selectors, **fields))


def every(name: str, cls: str, **fields: Any) -> draobjects.DeviceRequest:
    return req(name, cls, 0, mode=draobjects.ALL, **fields)


def sub(
    name: str, cls: str, count: int = 1, *selectors: str, **fields: Any
) -> draobjects.RequestSpec:
    return dataclasses.replace(spec(cls, count, *selectors, **fields), name=name)


def first(name: str, *subs: draobjects.RequestSpec) -> draobjects.DeviceRequest:
    return draobjects.DeviceRequest(name=name, first_available=subs)


def match(attribute: str, *requests: str) -> draobjects.DeviceConstraint:
    return draobjects.DeviceConstraint(requests=requests, match_attribute=attribute)


def distinct(attribute: str, *requests: str) -> draobjects.DeviceConstraint:
    return draobjects.DeviceConstraint(requests=requests, distinct_attribute=attribute)


def claim(
    name: str,
    *requests: draobjects.DeviceRequest,
    constraints: tuple[draobjects.DeviceConstraint, ...] = (),
    config: tuple[draobjects.Opaque, ...] = (),
) -> draobjects.ResourceClaim:
    return draobjects.ResourceClaim(
        namespace="",
        name=name,
        uid=f"uid-{name}",
        spec=draobjects.ClaimSpec(requests=requests, constraints=constraints, config=config),
    )


def memory_at_least(text: str) -> str:
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{text}")) >= 0'


class FakeSelectorError(Exception):
    def __init__(self, detail: str, *, at_compile: bool = False) -> None:
        super().__init__(f"CEL {'compile' if at_compile else 'runtime'} error: {detail}")
        self.detail, self.at_compile = detail, at_compile


def fake_matcher(
    expression: str,
    driver: str,
    pool: str,
    slice_: draobjects.ResourceSlice,
    dev: draobjects.Device,
) -> bool:
    """The handful of expressions these cases use."""
    if expression.startswith("device.driver == "):
        return driver == expression.split('"')[1]
    if expression.startswith(f'device.capacity["{DRIVER_A}"].memory'):
        wanted = quantities.parse(expression.split('"')[3])
        memory = dev.capacity.get("memory")
        if memory is None:
            raise FakeSelectorError("no such key: memory")
        return memory.value.value >= wanted
    if expression == "device.allowMultipleAllocations":
        return dev.allow_multiple_allocations
    if expression == "noSuchVar":
        raise FakeSelectorError(
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'noSuchVar' "
            "(in container '')",
            at_compile=True,
        )
    raise AssertionError(f"the fake matcher does not know {expression!r}")


def allocate(
    claims: Iterable[draobjects.ResourceClaim],
    slices: Iterable[draobjects.ResourceSlice],
    classes: Iterable[draobjects.DeviceClass] = (klass(CLASS_A, DRIVER_A),),
    *,
    minor: int = 37,
    gates: Mapping[str, bool] | None = None,
    node: objects.NodeInfo = NODE_1,
    taken: Iterable[tuple[str, str, str]] = (),
    shared: Iterable[tuple[str, str, str, str]] = (),
    consumed: Mapping[tuple[str, str, str], Mapping[str, str]] | None = None,
    matches: allocator.DeviceMatcher = fake_matcher,
) -> allocator.AllocationOutcome:
    features = emulation.emulate(minor, gates).devices
    store = dra.DraStore()
    store.restore(journal_module.DraState(slices=tuple(slices)))
    state = dra.AllocatedState(
        devices=frozenset(taken),
        shared=frozenset(shared),
        consumed=MappingProxyType(
            {k: {n: quantities.parse(v) for n, v in c.items()} for k, c in (consumed or {}).items()}
        ),
    )
    return allocator.allocate(
        node=node,
        claims=tuple(claims),
        pools=store.pools(node, allocator.pool_rules(features)),
        classes={c.name: c for c in classes},
        state=state,
        features=features,
        matches=matches,
    )


def chosen(outcome: allocator.AllocationOutcome) -> list[list[tuple[str, str, str, str]]]:
    """Per claim, (request, driver, pool, device) of each result, in the order written."""
    assert isinstance(outcome, allocator.Allocated), outcome
    return [
        [(d.request, d.driver, d.pool, d.device) for d in a.devices] for a in outcome.allocations
    ]


def fields_selector(outcome: allocator.AllocationOutcome, c: int = 0) -> Any:
    assert isinstance(outcome, allocator.Allocated), outcome
    selection = outcome.allocations[c].node_selection
    if selection is None:
        return None
    assert selection.terms is not None
    return [
        (
            tuple((r.key, r.operator, r.values) for r in t.expressions),
            tuple((r.key, r.operator, r.values) for r in t.fields),
        )
        for t in selection.terms
    ]


def failed(outcome: allocator.AllocationOutcome) -> str:
    assert isinstance(outcome, allocator.AllocationFailed), outcome
    return outcome.message


def refused(outcome: allocator.AllocationOutcome) -> str:
    assert isinstance(outcome, allocator.Unallocatable), outcome
    return outcome.message


RELEASES = pytest.mark.parametrize("minor", [34, 35, 36, 37])
ONE = slice_("slice-1", device("device-1"))


# --- simple cases, every release ------------------------------------------------------------


@RELEASES
def test_simple_one_device_on_the_node_is_allocated_for_the_node(minor: int) -> None:
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], [ONE], minor=minor)
    assert chosen(outcome) == [[("req-0", DRIVER_A, "pool-1", "device-1")]]
    assert fields_selector(outcome) == [((), LOCAL_1)]


def test_other_node_sees_its_own_slices_only() -> None:
    slices = [
        slice_("slice-1", device("device-1"), driver=DRIVER_B),
        slice_("slice-2", device("device-1"), where=on_node("node-2"), pool="pool-2"),
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices, node=NODE_2)
    assert chosen(outcome) == [[("req-0", DRIVER_A, "pool-2", "device-1")]]
    assert fields_selector(outcome) == [((), (("metadata.name", "In", ("node-2",)),))]


def test_small_and_large_backtrack_within_a_claim() -> None:
    # The large device comes first: the small request takes it, the large one finds nothing,
    # and the search goes back to give the small request the small device.
    slices = [slice_("slice-1", device("device-2", memory="2Gi"), device("device-1", memory="1Gi"))]
    the_claim = claim(
        "claim-0",
        req("req-0", CLASS_A, 1, memory_at_least("1Gi")),
        req("req-1", CLASS_A, 1, memory_at_least("2Gi")),
    )
    assert chosen(allocate([the_claim], slices)) == [
        [("req-0", DRIVER_A, "pool-1", "device-1"), ("req-1", DRIVER_A, "pool-1", "device-2")]
    ]


def test_small_and_large_backtrack_across_claims() -> None:
    slices = [slice_("slice-1", device("device-2", memory="2Gi"), device("device-1", memory="1Gi"))]
    claims = [
        claim("claim-0", req("req-0", CLASS_A, 1, memory_at_least("1Gi"))),
        claim("claim-1", req("req-1", CLASS_A, 1, memory_at_least("2Gi"))),
    ]
    assert chosen(allocate(claims, slices)) == [
        [("req-0", DRIVER_A, "pool-1", "device-1")],
        [("req-1", DRIVER_A, "pool-1", "device-2")],
    ]


def test_devices_come_from_pools_in_driver_and_pool_name_order() -> None:
    slices = [
        slice_("slice-b", device("device-1"), pool="pool-b"),
        slice_("slice-a", device("device-1"), pool="pool-a"),
        slice_("slice-z", device("device-0"), pool="pool-a", driver="a-driver"),
    ]
    classes = [klass(CLASS_A, DRIVER_A)]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A, 2))], slices, classes)
    assert chosen(outcome) == [
        [("req-0", DRIVER_A, "pool-a", "device-1"), ("req-0", DRIVER_A, "pool-b", "device-1")]
    ]


def test_slices_of_a_pool_are_walked_in_name_order_and_devices_in_slice_order() -> None:
    slices = [
        slice_("slice-b", device("device-9"), count=2),
        slice_("slice-a", device("device-5"), device("device-3"), count=2),
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A, 2))], slices)
    assert chosen(outcome) == [
        [("req-0", DRIVER_A, "pool-1", "device-5"), ("req-0", DRIVER_A, "pool-1", "device-3")]
    ]


@RELEASES
def test_not_enough_suitable_devices_is_the_filters_sentence(minor: int) -> None:
    claims = [claim("claim-0", req("req-0", CLASS_A)), claim("claim-0", req("req-1", CLASS_A))]
    assert refused(allocate(claims, [ONE], minor=minor)) == "cannot allocate all claims"


def test_already_allocated_devices_are_not_free() -> None:
    outcome = allocate(
        [claim("claim-0", req("req-0", CLASS_A))],
        [ONE],
        taken=[(DRIVER_A, "pool-1", "device-1")],
    )
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


def test_no_claims_need_nothing() -> None:
    assert allocate([], [ONE]) == allocator.Allocated(())


# --- classes and requests that cannot be served anywhere ------------------------------------


@pytest.mark.parametrize(
    ("the_claim", "message"),
    [
        (
            claim("claim-0", req("req-0", "unknown-class")),
            "claim claim-0, request req-0: could not retrieve device class unknown-class: "
            'deviceclass.resource.k8s.io "unknown-class" not found',
        ),
        (
            claim("claim-0", req("req-0", "")),
            "claim claim-0, request req-0: missing device class name (unsupported request type?)",
        ),
        (
            claim("claim-0", req("req-0", CLASS_A, 1, "")),
            "claim claim-0, request req-0, selector #0: CEL expression empty (unsupported "
            "selector type?)",
        ),
        (
            claim("claim-0", req("req-0", CLASS_A, 1, mode="future-mode")),
            "claim claim-0, request req-0: unsupported count mode future-mode",
        ),
        (
            claim("claim-0", req("req-0", CLASS_A), constraints=(draobjects.DeviceConstraint(),)),
            "claim claim-0, constraint #0: empty constraint (unsupported constraint type?)",
        ),
    ],
)
def test_a_claim_no_node_can_serve_stops_the_cycle_in_go_words(
    the_claim: draobjects.ResourceClaim, message: str
) -> None:
    assert failed(allocate([the_claim], [ONE])) == message


def test_a_namespaced_claim_is_named_with_its_namespace() -> None:
    the_claim = dataclasses.replace(claim("claim-0", req("req-0", "nope")), namespace="ml")
    assert failed(allocate([the_claim], [ONE])).startswith("claim ml/claim-0, request req-0:")


def test_admin_access_needs_its_gate() -> None:
    # DRAAdminAccess is locked on from v1.36; v1.35 lets it be turned off.
    the_claim = claim("claim-0", req("req-0", CLASS_A, admin_access=True))
    outcome = allocate([the_claim], [ONE], minor=35, gates={"DRAAdminAccess": False})
    assert failed(outcome) == (
        "claim claim-0, request req-0: admin access is requested, but the feature is disabled"
    )


def test_subrequests_need_the_prioritized_list_gate() -> None:
    the_claim = claim("claim-0", first("req-0", sub("subReq-0", CLASS_A)))
    outcome = allocate([the_claim], [ONE], minor=36, gates={"DRAPrioritizedList": False})
    assert failed(outcome) == (
        "claim claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is "
        "disabled"
    )


@pytest.mark.parametrize(
    ("the_claim", "message"),
    [
        (
            claim("claim-0", req("req-0", CLASS_A, capacity={"capacity-0": q("1")})),
            "claim claim-0, request req-0: has capacity requests, but the DRAConsumableCapacity "
            "feature is disabled",
        ),
        (
            claim(
                "claim-0",
                first(
                    "req-0",
                    sub("subReq-0", CLASS_A, capacity={"capacity-0": q("1")}),
                    sub("subReq-1", CLASS_A, capacity={"capacity-0": q("1")}),
                ),
            ),
            "claim claim-0, subrequest subReq-0: has capacity requests, but the "
            "DRAConsumableCapacity feature is disabled",
        ),
    ],
)
def test_capacity_requests_need_consumable_capacity(
    the_claim: draobjects.ResourceClaim, message: str
) -> None:
    # Off by default until v1.36.
    assert failed(allocate([the_claim], [ONE], minor=35)) == message


# --- the limit of 32 results per claim, worded per release ----------------------------------


def test_too_many_devices_in_one_request() -> None:
    the_claim = claim("claim-0", req("req-0", CLASS_A, 500))
    assert failed(allocate([the_claim], [ONE])) == (
        "claim claim-0, request req-0: adding 500 devices exceeds the claim limit of 32, with "
        "0 already accounted for"
    )
    assert failed(allocate([the_claim], [ONE], minor=36)) == (
        "claim claim-0: number of requested devices 500 exceeds the claim limit of 32"
    )


def test_the_request_that_overflows_the_claim_is_named() -> None:
    the_claim = claim("claim-0", req("req-0", CLASS_A, 20), req("req-1", CLASS_A, 20))
    assert failed(allocate([the_claim], [ONE])) == (
        "claim claim-0, request req-1: adding 20 devices exceeds the claim limit of 32, with "
        "20 already accounted for"
    )


def test_two_requests_filling_the_claim_exactly_are_allocated() -> None:
    devices = [device(f"device-{i}") for i in range(32)]
    the_claim = claim("claim-0", req("req-0", CLASS_A, 16), req("req-1", CLASS_A, 16))
    results = chosen(allocate([the_claim], [slice_("slice-1", *devices)]))[0]
    assert [r[3] for r in results] == [f"device-{i}" for i in range(32)]
    assert {r[0] for r in results[:16]} == {"req-0"}


def test_a_prioritized_list_counts_its_smallest_alternative() -> None:
    the_claim = claim(
        "claim-0",
        req("req-0", CLASS_A, 20),
        first("req-1", sub("subReq-0", CLASS_A, 20), sub("subReq-1", CLASS_A, 24)),
    )
    assert failed(allocate([the_claim], [ONE])).startswith(
        "claim claim-0, request req-1: adding 20 devices exceeds the claim limit of 32"
    )


def test_an_alternative_over_the_limit_is_skipped_for_the_next() -> None:
    the_claim = claim(
        "claim-0", first("req-0", sub("subReq-0", CLASS_B, 500), sub("subReq-1", CLASS_A, 1))
    )
    classes = [klass(CLASS_A, DRIVER_A), klass(CLASS_B, DRIVER_B)]
    assert chosen(allocate([the_claim], [ONE], classes)) == [
        [("req-0/subReq-1", DRIVER_A, "pool-1", "device-1")]
    ]


# --- allocationMode All -------------------------------------------------------------------


def test_all_devices_of_every_pool() -> None:
    slices = [
        slice_("slice-1", device("device-1")),
        slice_("slice-2", device("device-1"), pool="pool-2"),
    ]
    outcome = allocate([claim("claim-0", every("req-0", CLASS_A))], slices)
    assert chosen(outcome) == [
        [("req-0", DRIVER_A, "pool-1", "device-1"), ("req-0", DRIVER_A, "pool-2", "device-1")]
    ]


@pytest.mark.parametrize("minor", [34, 37])
def test_all_devices_of_an_incomplete_pool_is_an_error(minor: int) -> None:
    outcome = allocate(
        [claim("claim-0", every("req-0", CLASS_A))],
        [slice_("slice-1", device("device-1"), count=2)],
        minor=minor,
    )
    assert failed(outcome) == (
        "claim claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 "
        "is currently being updated"
    )


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_all_devices_plus_another_claim_of_another_class(order: tuple[int, int]) -> None:
    claims = [
        claim("claim-0", every("req-0", CLASS_A)),
        claim("claim-1", req("req-0", CLASS_B)),
    ]
    slices = [
        slice_("slice-a", device("device-1"), device("device-2")),
        slice_("slice-b", device("device-1"), driver=DRIVER_B),
    ]
    classes = [klass(CLASS_A, DRIVER_A), klass(CLASS_B, DRIVER_B)]
    outcome = allocate([claims[i] for i in order], slices, classes)
    expected = [
        [("req-0", DRIVER_A, "pool-1", "device-1"), ("req-0", DRIVER_A, "pool-1", "device-2")],
        [("req-0", DRIVER_B, "pool-1", "device-1")],
    ]
    assert chosen(outcome) == [expected[i] for i in order]


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_all_devices_and_one_more_of_the_same_cannot_both_be_had(order: tuple[int, int]) -> None:
    claims = [claim("claim-0", every("req-0", CLASS_A)), claim("claim-1", req("req-0", CLASS_A))]
    outcome = allocate([claims[i] for i in order], [ONE])
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


def test_all_devices_when_one_is_taken_is_none() -> None:
    slices = [slice_("slice-1", device("device-1"), device("device-2"))]
    outcome = allocate(
        [claim("claim-0", every("req-0", CLASS_A))],
        slices,
        taken=[(DRIVER_A, "pool-1", "device-1")],
    )
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


def test_all_devices_of_an_empty_slice_is_none() -> None:
    outcome = allocate([claim("claim-0", every("req-0", CLASS_A))], [slice_("slice-1")])
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


# --- admin access -------------------------------------------------------------------------


def test_admin_access_uses_devices_others_hold_and_says_so() -> None:
    slices = [slice_("slice-1", device("device-1"), device("device-2"))]
    the_claim = claim("claim-0", every("req-0", CLASS_A, admin_access=True))
    outcome = allocate([the_claim], slices, taken=[(DRIVER_A, "pool-1", "device-1")])
    assert chosen(outcome) == [
        [("req-0", DRIVER_A, "pool-1", "device-1"), ("req-0", DRIVER_A, "pool-1", "device-2")]
    ]
    assert isinstance(outcome, allocator.Allocated)
    assert [d.admin_access for d in outcome.allocations[0].devices] == [True, True]


def test_two_admin_claims_share_a_device_but_one_claim_cannot_take_it_twice() -> None:
    slices = [slice_("slice-1", device("device-1"), device("device-2"))]
    claims = [
        claim("claim-0", req("req-0", CLASS_A, admin_access=True)),
        claim("claim-1", req("req-0", CLASS_A, admin_access=True)),
    ]
    assert chosen(allocate(claims, slices)) == [
        [("req-0", DRIVER_A, "pool-1", "device-1")],
        [("req-0", DRIVER_A, "pool-1", "device-1")],
    ]
    # In one claim, a device taken by one admin request is not free for the next one.
    both = claim(
        "claim-0",
        req("req-0", CLASS_A, admin_access=True),
        every("req-1", CLASS_A, admin_access=True),
    )
    assert refused(allocate([both], slices)) == allocator.CANNOT_ALLOCATE


def test_an_admin_claim_may_follow_a_normal_one_on_the_same_device() -> None:
    slices = [slice_("slice-1", device("device-1"), device("device-2"))]
    claims = [
        claim("claim-0", req("req-0", CLASS_A)),
        claim("claim-1", req("req-0", CLASS_A, admin_access=True)),
    ]
    outcome = allocate(claims, slices)
    assert chosen(outcome) == [
        [("req-0", DRIVER_A, "pool-1", "device-1")],
        [("req-0", DRIVER_A, "pool-1", "device-1")],
    ]


# --- node selection of the allocation -----------------------------------------------------


def test_network_attached_devices_give_their_selectors_merged() -> None:
    slices = [
        slice_("slice-1", device("device-1"), where=labelled("region", "region-1")),
        slice_("slice-2", device("device-1"), where=ALL_NODES, pool="pool-2"),
        slice_("slice-3", device("device-1"), where=labelled("planet", "earth"), pool="pool-3"),
        slice_(
            "slice-4",
            device("device-1"),
            pool="pool-4",
            where=draobjects.NodeSelection(
                terms=(
                    specs.NodeSelectorTerm(
                        fields=(specs.Requirement("metadata.name", "In", ("node-1",)),)
                    ),
                )
            ),
        ),
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A, 4))], slices)
    assert [r[2] for r in chosen(outcome)[0]] == ["pool-1", "pool-2", "pool-3", "pool-4"]
    assert fields_selector(outcome) == [
        (
            (("region", "In", ("region-1",)), ("planet", "In", ("earth",))),
            (("metadata.name", "In", ("node-1",)),),
        )
    ]


def test_a_network_attached_device_for_another_region_is_not_seen() -> None:
    slices = [slice_("slice-1", device("device-1"), where=labelled("region", "region-1"))]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices, node=NODE_2)
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


def test_one_local_device_makes_the_allocation_local() -> None:
    slices = [
        slice_("slice-1", device("device-1"), where=labelled("region", "region-1")),
        slice_("slice-2", device("device-1"), pool="pool-2"),
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A, 2))], slices)
    assert fields_selector(outcome) == [((), LOCAL_1)]


def test_a_device_reachable_everywhere_needs_no_selector() -> None:
    slices = [slice_("slice-1", device("device-1"), where=ALL_NODES)]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices)
    assert fields_selector(outcome) is None


@pytest.mark.parametrize(("minor", "local"), [(35, False), (36, True)])
def test_a_device_binding_to_the_node_makes_it_local_from_v1_36(minor: int, local: bool) -> None:
    slices = [
        slice_("slice-1", device("device-1", binds_to_node=True), where=labelled("planet", "earth"))
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices, minor=minor)
    expected = [((), LOCAL_1)] if local else [((("planet", "In", ("earth",)),), ())]
    assert fields_selector(outcome) == expected


# --- constraints ----------------------------------------------------------------------------

ATTRIBUTES = {"driverVersion": draobjects.SemVer("1.0.0"), "numa": 1}


def test_match_attribute_of_every_kind() -> None:
    both = {**ATTRIBUTES, "stringAttribute": "value", "boolAttribute": True}
    slices = [
        slice_("slice-1", device("device-1", attributes=both), device("device-2", attributes=both))
    ]
    the_claim = claim(
        "claim-0",
        req("req-0", CLASS_A),
        req("req-1", CLASS_A),
        constraints=tuple(
            match(f"{DRIVER_A}/{a}")
            for a in ("numa", "driverVersion", "stringAttribute", "boolAttribute")
        ),
    )
    assert chosen(allocate([the_claim], slices)) == [
        [("req-0", DRIVER_A, "pool-1", "device-1"), ("req-1", DRIVER_A, "pool-1", "device-2")]
    ]


@pytest.mark.parametrize(
    ("attribute", "values"),
    [
        ("numa", (1, 2)),
        ("stringAttribute", ("a", "b")),
        ("boolAttribute", (True, False)),
        ("driverVersion", (draobjects.SemVer("1.0.0"), draobjects.SemVer("2.0.0"))),
        ("numa", (1, True)),  # an int and a bool never match
    ],
)
def test_match_attribute_with_different_values_finds_nothing(
    attribute: str, values: tuple[Any, Any]
) -> None:
    slices = [
        slice_(
            "slice-1",
            device("device-1", attributes={attribute: values[0]}),
            device("device-2", attributes={attribute: values[1]}),
        )
    ]
    the_claim = claim(
        "claim-0", req("req-0", CLASS_A, 2), constraints=(match(f"{DRIVER_A}/{attribute}"),)
    )
    assert refused(allocate([the_claim], slices)) == allocator.CANNOT_ALLOCATE


def test_a_missing_attribute_breaks_the_constraint() -> None:
    the_claim = claim(
        "claim-0", req("req-0", CLASS_A), constraints=(match(f"{DRIVER_A}/NonExistentAttribute"),)
    )
    assert refused(allocate([the_claim], [ONE])) == allocator.CANNOT_ALLOCATE


def test_an_attribute_of_another_domain_is_looked_up_as_published() -> None:
    numa = {"resource.kubernetes.io/numaNode": 0}
    slices = [
        slice_("slice-1", device("device-1", attributes=numa), device("device-2", attributes=numa))
    ]
    the_claim = claim(
        "claim-0", req("req-0", CLASS_A, 2), constraints=(match("resource.kubernetes.io/numaNode"),)
    )
    assert len(chosen(allocate([the_claim], slices))[0]) == 2


def test_a_constraint_for_one_request_leaves_the_others_free() -> None:
    slices = [
        slice_(
            "slice-1",
            device("device-1", attributes={"driverVersion": draobjects.SemVer("1.0.0")}),
            device("device-2", attributes={"driverVersion": draobjects.SemVer("2.0.0")}),
        )
    ]
    the_claim = claim(
        "claim-0",
        req("req-0", CLASS_A),
        req("req-1", CLASS_A),
        constraints=(match(f"{DRIVER_A}/driverVersion", "req-0"),),
    )
    assert chosen(allocate([the_claim], slices)) == [
        [("req-0", DRIVER_A, "pool-1", "device-1"), ("req-1", DRIVER_A, "pool-1", "device-2")]
    ]


def test_a_constraint_makes_the_search_go_back() -> None:
    def dev(name: str, version: str, text: str) -> draobjects.Device:
        attrs = {"driverVersion": draobjects.SemVer(version), "stringAttribute": text}
        return device(name, attributes=attrs)

    slices = [
        slice_(
            "slice-1",
            dev("device-1", "1.0.0", "a"),
            dev("device-2", "2.0.0", "b"),
            dev("device-3", "3.0.0", "b"),
        )
    ]
    the_claim = claim(
        "claim-0",
        req("req-0", CLASS_A),
        req("req-1", CLASS_A),
        constraints=(
            match(f"{DRIVER_A}/driverVersion", "req-0"),
            match(f"{DRIVER_A}/stringAttribute"),
        ),
    )
    assert chosen(allocate([the_claim], slices)) == [
        [("req-0", DRIVER_A, "pool-1", "device-2"), ("req-1", DRIVER_A, "pool-1", "device-3")]
    ]


def test_all_devices_breaking_a_constraint_is_an_error() -> None:
    slices = [
        slice_(
            "slice-1",
            device("device-1", attributes={"numa": 1}),
            device("device-2", attributes={"numa": 2}),
        )
    ]
    the_claim = claim("claim-0", every("req-0", CLASS_A), constraints=(match(f"{DRIVER_A}/numa"),))
    assert failed(allocate([the_claim], slices)) == (
        "claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a "
        "claim constraint would not be satisfied"
    )


# --- configs ------------------------------------------------------------------------------


def configs(
    outcome: allocator.AllocationOutcome, c: int = 0
) -> list[tuple[str, tuple[str, ...], Any]]:
    assert isinstance(outcome, allocator.Allocated), outcome
    return [(s, o.requests, o.parameters) for s, o in outcome.allocations[c].config]


@pytest.mark.parametrize(("minor", "requests"), [(36, ("req-0",)), (37, ())])
def test_a_class_config_is_copied_for_its_requests(minor: int, requests: tuple[str, ...]) -> None:
    outcome = allocate(
        [claim("claim-0", req("req-0", CLASS_A))],
        [ONE],
        [klass(CLASS_A, DRIVER_A, "classAttribute")],
        minor=minor,
    )
    # v1.37 writes a config that is for every request with no requests (meaning all).
    assert configs(outcome) == [("FromClass", requests, {"classAttribute": "classAttributeValue"})]


def test_each_class_config_once_naming_its_requests_then_the_claims() -> None:
    slices = [
        slice_("slice-1", device("device-0"), device("device-1")),
        slice_("slice-2", device("device-1"), driver=DRIVER_B),
    ]
    claim_config = draobjects.Opaque(driver=DRIVER_A, parameters={"claim": "x"})
    the_claim = claim(
        "claim-0",
        req("req-0", CLASS_A),
        req("req-1", CLASS_A),
        req("req-2", CLASS_B),
        config=(claim_config,),
    )
    classes = [klass(CLASS_A, DRIVER_A, "A"), klass(CLASS_B, DRIVER_B, "B")]
    outcome = allocate([the_claim], slices, classes)
    assert chosen(outcome) == [
        [
            ("req-0", DRIVER_A, "pool-1", "device-0"),
            ("req-1", DRIVER_A, "pool-1", "device-1"),
            ("req-2", DRIVER_B, "pool-1", "device-1"),
        ]
    ]
    assert configs(outcome) == [
        ("FromClass", ("req-0", "req-1"), {"A": "AValue"}),
        ("FromClass", ("req-2",), {"B": "BValue"}),
        ("FromClaim", (), {"claim": "x"}),
    ]


@pytest.mark.parametrize(("minor", "copies"), [(36, 2), (37, 1)])
def test_a_claim_config_for_two_requests(minor: int, copies: int) -> None:
    # Before v1.37 the config was added once per request it names.
    slices = [slice_("slice-1", *(device(f"device-{i}") for i in range(3)))]
    claim_config = draobjects.Opaque(
        driver=DRIVER_A, parameters={"deviceAttribute": "v"}, requests=("req-0", "req-1")
    )
    the_claim = claim(
        "claim-0",
        req("req-0", CLASS_A),
        req("req-1", CLASS_A),
        req("req-2", CLASS_A),
        config=(claim_config,),
    )
    outcome = allocate([the_claim], slices, minor=minor)
    assert (
        configs(outcome) == [("FromClaim", ("req-0", "req-1"), {"deviceAttribute": "v"})] * copies
    )


@pytest.mark.parametrize(("minor", "requests"), [(36, ("req-0/subReq-1",)), (37, ())])
def test_configs_follow_the_chosen_subrequest(minor: int, requests: tuple[str, ...]) -> None:
    slices = [slice_("slice-1", device("device-1"), device("device-2"), driver=DRIVER_B)]
    the_claim = claim(
        "claim-0",
        first("req-0", sub("subReq-0", CLASS_A), sub("subReq-1", CLASS_B, 2)),
        config=(
            draobjects.Opaque(driver=DRIVER_A, parameters="foo", requests=("req-0/subReq-0",)),
            draobjects.Opaque(driver=DRIVER_B, parameters="bar", requests=("req-0/subReq-1",)),
        ),
    )
    classes = [klass(CLASS_A, DRIVER_A, "a"), klass(CLASS_B, DRIVER_B, "b")]
    outcome = allocate([the_claim], slices, classes, minor=minor)
    assert chosen(outcome) == [
        [
            ("req-0/subReq-1", DRIVER_B, "pool-1", "device-1"),
            ("req-0/subReq-1", DRIVER_B, "pool-1", "device-2"),
        ]
    ]
    assert (
        configs(outcome)
        == [
            ("FromClass", requests, {"b": "bValue"}),
            ("FromClaim", ("req-0/subReq-1",), "bar"),
        ]
        if minor == 36
        else [("FromClass", (), {"b": "bValue"}), ("FromClaim", (), "bar")]
    )


def test_a_claim_config_scoped_to_one_request_keeps_its_requests() -> None:
    slices = [slice_("slice-1", device("device-0"), device("device-1"))]
    the_claim = claim(
        "claim-0",
        first("req-0", sub("subReq-0", CLASS_A), sub("subReq-1", CLASS_B)),
        req("req-1", CLASS_A),
        config=(
            draobjects.Opaque(
                driver=DRIVER_A, parameters="scoped", requests=("req-0/subReq-0", "req-0/subReq-1")
            ),
        ),
    )
    classes = [klass(CLASS_A, DRIVER_A), klass(CLASS_B, DRIVER_B)]
    outcome = allocate([the_claim], slices, classes)
    assert configs(outcome) == [("FromClaim", ("req-0/subReq-0", "req-0/subReq-1"), "scoped")]


# --- prioritized lists (firstAvailable) ---------------------------------------------------


def test_the_first_available_subrequest_that_fits_is_taken() -> None:
    the_claim = claim("claim-0", first("req-0", sub("subReq-0", CLASS_B), sub("subReq-1", CLASS_A)))
    classes = [klass(CLASS_A, DRIVER_A), klass(CLASS_B, DRIVER_B)]
    assert chosen(allocate([the_claim], [ONE], classes)) == [
        [("req-0/subReq-1", DRIVER_A, "pool-1", "device-1")]
    ]


def test_no_subrequest_fits() -> None:
    slices = [
        slice_("slice-1", device("device-1")),
        slice_("slice-2", device("device-1"), driver=DRIVER_B, pool="pool-2"),
    ]
    the_claim = claim(
        "claim-0", first("req-0", sub("subReq-0", CLASS_B, 2), sub("subReq-1", CLASS_A, 2))
    )
    classes = [klass(CLASS_A, DRIVER_A), klass(CLASS_B, DRIVER_B)]
    assert refused(allocate([the_claim], slices, classes)) == allocator.CANNOT_ALLOCATE


def test_subrequests_with_selectors_make_the_request_before_go_back() -> None:
    slices = [
        slice_(
            "slice-1",
            device("device-1", memory="2Gi"),
            device("device-2", memory="2Gi"),
            device("device-3", memory="1Gi"),
        )
    ]
    the_claim = claim(
        "claim-0",
        req("req-0", CLASS_A, 1, memory_at_least("1Gi")),
        first(
            "req-1",
            sub("subReq-0", CLASS_A, 1, memory_at_least("4Gi")),
            sub("subReq-1", CLASS_A, 2, memory_at_least("2Gi")),
        ),
    )
    assert chosen(allocate([the_claim], slices)) == [
        [
            ("req-0", DRIVER_A, "pool-1", "device-3"),
            ("req-1/subReq-1", DRIVER_A, "pool-1", "device-1"),
            ("req-1/subReq-1", DRIVER_A, "pool-1", "device-2"),
        ]
    ]


@pytest.mark.parametrize("named", ["req-1", "req-1/subReq-0"])
def test_a_constraint_may_name_a_request_or_one_of_its_subrequests(named: str) -> None:
    def dev(name: str, memory: str, version: str) -> draobjects.Device:
        return device(name, memory=memory, attributes={"driverVersion": draobjects.SemVer(version)})

    slices = [
        slice_("slice-1", dev("device-1", "8Gi", "1.0.0")),
        slice_(
            "slice-2",
            dev("device-2", "2Gi", "2.0.0"),
            dev("device-3", "1Gi", "1.0.0"),
            pool="pool-2",
        ),
    ]
    the_claim = claim(
        "claim-0",
        req("req-0", CLASS_A, 1, memory_at_least("8Gi")),
        first(
            "req-1",
            sub("subReq-0", CLASS_A, 1, memory_at_least("2Gi")),
            sub("subReq-1", CLASS_A, 1, memory_at_least("1Gi")),
        ),
        constraints=(match(f"{DRIVER_A}/driverVersion", "req-0", named),),
    )
    # Naming the request binds both subrequests; naming subReq-0 leaves subReq-1 free.
    expected = "device-3" if named == "req-1" else "device-2"
    assert chosen(allocate([the_claim], slices))[0][1][3] == expected


def test_a_subrequest_for_all_devices_when_one_is_taken_falls_to_the_next() -> None:
    slices = [slice_("slice-1", device("device-1"), device("device-2"))]
    the_claim = claim(
        "claim-0",
        first("req-0", sub("subReq-0", CLASS_A, 0, mode=draobjects.ALL), sub("subReq-1", CLASS_A)),
    )
    outcome = allocate([the_claim], slices, taken=[(DRIVER_A, "pool-1", "device-1")])
    assert chosen(outcome) == [[("req-0/subReq-1", DRIVER_A, "pool-1", "device-2")]]


def test_a_prioritized_list_goes_back_for_a_later_request() -> None:
    slices = [
        slice_("slice-1", device("device-1", memory="8Gi")),
        slice_("slice-2", device("device-2", memory="4Gi"), pool="pool-2"),
    ]
    the_claim = claim(
        "claim-0",
        first(
            "req-0",
            sub("subReq-0", CLASS_A, 1, memory_at_least("8Gi")),
            sub("subReq-1", CLASS_A, 1, memory_at_least("4Gi")),
        ),
        req("req-1", CLASS_A, 1, memory_at_least("8Gi")),
    )
    assert chosen(allocate([the_claim], slices)) == [
        [
            ("req-0/subReq-1", DRIVER_A, "pool-2", "device-2"),
            ("req-1", DRIVER_A, "pool-1", "device-1"),
        ]
    ]


# --- Score: prioritized lists -------------------------------------------------------------


def test_score_rewards_earlier_subrequests() -> None:
    the_claim = claim(
        "claim-0",
        first("req-0", sub("subReq-0", CLASS_A), sub("subReq-1", CLASS_A)),
        req("req-1", CLASS_A),
    )

    def allocation(request: str) -> draobjects.Allocation:
        result = draobjects.AllocatedDevice(
            request=request, driver=DRIVER_A, pool="pool-1", device="device-1"
        )
        return draobjects.Allocation(devices=(result,))

    assert allocator.score([(the_claim, allocation("req-0/subReq-0"))]) == 8
    assert allocator.score([(the_claim, allocation("req-0/subReq-1"))]) == 7
    assert allocator.score([(the_claim, allocation("req-1"))]) == 0


# --- partitionable devices (shared counters) ----------------------------------------------


def counter_slice(
    name: str, *sets: draobjects.CounterSet, count: int = 2, **more: Any
) -> draobjects.ResourceSlice:
    return slice_(name, shared=sets, count=count, **more)


def memory_device(name: str, memory: str, counter_set: str = "counter-set-1") -> draobjects.Device:
    return device(name, memory=memory, consumes_counters=(uses(counter_set, memory=memory),))


def test_devices_share_the_counters_of_their_pool() -> None:
    slices = [
        slice_(
            "slice-1",
            memory_device("device-1", "4Gi"),
            memory_device("device-2", "6Gi"),
            memory_device("device-3", "4Gi"),
            count=2,
        ),
        counter_slice("slice-2", counters("counter-set-1", memory="8Gi")),
    ]
    the_claim = claim("claim-0", req("req-0", CLASS_A), req("req-1", CLASS_A))
    assert chosen(allocate([the_claim], slices)) == [
        [("req-0", DRIVER_A, "pool-1", "device-1"), ("req-1", DRIVER_A, "pool-1", "device-3")]
    ]


def test_counters_used_by_devices_others_hold_are_not_free() -> None:
    def dev(name: str, cpus: str, memory: str) -> draobjects.Device:
        return device(name, consumes_counters=(uses("counter-set-1", cpus=cpus, memory=memory),))

    slices = [
        slice_(
            "slice-1",
            dev("device-1", "6", "4Gi"),
            dev("device-2", "4", "6Gi"),
            dev("device-3", "4", "4Gi"),
            count=2,
        ),
        counter_slice("slice-2", counters("counter-set-1", cpus="8", memory="18Gi")),
        slice_(
            "slice-3",
            dev("device-1", "6", "4Gi"),
            dev("device-2", "1", "7Gi"),
            dev("device-3", "1", "7Gi"),
            pool="pool-2",
            count=2,
        ),
        counter_slice("slice-4", counters("counter-set-1", cpus="8", memory="18Gi"), pool="pool-2"),
    ]
    taken = [
        (DRIVER_A, "pool-1", "device-2"),
        (DRIVER_A, "pool-1", "device-3"),
        (DRIVER_A, "pool-2", "device-1"),
    ]
    the_claim = claim("claim-0", req("req-0", CLASS_A), req("req-1", CLASS_A))
    assert chosen(allocate([the_claim], slices, taken=taken)) == [
        [("req-0", DRIVER_A, "pool-2", "device-2"), ("req-1", DRIVER_A, "pool-2", "device-3")]
    ]


def test_an_overdrawn_counter_set_blocks_every_device_of_the_pool() -> None:
    slices = [
        slice_(
            "slice-1", memory_device("device-1", "4Gi"), memory_device("device-2", "20Gi"), count=2
        ),
        counter_slice("slice-2", counters("counter-set-1", memory="18Gi")),
    ]
    outcome = allocate(
        [claim("claim-0", req("req-0", CLASS_A))], slices, taken=[(DRIVER_A, "pool-1", "device-2")]
    )
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


def test_devices_elsewhere_still_use_the_counters() -> None:
    # The pool spans two nodes; the device node-1 holds draws on the counters node-2 sees.
    slices = [
        counter_slice("slice-1", counters("counter-set-1", memory="8Gi"), count=3),
        slice_("slice-2", memory_device("device-1", "6Gi"), count=3),
        slice_(
            "slice-3",
            memory_device("device-2", "6Gi"),
            memory_device("device-3", "2Gi"),
            where=on_node("node-2"),
            count=3,
        ),
    ]
    outcome = allocate(
        [claim("claim-0", req("req-0", CLASS_A))],
        slices,
        node=NODE_2,
        taken=[(DRIVER_A, "pool-1", "device-1")],
    )
    assert chosen(outcome) == [[("req-0", DRIVER_A, "pool-1", "device-3")]]
    assert fields_selector(outcome) == [((), (("metadata.name", "In", ("node-2",)),))]


@pytest.mark.parametrize(("minor", "device_chosen"), [(35, "device-2"), (36, "device-1")])
def test_devices_with_counters_wait_for_partitionable_devices(
    minor: int, device_chosen: str
) -> None:
    # v1.35's default refuses a device that uses counters; its counter slice still counts
    # for the pool being complete (partitionable-devices-disabled-other-device-...).
    slices = [
        slice_("slice-1", memory_device("device-1", "4Gi"), device("device-2"), count=2),
        counter_slice("slice-2", counters("counter-set-1", memory="18Gi")),
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices, minor=minor)
    assert chosen(outcome) == [[("req-0", DRIVER_A, "pool-1", device_chosen)]]


@pytest.mark.parametrize(
    "slices",
    [
        [
            slice_(
                "slice-1", device("device-1", consumes_counters=(uses("counter-set-2"),)), count=2
            ),
            counter_slice("slice-2", counters("counter-set-1")),
        ],
        [
            slice_("slice-1", memory_device("device-1", "8Gi"), count=2),
            counter_slice("slice-2", counters("counter-set-1", **{"other-memory": "8Gi"})),
        ],
        [
            slice_("slice-1", device("device-1"), count=4),
            counter_slice("slice-2", counters("counter-set-1"), count=4),
            slice_("slice-3", device("device-2"), count=4),
            counter_slice("slice-4", counters("counter-set-1"), count=4),
        ],
    ],
    ids=["unknown-counter-set", "unknown-counter", "counter-set-twice"],
)
def test_a_pool_whose_counters_do_not_add_up_is_invalid(
    slices: list[draobjects.ResourceSlice],
) -> None:
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices)
    assert refused(outcome) == "invalid resource pools were encountered"


def test_per_device_node_selection() -> None:
    slices = [
        slice_(
            "slice-1",
            dataclasses.replace(memory_device("device-1", "4Gi"), selection=on_node("node-1")),
            dataclasses.replace(memory_device("device-2", "6Gi"), selection=on_node("node-2")),
            where=PER_DEVICE,
            count=2,
        ),
        counter_slice("slice-2", counters("counter-set-1", memory="18Gi"), where=PER_DEVICE),
    ]
    the_claim = claim(
        "claim-0",
        first(
            "req-0",
            sub("subReq-0", CLASS_A, 1, memory_at_least("6Gi")),
            sub("subReq-1", CLASS_A, 1, memory_at_least("4Gi")),
        ),
    )
    outcome = allocate([the_claim], slices)
    assert chosen(outcome) == [[("req-0/subReq-1", DRIVER_A, "pool-1", "device-1")]]
    assert fields_selector(outcome) == [((), LOCAL_1)]
    # Without partitionable devices such a slice is not used at all.
    assert refused(allocate([the_claim], slices, minor=35)) == allocator.CANNOT_ALLOCATE


def test_per_device_node_selectors_merge() -> None:
    slices = [
        slice_(
            "slice-1",
            dataclasses.replace(
                memory_device("device-1", "4Gi"), selection=labelled("region", "region-1")
            ),
            where=PER_DEVICE,
            count=2,
        ),
        counter_slice("slice-2", counters("counter-set-1", memory="18Gi"), where=PER_DEVICE),
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices)
    assert fields_selector(outcome) == [((("region", "In", ("region-1",)),), ())]


# --- device taints --------------------------------------------------------------------------

NO_SCHEDULE = draobjects.DeviceTaint(key="taint-key", value="taint-value", effect="NoSchedule")
NO_EXECUTE = draobjects.DeviceTaint(key="taint-key", value="taint-value-2", effect="NoExecute")
NO_EFFECT = draobjects.DeviceTaint(key="taint-key", value="taint-value", effect="None")
TOLERATE_NO_SCHEDULE = draobjects.DeviceToleration(
    key="taint-key", operator="Exists", effect="NoSchedule"
)
TOLERATE_NO_EXECUTE = draobjects.DeviceToleration(
    key="taint-key", operator="Equal", value="taint-value-2", effect="NoExecute"
)
TAINTED = slice_(
    "slice-1", device("device-1", taints=(NO_SCHEDULE,)), device("device-2", taints=(NO_EXECUTE,))
)


def test_tainted_devices_are_not_allocated() -> None:
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], [TAINTED])
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


def test_a_tolerated_taint_and_the_tolerations_in_the_result() -> None:
    the_claim = claim("claim-0", req("req-0", CLASS_A, tolerations=(TOLERATE_NO_EXECUTE,)))
    outcome = allocate([the_claim], [TAINTED])
    assert chosen(outcome) == [[("req-0", DRIVER_A, "pool-1", "device-2")]]
    assert isinstance(outcome, allocator.Allocated)
    assert outcome.allocations[0].devices[0].tolerations == (TOLERATE_NO_EXECUTE,)


def test_a_subrequests_tolerations_count_for_it_alone() -> None:
    the_claim = claim(
        "claim-0",
        first(
            "req-0",
            sub("subReq-0", CLASS_A),
            sub("subReq-1", CLASS_A, tolerations=(TOLERATE_NO_EXECUTE,)),
        ),
    )
    assert chosen(allocate([the_claim], [TAINTED])) == [
        [("req-0/subReq-1", DRIVER_A, "pool-1", "device-2")]
    ]


@pytest.mark.parametrize(("minor", "allocated"), [(34, False), (37, True)])
def test_a_taint_without_effect(minor: int, allocated: bool) -> None:
    gates = {"DRADeviceTaints": True} if minor == 34 else None
    slices = [slice_("slice-1", device("device-1", taints=(NO_EFFECT,)))]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices, minor=minor, gates=gates)
    assert isinstance(outcome, allocator.Allocated) == allocated


@pytest.mark.parametrize(("minor", "allocated"), [(35, True), (36, False)])
def test_taints_count_from_v1_36(minor: int, allocated: bool) -> None:
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], [TAINTED], minor=minor)
    assert isinstance(outcome, allocator.Allocated) == allocated


def test_admin_access_does_not_override_a_taint() -> None:
    slices = [slice_("slice-1", device("device-1", taints=(NO_SCHEDULE,)))]
    the_claim = claim("claim-0", req("req-0", CLASS_A, admin_access=True))
    assert refused(allocate([the_claim], slices)) == allocator.CANNOT_ALLOCATE
    assert chosen(allocate([the_claim], slices, minor=35)) == [
        [("req-0", DRIVER_A, "pool-1", "device-1")]
    ]


def test_all_devices_with_a_taint() -> None:
    slices = [slice_("slice-1", device("device-1", taints=(NO_SCHEDULE,)))]
    assert refused(allocate([claim("claim-0", every("req-0", CLASS_A))], slices)) == (
        allocator.CANNOT_ALLOCATE
    )


@pytest.mark.parametrize(("minor", "kept"), [(34, False), (35, True)])
def test_results_carry_tolerations_from_v1_35(minor: int, kept: bool) -> None:
    the_claim = claim("claim-0", req("req-0", CLASS_A, tolerations=(TOLERATE_NO_SCHEDULE,)))
    outcome = allocate([the_claim], [ONE], minor=minor)
    assert isinstance(outcome, allocator.Allocated)
    assert bool(outcome.allocations[0].devices[0].tolerations) == kept


# --- binding conditions ---------------------------------------------------------------------


def bound(name: str, *conditions: str) -> draobjects.Device:
    return device(
        name,
        binding_conditions=conditions,
        binding_failure_conditions=tuple(f"{c}Failed" for c in conditions),
    )


def test_binding_conditions_are_copied_into_the_results() -> None:
    slices = [slice_("slice-1", device("device-1"), bound("device-2", "IsPrepared"))]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A), req("req-1", CLASS_A))], slices)
    assert isinstance(outcome, allocator.Allocated)
    results = outcome.allocations[0].devices
    assert [(r.device, r.binding_conditions, r.binding_failure_conditions) for r in results] == [
        ("device-1", (), ()),
        ("device-2", ("IsPrepared",), ("IsPreparedFailed",)),
    ]


@pytest.mark.parametrize("minor", [34, 35])
def test_devices_with_binding_conditions_wait_for_the_gates(minor: int) -> None:
    slices = [slice_("slice-1", bound("device-1", "IsPrepared"))]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices, minor=minor)
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


def test_pools_with_binding_conditions_come_last() -> None:
    slices = [
        slice_("slice-a", bound("device-1", "IsPrepared"), pool="pool-a"),
        slice_("slice-b", device("device-1"), pool="pool-b"),
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices)
    assert chosen(outcome) == [[("req-0", DRIVER_A, "pool-b", "device-1")]]


# --- consumable capacity (allowMultipleAllocations) ---------------------------------------


def shareable(
    name: str,
    amount: str | None = None,
    policy: draobjects.CapacityPolicy | None = None,
    *,
    capacity: str = "capacity-0",
) -> draobjects.Device:
    """A device allowing multiple allocations, with ``amount`` of one capacity (if any)."""
    capacities = {capacity: draobjects.Capacity(q(amount), policy)} if amount else {}
    return device(name, allow_multiple_allocations=True, capacity=capacities)


RANGE_2_2_4 = draobjects.CapacityPolicy(default=q("2"), minimum=q("2"), step=q("2"), maximum=q("4"))
SHARED_CLASS = draobjects.DeviceClass(
    name=CLASS_A,
    selectors=(f'device.driver == "{DRIVER_A}"', "device.allowMultipleAllocations"),
)


def wants(
    name: str, amount: str | None = None, cls: str = CLASS_A, **fields: Any
) -> draobjects.DeviceRequest:
    capacity = {"capacity-0": q(amount)} if amount is not None else {}
    return req(name, cls, capacity=capacity, **fields)


def shares(outcome: allocator.AllocationOutcome) -> list[list[tuple[str, dict[str, str], bool]]]:
    """Per claim: the device, what it consumes, and whether the result has a share id."""
    assert isinstance(outcome, allocator.Allocated), outcome
    return [
        [
            (d.device, {k: v.text for k, v in d.consumed_capacity.items()}, bool(d.share_id))
            for d in a.devices
        ]
        for a in outcome.allocations
    ]


def test_two_claims_share_a_device_with_room_for_both() -> None:
    slices = [slice_("slice-1", shareable("device-1", "2"))]
    claims = [claim("claim-0", wants("req-0", "1")), claim("claim-1", wants("req-0", "1"))]
    assert shares(allocate(claims, slices, [SHARED_CLASS])) == [
        [("device-1", {"capacity-0": "1"}, True)],
        [("device-1", {"capacity-0": "1"}, True)],
    ]


def test_a_request_without_an_amount_takes_the_whole_capacity() -> None:
    slices = [slice_("slice-1", shareable("device-1", "2"))]
    claims = [claim("claim-0", wants("req-0")), claim("claim-1", wants("req-0"))]
    assert refused(allocate(claims, slices, [SHARED_CLASS])) == allocator.CANNOT_ALLOCATE


def test_a_device_without_capacities_is_shared_freely() -> None:
    slices = [slice_("slice-1", shareable("device-1"))]
    claims = [claim("claim-0", wants("req-0")), claim("claim-1", wants("req-0"))]
    assert shares(allocate(claims, slices, [SHARED_CLASS])) == [
        [("device-1", {}, True)],
        [("device-1", {}, True)],
    ]


def test_the_policy_default_and_its_range_round_requests_up() -> None:
    slices = [slice_("slice-1", shareable("device-1", "4", RANGE_2_2_4))]
    default = [claim("claim-0", wants("req-0")), claim("claim-1", wants("req-0"))]
    assert shares(allocate(default, slices, [SHARED_CLASS])) == [
        [("device-1", {"capacity-0": "2"}, True)],
        [("device-1", {"capacity-0": "2"}, True)],
    ]
    stepped = [claim("claim-0", wants("req-0", "3"))]
    assert shares(allocate(stepped, slices, [SHARED_CLASS])) == [
        [("device-1", {"capacity-0": "4"}, True)]
    ]
    over_max = [claim("claim-0", wants("req-0", "6"))]
    wide = [slice_("slice-1", shareable("device-1", "10", RANGE_2_2_4))]
    assert refused(allocate(over_max, wide, [SHARED_CLASS])) == allocator.CANNOT_ALLOCATE


def test_valid_values_round_up_to_the_next() -> None:
    policy = draobjects.CapacityPolicy(default=q("1"), valid_values=(q("1"), q("3")))
    slices = [slice_("slice-1", shareable("device-1", "3", policy))]
    outcome = allocate([claim("claim-0", wants("req-0", "2"))], slices, [SHARED_CLASS])
    assert shares(outcome) == [[("device-1", {"capacity-0": "3"}, True)]]


def test_capacity_others_consume_is_not_free() -> None:
    slices = [
        slice_(
            "slice-1",
            shareable("device-1", "2", RANGE_2_2_4),
            shareable("device-2", "2", RANGE_2_2_4),
        )
    ]
    outcome = allocate(
        [claim("claim-0", wants("req-0", "2"))],
        slices,
        [SHARED_CLASS],
        shared=[(DRIVER_A, "pool-1", "device-1", "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa")],
        consumed={(DRIVER_A, "pool-1", "device-1"): {"capacity-0": "2"}},
    )
    assert shares(outcome) == [[("device-2", {"capacity-0": "2"}, True)]]


def test_a_shareable_device_serves_two_requests_of_one_claim() -> None:
    slices = [slice_("slice-1", shareable("device-1", "2"))]
    the_claim = claim("claim-0", wants("req-0", "1"), wants("req-1", "1"))
    assert shares(allocate([the_claim], slices, [SHARED_CLASS])) == [
        [("device-1", {"capacity-0": "1"}, True), ("device-1", {"capacity-0": "1"}, True)]
    ]


def test_a_dedicated_device_with_a_capacity_request() -> None:
    slices = [
        slice_("slice-1", device("device-1", capacity={"capacity-0": draobjects.Capacity(q("1"))}))
    ]
    outcome = allocate([claim("claim-0", wants("req-0", "1"))], slices)
    assert shares(outcome) == [[("device-1", {}, False)]]


def test_a_request_for_a_capacity_the_device_lacks() -> None:
    slices = [slice_("slice-1", shareable("device-1", "1", capacity="capacity-1"))]
    outcome = allocate([claim("claim-0", wants("req-0", "1"))], slices)
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


@pytest.mark.parametrize(
    ("amount", "message"),
    [
        (
            "18446744073709551616",
            'capacity "capacity-0": capacity request cannot be represented in the device\'s '
            "range arithmetic: request 18446744073709551616 exceeds MaxInt64",
        ),
        (
            "9223372036854775807",
            'capacity "capacity-0": capacity request cannot be represented in the device\'s '
            "range arithmetic: rounding request 9223372036854775807 up to the next step passes "
            "MaxInt64",
        ),
    ],
)
def test_an_unrepresentable_request_stops_the_cycle_in_v1_37(amount: str, message: str) -> None:
    slices = [slice_("slice-1", shareable("device-1", "4", RANGE_2_2_4))]
    outcome = allocate([claim("claim-0", wants("req-0", amount))], slices, [SHARED_CLASS])
    assert failed(outcome) == (
        f"claim claim-0, request req-0: checking capacity for device driver-a/pool-1/device-1: "
        f"{message}"
    )
    # v1.36 skipped the device.
    assert (
        refused(
            allocate([claim("claim-0", wants("req-0", amount))], slices, [SHARED_CLASS], minor=36)
        )
        == allocator.CANNOT_ALLOCATE
    )


def test_a_negative_request_stops_the_cycle() -> None:
    slices = [slice_("slice-1", shareable("device-1", "10"))]
    outcome = allocate([claim("claim-0", wants("req-0", "-5"))], slices, [SHARED_CLASS])
    assert failed(outcome).endswith('capacity "capacity-0": capacity value is negative')


@pytest.mark.parametrize(("minor", "allocated"), [(36, False), (37, True)])
def test_all_devices_are_picked_by_their_static_capacity_from_v1_37(
    minor: int, allocated: bool
) -> None:
    # device-1 is full: v1.36 leaves it out of "All" and allocates device-2; v1.37 keeps it,
    # finds no room, and allocates nothing (the claim wanted all matching devices).
    slices = [
        slice_(
            "slice-1",
            shareable("device-1", "1"),
            shareable("device-2", "1"),
        )
    ]
    outcome = allocate(
        [claim("claim-0", every("req-0", CLASS_A, capacity={"capacity-0": q("1")}))],
        slices,
        minor=minor,
        shared=[(DRIVER_A, "pool-1", "device-1", "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa")],
        consumed={(DRIVER_A, "pool-1", "device-1"): {"capacity-0": "1"}},
    )
    if allocated:
        assert refused(outcome) == allocator.CANNOT_ALLOCATE
    else:
        assert shares(outcome) == [[("device-2", {"capacity-0": "1"}, True)]]


def test_share_ids_are_uuids_and_differ_per_result() -> None:
    slices = [slice_("slice-1", shareable("device-1", "2"))]
    the_claim = claim("claim-0", wants("req-0", "1"), wants("req-1", "1"))
    outcome = allocate([the_claim], slices, [SHARED_CLASS])
    assert isinstance(outcome, allocator.Allocated)
    ids = [d.share_id for d in outcome.allocations[0].devices]
    assert len(set(ids)) == 2
    assert all(len(i) == 36 and i == i.lower() for i in ids)


# --- distinctAttribute, per release ---------------------------------------------------------


def strings(*values: str) -> draobjects.ResourceSlice:
    return slice_(
        "slice-1",
        *(
            device(f"device-{i + 1}", attributes={"stringAttribute": v})
            for i, v in enumerate(values)
        ),
    )


DISTINCT = (distinct(f"{DRIVER_A}/stringAttribute"),)


def test_distinct_attributes_across_requests() -> None:
    def dev(name: str, version: str, numa: int, flag: bool) -> draobjects.Device:
        attrs = {"driverVersion": draobjects.SemVer(version), "numa": numa, "boolAttribute": flag}
        return device(name, attributes=attrs)

    slices = [
        slice_(
            "slice-1",
            dev("device-1", "1.0.0", 0, True),
            dev("device-2", "1.0.1", 1, False),
            dev("device-3", "1.0.2", 2, True),
            dev("device-4", "1.0.0", 3, True),
        )
    ]
    the_claim = claim(
        "claim-0",
        *(req(f"req-{i}", CLASS_A) for i in range(4)),
        constraints=(
            distinct(f"{DRIVER_A}/boolAttribute", "req-0", "req-1"),
            distinct(f"{DRIVER_A}/driverVersion", "req-0", "req-1", "req-2"),
            distinct(f"{DRIVER_A}/numa", "req-0", "req-1", "req-2", "req-3"),
        ),
    )
    assert [r[3] for r in chosen(allocate([the_claim], slices))[0]] == [
        "device-1",
        "device-2",
        "device-3",
        "device-4",
    ]


@pytest.mark.parametrize(("minor", "allocated"), [(34, True), (36, True), (37, False)])
def test_distinct_values_within_one_request(minor: int, allocated: bool) -> None:
    # Up to v1.36 the constraint remembered one value per request, so the third device was
    # only compared with the second; v1.34 compared no values at all.
    the_claim = claim("claim-0", req("req-0", CLASS_A, 3), constraints=DISTINCT)
    outcome = allocate([the_claim], [strings("value1", "value2", "value1")], minor=minor)
    if allocated:
        assert [r[3] for r in chosen(outcome)[0]] == ["device-1", "device-2", "device-3"]
    else:
        assert refused(outcome) == allocator.CANNOT_ALLOCATE
    distinct_three = allocate([the_claim], [strings("v1", "v2", "v3")], minor=minor)
    assert len(chosen(distinct_three)[0]) == 3


@pytest.mark.parametrize(("minor", "allocated"), [(34, True), (36, False), (37, False)])
def test_distinct_values_across_two_requests(minor: int, allocated: bool) -> None:
    the_claim = claim("claim-0", req("req-0", CLASS_A), req("req-1", CLASS_A), constraints=DISTINCT)
    outcome = allocate([the_claim], [strings("same", "same")], minor=minor)
    assert isinstance(outcome, allocator.Allocated) == allocated


def test_v1_35_does_not_know_distinct_attribute() -> None:
    the_claim = claim("claim-0", req("req-0", CLASS_A), constraints=DISTINCT)
    assert failed(allocate([the_claim], [strings("a")], minor=35)) == (
        "claim claim-0, constraint #0: empty constraint (unsupported constraint type?)"
    )


def test_distinct_attribute_needs_the_attribute() -> None:
    the_claim = claim(
        "claim-0", req("req-0", CLASS_A), constraints=(distinct(f"{DRIVER_A}/boolAttribute"),)
    )
    assert refused(allocate([the_claim], [ONE])) == allocator.CANNOT_ALLOCATE


# --- pools: incomplete, obsolete, invalid, per release --------------------------------------


@pytest.mark.parametrize(("minor", "allocated"), [(34, True), (35, False), (37, False)])
def test_an_incomplete_pool_is_used_only_by_v1_34(minor: int, allocated: bool) -> None:
    slices = [slice_("slice-1", device("device-1"), count=2)]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices, minor=minor)
    if allocated:
        assert chosen(outcome) == [[("req-0", DRIVER_A, "pool-1", "device-1")]]
    else:
        assert refused(outcome) == allocator.CANNOT_ALLOCATE


def test_a_pool_spread_over_two_nodes_is_complete() -> None:
    slices = [
        slice_("slice-1", device("device-1"), where=on_node("node-2"), count=2),
        slice_("slice-2", device("device-2"), count=2),
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices)
    assert chosen(outcome) == [[("req-0", DRIVER_A, "pool-1", "device-2")]]
    # All of it, from node-1: only what node-1 reaches.
    all_of_it = allocate([claim("claim-0", every("req-0", CLASS_A))], slices)
    assert chosen(all_of_it) == [[("req-0", DRIVER_A, "pool-1", "device-2")]]


def test_a_newer_generation_elsewhere_retires_the_pool() -> None:
    slices = [
        slice_("slice-1", device("device-1"), count=2, generation=1),
        slice_("slice-2", device("device-2"), where=on_node("node-2"), count=2, generation=2),
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices)
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


def test_an_obsolete_slice_is_ignored() -> None:
    slices = [
        slice_("slice-1-old", device("device-1"), count=2, generation=1),
        slice_("slice-1-new", device("device-2"), count=2, generation=2),
    ]
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], slices)
    assert refused(outcome) == allocator.CANNOT_ALLOCATE


INVALID_AND_GOOD = [
    slice_("slice-1", device("device-1"), count=2),
    slice_("slice-2", device("device-1"), count=2),
    slice_("slice-3", device("device-2"), pool="pool-2"),
]


@RELEASES
def test_an_invalid_pool_is_fine_when_another_serves(minor: int) -> None:
    outcome = allocate([claim("claim-0", req("req-0", CLASS_A))], INVALID_AND_GOOD, minor=minor)
    if minor == 34:
        # v1.34 walked into the invalid pool (pool-1 comes first) and gave up.
        assert failed(outcome) == "pool pool-1 is invalid: duplicate device name device-1"
    else:
        assert chosen(outcome) == [[("req-0", DRIVER_A, "pool-2", "device-2")]]


@pytest.mark.parametrize("minor", [35, 37])
def test_an_invalid_pool_is_the_reason_when_nothing_else_serves(minor: int) -> None:
    outcome = allocate(
        [claim("claim-0", req("req-0", CLASS_A))],
        INVALID_AND_GOOD,
        minor=minor,
        taken=[(DRIVER_A, "pool-2", "device-2")],
    )
    assert refused(outcome) == "invalid resource pools were encountered"


def test_all_devices_with_an_invalid_pool_is_an_error() -> None:
    outcome = allocate([claim("claim-0", every("req-0", CLASS_A))], INVALID_AND_GOOD)
    assert failed(outcome) == (
        "claim claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 "
        "is currently invalid"
    )


# --- selectors that cannot be evaluated -----------------------------------------------------


def test_a_claim_selector_that_does_not_compile() -> None:
    the_claim = claim("claim-0", req("req-0", CLASS_A, 1, "noSuchVar"))
    assert failed(allocate([the_claim], [ONE])) == (
        "claim claim-0: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:1: "
        "undeclared reference to 'noSuchVar' (in container '')"
    )


def test_a_class_selector_that_does_not_compile() -> None:
    broken = dataclasses.replace(klass(CLASS_A, DRIVER_A), selectors=("noSuchVar",))
    outcome = allocate([claim("claim-0", every("req-0", CLASS_A))], [ONE], [broken])
    assert failed(outcome).startswith("class class-a: selector #0: CEL compile error: ")


@pytest.mark.parametrize(
    ("minor", "message"),
    [
        (36, "claim claim-0: selector #0: CEL runtime error: no such key: memory"),
        (
            37,
            "claim claim-0: selector #0 on device driver-a/pool-1/device-1: CEL runtime error: "
            "no such key: memory. consider using CEL optional chaining (.? followed by "
            "orValue()) or guarding the check with has() for optional fields",
        ),
    ],
)
def test_a_runtime_error_per_release(minor: int, message: str) -> None:
    the_claim = claim("claim-0", req("req-0", CLASS_A, 1, memory_at_least("1Gi")))
    assert failed(allocate([the_claim], [ONE], minor=minor)) == message


def test_a_selector_is_evaluated_once_per_device_and_request() -> None:
    calls: list[tuple[str, str]] = []

    def counting(
        expression: str,
        driver: str,
        pool: str,
        slice_: draobjects.ResourceSlice,
        dev: draobjects.Device,
    ) -> bool:
        calls.append((expression, dev.name))
        return fake_matcher(expression, driver, pool, slice_, dev)

    numa = (0, 1, 1, 1)
    slices = [
        slice_(
            "slice-1", *(device(f"device-{i}", attributes={"numa": n}) for i, n in enumerate(numa))
        )
    ]
    # device-0 is tried first and its partner is looked for among the other three, in vain;
    # then device-1 and device-2 are found: device-2 is asked about once all the same.
    the_claim = claim("claim-0", req("req-0", CLASS_A, 2), constraints=(match(f"{DRIVER_A}/numa"),))
    outcome = allocate([the_claim], slices, matches=counting)
    assert [r[3] for r in chosen(outcome)[0]] == ["device-1", "device-2"]
    assert len(calls) == len(set(calls)) == 4


# --- with the real CEL selectors ------------------------------------------------------------


def test_the_cel_selectors_plug_in() -> None:
    from plumb.framework.devices import expressions

    verdicts = expressions.SelectorVerdicts()

    def cel(
        expression: str,
        driver: str,
        pool: str,
        slice_: draobjects.ResourceSlice,
        dev: draobjects.Device,
    ) -> bool:
        return verdicts.matches(expression, slice_, dev)

    slices = [slice_("slice-1", device("device-1", memory="1Gi"), device("device-2", memory="2Gi"))]
    the_claim = claim("claim-0", req("req-0", CLASS_A, 1, memory_at_least("2Gi")))
    assert chosen(allocate([the_claim], slices, matches=cel)) == [
        [("req-0", DRIVER_A, "pool-1", "device-2")]
    ]
    broken = claim("claim-0", req("req-0", CLASS_A, 1, "noSuchVar"))
    assert failed(allocate([broken], slices, matches=cel)).startswith(
        "claim claim-0: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:1: "
        "undeclared reference to 'noSuchVar'"
    )
    missing = claim(
        "claim-0", req("req-0", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].model == "x"')
    )
    assert failed(allocate([missing], slices, matches=cel)) == (
        "claim claim-0: selector #0 on device driver-a/pool-1/device-1: CEL runtime error: "
        "no such key: model. consider using CEL optional chaining (.? followed by orValue()) "
        "or guarding the check with has() for optional fields"
    )


def test_a_pod_with_many_claims_of_many_devices_is_searched_to_the_end() -> None:
    # The search recurses once per device taken, as Go's does: 12 claims of 32 devices go
    # deeper than Python's default recursion limit.
    slices = [slice_("slice-1", *(device(f"device-{i:03}") for i in range(12 * 32)))]
    claims = [claim(f"claim-{c}", req("req-0", CLASS_A, 32)) for c in range(12)]
    results = chosen(allocate(claims, slices))
    assert [len(r) for r in results] == [32] * 12
    assert results[11][31][3] == "device-383"
