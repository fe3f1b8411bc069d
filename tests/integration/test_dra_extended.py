"""Extended resources backed by DRA, under plumb and under the real kube-scheduler on the same
control plane: a pod asks for ``example.com/gpu`` (or a class's implicit
``deviceclass.resource.kubernetes.io/<class>``) and names no claim; where a node's device
plugin has the resource NodeResourcesFit counts it, where the node has none and a DeviceClass
maps the name, the scheduler allocates devices for it in a claim of its own making.

DRAExtendedResource is alpha (off) in v1.34 and v1.35, beta from v1.36, GA in v1.37: up to
v1.35 the API server drops the class's extendedResourceName and such a pod is only ever
judged by NodeResourcesFit; the tests show both.

State (issue 27): every test here passes under kube-scheduler v1.37.2 and v1.34.4; under plumb
the v1.37 expectations fail until it allocates claims (the v1.34 ones pass: NodeResourcesFit).
"""

from __future__ import annotations

import pytest

from plumb_dev.testing import drabuilders as drab
from plumb_dev.testing import draclient, kube
from tests.support import side_by_side
from tests.support.dra_stage import CANNOT_ALLOCATE, Stage, dra_fixture, not_helpful  # noqa: F401
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.dra]

EXTENDED_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def _made_for(dra: Stage, pod: str) -> list[kube.JSON]:
    """The claims the scheduler made for the pod's extended resources."""
    return [
        c
        for c in dra.api.claims(dra.namespace)
        if (c["metadata"].get("annotations") or {}).get(EXTENDED_ANNOTATION) == "true"
        and [o["name"] for o in c["metadata"].get("ownerReferences") or []] == [pod]
    ]


def test_an_extended_resource_comes_from_a_device_plugin_or_from_devices(
    kube_minor: int, scheduler: side_by_side.Runner, words: side_by_side.Words, dra: Stage
) -> None:
    resource = f"gpu-{dra.tag}.example.com/gpu"
    # Roomy has one through its device plugin (allocatable), small two devices in a slice.
    roomy, small = dra.roomy_and_small(plugin={resource: "1"})
    gpu = drab.make_class(dra.class_name("gpu")).driver(dra.driver).extended_resource(resource)
    kept = dra.api.create_class(gpu.obj())
    backed = kube_minor >= 36
    assert kept["spec"].get("extendedResourceName") == (resource if backed else None)
    dra.publish(small, drab.device("gpu-0"), drab.device("gpu-1"))
    dra.in_view(scheduler, [roomy, small])

    def pod(name: str, count: int) -> str | None:
        return dra.schedule(dra.make_pod(scheduler, name, extended={resource: count}))

    # Both nodes could serve the first (from v1.36); the resources favour roomy, whose device
    # plugin serves it: no claim.
    assert pod("plugin", 1) == roomy
    assert _made_for(dra, "plugin") == []
    # Roomy's one is taken; small serves the second from its devices, in a claim the
    # scheduler makes (up to v1.35 no node can).
    assert pod("devices", 1) == (small if backed else None)
    if not backed:
        histogram = f"0/2 nodes are available: 2 Insufficient {resource}."
        assert dra.failed("devices") == words.without_victims(histogram, 2, searched=1)
        return
    # The claim: named after the pod, owned by it, one request per container and resource
    # ("container-<index among init and app containers>-request-<index of the resource among
    # the container's sorted request names>": cpu, the GPU, memory), allocated and reserved as
    # any claim; the pod's status maps the container's resource to the request.
    (claim,) = _made_for(dra, "devices")
    stored = dra.pod("devices")
    name = claim["metadata"]["name"]
    request = "container-0-request-1"
    assert name.startswith("devices-extended-resources-")
    assert claim["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "devices",
            "uid": stored["metadata"]["uid"],
            "controller": True,
        }
    ]
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    exactly = {"deviceClassName": dra.class_name("gpu"), "allocationMode": "ExactCount", "count": 1}
    assert claim["spec"] == {"devices": {"requests": [{"name": request, "exactly": exactly}]}}
    assert draclient.allocated(claim) == [
        draclient.DeviceTaken(request, dra.driver, small, "gpu-0")
    ]
    assert draclient.reserved_for(claim) == ["devices"]
    assert stored["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [
            {"containerName": "main", "resourceName": resource, "requestName": request}
        ],
        "resourceClaimName": name,
    }

    # Two more: roomy's device plugin has one at all, small one device left.
    assert pod("more", 2) is None
    # More than roomy has at all: both verdicts are unresolvable.
    histogram = f"0/2 nodes are available: 1 Insufficient {resource}, 1 {CANNOT_ALLOCATE}."
    assert dra.failed("more") == not_helpful(kube_minor, histogram, 2)
    assert _made_for(dra, "more") == []


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_class_s_implicit_extended_resource_name(
    kube_minor: int, scheduler: side_by_side.Runner, words: side_by_side.Words, dra: Stage
) -> None:
    tpu = dra.device_class("tpu")
    resource = f"{drab.IMPLICIT_EXTENDED_PREFIX}{tpu}"
    tpus = [drab.device("tpu-0"), drab.device("tpu-1")]
    _, small = dra.two_nodes(scheduler, roomy=tpus[:1], small=tpus)

    # Two TPUs: only small has them (roomy one). The request is the container's second (cpu,
    # the TPUs, memory).
    pair = dra.make_pod(scheduler, "pair", extended={resource: 2})
    backed = kube_minor >= 36
    assert dra.schedule(pair) == (small if backed else None)
    if not backed:
        histogram = f"0/2 nodes are available: 2 Insufficient {resource}."
        assert dra.failed("pair") == words.without_victims(histogram, 2, searched=0)
        return
    (claim,) = _made_for(dra, "pair")
    assert draclient.allocated(claim) == [
        draclient.DeviceTaken("container-0-request-1", dra.driver, small, "tpu-0"),
        draclient.DeviceTaken("container-0-request-1", dra.driver, small, "tpu-1"),
    ]
