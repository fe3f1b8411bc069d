"""Devices counted in arrays: DynamicResources' Filter gives every node the verdict the
structured allocator gives it (the same nodes pass, the same words for those that fail),
whether counting or the allocator decides, on every release; and counting decides the
common claim on plain nodes without the allocator."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from plumb.backend.cache import dra, snapshot
from plumb.backend.records import draobjects, objects
from plumb.framework import emulation
from plumb.framework.devices import allocator, availability, expressions
from plumb.framework.plugins import dynamicresources
from plumb_dev.testing import drabuilders as b

GPU, NIC = "gpu.example.com", "nic.example.com"
BIG = f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0'
A100 = f'device.attributes["{GPU}"].model == "a100"'
NODES = tuple(f"node-{i}" for i in range(3))
CLASSES = {
    "gpu": b.make_class("gpu").driver(GPU).obj(),
    "nic": b.make_class("nic").driver(NIC).obj(),
    "any": b.make_class("any").obj(),
}


def gpu(name: str, memory: str | None = "80Gi", model: str | None = "a100") -> b.DeviceBuilder:
    built = b.device(name)
    if model is not None:
        built.attr("model", model)
    if memory is not None:
        built.capacity("memory", memory)
    return built


def local(node: str, *devices: b.DeviceBuilder, driver: str = GPU, pool: str = "") -> Any:
    name = f"{node}-{pool or driver}"
    return b.make_slice(name, driver).pool(pool or name).node(node).devices(*devices).obj()


def claim_body(name: str, spec: b.ClaimSpecBuilder, **status: Any) -> dict[str, Any]:
    body = {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": spec.spec(),
    }
    if status:
        body["status"] = status
    return body


def held(name: str, *devices: tuple[str, str, str], share: bool = False) -> dict[str, Any]:
    """A claim of another pod holding these (driver, pool, device); ``share``: a share of
    each with all its memory consumed (consumable capacity)."""
    results = []
    for d, p, n in devices:
        result: dict[str, Any] = {"request": "r", "driver": d, "pool": p, "device": n}
        if share:
            result.update(shareID=f"{name}-{n}", consumedCapacity={"memory": "80Gi"})
        results.append(result)
    return claim_body(
        name,
        b.ClaimSpecBuilder().request("r", "gpu"),
        allocation={"devices": {"results": results}, "nodeSelector": None},
    )


def store_of(
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]] = (),
    classes: Mapping[str, Mapping[str, Any]] = CLASSES,
) -> dra.DraStore:
    store = dra.DraStore()
    for body in slices:
        store.on_slice(body, body["metadata"]["name"])
    for name, body in classes.items():
        store.on_class(body, name)
    for body in claims:
        store.on_claim(body, "ml", body["metadata"]["name"])
    return store


def statics_of(nodes: Sequence[str] = NODES) -> snapshot.NodeStatics:
    infos = [objects.NodeInfo(name=n, allocatable={}, labels={"rack": n[-1]}) for n in nodes]
    return snapshot.NodeStatics(
        infos, np.zeros(len(infos), dtype=np.uint64), np.zeros((len(infos), 1), dtype=np.int64)
    )


def pod_claims(*specs: b.ClaimSpecBuilder) -> list[draobjects.ResourceClaim]:
    return [draobjects.parse_claim(claim_body(f"c{i}", s)) for i, s in enumerate(specs)]


def verdicts(
    claims: Sequence[draobjects.ResourceClaim],
    store: dra.DraStore,
    statics: snapshot.NodeStatics,
    *,
    minor: int = 37,
    fast: bool = True,
    matcher: dynamicresources.Matcher | None = None,
) -> dynamicresources.NodeVerdicts:
    devices = dynamicresources.PodDevices(
        claims=tuple(claims), to_allocate=tuple(c for c in claims if c.allocation is None)
    )
    return dynamicresources.filter(
        devices,
        statics,
        np.ones(len(statics), dtype=np.bool_),
        store,
        emulation.emulate(minor).devices,
        matcher or dynamicresources.matcher(expressions.SelectorVerdicts()),
        scored=True,
        fast=fast,
    )


def words(found: dynamicresources.NodeVerdicts) -> list[str]:
    """Per node: "" where it passes, else its reason."""
    return [found.reasons[r] if f else "" for f, r in zip(found.fails, found.reason, strict=True)]


def counted(
    claims: Sequence[draobjects.ResourceClaim],
    store: dra.DraStore,
    statics: snapshot.NodeStatics,
    minor: int = 37,
) -> availability.FastVerdict | None:
    return availability.Availability().verdict(
        claims,
        statics,
        store,
        emulation.emulate(minor).devices,
        dynamicresources.matcher(expressions.SelectorVerdicts()),
    )


# --- the common case: counting decides every node --------------------------------------------


def test_one_big_gpu_passes_where_one_is_free_and_fails_in_the_allocators_words() -> None:
    store = store_of(
        [
            local("node-0", gpu("g0"), gpu("g1", memory="20Gi")),
            local("node-1", gpu("g0", memory="20Gi")),
            local("node-2", gpu("g0"), gpu("g1")),
        ],
        [
            held(
                "other",
                (GPU, "node-2-gpu.example.com", "g0"),
                (GPU, "node-2-gpu.example.com", "g1"),
            )
        ],
    )
    claims = pod_claims(b.ClaimSpecBuilder().request("gpu", "gpu", selectors=[BIG]))
    statics = statics_of()
    fast = counted(claims, store, statics)
    assert fast is not None
    assert fast.decided.all()
    assert words(verdicts(claims, store, statics)) == [
        "",
        "cannot allocate all claims",
        "cannot allocate all claims",
    ]
    assert words(verdicts(claims, store, statics, fast=False)) == words(
        verdicts(claims, store, statics)
    )


def test_counting_runs_no_allocator_on_decided_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    store = store_of([local(n, gpu("g0"), gpu("g1")) for n in NODES])
    claims = pod_claims(b.ClaimSpecBuilder().request("gpu", "gpu", selectors=[BIG], count=2))

    def refuse(**_: Any) -> allocator.AllocationOutcome:
        raise AssertionError("the allocator ran")

    monkeypatch.setattr(allocator, "allocate", refuse)
    assert words(verdicts(claims, store, statics_of())) == ["", "", ""]


def test_all_devices_need_every_match_free_and_one_at_least() -> None:
    store = store_of(
        [
            local("node-0", gpu("g0"), gpu("g1", model="t4")),
            local("node-1", gpu("g0"), gpu("g1")),
            local("node-2", gpu("g0", model="t4")),
        ],
        [held("other", (GPU, "node-1-gpu.example.com", "g1"))],
    )
    claims = pod_claims(
        b.ClaimSpecBuilder().request("all", "gpu", selectors=[A100], all_devices=True)
    )
    statics = statics_of()
    fast = counted(claims, store, statics)
    assert fast is not None
    assert fast.decided.all()
    expected = ["", "cannot allocate all claims", "cannot allocate all claims"]
    assert words(verdicts(claims, store, statics)) == expected
    assert words(verdicts(claims, store, statics, fast=False)) == expected


def test_two_claims_for_the_same_devices_need_both_counts() -> None:
    store = store_of(
        [local("node-0", gpu("g0")), local("node-1", gpu("g0"), gpu("g1")), local("node-2")]
    )
    spec = b.ClaimSpecBuilder().request("gpu", "gpu", selectors=[BIG])
    claims = pod_claims(spec, spec)
    statics = statics_of()
    fast = counted(claims, store, statics)
    assert fast is not None
    assert fast.decided.all()
    assert words(verdicts(claims, store, statics)) == [
        "cannot allocate all claims",
        "",
        "cannot allocate all claims",
    ]


def test_requests_whose_free_devices_overlap_are_left_to_the_allocator() -> None:
    # "gpu" with a100 and "gpu" with 40Gi both want g0 on node-0; node-1's sets are apart.
    store = store_of(
        [
            local("node-0", gpu("g0"), gpu("g1", memory="20Gi", model="t4")),
            local("node-1", gpu("g0", memory="20Gi"), gpu("g1", model="t4")),
        ]
    )
    claims = pod_claims(
        b.ClaimSpecBuilder()
        .request("a", "gpu", selectors=[A100])
        .request("b", "gpu", selectors=[BIG])
    )
    statics = statics_of(NODES[:2])
    fast = counted(claims, store, statics)
    assert fast is not None
    assert fast.decided.tolist() == [False, True]
    assert words(verdicts(claims, store, statics)) == ["cannot allocate all claims", ""]


def test_a_claim_allocated_already_keeps_its_nodes_and_its_score() -> None:
    # The pod's first claim was allocated for node-0 and node-2 (its prioritized list's first
    # choice); the second is counted: node-1 cannot reach the first, node-2 has no GPU free.
    store = store_of(
        [local(n, gpu("g0"), gpu("g1")) for n in NODES],
        [
            held(
                "other",
                (GPU, "node-2-gpu.example.com", "g0"),
                (GPU, "node-2-gpu.example.com", "g1"),
            )
        ],
    )
    first = b.ClaimSpecBuilder().first_available("gpu", b.subrequest("big", "gpu", selectors=[BIG]))
    on_node_0 = {
        "devices": {
            "results": [
                {
                    "request": "gpu/big",
                    "driver": GPU,
                    "pool": "node-0-gpu.example.com",
                    "device": "g0",
                }
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["node-0", "node-2"]}
                    ]
                }
            ]
        },
    }
    allocated = draobjects.parse_claim(claim_body("done", first, allocation=on_node_0))
    claims = [allocated, *pod_claims(b.ClaimSpecBuilder().request("gpu", "gpu"))]
    statics = statics_of()
    found = verdicts(claims, store, statics)
    slow = verdicts(claims, store, statics, fast=False)
    assert words(found) == words(slow)
    assert words(found) == [
        "",
        "resourceclaim not available on the node",
        "cannot allocate all claims",
    ]
    assert found.raw_score.tolist() == slow.raw_score.tolist()
    assert found.raw_score.tolist() == [allocator.SUBREQUESTS_LIMIT, 0, 0]


# --- what counting leaves to the allocator ---------------------------------------------------


@pytest.mark.parametrize(
    "odd",
    [
        b.device("g9").taint("dead"),
        b.device("g9").consumes("counters", memory="1Gi"),
        b.device("g9").multiple_allocations(),
        b.device("g9").capacity("memory", "1Gi", default="2Gi"),  # no allocation fits
    ],
    ids=["taint", "counters", "multiple-allocations", "capacity-policy"],
)
def test_a_node_with_a_device_counting_cannot_judge_goes_to_the_allocator(
    odd: b.DeviceBuilder,
) -> None:
    store = store_of([local("node-0", gpu("g0"), odd), local("node-1", gpu("g0"))])
    claims = pod_claims(b.ClaimSpecBuilder().request("gpu", "gpu"))
    statics = statics_of(NODES[:2])
    fast = counted(claims, store, statics)
    assert fast is not None
    assert fast.decided.tolist() == [False, True]
    assert words(verdicts(claims, store, statics)) == words(
        verdicts(claims, store, statics, fast=False)
    )


def test_a_selector_error_is_the_allocators_to_word() -> None:
    store = store_of([local("node-0", gpu("g0", memory=None)), local("node-1", gpu("g0"))])
    claims = pod_claims(b.ClaimSpecBuilder().request("gpu", "gpu", selectors=[BIG]))
    statics = statics_of(NODES[:2])
    fast = counted(claims, store, statics)
    assert fast is not None
    assert fast.decided.tolist() == [False, True]
    found = verdicts(claims, store, statics)
    assert found.error is not None
    assert "CEL runtime error" in found.error
    assert found.error == verdicts(claims, store, statics, fast=False).error


def test_pools_not_node_local_or_incomplete_go_to_the_allocator() -> None:
    shared = b.make_slice("rack", NIC).node_selector(
        [{"key": "rack", "operator": "In", "values": ["1"]}]
    )
    incomplete = b.make_slice("half", GPU).pool("half", count=2).node("node-2")
    store = store_of(
        [
            local("node-0", gpu("g0")),
            local("node-1", gpu("g0")),
            shared.devices(b.device("n0")).obj(),
            incomplete.devices(gpu("g0")).obj(),
        ]
    )
    claims = pod_claims(b.ClaimSpecBuilder().request("gpu", "gpu"))
    fast = counted(claims, store, statics_of())
    assert fast is not None
    assert fast.decided.tolist() == [True, False, False]


@pytest.mark.parametrize(
    "spec",
    [
        b.ClaimSpecBuilder()
        .request("gpu", "gpu")
        .request("b", "gpu")
        .match_attribute(f"{GPU}/model"),
        b.ClaimSpecBuilder().request("gpu", "gpu", admin=True),
        b.ClaimSpecBuilder().request("gpu", "gpu", capacity={"memory": "1Gi"}),
        b.ClaimSpecBuilder().first_available("gpu", b.subrequest("big", "gpu")),
        b.ClaimSpecBuilder().request("gpu", "missing"),
        b.ClaimSpecBuilder().request("gpu", "gpu", count=33),
        b.ClaimSpecBuilder().request("all", "gpu", all_devices=True).request("one", "gpu"),
    ],
    ids=[
        "constraint",
        "admin",
        "capacity",
        "first-available",
        "no-class",
        "over-32",
        "all-and-one",
    ],
)
def test_claims_counting_cannot_judge_go_to_the_allocator(spec: b.ClaimSpecBuilder) -> None:
    store = store_of([local(n, gpu("g0")) for n in NODES])
    assert counted(pod_claims(spec), store, statics_of()) is None


def test_a_device_with_capacity_consumed_leaves_its_node_to_the_allocator() -> None:
    # A share of node-0's only GPU holds all its memory: free to count, full to the allocator.
    store = store_of(
        [local("node-0", gpu("g0")), local("node-1", gpu("g0"))],
        [held("other", (GPU, "node-0-gpu.example.com", "g0"), share=True)],
    )
    claims = pod_claims(b.ClaimSpecBuilder().request("gpu", "gpu"))
    statics = statics_of(NODES[:2])
    fast = counted(claims, store, statics)
    assert fast is not None
    assert fast.decided.tolist() == [False, True]
    assert words(verdicts(claims, store, statics)) == ["cannot allocate all claims", ""]
    assert words(verdicts(claims, store, statics, minor=35)) == [
        "cannot allocate all claims",  # before consumable capacity: the device is taken whole
        "",
    ]


def test_all_devices_of_a_node_with_more_than_a_claim_holds_is_the_allocators_error() -> None:
    many = [gpu(f"g{i:02d}") for i in range(allocator.RESULTS_LIMIT + 1)]
    store = store_of([local("node-0", gpu("g0")), local("node-1", *many)])
    claims = pod_claims(b.ClaimSpecBuilder().request("all", "gpu", all_devices=True))
    statics = statics_of(NODES[:2])
    fast = counted(claims, store, statics)
    assert fast is not None
    assert fast.decided.tolist() == [True, False]
    found = verdicts(claims, store, statics)
    assert found.error is not None
    assert "exceeds the claim limit of 32" in found.error
    assert found.error == verdicts(claims, store, statics, fast=False).error


# --- the cache ------------------------------------------------------------------------------


def test_a_selector_is_evaluated_once_per_device_until_its_slice_changes() -> None:
    selectors = expressions.SelectorVerdicts()
    matcher = dynamicresources.matcher(selectors)
    bodies = [local(n, gpu("g0"), gpu("g1", memory="20Gi")) for n in NODES]
    store = store_of(bodies)
    statics = statics_of()
    claims = pod_claims(b.ClaimSpecBuilder().request("gpu", "gpu", selectors=[BIG]))
    for _ in range(3):
        verdicts(claims, store, statics, matcher=matcher)
    assert selectors.evaluations == 2 * 6  # the class's and the request's, on six devices
    changed = local("node-1", gpu("g0", memory="20Gi"), gpu("g1", memory="20Gi"))
    changed["metadata"]["resourceVersion"] = "2"
    store.on_slice(changed, changed["metadata"]["name"])
    assert words(verdicts(claims, store, statics, matcher=matcher)) == [
        "",
        "cannot allocate all claims",
        "",
    ]
    assert selectors.evaluations == 2 * 6 + 2 * 2  # node-1's two devices again


def test_a_slice_republished_with_a_taint_goes_to_the_allocator() -> None:
    store = store_of([local(n, gpu("g0")) for n in NODES[:2]])
    statics = statics_of(NODES[:2])
    claims = pod_claims(b.ClaimSpecBuilder().request("gpu", "gpu"))
    table = availability.Availability()
    features = emulation.emulate(37).devices
    matcher = dynamicresources.matcher(expressions.SelectorVerdicts())
    first = table.verdict(claims, statics, store, features, matcher)
    assert first is not None
    assert first.decided.tolist() == [True, True]
    tainted = local("node-1", gpu("g0").taint("broken", effect="NoExecute"))
    tainted["metadata"]["resourceVersion"] = "2"
    store.on_slice(tainted, tainted["metadata"]["name"])
    again = table.verdict(claims, statics, store, features, matcher)
    assert again is not None
    assert again.decided.tolist() == [True, False]
    assert words(verdicts(claims, store, statics)) == ["", "cannot allocate all claims"]


def test_a_device_freed_or_taken_shows_at_once() -> None:
    store = store_of([local("node-0", gpu("g0"))])
    statics = statics_of(NODES[:1])
    claims = pod_claims(b.ClaimSpecBuilder().request("gpu", "gpu"))
    assert words(verdicts(claims, store, statics)) == [""]
    store.on_claim(held("other", (GPU, "node-0-gpu.example.com", "g0")), "ml", "other")
    assert words(verdicts(claims, store, statics)) == ["cannot allocate all claims"]
    store.on_claim(None, "ml", "other")
    assert words(verdicts(claims, store, statics)) == [""]


# --- the property: counting says what the allocator says, on every release --------------------

MEMORY = st.sampled_from([None, *["20Gi"] * 3, *["80Gi"] * 6])
MODEL = st.sampled_from([None, *["a100"] * 6, *["t4"] * 3])


@st.composite
def a_device(draw: st.DrawFn, name: str) -> b.DeviceBuilder:
    built = gpu(name, memory=draw(MEMORY), model=draw(MODEL))
    odd = (
        draw(st.sampled_from(["", "taint", "multiple", "policy"]))
        if draw(st.integers(0, 14)) == 0
        else ""
    )
    if odd == "taint":
        built.taint("dead", effect=draw(st.sampled_from(["NoSchedule", "NoExecute", "None"])))
    elif odd == "multiple":
        built.multiple_allocations()
    elif odd == "policy":
        built.capacity("slots", "4", default=draw(st.sampled_from(["1", "8"])))
    return built


@st.composite
def a_cluster(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[str, str, str]]]:
    """Slices (mostly node-local, one pool per node and driver) and every device id."""
    slices: list[dict[str, Any]] = []
    ids: list[tuple[str, str, str]] = []
    for node in NODES:
        for driver in draw(st.sampled_from([[GPU], [GPU], [GPU], [GPU, NIC], []])):
            pool = draw(st.sampled_from(["", "", "", "shared-name"]))
            names = [
                f"d{i}"
                for i in range(
                    draw(st.integers(0, 6)) if driver == NIC else draw(st.integers(1, 6))
                )
            ]
            if names and draw(st.integers(0, 9)) == 0:
                names.append(names[0])  # a device name twice: an invalid pool
            devices = [draw(a_device(n)) for n in names]
            body = local(node, *devices, driver=driver, pool=pool)
            if draw(st.integers(0, 9)) == 0:
                body["spec"]["pool"]["resourceSliceCount"] = 2  # incomplete
            slices.append(body)
            ids += [(driver, body["spec"]["pool"]["name"], n) for n in names]
    if draw(st.integers(0, 5)) == 0:
        where = {"key": "rack", "operator": "In", "values": [draw(st.sampled_from("012"))]}
        shared = b.make_slice("racked", GPU).node_selector([where])
        slices.append(shared.devices(draw(a_device("r0"))).obj())
        ids.append((GPU, "racked", "r0"))
    return slices, ids


@st.composite
def a_request(draw: st.DrawFn, name: str) -> dict[str, Any]:
    device_class = draw(st.sampled_from(["gpu", "gpu", "gpu", "gpu", "nic", "any"]))
    selectors = draw(st.lists(st.sampled_from([BIG, A100]), max_size=2, unique=True))
    every = draw(st.integers(0, 5)) == 0
    count = None if every else draw(st.sampled_from([0, 1, 1, 1, 2, 3]))
    return {
        "name": name,
        "class": device_class,
        "selectors": selectors,
        "every": every,
        "count": count,
    }


@st.composite
def a_pod(draw: st.DrawFn) -> list[b.ClaimSpecBuilder]:
    specs = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        spec = b.ClaimSpecBuilder()
        for r in range(draw(st.sampled_from([1, 1, 2]))):
            request = draw(a_request(f"r{r}"))
            spec.request(
                request["name"],
                request["class"],
                selectors=request["selectors"],
                count=request["count"],
                all_devices=request["every"],
            )
        specs.append(spec)
    return specs


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=a_cluster(),
    pod=a_pod(),
    minor=st.sampled_from(sorted(emulation.MINORS)),
    data=st.data(),
)
def test_counting_gives_every_node_the_allocators_verdict(
    cluster: tuple[list[dict[str, Any]], list[tuple[str, str, str]]],
    pod: list[b.ClaimSpecBuilder],
    minor: int,
    data: st.DataObject,
) -> None:
    slices, ids = cluster
    taken = (
        data.draw(
            st.lists(st.sampled_from(ids), unique=True, max_size=len(ids) // 2), label="taken"
        )
        if ids
        else []
    )
    shares = data.draw(st.booleans(), label="shares")
    held_claims = [held(f"h{i}", d, share=shares and i % 2 == 0) for i, d in enumerate(taken)]
    store = store_of(slices, held_claims)
    statics = statics_of()
    claims = pod_claims(*pod)
    features = emulation.emulate(minor).devices
    matcher = dynamicresources.matcher(expressions.SelectorVerdicts())
    slow = verdicts(claims, store, statics, minor=minor, fast=False, matcher=matcher)
    found = verdicts(claims, store, statics, minor=minor, matcher=matcher)
    assert found.error == slow.error
    if slow.error is None:
        assert words(found) == words(slow)
        assert found.raw_score.tolist() == slow.raw_score.tolist()
    fast = availability.Availability().verdict(claims, statics, store, features, matcher)
    if fast is None:
        event("claims left to the allocator")
        return
    event(f"nodes decided: {int(fast.decided.sum())}")
    event(f"passing decided: {int((fast.decided & fast.passes).sum())}")
    every = any(
        r.exactly is not None and r.exactly.mode == draobjects.ALL
        for c in claims
        for r in c.spec.requests
    )
    if every:
        event(f"All, decided nodes: {int(fast.decided.sum())}")
    pools = allocator.pool_rules(features)
    classes = {c.name: c for c in store.classes()}
    state = store.allocated(consumable=features.consumable_capacity)
    for n in np.flatnonzero(fast.decided):
        node = statics.nodes[int(n)]
        outcome = allocator.allocate(
            node=node,
            claims=claims,
            pools=store.pools(node, pools),
            classes=classes,
            state=state,
            features=features,
            matches=matcher,
        )
        if fast.passes[n]:
            assert isinstance(outcome, allocator.Allocated), (node.name, outcome)
        else:
            assert outcome == allocator.Unallocatable(allocator.CANNOT_ALLOCATE), (
                node.name,
                outcome,
            )
