"""Which devices a claim gets, under plumb and under the real kube-scheduler on the same control
plane: CEL selectors of the class and the request on attributes and capacity, ExactCount and
All, claims made from templates, and a pod whose claim does not exist yet.

No driver runs: the test publishes each node's ResourceSlice as its kubelet plugin would
(``tests/support/dra_stage.py``), and the nodes are plain API objects, so a bound pod stays
Pending. Every pod asks for 1 cpu and 1Gi; "roomy" beats "small" on resources for it, so a
scheduler that ignores claims sends it to roomy, and the devices are laid out so that exactly
one node can hold each claim (no score ties). The allocation is asserted as kube-scheduler
writes it: driver, pool (named after the node here), device, in order.

State (issue 27): every test here passes under kube-scheduler v1.37.2 and v1.34.4; under plumb
they fail until it allocates claims (it binds claim pods as if they had none).
"""

from __future__ import annotations

import pytest

from plumb_dev.testing import builders, draclient, kube
from plumb_dev.testing import drabuilders as drab
from tests.support import side_by_side
from tests.support.dra_stage import (  # noqa: F401
    BOTH_CANNOT_ALLOCATE,
    Stage,
    dra_fixture,
    not_helpful,
)
from tests.support.pod_watches import NominationWatch
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.dra]


def _gpu(name: str, model: str, memory: str = "40Gi", kind: str = "gpu") -> drab.DeviceBuilder:
    return drab.device(name).attr("kind", kind).attr("model", model).capacity("memory", memory)


def _a100s(count: int) -> list[drab.DeviceBuilder]:
    """``count`` A100 GPUs of 40Gi: gpu-0, gpu-1, ..."""
    return [_gpu(f"gpu-{i}", "a100") for i in range(count)]


def test_selectors_of_the_class_and_the_request_on_attributes_pick_the_device(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    scheduler: side_by_side.Runner,
    dra: Stage,
) -> None:
    # The class takes the driver's GPUs; the request the A100s. Roomy's NIC is an "A100" too
    # (its model attribute says so), but no GPU: only small has a device both select.
    gpu = dra.device_class("gpu", f'{dra.cel("kind")} == "gpu"')
    nic = _gpu("nic-0", "a100", kind="nic")
    _, small = dra.two_nodes(scheduler, roomy=[_gpu("gpu-0", "t4"), nic], small=_a100s(1))

    dra.new_claim("a100", gpu, dra.model_is("a100"))
    with NominationWatch(kube_client, namespace, "trainer") as watched:
        assert dra.run(scheduler, "trainer", "a100") == small
        assert watched.bound.wait(timeout=30)
    # A pod with claims has PreBind work: from v1.35 (NominatedNodeNameForExpectation) it is
    # nominated to its node before the claim is written; the API server clears it at binding.
    assert watched.seen == ([None] if kube_minor < 35 else [None, small, None])

    # What kube-scheduler writes, before it binds: the finalizer, then status.allocation (the
    # devices, a node selector naming the node of a node-local slice and, where
    # DRADeviceBindingConditions is on (v1.36+; the API server drops it otherwise), the time)
    # and the pod in reservedFor, in one status update.
    claim = dra.claim("a100")
    pod = dra.pod("trainer")
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    allocation = claim["status"]["allocation"]
    assert allocation["devices"] == {
        "results": [{"request": "gpu", "driver": dra.driver, "pool": small, "device": "gpu-0"}]
    }
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [small]}]}
        ]
    }
    assert ("allocationTimestamp" in allocation) == (kube_minor >= 36)
    assert "config" not in allocation
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "trainer", "uid": pod["metadata"]["uid"]}
    ]


