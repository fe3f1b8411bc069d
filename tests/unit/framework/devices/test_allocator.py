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
