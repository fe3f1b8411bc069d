"""PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSINodes as compact records, and
the store the volume plugins read them from, with CSIDrivers and CSIStorageCapacities
(``csiobjects``), kept current by watch events.

The records hold what kube-scheduler v1.34's volume plugins (VolumeRestrictions,
NodeVolumeLimits, VolumeBinding, VolumeZone) and VolumeBinding's PreBind read, nothing else.
Parsing never raises: a value plumb cannot read (a bad quantity, an unknown operator in a PV's
node affinity) turns into what kube-scheduler makes of it (a zero size, a term that matches no
node).

The store also keeps VolumeBinding's *assumptions*: once a pod is placed, the PVs chosen for its
claims are held as bound to them (and claims left to dynamic provisioning as carrying the
selected node) until the watch brings a newer version of the object or the caller forgets the
plan, as kube-scheduler's assume cache does, so the next pod does not take the same PV.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from plumb.backend.cache import csiobjects
from plumb.backend.records import objects, specs
from plumb.k8s import quantities

STORAGE = "storage"
FILESYSTEM = "Filesystem"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
AVAILABLE, BOUND, RELEASED, FAILED = "Available", "Bound", "Released", "Failed"
CLAIM_PENDING, CLAIM_BOUND, CLAIM_LOST = "Pending", "Bound", "Lost"
# Status codes of a PreFilter failure, as kube-scheduler names them: the first two reject the pod
# (preemption is tried after Unschedulable only), Error fails the cycle.
UNSCHEDULABLE = "Unschedulable"
UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
ERROR = "Error"
# Annotations (component-helpers storage/volume): the beta class annotation wins over the field.
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
# A StorageClass provisioner that says "no dynamic provisioning" (local volumes).
NO_PROVISIONER = "kubernetes.io/no-provisioner"

_EMPTY: Mapping[str, str] = MappingProxyType({})
# A node selector term that matches no node: what an unreadable term becomes.
_NOTHING = specs.NodeSelectorTerm()


def claim_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ClaimRef:
    """A PV's ``spec.claimRef``: the claim it is (being) bound to; an empty uid when pre-bound
    by a person who named the claim only."""

    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        return claim_key(self.namespace, self.name)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PersistentVolume:
    """What scheduling reads of a PV. ``node_terms`` is None without required node affinity;
    ``capacity`` is ``spec.capacity.storage`` in bytes (rounded up)."""

    name: str
    resource_version: str = dataclasses.field(default="", compare=False)
    labels: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY)
    capacity: int = 0
    access_modes: frozenset[str] = frozenset()
    storage_class: str = ""
    volume_mode: str = FILESYSTEM
    attributes_class: str = ""
    claim: ClaimRef | None = None
    phase: str = ""
    node_terms: tuple[specs.NodeSelectorTerm, ...] | None = None
    csi_driver: str = ""
    csi_handle: str = ""
    deleting: bool = False
    bound_by_controller: bool = False

    def bound_to(self, claim: Claim) -> bool:
        """IsVolumeBoundToClaim: the claimRef names the claim (and its uid, when it has one)."""
        ref = self.claim
        if ref is None or ref.namespace != claim.namespace or ref.name != claim.name:
            return False
        return not ref.uid or ref.uid == claim.uid


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Claim:
    """What scheduling reads of a PVC. ``storage_class`` is None when the claim names no class
    (neither the beta annotation nor ``spec.storageClassName``); ``request`` is
    ``spec.resources.requests.storage`` in bytes (rounded up), ``None`` when absent."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = dataclasses.field(default="", compare=False)
    storage_class: str | None = None
    access_modes: frozenset[str] = frozenset()
    request: int | None = None
    volume_mode: str = FILESYSTEM
    attributes_class: str = ""
    volume_name: str = ""
    phase: str = ""
    selected_node: str | None = None
    bind_completed: bool = False
    selector: specs.LabelSelector | None = None
    # A selector kube-scheduler cannot build (an unknown operator): FindMatchingVolume errors.
    selector_problem: str | None = None
    controller_uid: str = ""
    deleting: bool = False

    @property
    def key(self) -> str:
        return claim_key(self.namespace, self.name)

    @property
    def class_name(self) -> str:
        """GetPersistentVolumeClaimClass: the class name, "" when none is named."""
        return self.storage_class or ""

    @property
    def fully_bound(self) -> bool:
        """isPVCFullyBound: a volume name and the PV controller's bind-completed annotation."""
        return bool(self.volume_name) and self.bind_completed


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class StorageClass:
    """``binding_mode`` is None when unset (the API server defaults it to Immediate);
    ``allowed_topologies`` are ORed terms of (key, allowed values) ANDed within a term."""

    name: str
    provisioner: str = ""
    binding_mode: str | None = IMMEDIATE
    allowed_topologies: tuple[tuple[tuple[str, frozenset[str]], ...], ...] = ()

    @property
    def delayed(self) -> bool:
        return self.binding_mode == WAIT_FOR_FIRST_CONSUMER


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class CSINode:
    """A node's CSI drivers (``drivers``, every one registered) and, for those that report one,
    how many volumes it can attach (``limits``)."""

    name: str
    limits: Mapping[str, int] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    drivers: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class StaticBinding:
    """A PV VolumeBinding chose for an unbound WaitForFirstConsumer claim, as they were when
    chosen (their resourceVersions make PreBind's writes conditional on them)."""

    claim: Claim
    pv: PersistentVolume


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class BindingPlan:
    """What VolumeBinding's PreBind does for a pod placed on ``node``: bind each PV to its claim,
    and ask dynamic provisioning on that node for each claim in ``provisions``."""

    namespace: str
    pod: str
    pod_uid: str
    node: str
    bindings: tuple[StaticBinding, ...] = ()
    provisions: tuple[Claim, ...] = ()

    @property
    def empty(self) -> bool:
        """Nothing to write: every claim of the pod is bound already (or it has none)."""
        return not self.bindings and not self.provisions