def test_a_selector_on_capacity_picks_the_device_with_enough_memory(
    scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")
    _, small = dra.two_nodes(
        scheduler,
        roomy=[_gpu("gpu-0", "a100", "16Gi")],
        small=[_gpu("gpu-0", "a100", "40Gi"), _gpu("gpu-1", "a100", "80Gi")],
    )

    def at_least(name: str, memory: str) -> str | None:
        selector = f'{dra.capacity_cel("memory")}.compareTo(quantity("{memory}")) >= 0'
        return dra.run(scheduler, name, dra.new_claim(name, gpu, selector))

    # 64Gi or more: only small's second device; then 32Gi or more: small's first (the
    # second is taken), though roomy, which the resources favour, has a free 16Gi one.
    assert at_least("huge", "64Gi") == small
    assert at_least("large", "32Gi") == small
    assert dra.devices("huge") == [(dra.driver, small, "gpu-1")]
    assert dra.devices("large") == [(dra.driver, small, "gpu-0")]


def test_exact_count_takes_that_many_devices_of_one_node_in_their_order(
    scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")
    _, small = dra.two_nodes(scheduler, roomy=_a100s(2), small=_a100s(4))

    # Three devices: roomy has two, small four; the first three of small's, as published.
    dra.new_claim("three", gpu, count=3)
    assert dra.run(scheduler, "trainer", "three") == small
    assert dra.requests("three") == [("gpu", "gpu-0"), ("gpu", "gpu-1"), ("gpu", "gpu-2")]
    assert {pool for _, pool, _ in dra.devices("three")} == {small}


def test_all_takes_every_matching_device_of_a_node_where_none_is_in_use(
    scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu", f'{dra.cel("kind")} == "gpu"')
    nic = _gpu("nic-0", "a100", kind="nic")
    mixed = [_gpu("gpu-0", "a100"), nic, _gpu("gpu-1", "t4")]
    roomy, small = dra.two_nodes(scheduler, roomy=_a100s(2), small=mixed)

    # One of roomy's GPUs taken first (the pod pinned there)...
    pinned = dra.claim_pod(scheduler, "pinned", dra.new_claim("one", gpu))
    assert dra.schedule(pinned.node_selector(builders.HOSTNAME_LABEL, roomy)) == roomy
    assert dra.devices("one") == [(dra.driver, roomy, "gpu-0")]
    # ... so "all the GPUs" can only be small's (both models, not the NIC): All needs every
    # device the request selects on the node to be free.
    dra.new_claim("all", gpu, all_devices=True)
    assert dra.run(scheduler, "greedy", "all") == small
    assert dra.requests("all") == [("gpu", "gpu-0"), ("gpu", "gpu-1")]


def test_a_template_makes_one_claim_per_pod(
    namespace: str, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")
    roomy, small = dra.two_nodes(scheduler, roomy=_a100s(1), small=_a100s(1))

    dra.api.create_template(drab.make_template("one-gpu", namespace).request("gpu", gpu).obj())
    # Each pod waits (PreEnqueue) until the resourceclaim controller has made its claim. The
    # first goes where the resources say; the second where the only free GPU is.
    for name, node in (("first", roomy), ("second", small)):
        pod = dra.make_pod(scheduler, name).resource_claim("gpu", template="one-gpu")
        assert dra.schedule(pod) == node
        made = dra.api.wait_generated(namespace, name, "gpu")
        claim = dra.claim(made)
        assert made.startswith(f"{name}-gpu-")
        assert claim["metadata"]["annotations"] == {drab.POD_CLAIM_NAME_ANNOTATION: "gpu"}
        assert [o["name"] for o in claim["metadata"]["ownerReferences"]] == [name]
        assert dra.devices(made) == [(dra.driver, node, "gpu-0")]
        assert draclient.reserved_for(claim) == [name]


def test_a_pod_waits_without_an_event_until_its_claim_exists(
    kube_client: kube.Kube, namespace: str, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    roomy, small = dra.roomy_and_small()
    gpu = dra.device_class("gpu")
    dra.publish(roomy, _gpu("gpu-0", "t4"))
    dra.publish(small, _gpu("gpu-0", "a100"))
    side_by_side.in_view(kube_client, scheduler, namespace, [roomy, small])

    dra.create(dra.claim_pod(scheduler, "early", "later"))
    # The probe is a pod made after "early": once it is bound the scheduler has seen "early"
    # too. PreEnqueue keeps it out of the queue: no attempt, so no event and no condition.
    dra.in_view(scheduler, [roomy, small])
    pod = dra.pod("early")
    assert pod["spec"].get("nodeName") is None
    assert pod["status"].get("conditions") is None
    assert [e["reason"] for e in kube_client.events(namespace, "early")] == []

    dra.new_claim("later", gpu, dra.model_is("a100"))
    assert dra.settled("early") == small
    assert dra.devices("later") == [(dra.driver, small, "gpu-0")]


def test_devices_in_use_are_not_allocated_again(
    kube_minor: int, namespace: str, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")
    roomy, small = dra.two_nodes(scheduler, roomy=_a100s(1), small=_a100s(1))

    # One GPU per node: the first pod where the resources say, the second where a GPU is
    # left, the third nowhere; every node's verdict is the DynamicResources filter's, which
    # preemption cannot cure (UnschedulableAndUnresolvable), so it looks at no node.
    for name, node in (("first", roomy), ("second", small), ("third", None)):
        assert dra.run(scheduler, name, dra.new_claim(name, gpu)) == node
    assert dra.api.in_use(namespace, ["first", "second", "third"]) == {
        "first": [draclient.DeviceTaken("gpu", dra.driver, roomy, "gpu-0")],
        "second": [draclient.DeviceTaken("gpu", dra.driver, small, "gpu-0")],
    }
    assert dra.failed("third") == not_helpful(kube_minor, BOTH_CANNOT_ALLOCATE, 2)


def test_devices_reachable_from_several_nodes_and_the_configuration_they_take(
    kube_minor: int, namespace: str, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    rack = "plumb.test/rack"
    roomy = dra.add_node(
        builders.make_node(f"{namespace}-roomy").capacity(cpu="8", memory="16Gi").label(rack, "b")
    )
    small = dra.add_node(
        builders.make_node(f"{namespace}-small").capacity(cpu="4", memory="16Gi").label(rack, "a")
    )
    fpga = drab.make_class(dra.class_name("fpga")).driver(dra.driver)
    fpga.selector(f'{dra.cel("kind")} == "fpga"').config(dra.driver, {"mode": "exclusive"})
    dra.api.create_class(fpga.obj())
    # Rack a's FPGA is reachable from rack a's nodes (a slice with a node selector), the
    # licence server from every node (allNodes); each is a pool of its own.
    in_rack_a = drab.make_slice(f"rack-a-{dra.tag}", dra.driver).node_selector(
        [builders.expr(rack, "In", "a")]
    )
    dra.api.create_slice(in_rack_a.devices(drab.device("fpga-0").attr("kind", "fpga")).obj())
    everywhere = drab.make_slice(f"licences-{dra.tag}", dra.driver).all_nodes()
    dra.api.create_slice(everywhere.devices(drab.device("seat-0").attr("kind", "licence")).obj())
    licence = dra.device_class("licence", f'{dra.cel("kind")} == "licence"')
    dra.in_view(scheduler, [roomy, small])

    # The FPGA only from small; the claim's own configuration comes after the class's.
    accel = dra.make_claim("fpga").request("fpga", dra.class_name("fpga"))
    dra.api.create_claim(accel.config(dra.driver, {"clock": "fast"}, "fpga").obj())
    assert dra.run(scheduler, "synth", "fpga") == small
    allocation = dra.claim("fpga")["status"]["allocation"]
    assert draclient.allocated(dra.claim("fpga")) == [
        draclient.DeviceTaken("fpga", dra.driver, f"rack-a-{dra.tag}", "fpga-0")
    ]
    # The allocation is reachable where the slice is: its node selector, as published.
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": rack, "operator": "In", "values": ["a"]}]}
        ]
    }
    # Class configuration first, then the claim's, each naming the requests it applies to;
    # from v1.37 a configuration that applies to every request of the claim names none.
    every = {} if kube_minor >= 37 else {"requests": ["fpga"]}
    assert allocation["devices"]["config"] == [
        {
            "source": "FromClass",
            **every,
            "opaque": {"driver": dra.driver, "parameters": {"mode": "exclusive"}},
        },
        {
            "source": "FromClaim",
            **every,
            "opaque": {"driver": dra.driver, "parameters": {"clock": "fast"}},
        },
    ]

    # The licence from anywhere: the resources choose roomy, and the allocation has no node
    # selector (every node reaches it).
    dra.api.create_claim(dra.make_claim("seat").request("seat", licence).obj())
    assert dra.run(scheduler, "user", "seat") == roomy
    assert draclient.allocated(dra.claim("seat")) == [
        draclient.DeviceTaken("seat", dra.driver, f"licences-{dra.tag}", "seat-0")
    ]
    assert "nodeSelector" not in dra.claim("seat")["status"]["allocation"]
