"""A binding that fails after DynamicResources' PreBind wrote the claims: the allocation is on
the API server, so its devices stay taken until the watch shows the claim (kube-scheduler's
assume cache keeps a claim after its API call), and the pod goes back where its devices are.
The chaos scenario sigkill-dra found two pods given one device when plumb forgot it."""

from __future__ import annotations

import logging

from plumb.k8s import client as k8s_client
from plumb.observability import trace
from plumb_dev.testing.drabuilders import device, make_claim
from tests.support.dra_world import NS, DraWorld
from tests.support.fakes import FakeApi
from tests.support.log_capture import Lines


async def test_a_device_written_for_a_pod_whose_binding_failed_is_not_given_again(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    dropped = k8s_client.TransportError("the server closed the connection")
    world = DraWorld(json_lines, bindings=FakeApi(dropped))
    world.nodes("node-a", "node-b")
    world.device_class("gpu")
    world.publish("node-a", device("gpu-0"))
    for name in ("first", "second"):
        world.claim(make_claim(name, NS).request("gpu", "gpu"))
    world.pod("p0", "first")
    await world.decide()
    assert world.last("p0").result == trace.BIND_FAILED
    assert world.api.claims[f"{NS}/first"]["status"]["allocation"]  # PreBind wrote it
    world.pod("p1", "second")  # decided before the watch shows the first claim allocated
    await world.decide()
    second = world.last("p1")
    assert second.result == trace.UNSCHEDULABLE, second.devices
    assert second.message.startswith("0/2 nodes are available: 2 cannot allocate all claims.")
    # The first pod, tried again, goes to its device's node; the device is held once.
    await world.settle()
    assert (world.last("p0").result, world.last("p0").node) == (trace.SCHEDULED, "node-a")
    holders = [
        key
        for key, claim in world.api.claims.items()
        if (claim.get("status") or {}).get("allocation")
    ]
    assert holders == [f"{NS}/first"]
