"""Chained builders for Dynamic Resource Allocation bodies (resource.k8s.io/v1): DeviceClasses,
ResourceSlices and their devices, ResourceClaims and ResourceClaimTemplates.

``make_slice("node-a-gpus", "gpu.example.com").node("node-a").devices(device("gpu-0")
.attr("model", "a100").capacity("memory", "80Gi"))``; ``make_claim("gpu", ns).request("gpu",
"gpu-class", selectors=['device.attributes["gpu.example.com"].model == "a100"'])``. The pod's
side (``spec.resourceClaims``) is ``builders.PodBuilder.resource_claim``. Bodies are plain
dicts, as the API server takes them; the records plumb parses them into are
``plumb.backend.records.draobjects``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Self

API_VERSION = "resource.k8s.io/v1"
EXACT_COUNT, ALL = "ExactCount", "All"
# The annotation the resourceclaim controller writes on a claim it made from a template, and
# the label a namespace needs before its claims may ask for admin access.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
# Implicit extended resource name of a DeviceClass (DRAExtendedResource): this prefix + name.
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"


def _attribute(value: bool | int | str, version: bool) -> dict[str, Any]:
    if version:
        return {"version": str(value)}
    # bool first: True is an int too.
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


class DeviceBuilder:
    """One device of a slice: ``device("gpu-0").attr("model", "a100").capacity("memory",
    "80Gi")``. Attribute and capacity names without a domain are in the driver's."""

    def __init__(self, name: str) -> None:
        self._body: dict[str, Any] = {"name": name}

    def attr(self, name: str, value: bool | int | str, *, version: bool = False) -> Self:
        """An attribute, typed by its Python value (bool, int, str); ``version=True``
        makes a string a semantic version."""
        self._body.setdefault("attributes", {})[name] = _attribute(value, version)
        return self

    def capacity(self, name: str, value: str, **policy: Any) -> Self:
        """A capacity (a quantity); ``policy`` is its requestPolicy (consumable capacity):
        ``default="1Gi", validRange={"min": "1Gi"}``."""
        entry: dict[str, Any] = {"value": value}
        if policy:
            entry["requestPolicy"] = dict(policy)
        self._body.setdefault("capacity", {})[name] = entry
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        self._body.setdefault("taints", []).append(taint)
        return self

    def consumes(self, counter_set: str, **counters: str) -> Self:
        """What the device takes from one of its slice's shared counter sets."""
        entry = {
            "counterSet": counter_set,
            "counters": {name: {"value": value} for name, value in counters.items()},
        }
        self._body.setdefault("consumesCounters", []).append(entry)
        return self

    def multiple_allocations(self) -> Self:
        """allowMultipleAllocations (consumable capacity): several claims may share it."""
        self._body["allowMultipleAllocations"] = True
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


def device(name: str) -> DeviceBuilder:
    return DeviceBuilder(name)


class SliceBuilder:
    """A ResourceSlice of one driver: by default the only slice (count 1, generation 1) of a
    pool named after the slice. Exactly one of node/node_selector/all_nodes must be set."""

    def __init__(self, name: str, driver: str) -> None:
        self._body: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {
                "driver": driver,
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            },
        }

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._body["spec"]
        return spec

    def pool(self, name: str, *, generation: int = 1, count: int = 1) -> Self:
        self._spec["pool"] = {"name": name, "generation": generation, "resourceSliceCount": count}
        return self

    def node(self, name: str) -> Self:
        """Node-local: the devices are reachable from that node only."""
        self._spec["nodeName"] = name
        return self

    def node_selector(self, *terms: Sequence[dict[str, Any]]) -> Self:
        """Reachable from the nodes matching any term (each a list of ``builders.expr``)."""
        self._spec["nodeSelector"] = {
            "nodeSelectorTerms": [{"matchExpressions": list(term)} for term in terms]
        }
        return self

    def all_nodes(self) -> Self:
        self._spec["allNodes"] = True
        return self

    def devices(self, *devices: DeviceBuilder | Mapping[str, Any]) -> Self:
        listed = self._spec.setdefault("devices", [])
        for entry in devices:
            listed.append(entry.obj() if isinstance(entry, DeviceBuilder) else dict(entry))
        return self

    def counters(self, name: str, **counters: str) -> Self:
        """One shared counter set (partitionable devices)."""
        entry = {"name": name, "counters": {key: {"value": v} for key, v in counters.items()}}
        self._spec.setdefault("sharedCounters", []).append(entry)
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


def make_slice(name: str, driver: str) -> SliceBuilder:
    return SliceBuilder(name, driver)


class ClassBuilder:
    """A DeviceClass: its CEL selectors (ANDed), opaque config, extended resource name."""

    def __init__(self, name: str) -> None:
        self._body: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {},
        }

    def selector(self, expression: str) -> Self:
        self._body["spec"].setdefault("selectors", []).append({"cel": {"expression": expression}})
        return self

    def driver(self, name: str) -> Self:
        """The usual first selector: devices of one driver."""
        return self.selector(f'device.driver == "{name}"')

    def config(self, driver: str, parameters: Mapping[str, Any]) -> Self:
        entry = {"opaque": {"driver": driver, "parameters": dict(parameters)}}
        self._body["spec"].setdefault("config", []).append(entry)
        return self

    def extended_resource(self, name: str) -> Self:
        """spec.extendedResourceName (DRAExtendedResource): pods asking for this extended
        resource get it from the class's devices."""
        self._body["spec"]["extendedResourceName"] = name
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


