"""Claims and preemption, under plumb and under the real kube-scheduler on the same control
plane: an idle claim allocated where the pod cannot go is deallocated (DynamicResources'
PostFilter, which runs before DefaultPreemption) and allocated again where it can; a claim pod
preempts for the cpu of its device's node; no pod is preempted for its devices (the
DynamicResources filter's verdict is one preemption cannot cure).

The harness is test_dra_selection.py's for the devices and test_preemption_parity.py's for
the preemption (``preemption_scenes.Scene``: occupants placed by the scheduler under test,
victims' deletion finished as a kubelet would).

State (issue 27): every test here passes under kube-scheduler v1.37.2 and v1.34.4; under plumb
they fail until it allocates claims.
"""

from __future__ import annotations

import pytest

from plumb.framework.plugins import nodeaffinity
from plumb_dev.testing import builders, draclient
from plumb_dev.testing import drabuilders as drab
from tests.support import side_by_side
from tests.support.dra_stage import (  # noqa: F401
    BOTH_CANNOT_ALLOCATE,
    CANNOT_ALLOCATE,
    DEALLOCATED,
    NOT_AVAILABLE,
    Stage,
    dra_fixture,
    model,
    not_helpful,
)
from tests.support.preemption_scenes import (  # noqa: F401
    Occupant,
    PreemptionOutcome,
    Scene,
    scene_fixture,
)
from tests.support.preemption_steps import first_seen
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.dra]


def _messages(dra: Stage, name: str) -> list[str]:
    """The pod's distinct FailedScheduling messages, in the order they were first posted."""
    uid = dra.pod(name)["metadata"]["uid"]
    first: dict[str, object] = {}
    for event in sorted(dra.client.events(dra.namespace, name), key=first_seen):
        if event.get("reason") != side_by_side.FAILED_SCHEDULING:
            continue
        if (event.get("involvedObject") or {}).get("uid") == uid:
            first.setdefault(str(event.get("message")), None)
    return list(first)


def test_an_idle_claim_allocated_elsewhere_is_deallocated_before_preemption(
    kube_minor: int, namespace: str, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    roomy, small = dra.roomy_and_small()
    gpu = dra.device_class("gpu")
    dra.publish(roomy, drab.device("gpu-0"))
    dra.publish(small, drab.device("gpu-0"))
    # A claim left allocated on roomy by a pod that is gone: nothing reserves it.
    dra.new_claim("idle", gpu)
    on_roomy = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [roomy]}]}
        ]
    }
    result = {"request": "gpu", "driver": dra.driver, "pool": roomy, "device": "gpu-0"}
    allocation = {"devices": {"results": [result]}, "nodeSelector": on_roomy}
    dra.api.write_claim_status(namespace, "idle", {"allocation": allocation})
    dra.in_view(scheduler, [roomy, small])

    # The pod must go to small: roomy fails NodeAffinity, small the allocation's node
    # selector. DynamicResources' PostFilter deallocates the claim (nothing reserves it),
    # DefaultPreemption then finds no node worth a look; the deallocation wakes the pod,
    # whose claim is then allocated on small.
    pinned = dra.claim_pod(scheduler, "pinned", "idle")
    dra.create(pinned.node_selector(builders.HOSTNAME_LABEL, small))
    assert dra.bound("pinned") == small
    assert dra.devices("idle") == [(dra.driver, small, "gpu-0")]
    histogram = f"0/2 nodes are available: 1 {nodeaffinity.MISMATCH}, 1 {NOT_AVAILABLE}."
    first = not_helpful(kube_minor, histogram, 2, dynamic=DEALLOCATED)
    assert _messages(dra, "pinned") == [first]


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_claim_pod_preempts_for_cpu_on_the_node_of_its_device(scene: Scene, dra: Stage) -> None:
    gpu = dra.device_class("gpu")
    roomy, small = dra.two_nodes(scene.scheduler, roomy=[model("t4")], small=[model("a100")])
    scene.nodes.extend([roomy, small])
    scene.stage([Occupant("low", small, priority=10, cpu="3")])

    dra.new_claim("a100", gpu, dra.model_is("a100"))
    # 2 cpu and the A100: small has the device and 1 cpu free, roomy the cpu and no A100.
    # Evicting "low" makes room on small; roomy is not worth a look.
    outcome = scene.preempt(scene.preemptor("2").resource_claim("gpu", claim="a100"), victims=1)
    histogram = f"0/2 nodes are available: 1 Insufficient cpu, 1 {CANNOT_ALLOCATE}."
    assert outcome == scene.preempted(deleted={"low"}, node=small, histogram=histogram)
    assert dra.devices("a100") == [(dra.driver, small, "gpu-0")]
    assert draclient.reserved_for(dra.claim("a100")) == ["preemptor"]


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_no_pod_is_preempted_for_the_devices_it_holds(
    kube_minor: int, scene: Scene, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")
    roomy, small = dra.two_nodes(scene.scheduler, roomy=[model("t4")], small=[model("a100")])
    scene.nodes.extend([roomy, small])

    for name in ("held", "wanted"):
        dra.new_claim(name, gpu, dra.model_is("a100"))
    holder = scene.pod("holder", "1", 10).node_selector(builders.HOSTNAME_LABEL, small)
    scene.stage([holder.resource_claim("gpu", claim="held")])
    assert dra.devices("held") == [(dra.driver, small, "gpu-0")]

    # The only A100 is held by a pod of lower priority, yet no node is worth a look: the
    # filter's "cannot allocate" is unresolvable, and preemption does not count devices.
    outcome = scene.refused(scene.preemptor("1").resource_claim("gpu", claim="wanted"))
    message = not_helpful(kube_minor, BOTH_CANNOT_ALLOCATE, 2)
    assert outcome == PreemptionOutcome(message=message)
    assert draclient.allocated(dra.claim("wanted")) == []
