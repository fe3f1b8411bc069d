"""Extended resources backed by DRA: the claim kube-scheduler makes for a pod's class-mapped
extended resources (its requests and the pod's request mappings, createRequestsAndMappings in
extendeddynamicresources.go), which nodes need it, and what PreBind sends."""

from __future__ import annotations

from typing import Any

from plumb.backend.cache import dra
from plumb.backend.records import draobjects, objects
from plumb.framework.plugins import extendedresources as extended
from plumb_dev.testing import drabuilders as drab
from plumb_dev.testing.builders import PodBuilder, make_pod
from tests.support.dra_bodies import claim_body


def _asks(requests: dict[str, int]) -> dict[str, Any]:
    """Requests for PodBuilder.init (typed apart from its keyword flags)."""
    return requests


GPU = "example.com/gpu"
NIC = "example.com/nic"
TPU = f"{draobjects.IMPLICIT_EXTENDED_PREFIX}tpu"


def pod_of(builder: PodBuilder, uid: str = "pod-uid") -> objects.PodInfo:
    return objects.parse_pod(builder.uid(uid).obj())


def store_with(*classes: drab.ClassBuilder) -> dra.DraStore:
    store = dra.DraStore()
    for body in classes:
        obj = body.obj()
        store.on_class(obj, obj["metadata"]["name"])
    return store


def gpus() -> drab.ClassBuilder:
    return drab.make_class("gpu").driver("gpu.example.com").extended_resource(GPU)


def node(**allocatable: int) -> objects.NodeInfo:
    return objects.NodeInfo(name="node-a", allocatable={"cpu": 4000, **allocatable})


def plan(builder: PodBuilder, *resources: str) -> list[tuple[str, str, int, list[str]]]:
    """(request, class, count, mapped as "container=resource") of the claim for ``resources``."""
    pod = pod_of(builder)
    classes = {
        GPU: draobjects.DeviceClass(name="gpu"),
        NIC: draobjects.DeviceClass(name="nic"),
        TPU: draobjects.DeviceClass(name="tpu"),
    }
    requests, mappings = extended.requests_and_mappings(pod, list(resources), classes)
    out = []
    for request in requests:
        assert request.exactly is not None
        mapped = [f"{m.container}={m.resource}" for m in mappings if m.request == request.name]
        out.append((request.name, request.exactly.device_class, request.exactly.count, mapped))
    return out


# The requests and mappings ------------------------------------------------------------------


def test_one_container_names_its_request_by_the_place_of_the_resource_among_its_requests() -> None:
    # cpu, example.com/gpu, memory: the GPU is the container's second request.
    builder = make_pod("trainer").req(cpu="1", memory="1Gi", **{GPU: 2})
    assert plan(builder, GPU) == [("container-0-request-1", "gpu", 2, ["main=" + GPU])]


def test_each_long_running_container_has_a_request_of_its_own() -> None:
    builder = (
        make_pod("pair")
        .req(**{GPU: 1})
        .container("helper", cpu="1", **{GPU: 2})
        .init("proxy", sidecar=True, **_asks({GPU: 1}))
    )
    # The sidecar is container 0, main 1, helper 2 (init containers first).
    assert plan(builder, GPU) == [
        ("container-0-request-0", "gpu", 1, ["proxy=" + GPU]),
        ("container-1-request-0", "gpu", 1, ["main=" + GPU]),
        ("container-2-request-1", "gpu", 2, ["helper=" + GPU]),
    ]


def test_an_init_container_uses_the_devices_of_the_containers_after_it_first() -> None:
    # The init container needs 3; main, which runs after it, has 2: it asks for 1 more.
    builder = make_pod("warm").req(**{GPU: 2}).init("load", **_asks({GPU: 3}))
    assert plan(builder, GPU) == [
        ("container-0-request-0", "gpu", 1, ["load=" + GPU]),
        ("container-1-request-0", "gpu", 2, ["main=" + GPU, "load=" + GPU]),
    ]
    # Covered whole by main's: no request of its own.
    builder = make_pod("warm").req(**{GPU: 2}).init("load", **_asks({GPU: 2}))
    assert plan(builder, GPU) == [
        ("container-1-request-0", "gpu", 2, ["main=" + GPU, "load=" + GPU]),
    ]


def test_of_several_init_containers_the_largest_request_serves_them_all() -> None:
    # They run one after the other: one request of the largest count, every one mapped to it.
    builder = make_pod("steps").init("one", **_asks({GPU: 1})).init("two", **_asks({GPU: 3}))
    assert plan(builder, GPU) == [
        ("container-1-request-0", "gpu", 3, ["one=" + GPU, "two=" + GPU]),
    ]


def test_requests_are_sorted_by_name_across_resources_as_strings() -> None:
    builder = make_pod("many").req(**{NIC: 1, GPU: 1})
    for i in range(10):
        builder.container(f"c{i}", **{GPU: 1})
    found = plan(builder, NIC, GPU)
    names = [name for name, _, _, _ in found]
    assert names == sorted(names)
    assert names[:3] == ["container-0-request-0", "container-0-request-1", "container-1-request-0"]
    assert "container-10-request-0" in names[:4]  # "10" before "2", as Go sorts strings
    assert [(name, cls) for name, cls, _, _ in found[:2]] == [
        ("container-0-request-0", "gpu"),
        ("container-0-request-1", "nic"),
    ]