def make_class(name: str) -> ClassBuilder:
    return ClassBuilder(name)


def toleration(
    key: str = "",
    *,
    operator: str = "Equal",
    value: str = "",
    effect: str = "",
    seconds: int | None = None,
) -> dict[str, Any]:
    """A request's toleration of device taints; an empty key with Exists tolerates all."""
    body: dict[str, Any] = {"operator": operator}
    for name, text in (("key", key), ("value", value), ("effect", effect)):
        if text:
            body[name] = text
    if seconds is not None:
        body["tolerationSeconds"] = seconds
    return body


def _exact(
    device_class: str,
    selectors: Sequence[str],
    count: int | None,
    all_devices: bool,
    admin: bool,
    tolerations: Sequence[Mapping[str, Any]],
    capacity: Mapping[str, str] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class}
    if selectors:
        body["selectors"] = [{"cel": {"expression": text}} for text in selectors]
    if all_devices:
        body["allocationMode"] = ALL
    elif count is not None:
        body["allocationMode"] = EXACT_COUNT
        body["count"] = count
    if admin:
        body["adminAccess"] = True
    if tolerations:
        body["tolerations"] = [dict(t) for t in tolerations]
    if capacity:
        body["capacity"] = {"requests": dict(capacity)}
    return body


def subrequest(
    name: str,
    device_class: str,
    *,
    selectors: Sequence[str] = (),
    count: int | None = None,
    all_devices: bool = False,
    tolerations: Sequence[Mapping[str, Any]] = (),
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One alternative of a ``firstAvailable`` request, in the order of preference given."""
    body = _exact(device_class, selectors, count, all_devices, False, tolerations, capacity)
    return {"name": name, **body}


class ClaimSpecBuilder:
    """The spec.devices of a claim (or of a template's claim): requests, constraints, config."""

    def __init__(self) -> None:
        self._devices: dict[str, Any] = {"requests": []}

    def request(
        self,
        name: str,
        device_class: str,
        *,
        selectors: Sequence[str] = (),
        count: int | None = None,
        all_devices: bool = False,
        admin: bool = False,
        tolerations: Sequence[Mapping[str, Any]] = (),
        capacity: Mapping[str, str] | None = None,
    ) -> Self:
        """An ``exactly`` request: ``count`` devices (ExactCount; None leaves the mode and
        count to their defaults, one device), or ``all_devices`` (mode All)."""
        exactly = _exact(device_class, selectors, count, all_devices, admin, tolerations, capacity)
        self._devices["requests"].append({"name": name, "exactly": exactly})
        return self

    def first_available(self, name: str, *subrequests: Mapping[str, Any]) -> Self:
        """A prioritized list: the first subrequest that can be met is (``subrequest``)."""
        entry = {"name": name, "firstAvailable": [dict(s) for s in subrequests]}
        self._devices["requests"].append(entry)
        return self

    def match_attribute(self, attribute: str, *requests: str) -> Self:
        """All devices of ``requests`` (none named: of every request) share the attribute's
        value (a fully qualified name: ``gpu.example.com/numa``)."""
        return self._constraint("matchAttribute", attribute, requests)

    def distinct_attribute(self, attribute: str, *requests: str) -> Self:
        return self._constraint("distinctAttribute", attribute, requests)

    def _constraint(self, kind: str, attribute: str, requests: Sequence[str]) -> Self:
        constraint: dict[str, Any] = {kind: attribute}
        if requests:
            constraint["requests"] = list(requests)
        self._devices.setdefault("constraints", []).append(constraint)
        return self

    def config(self, driver: str, parameters: Mapping[str, Any], *requests: str) -> Self:
        entry: dict[str, Any] = {"opaque": {"driver": driver, "parameters": dict(parameters)}}
        if requests:
            entry["requests"] = list(requests)
        self._devices.setdefault("config", []).append(entry)
        return self

    def spec(self) -> dict[str, Any]:
        return {"devices": copy.deepcopy(self._devices)}


class ClaimBuilder(ClaimSpecBuilder):
    """A ResourceClaim a pod names with ``resource_claim(name, claim=...)``."""

    def __init__(self, name: str, namespace: str) -> None:
        super().__init__()
        self._metadata: dict[str, Any] = {"name": name, "namespace": namespace}

    def obj(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": copy.deepcopy(self._metadata),
            "spec": self.spec(),
        }


class TemplateBuilder(ClaimSpecBuilder):
    """A ResourceClaimTemplate: the resourceclaim controller makes one claim per pod from it."""

    def __init__(self, name: str, namespace: str) -> None:
        super().__init__()
        self._metadata: dict[str, Any] = {"name": name, "namespace": namespace}

    def obj(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaimTemplate",
            "metadata": copy.deepcopy(self._metadata),
            "spec": {"spec": self.spec()},
        }


def make_claim(name: str, namespace: str) -> ClaimBuilder:
    return ClaimBuilder(name, namespace)


def make_template(name: str, namespace: str) -> TemplateBuilder:
    return TemplateBuilder(name, namespace)
