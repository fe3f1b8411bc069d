"""Claim pods that no node takes, under plumb and under the real kube-scheduler on the same
control plane, and the FailedScheduling text each gets: the only node with the device lacks
cpu, the request names a class that does not exist (until it does), a selector fails at run
time.

The harness is test_dra_selection.py's. The DynamicResources filter's verdicts are
UnschedulableAndUnresolvable, so preemption searches only the nodes another filter rejected;
its PostFilter adds "still not schedulable" when it found no claim to deallocate (up to
v1.36; v1.37 adds nothing), before DefaultPreemption's words (``dra_stage.post_filter``).

State (issue 27): every test here passes under kube-scheduler v1.37.2 and v1.34.4; under plumb
they fail until it allocates claims.
"""

from __future__ import annotations

import pytest

from plumb_dev.testing import builders, draclient
from tests.support import side_by_side
from tests.support.dra_stage import (  # noqa: F401
    CANNOT_ALLOCATE,
    Stage,
    dra_fixture,
    model,
    not_helpful,
    without_victims,
)
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.dra]


def test_the_only_node_with_the_device_lacks_cpu(
    kube_minor: int, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")
    _, small = dra.two_nodes(scheduler, roomy=[model("t4")], small=[model("a100")])
    # Small is half full (2 of its 4 cpu), with a pod of the same priority.
    busy = dra.make_pod(scheduler, "busy", cpu="2").node_selector(builders.HOSTNAME_LABEL, small)
    assert dra.schedule(busy, cluster_nodes=None) == small

    dra.new_claim("a100", gpu, dra.model_is("a100"))
    # 3 cpu: roomy has them but no A100; small has the A100 but 2 cpu free. Small's verdict
    # is NodeResourcesFit's (it runs first), which evicting pods could cure: preemption
    # searches small and finds no pod of lower priority; roomy's is not helpful.
    assert dra.run(scheduler, "big", "a100", cpu="3") is None
    histogram = f"0/2 nodes are available: 1 Insufficient cpu, 1 {CANNOT_ALLOCATE}."
    assert dra.failed("big") == without_victims(kube_minor, histogram, 2, searched=1)
    assert draclient.allocated(dra.claim("a100")) == []

    # More than small has at all: NodeResourcesFit's verdict is unresolvable too.
    assert dra.run(scheduler, "huge", "a100", cpu="6") is None
    assert dra.failed("huge") == not_helpful(kube_minor, histogram, 2)


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_request_for_a_missing_class_waits_until_the_class_exists(
    kube_minor: int, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    _, small = dra.two_nodes(scheduler, roomy=[model("t4")], small=[model("a100")])

    # PreFilter refuses the pod as a whole: the message is its words, not a node histogram.
    missing = dra.class_name("a100")
    assert dra.run(scheduler, "early", dra.new_claim("a100", missing)) is None
    histogram = f"0/2 nodes are available: request gpu: device class {missing} does not exist."
    message = dra.failed("early")
    # PreFilter stopped before it kept the pod's claims: up to v1.36 DynamicResources'
    # PostFilter says so, as for a pod without claims.
    assert message == not_helpful(kube_minor, histogram, 2, dynamic=side_by_side.NO_CLAIMS)

    # A class added wakes the pod.
    assert dra.device_class("a100", dra.model_is("a100")) == missing
    assert dra.bound("early") == small
    assert dra.devices("a100") == [(dra.driver, small, "gpu-0")]


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_selector_that_fails_on_a_device_stops_the_attempt(
    kube_minor: int, namespace: str, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")
    _, small = dra.two_nodes(scheduler, small=[model("a100")])

    # No device of small has the attribute: CEL's "no such key" is an error, not a verdict.
    broken = f'{dra.cel("memory")} == "80Gi"'
    dra.new_claim("broken", gpu, broken)
    pod = dra.claim_pod(scheduler, "broken", "broken")
    assert dra.schedule(pod, cluster_nodes=None) is None
    message = dra.failed("broken")
    # The filter's error ends the attempt (retried with backoff); v1.37 names the device and
    # adds CEL's hint.
    where = f"claim {namespace}/broken: selector #0"
    error = "CEL runtime error: no such key: memory"
    if kube_minor >= 37:
        device = f"{dra.driver}/{small}/gpu-0"
        hint = (
            "consider using CEL optional chaining (.? followed by orValue()) or guarding the "
            "check with has() for optional fields"
        )
        expected = f"{where} on device {device}: {error}. {hint}"
    else:
        expected = f"{where}: {error}"
    assert message == f'running "DynamicResources" filter plugin: {expected}'