# PreFilter and Filter ------------------------------------------------------------------------


def test_a_pod_no_class_maps_is_left_alone() -> None:
    store = store_with(gpus())
    assert extended.prefilter(pod_of(make_pod("p").req(cpu="1")), store) is None
    assert extended.prefilter(pod_of(make_pod("p").req(**{NIC: 1})), store) is None


def test_a_class_maps_its_extended_resource_name_and_its_implicit_one() -> None:
    store = store_with(gpus(), drab.make_class("tpu"))
    found = extended.prefilter(pod_of(make_pod("p").req(**{GPU: 1, TPU: 2, NIC: 1})), store)
    assert found is not None
    assert {name: c.name for name, c in found.classes.items()} == {GPU: "gpu", TPU: "tpu"}
    assert found.totals == {GPU: 1, TPU: 2, NIC: 1}


def test_devices_serve_only_what_the_nodes_allocatable_lacks() -> None:
    store = store_with(gpus(), drab.make_class("tpu"))
    resources = extended.prefilter(pod_of(make_pod("p").req(**{GPU: 1, TPU: 1})), store)
    assert resources is not None
    # A device plugin gives the node GPUs: only the TPU (the first of the container's requests
    # by name) goes to devices.
    made = extended.on_node(resources, node(**{GPU: 4}))
    assert isinstance(made, extended.NodeClaim)
    assert [r.name for r in made.claim.spec.requests] == ["container-0-request-0"]
    assert made.claim.name == extended.IN_MEMORY
    assert (made.claim.extended, made.claim.owner_uid) == (True, "pod-uid")
    # Allocatable of both: nothing for devices. Of neither: both.
    assert extended.on_node(resources, node(**{GPU: 4, TPU: 1})) is None
    made = extended.on_node(resources, node())
    assert isinstance(made, extended.NodeClaim)
    assert [m.resource for m in made.mappings] == [TPU, GPU]
    # A node reporting none (0) counts as having none: devices again.
    assert extended.on_node(resources, node(**{GPU: 0, TPU: 0})) == made


def test_an_extended_resource_no_class_maps_and_the_node_lacks_cannot_fit() -> None:
    store = store_with(gpus())
    resources = extended.prefilter(pod_of(make_pod("p").req(**{GPU: 1, NIC: 1})), store)
    assert resources is not None
    assert extended.on_node(resources, node()) == extended.CANNOT_FIT
    assert isinstance(extended.on_node(resources, node(**{NIC: 1})), extended.NodeClaim)


def test_a_claim_an_earlier_cycle_made_for_the_pod_fails_every_node() -> None:
    store = store_with(gpus())
    left = claim_body("p-extended-resources-x7k2q", owner="pod-uid")
    left["metadata"]["annotations"] = {draobjects.EXTENDED_CLAIM_ANNOTATION: "true"}
    store.on_claim(left, "ml", "p-extended-resources-x7k2q")
    resources = extended.prefilter(pod_of(make_pod("p", "ml").req(**{GPU: 1})), store)
    assert resources is not None
    assert resources.stale is not None
    assert resources.stale.name == "p-extended-resources-x7k2q"
    assert extended.on_node(resources, node()) == extended.STALE
    # Another pod's claim is not this one's.
    other = extended.prefilter(pod_of(make_pod("q", "ml").req(**{GPU: 1}), "q-uid"), store)
    assert other is not None
    assert other.stale is None


# What PreBind sends --------------------------------------------------------------------------


def test_the_claim_is_created_owned_by_the_pod_under_a_generated_name() -> None:
    pod = pod_of(make_pod("devices", "ml").req(cpu="1", memory="1Gi", **{GPU: 1}))
    resources = extended.prefilter(pod, store_with(gpus()))
    assert resources is not None
    made = extended.on_node(resources, node())
    assert isinstance(made, extended.NodeClaim)
    body = extended.creation_body(pod, made.claim)
    assert body["metadata"] == {
        "generateName": "devices-extended-resources-",
        "namespace": "ml",
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "devices",
                "uid": "pod-uid",
                "controller": True,
            }
        ],
        "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
    }
    exactly = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}
    assert body["spec"] == {
        "devices": {"requests": [{"name": "container-0-request-1", "exactly": exactly}]}
    }
    assert extended.status_patch(made.mappings, "devices-extended-resources-x7k2q") == {
        "status": {
            "extendedResourceClaimStatus": {
                "requestMappings": [
                    {
                        "containerName": "main",
                        "resourceName": GPU,
                        "requestName": "container-0-request-1",
                    }
                ],
                "resourceClaimName": "devices-extended-resources-x7k2q",
            }
        }
    }


def test_two_pods_assume_their_in_memory_claims_apart() -> None:
    # Both claims are "<extended-resources>" until created: the allocations Reserve assumes
    # must not overwrite each other.
    first = pod_of(make_pod("a", "ml"), "uid-1")
    second = pod_of(make_pod("b", "ml"), "uid-2")
    assert extended.pending_key(first) != extended.pending_key(second)
