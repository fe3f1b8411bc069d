"""Dynamic Resource Allocation objects (resource.k8s.io/v1) as compact records: ResourceSlices
and their devices, DeviceClasses, ResourceClaims with their allocation, ResourceClaimTemplates,
and the claims a pod names.

What the DynamicResources plugin reads, nothing else; the opaque device configuration is kept
as the API gave it, because the allocation copies it into the claim's status. Parsing never
raises on a field plumb does not use; a field it needs and cannot read makes the object's
``problem`` (a claim), or leaves the device out (a slice), as kube-scheduler's decoding would
have refused the object.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from plumb.backend.records import specs
from plumb.k8s import quantities

GROUP = "resource.k8s.io"
VERSION = "v1"
EXACT_COUNT, ALL = "ExactCount", "All"
NO_SCHEDULE, NO_EXECUTE, NONE_EFFECT = "NoSchedule", "NoExecute", "None"
# The finalizer kube-scheduler adds to a claim before it writes the allocation
# (resourceclaim.Finalizer), and the annotation the resourceclaim controller puts on a claim
# it made from a template (resourceclaim.PodClaimNameAnnotation).
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# A claim kube-scheduler made for extended resources backed by DRA (v1.37) carries this
# annotation ("true"); its requests are named after the containers' resources.
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# Every DeviceClass backs the extended resource of this prefix and its name, besides its
# spec.extendedResourceName (resourceapi.ResourceDeviceClassPrefix).
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
_NATIVE_PREFIX = "kubernetes.io/"
_QUOTA_PREFIX = "requests."


def device_backed_name(resource: str) -> bool:
    """Whether a DeviceClass may back the resource (IsDRAExtendedResourceName): an extended
    resource (a domain that is not kubernetes.io's) or a class's implicit name."""
    if resource.startswith(IMPLICIT_EXTENDED_PREFIX):
        return True
    return (
        "/" in resource
        and _NATIVE_PREFIX not in resource
        and not resource.startswith(_QUOTA_PREFIX)
    )


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class SemVer:
    """A device attribute of type version: semantic version 2.0.0, kept as written."""

    text: str


# A device attribute's value; list types (ints, bools, strings, versions) are tuples.
AttributeValue = (
    bool
    | int
    | str
    | SemVer
    | tuple[int, ...]
    | tuple[bool, ...]
    | tuple[str, ...]
    | tuple[SemVer, ...]
)


@dataclasses.dataclass(frozen=True, slots=True)
class Quantity:
    """A resource.Quantity: its exact value and the text the API gave (CEL's quantity())."""

    value: Fraction
    text: str


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class CapacityPolicy:
    """A capacity's requestPolicy (consumable capacity): the default a request without an
    amount takes, and what amounts are valid (a list, or a range with a step)."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    minimum: Quantity | None = None
    maximum: Quantity | None = None
    step: Quantity | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Capacity:
    value: Quantity
    policy: CapacityPolicy | None = None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE
    time_added: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DeviceToleration:
    """A request's toleration of device taints (operator Equal or Exists; "" effect: all)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: DeviceTaint) -> bool:
        """resourceclaim.ToleratesTaint: effect, key, then Equal (or none) compares the
        values and Exists matches; any other operator matches nothing."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclasses.dataclass(frozen=True, slots=True)
class CounterConsumption:
    """What a device of a partitionable pool takes from one of its slice's counter sets."""

    counter_set: str
    counters: Mapping[str, Quantity]
    # compatibilityGroups (v1.37, gate DRADeviceCompatibilityGroups): a slice whose devices
    # name any is left out of its pool while the gate is off.
    compatibility_groups: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, Quantity]


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSelection:
    """Which nodes a slice's (or a device's) devices are reachable from: exactly one of a node
    name, a node selector (its terms ORed, as a pod's required node affinity) or all nodes."""

    node_name: str = ""
    terms: tuple[specs.NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Device:
    """One device of a slice. ``attributes`` and ``capacity`` keep the keys as published
    (``model`` or ``gpu.example.com/model``; a name without a domain is in the driver's)."""

    name: str
    attributes: Mapping[str, AttributeValue] = dataclasses.field(default_factory=dict)
    capacity: Mapping[str, Capacity] = dataclasses.field(default_factory=dict)
    consumes_counters: tuple[CounterConsumption, ...] = ()
    # Set only under perDeviceNodeSelection: the device's own node selection.
    selection: NodeSelection | None = None
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ResourceSlice:
    """A ResourceSlice: part of a pool (``slice_count`` slices of ``generation``) of one driver."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    selection: NodeSelection
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    resource_version: str = dataclasses.field(default="", compare=False)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Opaque:
    """One opaque device configuration (class or claim), kept as the API gave it.
    ``requests`` is empty for a class's and for a claim's that applies to all requests."""

    driver: str
    parameters: Any
    requests: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DeviceClass:
    name: str
    uid: str = ""
    selectors: tuple[str, ...] = ()  # CEL expressions, ANDed
    config: tuple[Opaque, ...] = ()
    extended_resource_name: str = ""
    creation_timestamp: str = ""
    resource_version: str = dataclasses.field(default="", compare=False)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class RequestSpec:
    """What a request asks for: ``exactly`` (name "") or one of ``firstAvailable``'s
    subrequests (its name)."""

    name: str = ""
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: Mapping[str, Quantity] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DeviceRequest:
    name: str
    exactly: RequestSpec | None = None
    first_available: tuple[RequestSpec, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DeviceConstraint:
    """``requests`` empty: all of the claim's requests."""

    requests: tuple[str, ...] = ()
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class AllocatedDevice:
    """One result of an allocation: ``request`` is "<request>" or "<request>/<subrequest>"."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str = ""
    consumed_capacity: Mapping[str, Quantity] = dataclasses.field(default_factory=dict)

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Allocation:
    """A claim's status.allocation. ``config`` is class configs first (source FromClass),
    then the claim's (FromClaim); ``node_selection`` None: reachable from every node."""

    devices: tuple[AllocatedDevice, ...] = ()
    config: tuple[tuple[str, Opaque], ...] = ()
    node_selection: NodeSelection | None = None
    timestamp: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Consumer:
    """One entry of status.reservedFor (a pod, for the scheduler's purposes)."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[Opaque, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    spec: ClaimSpec
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    deleting: bool = False
    finalizers: tuple[str, ...] = ()
    # The pod claim name the resourceclaim controller wrote (a claim made from a template),
    # and the uid of the pod owning it ("" when none does).
    pod_claim_name: str = ""
    owner_uid: str = ""
    extended: bool = False
    # Devices' binding conditions as reported in status.devices: (driver, pool, device) →
    # the condition types that are True.
    device_conditions: Mapping[tuple[str, str, str], frozenset[str]] = dataclasses.field(
        default_factory=dict
    )
    problem: str | None = None
    resource_version: str = dataclasses.field(default="", compare=False)
    # The object as watched: PreBind updates the whole claim, as kube-scheduler updates its
    # cached copy (claimreservations.py).
    body: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec
    problem: str | None = None
    resource_version: str = dataclasses.field(default="", compare=False)


@dataclasses.dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One entry of a pod's spec.resourceClaims: a claim by name or a template to make one."""

    name: str
    claim_name: str = ""
    template_name: str = ""


# --- parsing --------------------------------------------------------------------------------


def _quantity(raw: Any) -> Quantity | None:
    if raw is None:
        return None
    try:
        return Quantity(quantities.parse(raw), str(raw))
    except quantities.QuantityError:
        return None


def _attribute(raw: Mapping[str, Any]) -> AttributeValue | None:
    if "bool" in raw:
        return bool(raw["bool"])
    if "int" in raw:
        return int(raw["int"])
    if "string" in raw:
        return str(raw["string"])
    if "version" in raw:
        return SemVer(str(raw["version"]))
    if "ints" in raw:
        return tuple(int(v) for v in raw["ints"] or ())
    if "bools" in raw:
        return tuple(bool(v) for v in raw["bools"] or ())
    if "strings" in raw:
        return tuple(str(v) for v in raw["strings"] or ())
    if "versions" in raw:
        return tuple(SemVer(str(v)) for v in raw["versions"] or ())
    return None


def _policy(raw: Mapping[str, Any] | None) -> CapacityPolicy | None:
    if not raw:
        return None
    valid = tuple(q for q in (_quantity(v) for v in raw.get("validValues") or ()) if q)
    span = raw.get("validRange") or {}
    return CapacityPolicy(
        default=_quantity(raw.get("default")),
        valid_values=valid,
        minimum=_quantity(span.get("min")),
        maximum=_quantity(span.get("max")),
        step=_quantity(span.get("step")),
    )


def _counters(raw: Mapping[str, Any] | None) -> Mapping[str, Quantity]:
    out = {}
    for name, counter in (raw or {}).items():
        q = _quantity((counter or {}).get("value"))
        if q is not None:
            out[str(name)] = q
    return MappingProxyType(out)


def _taint(raw: Mapping[str, Any]) -> DeviceTaint:
    return DeviceTaint(
        key=str(raw.get("key", "")),
        value=str(raw.get("value", "")),
        effect=str(raw.get("effect", NO_SCHEDULE)),
        time_added=str(raw.get("timeAdded", "")),
    )


def toleration(raw: Mapping[str, Any]) -> DeviceToleration:
    seconds = raw.get("tolerationSeconds")
    return DeviceToleration(
        key=str(raw.get("key", "")),
        operator=str(raw.get("operator") or "Equal"),
        value=str(raw.get("value", "")),
        effect=str(raw.get("effect", "")),
        toleration_seconds=None if seconds is None else int(seconds),
    )


def node_selection(raw: Mapping[str, Any], where: str) -> NodeSelection | None:
    """nodeName / nodeSelector / allNodes of a slice, a device or an allocation; None when
    none is set (a slice's devices then each say)."""
    if raw.get("nodeName"):
        return NodeSelection(node_name=str(raw["nodeName"]))
    if raw.get("nodeSelector") is not None:
        terms = tuple(
            specs.node_term(t, f"{where}.nodeSelectorTerms[{i}]")
            for i, t in enumerate((raw["nodeSelector"] or {}).get("nodeSelectorTerms") or ())
        )
        return NodeSelection(terms=terms)
    if raw.get("allNodes"):
        return NodeSelection(all_nodes=True)
    return None


_NOWHERE = NodeSelection(terms=())


def _device(raw: Mapping[str, Any], where: str) -> Device:
    attributes = {}
    for name, value in (raw.get("attributes") or {}).items():
        parsed = _attribute(value or {})
        if parsed is not None:
            attributes[str(name)] = parsed
    capacity = {}
    for name, value in (raw.get("capacity") or {}).items():
        q = _quantity((value or {}).get("value"))
        if q is not None:
            capacity[str(name)] = Capacity(q, _policy((value or {}).get("requestPolicy")))
    try:
        selection = node_selection(raw, where)
    except specs.SpecError:
        selection = _NOWHERE
    return Device(
        name=str(raw.get("name", "")),
        attributes=MappingProxyType(attributes),
        capacity=MappingProxyType(capacity),
        consumes_counters=tuple(
            CounterConsumption(
                str(c.get("counterSet", "")),
                _counters(c.get("counters")),
                tuple(str(g) for g in c.get("compatibilityGroups") or ()),
            )
            for c in raw.get("consumesCounters") or ()
        ),
        selection=selection,
        taints=tuple(_taint(t) for t in raw.get("taints") or ()),
        binds_to_node=bool(raw.get("bindsToNode")),
        binding_conditions=tuple(str(c) for c in raw.get("bindingConditions") or ()),
        binding_failure_conditions=tuple(str(c) for c in raw.get("bindingFailureConditions") or ()),
        allow_multiple_allocations=bool(raw.get("allowMultipleAllocations")),
    )


def parse_slice(body: Mapping[str, Any]) -> ResourceSlice:
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    pool = spec.get("pool") or {}
    name = str(metadata.get("name", ""))
    per_device = bool(spec.get("perDeviceNodeSelection"))
    try:
        selection = node_selection(spec, f"ResourceSlice {name}: spec")
    except specs.SpecError:
        selection = _NOWHERE
    return ResourceSlice(
        name=name,
        driver=str(spec.get("driver", "")),
        pool=str(pool.get("name", "")),
        generation=int(pool.get("generation") or 0),
        slice_count=int(pool.get("resourceSliceCount") or 0),
        selection=selection or _NOWHERE,
        per_device_node_selection=per_device,
        devices=tuple(
            _device(d, f"ResourceSlice {name}: spec.devices[{i}]")
            for i, d in enumerate(spec.get("devices") or ())
        ),
        shared_counters=tuple(
            CounterSet(str(c.get("name", "")), _counters(c.get("counters")))
            for c in spec.get("sharedCounters") or ()
        ),
        resource_version=str(metadata.get("resourceVersion", "")),
    )


def _selectors(raw: Any) -> tuple[str, ...]:
    return tuple(str((s.get("cel") or {}).get("expression", "")) for s in raw or () if s)


def _opaque(raw: Mapping[str, Any]) -> Opaque | None:
    opaque = raw.get("opaque")
    if not opaque:
        return None
    return Opaque(
        driver=str(opaque.get("driver", "")),
        parameters=opaque.get("parameters"),
        requests=tuple(str(r) for r in raw.get("requests") or ()),
    )


def parse_class(body: Mapping[str, Any]) -> DeviceClass:
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    return DeviceClass(
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
        selectors=_selectors(spec.get("selectors")),
        config=tuple(o for o in (_opaque(c) for c in spec.get("config") or ()) if o),
        extended_resource_name=str(spec.get("extendedResourceName") or ""),
        creation_timestamp=str(metadata.get("creationTimestamp", "")),
        resource_version=str(metadata.get("resourceVersion", "")),
    )


def _request_spec(raw: Mapping[str, Any], name: str = "") -> RequestSpec:
    capacity = {}
    for key, value in ((raw.get("capacity") or {}).get("requests") or {}).items():
        q = _quantity(value)
        if q is None:
            raise specs.SpecError(f"capacity.requests[{key}]: unusable quantity {value!r}")
        capacity[str(key)] = q
    mode = str(raw.get("allocationMode") or EXACT_COUNT)
    return RequestSpec(
        name=name,
        device_class=str(raw.get("deviceClassName", "")),
        selectors=_selectors(raw.get("selectors")),
        mode=mode,
        count=int(raw.get("count") or (1 if mode == EXACT_COUNT else 0)),
        admin_access=bool(raw.get("adminAccess")),
        tolerations=tuple(toleration(t) for t in raw.get("tolerations") or ()),
        capacity=MappingProxyType(capacity),
    )


def _request(raw: Mapping[str, Any]) -> DeviceRequest:
    name = str(raw.get("name", ""))
    exactly = raw.get("exactly")
    return DeviceRequest(
        name=name,
        exactly=None if exactly is None else _request_spec(exactly),
        first_available=tuple(
            _request_spec(s, str(s.get("name", ""))) for s in raw.get("firstAvailable") or ()
        ),
    )


def parse_claim_spec(spec: Mapping[str, Any]) -> ClaimSpec:
    devices = spec.get("devices") or {}
    return ClaimSpec(
        requests=tuple(_request(r) for r in devices.get("requests") or ()),
        constraints=tuple(
            DeviceConstraint(
                requests=tuple(str(r) for r in c.get("requests") or ()),
                match_attribute=str(c.get("matchAttribute") or ""),
                distinct_attribute=str(c.get("distinctAttribute") or ""),
            )
            for c in devices.get("constraints") or ()
        ),
        config=tuple(o for o in (_opaque(c) for c in devices.get("config") or ()) if o),
    )


def _allocated(raw: Mapping[str, Any]) -> AllocatedDevice:
    consumed = {}
    for key, value in (raw.get("consumedCapacity") or {}).items():
        q = _quantity(value)
        if q is not None:
            consumed[str(key)] = q
    admin = raw.get("adminAccess")
    return AllocatedDevice(
        request=str(raw.get("request", "")),
        driver=str(raw.get("driver", "")),
        pool=str(raw.get("pool", "")),
        device=str(raw.get("device", "")),
        admin_access=None if admin is None else bool(admin),
        tolerations=tuple(toleration(t) for t in raw.get("tolerations") or ()),
        binding_conditions=tuple(str(c) for c in raw.get("bindingConditions") or ()),
        binding_failure_conditions=tuple(str(c) for c in raw.get("bindingFailureConditions") or ()),
        share_id=str(raw.get("shareID") or ""),
        consumed_capacity=MappingProxyType(consumed),
    )


def _allocation(raw: Mapping[str, Any], where: str) -> Allocation:
    devices = raw.get("devices") or {}
    config = []
    for c in devices.get("config") or ():
        opaque = _opaque(c)
        if opaque is not None:
            config.append((str(c.get("source", "")), opaque))
    try:
        selection = node_selection(raw, where)
    except specs.SpecError:
        selection = _NOWHERE
    return Allocation(
        devices=tuple(_allocated(r) for r in devices.get("results") or ()),
        config=tuple(config),
        node_selection=selection,
        timestamp=str(raw.get("allocationTimestamp") or ""),
    )


_TRUE = "True"


def _device_conditions(raw: Any) -> Mapping[tuple[str, str, str], frozenset[str]]:
    out = {}
    for status in raw or ():
        true = frozenset(
            str(c.get("type", ""))
            for c in status.get("conditions") or ()
            if c.get("status") == _TRUE
        )
        key = (
            str(status.get("driver", "")),
            str(status.get("pool", "")),
            str(status.get("device", "")),
        )
        out[key] = true
    return MappingProxyType(out)


def parse_claim(body: Mapping[str, Any]) -> ResourceClaim:
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    namespace = str(metadata.get("namespace", ""))
    name = str(metadata.get("name", ""))
    annotations = metadata.get("annotations") or {}
    owner = next(
        (
            str(o.get("uid", ""))
            for o in metadata.get("ownerReferences") or ()
            if o.get("kind") == "Pod" and o.get("controller")
        ),
        "",
    )
    problem = None
    try:
        spec = parse_claim_spec(body.get("spec") or {})
    except (specs.SpecError, ValueError, TypeError) as error:
        spec, problem = ClaimSpec(), f"resourceclaim {namespace}/{name}: {error}"
    allocation = status.get("allocation")
    return ResourceClaim(
        namespace=namespace,
        name=name,
        uid=str(metadata.get("uid", "")),
        spec=spec,
        allocation=None
        if allocation is None
        else _allocation(allocation, f"ResourceClaim {namespace}/{name}: status.allocation"),
        reserved_for=tuple(
            Consumer(
                resource=str(r.get("resource", "")),
                name=str(r.get("name", "")),
                uid=str(r.get("uid", "")),
                api_group=str(r.get("apiGroup", "")),
            )
            for r in status.get("reservedFor") or ()
        ),
        deleting=metadata.get("deletionTimestamp") is not None,
        finalizers=tuple(str(f) for f in metadata.get("finalizers") or ()),
        pod_claim_name=str(annotations.get(POD_CLAIM_NAME_ANNOTATION, "")),
        owner_uid=owner,
        extended=annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true",
        device_conditions=_device_conditions(status.get("devices")),
        problem=problem,
        resource_version=str(metadata.get("resourceVersion", "")),
        body=body,
    )


def parse_template(body: Mapping[str, Any]) -> ClaimTemplate:
    metadata = body.get("metadata") or {}
    namespace = str(metadata.get("namespace", ""))
    name = str(metadata.get("name", ""))
    problem = None
    try:
        spec = parse_claim_spec(((body.get("spec") or {}).get("spec")) or {})
    except (specs.SpecError, ValueError, TypeError) as error:
        spec, problem = ClaimSpec(), f"resourceclaimtemplate {namespace}/{name}: {error}"
    return ClaimTemplate(
        namespace=namespace,
        name=name,
        spec=spec,
        problem=problem,
        resource_version=str(metadata.get("resourceVersion", "")),
    )


def pod_resource_claims(spec: Mapping[str, Any]) -> tuple[PodResourceClaim, ...]:
    return tuple(
        PodResourceClaim(
            name=str(c.get("name", "")),
            claim_name=str(c.get("resourceClaimName") or ""),
            template_name=str(c.get("resourceClaimTemplateName") or ""),
        )
        for c in spec.get("resourceClaims") or ()
    )


def pod_claim_statuses(status: Mapping[str, Any]) -> Mapping[str, str]:
    """status.resourceClaimStatuses: pod claim name → the claim made for it ("" when the
    controller decided none is needed)."""
    return MappingProxyType(
        {
            str(s.get("name", "")): str(s.get("resourceClaimName") or "")
            for s in status.get("resourceClaimStatuses") or ()
        }
    )


_QUALIFIED = re.compile(r"^(?:(?P<domain>[^/]+)/)?(?P<id>[^/]+)$")


def split_attribute(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of an attribute or capacity name; a name without a domain is in the
    driver's."""
    found = _QUALIFIED.match(name)
    if found is None:
        return ("", name)
    return (found.group("domain") or driver, found.group("id"))


def lookup_attribute(device: Device, driver: str, qualified: str) -> AttributeValue | None:
    """A device's attribute by fully qualified name ("domain/id"), as the allocator's
    matchAttribute and distinctAttribute read it: the name as published, or its id alone
    when the domain is the driver's."""
    value = device.attributes.get(qualified)
    if value is not None:
        return value
    domain, ident = split_attribute(qualified, driver)
    if domain == driver:
        return device.attributes.get(ident)
    return None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Pool:
    """A driver's pool as a node sees it: the slices of its newest generation reachable from
    the node. ``incomplete``: fewer slices of that generation than ``resourceSliceCount``
    (being updated); ``invalid``: why its devices cannot be used (a device name twice), "" if
    they can.

    Under partitionable devices (DRAPartitionableDevices), ``slices`` holds the device slices
    only: the pool's counter sets are in ``counter_sets`` (by name, from its slices that
    publish sharedCounters), and ``other_slices`` the device slices of the same generation not
    reachable from the node, whose devices draw on the same counters (GatherPools'
    DeviceSlicesNotTargetingNode). An incomplete or invalid pool has no slices."""

    driver: str
    name: str
    generation: int
    slices: tuple[ResourceSlice, ...]
    incomplete: bool = False
    invalid: str = ""
    counter_sets: Mapping[str, CounterSet] = dataclasses.field(default_factory=dict)
    other_slices: tuple[ResourceSlice, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        """(driver, pool name): the pool's id."""
        return (self.driver, self.name)
