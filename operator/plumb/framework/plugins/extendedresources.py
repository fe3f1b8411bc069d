"""Extended resources backed by DRA: a pod's extended resource (``example.com/gpu``, or a class's
implicit ``deviceclass.resource.kubernetes.io/<class>``) that a DeviceClass maps is met from
devices on a node whose allocatable has none of it, in a ResourceClaim the scheduler makes for
the pod, as kube-scheduler's DynamicResources does with DRAExtendedResource on (v1.36 beta, v1.37
GA; plugins/dynamicresources/extendeddynamicresources.go). Pure: the writes are
claimreservations.py's.

- PreFilter (``prefilter``): a pod asking for any resource a class maps gets an in-memory claim
  "<extended-resources>" (no requests yet), or the claim an earlier cycle made for it if one
  is left (annotated ``resource.kubernetes.io/extended-resource-claim: "true"``, owned by the
  pod), which Filter then refuses everywhere so PostFilter deletes it.
- Filter (``on_node``): per node, the resources its allocatable has none of go to devices, one
  request per container and resource ("container-<i>-request-<j>", ExactCount of the
  container's count; init containers reuse what later containers ask first); the others are
  NodeResourcesFit's (compiling.py lets that plugin pass a class-mapped resource a node has
  none of).
- Reserve, PreBind: the node's claim allocated with the pod's other claims (dynamicresources.py),
  then created (``creation_body``: ``<pod>-extended-resources-`` and five characters, owned by
  the pod), allocated and reserved, and the pod's ``status.extendedResourceClaimStatus``
  written (``status_patch``); Unreserve and PostFilter delete a claim so made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from plumb.backend.cache import dra
from plumb.backend.records import draobjects, objects

# The claim's name until PreBind creates it (specialClaimInMemName: not a valid object name).
IN_MEMORY = "<extended-resources>"
# Filter's words (UnschedulableAndUnresolvable): a claim left by an earlier cycle, and an
# extended resource neither the node's allocatable nor a class has (NodeResourcesFit, which
# runs first, says "Insufficient <resource>" there unless the resource is ignored).
STALE = "cannot schedule extended resource claim"
CANNOT_FIT = "cannot fit resource"
# PostFilter's, after deleting a claim an earlier cycle left (every release that has it).
DELETED = "deletion of ResourceClaim completed"
REQUEST_NAME = "container-{index}-request-{place}"


@dataclasses.dataclass(frozen=True, slots=True)
class RequestMapping:
    """One entry of the pod's status.extendedResourceClaimStatus.requestMappings."""

    container: str
    resource: str
    request: str

    def body(self) -> dict[str, str]:
        return {
            "containerName": self.container,
            "resourceName": self.resource,
            "requestName": self.request,
        }


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class NodeClaim:
    """The claim a node needs for the pod's extended resources (its requests for the
    resources the node's allocatable lacks), and the pod's request mappings."""

    claim: draobjects.ResourceClaim
    mappings: tuple[RequestMapping, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PodResources:
    """PreFilter's state for a pod whose extended resources a class maps: the pod's totals of
    every resource a class may back (a class or not), the classes backing them, and the
    claim an earlier cycle made for it (None: the in-memory one is used)."""

    pod: objects.PodInfo
    totals: Mapping[str, int]
    classes: Mapping[str, draobjects.DeviceClass]
    stale: draobjects.ResourceClaim | None = None
    # The node claims built so far, by the resources going to devices (nodes alike share one).
    _built: dict[frozenset[str], NodeClaim] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )


def prefilter(pod: objects.PodInfo, store: dra.DraStore) -> PodResources | None:
    """preFilterExtendedResources: None when no resource the pod asks for is mapped by a class
    (the plugin leaves the pod alone for them)."""
    if not pod.device_requests:
        return None
    totals = {
        name: amount
        for name, amount in pod.requests.items()
        if amount and draobjects.device_backed_name(name)
    }
    classes = {name: found for name in totals if (found := store.extended_class(name)) is not None}
    if not classes:
        return None
    return PodResources(
        pod=pod, totals=totals, classes=classes, stale=store.extended_claim(pod.uid)
    )


def on_node(resources: PodResources, node: objects.NodeInfo) -> NodeClaim | str | None:
    """filterExtendedResources on one node: the claim to allocate there, None when devices
    serve none of the pod's resources there (nothing to allocate), or the node's failure.

    For a pod that names claims of its own and has nothing for devices here, kube-scheduler
    still allocates an empty claim, whose PreBind then fails for want of request mappings;
    plumb allocates none (docs/dra.md, "Extended resources backed by DRA")."""
    stale = resources.stale
    if stale is not None and stale.spec.requests:
        return STALE
    needs = []
    for name in sorted(resources.totals):
        allocatable = node.allocatable.get(name)
        if name in resources.classes and not allocatable:
            needs.append(name)
        elif allocatable is None:
            return CANNOT_FIT
    if not needs or (stale is not None and stale.allocation is not None):
        return None
    key = frozenset(needs)
    built = resources._built.get(key)
    if built is None:
        built = _node_claim(resources, needs)
        resources._built[key] = built
    return built