class ClaimUse(Protocol):
    """What the volume plugins ask about the pods already on nodes (bound or assumed)."""

    def claims_on(self, node: str) -> Collection[str]:
        """Keys (namespace/name) of every claim the pods on ``node`` use, ephemeral ones too."""
        ...

    def named_by_a_placed_pod(self, key: str) -> bool:
        """Whether some pod on a node names this claim in a persistentVolumeClaim volume."""
        ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class InUse:
    """A ClaimUse built from the placed pods themselves (``InUse.of``)."""

    by_node: Mapping[str, frozenset[str]] = dataclasses.field(
        default_factory=lambda: MappingProxyType({})
    )
    named: frozenset[str] = frozenset()

    @classmethod
    def of(cls, placed: Iterable[tuple[str, objects.PodInfo]]) -> InUse:
        """From (node, pod) pairs of the pods on nodes."""
        by_node: dict[str, set[str]] = {}
        named: set[str] = set()
        for node, pod in placed:
            for claim in pod.claims:
                key = claim_key(pod.namespace, claim.name)
                by_node.setdefault(node, set()).add(key)
                if not claim.ephemeral:
                    named.add(key)
        return cls(
            by_node=MappingProxyType({n: frozenset(keys) for n, keys in by_node.items()}),
            named=frozenset(named),
        )

    def claims_on(self, node: str) -> Collection[str]:
        return self.by_node.get(node, frozenset())

    def named_by_a_placed_pod(self, key: str) -> bool:
        return key in self.named


NOTHING_IN_USE = InUse()


# Parsing ---------------------------------------------------------------------------------------


def _labels(metadata: Mapping[str, Any], field: str) -> Mapping[str, str]:
    raw = metadata.get(field)
    if not raw:
        return _EMPTY
    return MappingProxyType({str(k): str(v) for k, v in raw.items()})


def _storage(raw: Mapping[str, Any] | None) -> int | None:
    text = (raw or {}).get(STORAGE)
    if text is None:
        return None
    try:
        return quantities.clamp_int64(quantities.value(text))
    except quantities.QuantityError:
        return 0


