"""Which claim kept a pod off which nodes, and why (framework/claimrejections.py), as the trace
line of a claim pod no node fits says it: the claim that cannot be allocated there even alone,
the claims together when each fits alone, an allocated claim a node cannot reach, the claim a
PreFilter rejection comes from."""

from __future__ import annotations

import logging

from plumb.observability import trace
from plumb_dev.testing.drabuilders import device, make_claim
from tests.support.dra_world import NS, DraWorld
from tests.support.log_capture import Lines

CANNOT = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
A100 = 'device.attributes["gpu.example.com"].model == "a100"'


def _reject(claim: str, reason: str, *nodes: str) -> trace.ClaimRejection:
    return trace.ClaimRejection(
        claim=f"{NS}/{claim}" if claim else "", reason=reason, nodes=len(nodes), examples=nodes
    )


async def test_a_single_claim_is_named_on_every_node_it_does_not_fit(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    world = DraWorld(json_lines)
    world.nodes("node-a", "node-b")
    world.device_class("gpu")
    world.publish("node-a", device("gpu-0"))
    world.publish("node-b", device("gpu-0"))
    for i in range(3):
        world.claim(make_claim(f"one-{i}", NS).request("gpu", "gpu"))
    world.pod("first", "one-0")
    world.pod("second", "one-1")
    await world.settle()
    world.pod("third", "one-2")
    await world.settle()
    record = world.last("third")
    assert record.result == trace.UNSCHEDULABLE
    assert record.message.startswith(f"0/2 nodes are available: 2 {CANNOT}.")
    assert record.claims == (_reject("one-2", CANNOT, "node-a", "node-b"),)


async def test_of_several_claims_the_one_that_cannot_fit_alone_is_named_else_all_together(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    world = DraWorld(json_lines)
    world.nodes("node-a", "node-b")
    world.device_class("gpu")
    # node-a: one a100; node-b: two t4. The pod wants an a100 and any gpu.
    world.publish("node-a", device("gpu-0").attr("model", "a100"))
    world.publish(
        "node-b", device("gpu-0").attr("model", "t4"), device("gpu-1").attr("model", "t4")
    )
    world.claim(make_claim("fast", NS).request("gpu", "gpu", selectors=[A100]))
    world.claim(make_claim("any", NS).request("gpu", "gpu"))
    world.pod("trainer", "fast", "any")
    await world.settle()
    record = world.last("trainer")
    assert record.result == trace.UNSCHEDULABLE
    # On node-b the a100 claim fails alone; on node-a each fits alone, not both at once.
    assert record.claims == (
        _reject("fast", CANNOT, "node-b"),
        _reject("", CANNOT, "node-a"),
    )
    assert record.rejected["DynamicResources"].reasons == {CANNOT: 2}


async def test_an_allocated_claim_is_named_on_the_nodes_that_cannot_reach_it(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    world = DraWorld(json_lines)
    world.nodes("node-a", "node-b", "node-c")
    world.device_class("gpu")
    for node in ("node-a", "node-b", "node-c"):
        world.publish(node, device("gpu-0"))
    world.claim(make_claim("shared", NS).request("gpu", "gpu"))
    world.pod("owner", "shared", cpu="3")
    await world.settle()
    owner = world.last("owner")
    assert owner.result == trace.SCHEDULED
    # The claim's device is on the owner's node, which has no room left for the next pod.
    world.pod("sharer", "shared", cpu="2")
    await world.settle()
    record = world.last("sharer")
    assert record.result == trace.UNSCHEDULABLE
    others = sorted({"node-a", "node-b", "node-c"} - {owner.node or ""})
    assert record.claims == (_reject("shared", NOT_AVAILABLE, *others),)
    assert record.rejected["NodeResourcesFit"].nodes == 1


async def test_a_prefilter_rejection_names_the_claim_it_comes_from_on_every_node(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    world = DraWorld(json_lines)
    world.nodes("node-a", "node-b")
    world.device_class("gpu")
    world.publish("node-a", device("gpu-0"))
    world.claim(make_claim("fine", NS).request("gpu", "gpu"))
    world.claim(make_claim("odd", NS).request("gpu", "no-such-class"))
    world.pod("trainer", "fine", "odd")
    await world.settle()
    record = world.last("trainer")
    reason = "request gpu: device class no-such-class does not exist"
    assert record.message.startswith(f"0/2 nodes are available: {reason}.")
    assert record.claims == (trace.ClaimRejection(claim=f"{NS}/odd", reason=reason, nodes=2),)


async def test_a_scheduled_claim_pod_names_no_rejection_and_its_devices(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    world = DraWorld(json_lines)
    world.nodes("node-a")
    world.device_class("gpu")
    world.publish("node-a", device("gpu-0"), device("gpu-1"))
    world.claim(make_claim("two", NS).request("gpu", "gpu", count=2))
    world.pod("trainer", "two")
    await world.settle()
    record = world.last("trainer")
    assert record.result == trace.SCHEDULED
    assert record.claims == ()
    assert [(d.claim, d.request, d.pool, d.device) for d in record.devices] == [
        (f"{NS}/two", "gpu", "node-a", "gpu-0"),
        (f"{NS}/two", "gpu", "node-a", "gpu-1"),
    ]


async def test_devices_taken_by_pods_before_it_in_its_batch_are_said_so(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    # Four pods in one batch, two devices: the kernel's device columns give them to the first
    # two; the others' claims would fit node-a and node-b alone, node-c has no device at all.
    world = DraWorld(json_lines)
    world.nodes("node-a", "node-b", "node-c")
    world.device_class("gpu")
    world.publish("node-a", device("gpu-0"))
    world.publish("node-b", device("gpu-0"))
    for i in range(4):
        world.claim(make_claim(f"c{i}", NS).request("gpu", "gpu"))
        world.pod(f"p{i}", f"c{i}")
    await world.decide()
    failed = [r for r in world.traces() if r.result == trace.UNSCHEDULABLE]
    assert [r.batch for r in failed] == [4, 4]
    for record in failed:
        claim = f"{NS}/c{record.pod[-1]}"
        assert record.claims == (
            trace.ClaimRejection(
                claim=claim,
                reason="cannot allocate all claims: the devices left went to pods placed before "
                "it in its batch",
                nodes=2,
                examples=("node-a", "node-b"),
            ),
            _reject(f"c{record.pod[-1]}", CANNOT, "node-c"),
        )