def _node_claim(resources: PodResources, needs: list[str]) -> NodeClaim:
    pod = resources.pod
    requests, mappings = requests_and_mappings(pod, needs, resources.classes)
    base = resources.stale
    claim = draobjects.ResourceClaim(
        namespace=pod.namespace,
        name=IN_MEMORY if base is None else base.name,
        # A stand-in for the temporary UID kube-scheduler draws: fixed, so a replay decides
        # the same (consumable capacity derives its share ids from it).
        uid=f"{pod.uid}/extended-resources" if base is None else base.uid,
        spec=draobjects.ClaimSpec(requests=requests),
        owner_uid=pod.uid,
        extended=True,
    )
    return NodeClaim(claim=claim, mappings=mappings)


def requests_and_mappings(
    pod: objects.PodInfo,
    resources: list[str],
    classes: Mapping[str, draobjects.DeviceClass],
) -> tuple[tuple[draobjects.DeviceRequest, ...], tuple[RequestMapping, ...]]:
    """createRequestsAndMappings: the claim's requests for ``resources`` (sorted by name) and
    which request serves each container's resource.

    A container that keeps running (an app container, a sidecar) gets a request of its own
    count. An init container that runs to completion first counts what the long-running
    containers after it ask (it runs before them, on their devices), and asks only for the
    rest; of those init containers' requests only the largest is kept, and the others map to
    it (they run one after another)."""
    requests: list[draobjects.DeviceRequest] = []
    mappings: list[RequestMapping] = []
    for resource in sorted(resources):
        device_class = classes[resource].name
        lasting: dict[int, tuple[str, int]] = {}  # container index -> (request, count)
        lasting_maps: list[RequestMapping] = []
        for container in pod.device_requests:
            asked = _asked(container, resource)
            if container.init or asked is None:
                continue
            name = REQUEST_NAME.format(index=container.index, place=asked[0])
            lasting[container.index] = (name, asked[1])
            lasting_maps.append(RequestMapping(container.name, resource, name))
        largest: tuple[str, int] | None = None
        brief: set[str] = set()
        brief_maps: list[RequestMapping] = []
        for container in pod.device_requests:
            asked = _asked(container, resource)
            if not container.init or asked is None:
                continue
            place, count = asked
            covered = 0
            for index in sorted(i for i in lasting if i >= container.index):
                name, served = lasting[index]
                covered += served
                brief_maps.append(RequestMapping(container.name, resource, name))
                if covered >= count:
                    break
            if covered >= count:
                continue
            name = REQUEST_NAME.format(index=container.index, place=place)
            brief.add(name)
            brief_maps.append(RequestMapping(container.name, resource, name))
            if largest is None or largest[1] < count - covered:
                largest = (name, count - covered)
        if largest is not None and len(brief) > 1:
            brief_maps = [
                dataclasses.replace(m, request=largest[0]) if m.request in brief else m
                for m in brief_maps
            ]
        kept = [largest] if largest is not None else []
        kept += [lasting[index] for index in sorted(lasting)]
        requests += (_exactly(name, device_class, count) for name, count in kept)
        mappings += lasting_maps + brief_maps
    requests.sort(key=lambda r: r.name)
    return tuple(requests), tuple(mappings)


def _asked(container: objects.ContainerDeviceRequests, resource: str) -> tuple[int, int] | None:
    """(place among the container's request names, count) of the resource, if it asks."""
    for name, place, count in container.requests:
        if name == resource:
            return place, count
    return None


def _exactly(name: str, device_class: str, count: int) -> draobjects.DeviceRequest:
    spec = draobjects.RequestSpec(
        device_class=device_class, mode=draobjects.EXACT_COUNT, count=count
    )
    return draobjects.DeviceRequest(name=name, exactly=spec)


def pending_key(pod: objects.PodInfo) -> str:
    """The key Reserve assumes the in-memory claim's allocation under, until PreBind has
    written the claim (one per pod: two pods' in-memory claims share a name)."""
    return f"{pod.namespace}/{IN_MEMORY}/{pod.uid}"


def creation_body(pod: objects.PodInfo, claim: draobjects.ResourceClaim) -> dict[str, Any]:
    """The claim as PreBind creates it (createExtendedResourceClaimInAPI): named by the API
    server from ``<pod>-extended-resources-``, owned by the pod, annotated, its requests."""
    return {
        "apiVersion": f"{draobjects.GROUP}/{draobjects.VERSION}",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": f"{pod.name}-extended-resources-",
            "namespace": pod.namespace,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod.name,
                    "uid": pod.uid,
                    "controller": True,
                }
            ],
            "annotations": {draobjects.EXTENDED_CLAIM_ANNOTATION: "true"},
        },
        "spec": {"devices": {"requests": [_request_body(r) for r in claim.spec.requests]}},
    }


def _request_body(request: draobjects.DeviceRequest) -> dict[str, Any]:
    assert request.exactly is not None
    exactly = request.exactly
    return {
        "name": request.name,
        "exactly": {
            "deviceClassName": exactly.device_class,
            "allocationMode": exactly.mode,
            "count": exactly.count,
        },
    }


def status_patch(mappings: tuple[RequestMapping, ...], claim_name: str) -> dict[str, Any]:
    """The pod status patch naming the claim made (patchPodExtendedResourceClaimStatus)."""
    return {
        "status": {
            "extendedResourceClaimStatus": {
                "requestMappings": [m.body() for m in mappings],
                "resourceClaimName": claim_name,
            }
        }
    }