def _node_terms(spec: Mapping[str, Any]) -> tuple[specs.NodeSelectorTerm, ...] | None:
    required = (spec.get("nodeAffinity") or {}).get("required")
    if required is None:
        return None
    terms = []
    for raw in required.get("nodeSelectorTerms") or ():
        try:
            terms.append(
                specs.NodeSelectorTerm(
                    tuple(
                        specs.requirement(e, "nodeAffinity", specs.NODE_OPERATORS)
                        for e in raw.get("matchExpressions") or ()
                    ),
                    tuple(
                        specs.requirement(e, "nodeAffinity", specs.NODE_OPERATORS)
                        for e in raw.get("matchFields") or ()
                    ),
                )
            )
        except specs.SpecError:
            terms.append(_NOTHING)  # kube-scheduler cannot parse it: the term matches nothing
    return tuple(terms)


def parse_pv(body: Mapping[str, Any]) -> PersistentVolume:
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    annotations = metadata.get("annotations") or {}
    raw_ref = spec.get("claimRef")
    ref = None
    if raw_ref is not None:
        ref = ClaimRef(
            namespace=str(raw_ref.get("namespace") or ""),
            name=str(raw_ref.get("name") or ""),
            uid=str(raw_ref.get("uid") or ""),
        )
    csi = spec.get("csi") or {}
    storage_class = annotations.get(BETA_STORAGE_CLASS)
    if storage_class is None:
        storage_class = spec.get("storageClassName") or ""
    return PersistentVolume(
        name=str(metadata.get("name") or ""),
        resource_version=str(metadata.get("resourceVersion") or ""),
        labels=_labels(metadata, "labels"),
        capacity=_storage(spec.get("capacity")) or 0,
        access_modes=frozenset(str(m) for m in spec.get("accessModes") or ()),
        storage_class=str(storage_class),
        volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        claim=ref,
        phase=str((body.get("status") or {}).get("phase") or ""),
        node_terms=_node_terms(spec),
        csi_driver=str(csi.get("driver") or ""),
        csi_handle=str(csi.get("volumeHandle") or ""),
        deleting=metadata.get("deletionTimestamp") is not None,
        bound_by_controller=BOUND_BY_CONTROLLER in annotations,
    )


def parse_claim(body: Mapping[str, Any]) -> Claim:
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    annotations = metadata.get("annotations") or {}
    storage_class = annotations.get(BETA_STORAGE_CLASS)
    if storage_class is None and spec.get("storageClassName") is not None:
        storage_class = spec["storageClassName"]
    selector = None
    problem = None
    try:
        selector = specs.label_selector(spec.get("selector"), "selector")
    except specs.SpecError as error:
        problem = str(error)
    controller = ""
    for reference in metadata.get("ownerReferences") or ():
        if reference.get("controller"):
            controller = str(reference.get("uid") or "")
    selected = annotations.get(SELECTED_NODE)
    return Claim(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        resource_version=str(metadata.get("resourceVersion") or ""),
        storage_class=None if storage_class is None else str(storage_class),
        access_modes=frozenset(str(m) for m in spec.get("accessModes") or ()),
        request=_storage((spec.get("resources") or {}).get("requests")),
        volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
        attributes_class=str(spec.get("volumeAttributesClassName") or ""),
        volume_name=str(spec.get("volumeName") or ""),
        phase=str((body.get("status") or {}).get("phase") or ""),
        selected_node=None if selected is None else str(selected),
        bind_completed=BIND_COMPLETED in annotations,
        selector=selector,
        selector_problem=problem,
        controller_uid=controller,
        deleting=metadata.get("deletionTimestamp") is not None,
    )


def parse_storage_class(body: Mapping[str, Any]) -> StorageClass:
    metadata = body.get("metadata") or {}
    mode = body.get("volumeBindingMode")
    terms = []
    for term in body.get("allowedTopologies") or ():
        terms.append(
            tuple(
                (str(e.get("key") or ""), frozenset(str(v) for v in e.get("values") or ()))
                for e in term.get("matchLabelExpressions") or ()
            )
        )
    return StorageClass(
        name=str(metadata.get("name") or ""),
        provisioner=str(body.get("provisioner") or ""),
        binding_mode=None if mode is None else str(mode),
        allowed_topologies=tuple(terms),
    )


