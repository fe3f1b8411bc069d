"""A pod's requests that a DeviceClass may back (extended resources backed by DRA), as
kube-scheduler names the requests of the claim it makes for them: the container's place among
init and app containers, the resource's among the container's sorted request names."""

from __future__ import annotations

import json
from typing import Any

from plumb.backend.cache import codec
from plumb.backend.records import draobjects, objects
from plumb_dev.testing.builders import make_pod


def _asks(requests: dict[str, int]) -> dict[str, Any]:
    """Requests for PodBuilder.init (typed apart from its keyword flags)."""
    return requests


GPU = "example.com/gpu"
TPU = f"{draobjects.IMPLICIT_EXTENDED_PREFIX}tpu"


def test_which_resource_names_a_class_may_back() -> None:
    assert draobjects.device_backed_name(GPU)
    assert draobjects.device_backed_name(TPU)
    for native in ("cpu", "memory", "hugepages-2Mi", "kubernetes.io/batch", "requests.x/y"):
        assert not draobjects.device_backed_name(native), native


def test_each_container_keeps_its_device_requests_and_their_places() -> None:
    body = (
        make_pod("p")
        .req(cpu="1", memory="1Gi", **{GPU: 2})
        .init("load", **_asks({GPU: 1}))
        .init("proxy", sidecar=True, **_asks({TPU: 1}))
        .container("plain", cpu="1")
        .obj()
    )
    pod = objects.parse_pod(body)
    assert pod.device_requests == (
        objects.ContainerDeviceRequests(index=0, name="load", init=True, requests=((GPU, 0, 1),)),
        objects.ContainerDeviceRequests(index=1, name="proxy", init=False, requests=((TPU, 0, 1),)),
        # cpu, example.com/gpu, memory: the GPU second.
        objects.ContainerDeviceRequests(index=2, name="main", init=False, requests=((GPU, 1, 2),)),
    )


def test_a_pod_asking_for_no_such_resource_keeps_nothing() -> None:
    assert objects.parse_pod(make_pod("p").req(cpu="1", memory="1Gi").obj()).device_requests == ()


def test_they_survive_a_snapshot_dump() -> None:
    # plumb replay decides a dumped pod again: its claim's requests must be named the same.
    pod = objects.parse_pod(make_pod("p").req(**{GPU: 2}).init("load", **_asks({GPU: 1})).obj())
    encoded = json.loads(json.dumps(codec.encode(pod)))
    assert codec.decode(objects.PodInfo, encoded).device_requests == pod.device_requests