def parse_csinode(body: Mapping[str, Any]) -> CSINode:
    limits = {}
    drivers = set()
    for driver in (body.get("spec") or {}).get("drivers") or ():
        name = str(driver.get("name") or "")
        drivers.add(name)
        count = (driver.get("allocatable") or {}).get("count")
        if count is not None:
            limits[name] = int(count)
    return CSINode(
        name=str((body.get("metadata") or {}).get("name") or ""),
        limits=MappingProxyType(limits),
        drivers=frozenset(drivers),
    )


# The store -------------------------------------------------------------------------------------


class Volumes:
    """PVs (indexed by class), claims, StorageClasses, CSINodes, CSIDrivers and
    CSIStorageCapacities (indexed by class), fed by watch events.

    ``on_*(body, ...)`` applies one event (``body`` None: deleted); ``resync_*`` replaces a
    whole kind after a relist. ``generation`` grows with every change, for callers that cache
    anything derived from the store.
    """

    def __init__(self) -> None:
        self.generation = 0
        self._pvs: dict[str, PersistentVolume] = {}
        self._by_class: dict[str, dict[str, PersistentVolume]] = {}
        self._claims: dict[str, Claim] = {}
        self._classes: dict[str, StorageClass] = {}
        self._csinodes: dict[str, CSINode] = {}
        self._csidrivers: dict[str, csiobjects.CSIDriver] = {}
        # class -> namespace/name -> capacity
        self._capacities: dict[str, dict[str, csiobjects.StorageCapacity]] = {}
        # name or key -> (assumed record, resourceVersion of the API object it was made from)
        self._assumed_pvs: dict[str, tuple[PersistentVolume, str]] = {}
        self._assumed_claims: dict[str, tuple[Claim, str]] = {}

    # events

    def on_pv(self, body: Mapping[str, Any] | None, name: str) -> None:
        self.generation += 1
        old = self._pvs.pop(name, None)
        if old is not None:
            self._by_class.get(old.storage_class, {}).pop(name, None)
        assumed = self._assumed_pvs.get(name)
        if body is None:
            self._assumed_pvs.pop(name, None)
            return
        pv = parse_pv(body)
        self._pvs[name] = pv
        self._by_class.setdefault(pv.storage_class, {})[name] = pv
        if assumed is not None and assumed[1] != pv.resource_version:
            del self._assumed_pvs[name]  # the API object moved on: it now says what is true

    def on_pvc(self, body: Mapping[str, Any] | None, namespace: str, name: str) -> None:
        self.generation += 1
        key = claim_key(namespace, name)
        assumed = self._assumed_claims.get(key)
        if body is None:
            self._claims.pop(key, None)
            self._assumed_claims.pop(key, None)
            return
        claim = parse_claim(body)
        self._claims[key] = claim
        if assumed is not None and assumed[1] != claim.resource_version:
            del self._assumed_claims[key]

    def on_storage_class(self, body: Mapping[str, Any] | None, name: str) -> None:
        self.generation += 1
        if body is None:
            self._classes.pop(name, None)
        else:
            self._classes[name] = parse_storage_class(body)

    def on_csinode(self, body: Mapping[str, Any] | None, name: str) -> None:
        self.generation += 1
        if body is None:
            self._csinodes.pop(name, None)
        else:
            self._csinodes[name] = parse_csinode(body)

    def on_csidriver(self, body: Mapping[str, Any] | None, name: str) -> None:
        self.generation += 1
        if body is None:
            self._csidrivers.pop(name, None)
        else:
            self._csidrivers[name] = csiobjects.parse_csidriver(body)

    def on_storage_capacity(
        self, body: Mapping[str, Any] | None, namespace: str, name: str
    ) -> None:
        self.generation += 1
        key = claim_key(namespace, name)
        for by_key in self._capacities.values():
            by_key.pop(key, None)
        if body is not None:
            capacity = csiobjects.parse_storage_capacity(body)
            self._capacities.setdefault(capacity.storage_class, {})[key] = capacity

    def resync_pvs(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        listed = {str((b.get("metadata") or {}).get("name") or ""): b for b in bodies}
        for name in set(self._pvs) - set(listed):
            self.on_pv(None, name)
        for name, body in listed.items():
            self.on_pv(body, name)

    def resync_pvcs(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        listed = {}
        for body in bodies:
            metadata = body.get("metadata") or {}
            listed[(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))] = body
        for key in set(self._claims) - {claim_key(ns, n) for ns, n in listed}:
            namespace, _, name = key.partition("/")
            self.on_pvc(None, namespace, name)
        for (namespace, name), body in listed.items():
            self.on_pvc(body, namespace, name)

    def resync_storage_classes(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        self.generation += 1
        self._classes = {c.name: c for c in map(parse_storage_class, bodies)}

    def resync_csinodes(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        self.generation += 1
        self._csinodes = {c.name: c for c in map(parse_csinode, bodies)}

    def resync_csidrivers(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        self.generation += 1
        self._csidrivers = {d.name: d for d in map(csiobjects.parse_csidriver, bodies)}

    def resync_storage_capacities(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        self.generation += 1
        self._capacities = {}
        for capacity in map(csiobjects.parse_storage_capacity, bodies):
            self._capacities.setdefault(capacity.storage_class, {})[capacity.key] = capacity

    # queries (assumptions first)

    def pv(self, name: str) -> PersistentVolume | None:
        assumed = self._assumed_pvs.get(name)
        return assumed[0] if assumed is not None else self._pvs.get(name)

    def claim(self, namespace: str, name: str) -> Claim | None:
        key = claim_key(namespace, name)
        assumed = self._assumed_claims.get(key)
        return assumed[0] if assumed is not None else self._claims.get(key)

    def storage_class(self, name: str) -> StorageClass | None:
        return self._classes.get(name)

    def csinode(self, node: str) -> CSINode | None:
        return self._csinodes.get(node)

    def csidriver(self, name: str) -> csiobjects.CSIDriver | None:
        return self._csidrivers.get(name)

    def capacities_of_class(self, storage_class: str) -> tuple[csiobjects.StorageCapacity, ...]:
        """The CSIStorageCapacities of a class, by namespace/name (kube-scheduler takes the
        first its lister returns that fits, an order it does not define)."""
        by_key = self._capacities.get(storage_class, {})
        return tuple(by_key[key] for key in sorted(by_key))

    def pvs_of_class(self, storage_class: str) -> tuple[PersistentVolume, ...]:
        """The PVs of a class (the beta annotation counts, as in kube-scheduler's index), by
        name, each as assumed if it is."""
        names = sorted(self._by_class.get(storage_class, {}))
        found = (self.pv(name) for name in names)
        return tuple(pv for pv in found if pv is not None)

    def __len__(self) -> int:
        return len(self._pvs) + len(self._claims)

    # assumptions (VolumeBinding's Reserve and Unreserve)

    def assume(self, plan: BindingPlan) -> None:
        """Hold the plan's PVs as bound to their claims, and its claims to provision as carrying
        the selected node, until a newer version of each arrives or ``forget``."""
        self.generation += 1
        for binding in plan.bindings:
            pv, claim = binding.pv, binding.claim
            ref = ClaimRef(namespace=claim.namespace, name=claim.name, uid=claim.uid)
            assumed = dataclasses.replace(
                pv, claim=ref, bound_by_controller=pv.bound_by_controller or not pv.bound_to(claim)
            )
            self._assumed_pvs[pv.name] = (assumed, pv.resource_version)
        for claim in plan.provisions:
            assumed_claim = dataclasses.replace(claim, selected_node=plan.node)
            self._assumed_claims[claim.key] = (assumed_claim, claim.resource_version)

    def forget(self, plan: BindingPlan) -> None:
        """Drop the plan's assumptions (the pod was not bound, or PreBind failed)."""
        self.generation += 1
        for binding in plan.bindings:
            self._assumed_pvs.pop(binding.pv.name, None)
        for claim in plan.provisions:
            self._assumed_claims.pop(claim.key, None)
