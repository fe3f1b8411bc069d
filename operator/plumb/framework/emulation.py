"""Which kube-scheduler release plumb decides as (v1.34 to v1.37), and every behaviour that differs.

plumb follows the cluster it runs against: at start it reads the API server's ``/version`` and
decides as that minor release's kube-scheduler, with that release's feature-gate defaults;
``plumb run --emulated-version 1.N`` pins the release and ``--feature-gates`` sets gates, as
kube-scheduler's own flags of those names do. A server older than the window is decided as its
oldest release, a newer one as its newest, and the log says so.

Everything that depends on the release is here, in two tables a reader can scan:

- ``GATES``: each kube-scheduler feature gate plumb honours, its default per release and
  whether the release locks it (read in each release's ``pkg/features/kube_features.go``);
- ``Emulation``'s fields: one per change of behaviour, each set in ``emulate`` from the release
  or a gate, with the pull request or file that made the change.

The rest of plumb reads ``Emulation``'s fields (through ``scoring.Profile.kube``), never a
version number, so that each change has one switch and one place that says when it applies.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

OLDEST = 34
NEWEST = 37
MINORS = tuple(range(OLDEST, NEWEST + 1))


@dataclasses.dataclass(frozen=True)
class FeatureGate:
    """A kube-scheduler feature gate plumb honours: its default per minor release (a minor it
    is missing from has no such gate) and the minors where it is locked to that default."""

    name: str
    defaults: Mapping[int, bool]
    locked: frozenset[int] = frozenset()


def _gate(
    name: str, *, since: int, on: int | None = None, locked: int | None = None
) -> FeatureGate:
    """A gate that exists from ``since``, on by default from ``on``, locked from ``locked``."""
    defaults = {minor: on is not None and minor >= on for minor in MINORS if minor >= since}
    frozen = frozenset(m for m in MINORS if locked is not None and m >= locked)
    return FeatureGate(name, defaults, frozen)


GATES: Mapping[str, FeatureGate] = {
    gate.name: gate
    for gate in (
        # A Filter in the default profile, last (plugins/nodedeclaredfeatures): alpha in
        # v1.35, beta in v1.36, GA and locked in v1.37.
        _gate("NodeDeclaredFeatures", since=35, on=36, locked=37),
        # VolumeBinding's Score (its default shape favours free capacity): beta, on in v1.37.
        _gate("StorageCapacityScoring", since=34, on=37),
        # NodeVolumeLimits rejects a node without a CSI driver that asks for it (CSIDriver
        # preventPodSchedulingIfMissing): alpha in v1.35 (any CSIDriver), beta, on in v1.37.
        _gate("VolumeLimitScaling", since=35, on=37),
        # nominatedNodeName written before a PreBind that has work to do (volume binding).
        _gate("NominatedNodeNameForExpectation", since=34, on=35),
        # The next pod of the same signature, finding the node just chosen full, takes the
        # next node of that cycle's scores (framework/signatures.py, contract.Batch.continues).
        # Never in the default profile (PodTopologySpread's system defaults sign no pod). No
        # switch beside the gate: v1.37's rescoring of the node just chosen when it still fits
        # (framework/runtime/batch.go rescoreHintedNode) picks what v1.35's fresh cycle picks
        # over the nodes of one batch (docs/versions.md, "Opportunistic batching").
        _gate("OpportunisticBatching", since=35, on=35),
        # Pod-level requests of a pod being resized read from its status.
        _gate("InPlacePodLevelResourcesVerticalScaling", since=35, on=36),
        # DynamicResourcesArgs.bindingTimeout (schedconfig/revisions.py) is allowed, and
        # defaulted to 10m, only with this gate and DRAResourceClaimDeviceStatus on; the field
        # itself came in v1.35. Alpha in v1.34 and v1.35, beta, on in v1.36.
        _gate("DRADeviceBindingConditions", since=34, on=36),
        # The other gate bindingTimeout needs: beta, on since v1.33, GA and locked in v1.37.
        _gate("DRAResourceClaimDeviceStatus", since=34, on=34, locked=37),
        # The gates DynamicResources hands its allocator (AllocatorFeatures in
        # dynamicresources.go; framework/devices/allocator.py reads them through
        # Emulation.devices). Admin access: beta, on in v1.34, GA and locked from v1.36.
        _gate("DRAAdminAccess", since=34, on=34, locked=36),
        # firstAvailable (prioritized lists) and their Score: beta, on in v1.34, locked in v1.37.
        _gate("DRAPrioritizedList", since=34, on=34, locked=37),
        # Shared counters and per-device node selection: alpha, beta and on in v1.36.
        _gate("DRAPartitionableDevices", since=34, on=36),
        # Device taints and request tolerations: alpha, beta and on in v1.36, GA in v1.37.
        _gate("DRADeviceTaints", since=34, on=36),
        # DeviceTaintRule objects adding taints to the devices they select (the slices the
        # allocator sees, ListWithDeviceTaintRules): alpha in v1.35, GA and on in v1.37.
        _gate("DRADeviceTaintRules", since=35, on=37),
        # allowMultipleAllocations, capacity requests, shareID, distinctAttribute: alpha,
        # beta and on in v1.36.
        _gate("DRAConsumableCapacity", since=34, on=36),
        # Extended resources backed by DRA (a class's extendedResourceName): alpha, beta and
        # on in v1.36, GA and locked in v1.37.
        _gate("DRAExtendedResource", since=34, on=36, locked=37),
        # Filter gives up on a node after DynamicResourcesArgs.filterTimeout: beta, on.
        _gate("DRASchedulerFilterTimeout", since=34, on=34),
        # Fractional capacity ranges (milli-value arithmetic): beta in v1.37, on only with
        # --min-compatibility-version=1.37 (MinCompatibilityVersion), which kube-scheduler
        # v1.37 does not have by default (1.36): off.
        _gate("DRAFractionalCapacityRange", since=37),
        # Alpha, off: list-typed attributes in constraints (v1.36), devices that skip node
        # operations, derived attributes and counter compatibility groups (v1.37). plumb's
        # allocator does not implement them (docs/dra.md, "Allocation").
        _gate("DRAListTypeAttributes", since=36),
        _gate("DRAOptionalNodeOperations", since=37),
        _gate("DRADerivedAttributes", since=37),
        _gate("DRADeviceCompatibilityGroups", since=37),
    )
}
"""The gates ``--feature-gates`` takes, by name."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DeviceFeatures:
    """What DynamicResources' structured allocator does in the release and gates in force.

    The first seven are the allocator's features as the plugin derives them from the gates
    (AllocatorFeatures in dynamicresources.go). kube-scheduler then runs the first of three
    allocator variants (structured/allocator.go: "stable", "incubating", "experimental") that
    supports every feature on, and the variants of one release behave differently; the rest
    are those differences, for the release and the variant its gates select
    (``emulate``, ``_allocator_variant``). Defaults: v1.37 with its default gates.
    """

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    # DRADeviceBindingConditions and DRAResourceClaimDeviceStatus both on: devices with
    # binding conditions may be allocated, the conditions are copied into the results and
    # PreBind writes allocationTimestamp.
    binding_conditions: bool = True
    consumable_capacity: bool = True
    fractional_capacity_range: bool = False
    # v1.36 (pools_incubating.go): a slice publishing shared counters belongs to every
    # node's view of its pool, whatever its node selection.
    counter_slices_everywhere: bool = False
    # DRADeviceCompatibilityGroups (alpha, off): without it a slice whose devices name
    # compatibility groups is left out, which leaves its pool incomplete.
    compatibility_groups: bool = False
    # v1.34 (pools_experimental.go): a pool missing slices is still allocated from (only
    # "All" refuses it), a newer generation elsewhere does not retire it, slices with
    # sharedCounters are kept without DRAPartitionableDevices, and an invalid pool reached
    # by the search stops the pod with "pool P is invalid: ...". From v1.35 such pools are
    # skipped and "invalid resource pools were encountered" is the node's reason.
    legacy_pools: bool = False
    # The variant in use knows distinctAttribute (else "empty constraint (unsupported
    # constraint type?)"): the incubating one from v1.36 and every experimental one.
    distinct_attribute: bool = True
    # v1.34 (experimental constraint.go) compared the attributes' pointers, so no two
    # devices ever counted as equal: the constraint only asked for the attribute.
    distinct_values: bool = True
    # v1.34 to v1.36: distinctAttribute remembered one value per request (the latest), so
    # the devices of one request were only compared with the one before.
    distinct_per_request: bool = False
    # From v1.35 each result carries its request's tolerations.
    tolerations_in_results: bool = True
    # From v1.35 only NoSchedule and NoExecute taints keep a device from being allocated;
    # v1.34 refused a device with any untolerated taint.
    known_taint_effects_only: bool = True
    # A device with bindsToNode restricts the allocation to the node (the incubating variant
    # from v1.36, and every experimental one; not the stable ones).
    binds_to_node: bool = True
    # v1.37 (#137063 allocator_incubating.go): a claim config naming several requests is
    # added once (before: once per request it names), and a config whose requests cover
    # every request of the claim is written with none (meaning all).
    claim_config_once: bool = True
    # v1.37: the limit of 32 results per claim is checked per request, "claim C, request R:
    # adding N devices exceeds the claim limit of 32, with M already accounted for"; before,
    # per claim: "claim C: number of requested devices N exceeds the claim limit of 32".
    limit_per_request: bool = True
    # v1.37: a selector's runtime error names the device ("selector #0 on device D") and a
    # missing key gets CEL's hint about optional chaining (cel.EnhanceRuntimeError).
    cel_error_names_device: bool = True
    # v1.37 (consumable_capacity.go): a capacity request that cannot be represented, or a
    # negative one, stops the pod; "All" picks devices by their static capacity only. In
    # v1.36 such devices were skipped and "All" left out devices without room.
    strict_capacity: bool = True
    # DRAExtendedResource (on from v1.36, GA in v1.37): a pod's extended resource that a
    # DeviceClass maps (its extendedResourceName, or deviceclass.resource.kubernetes.io/<class>)
    # is allocated from devices, in a claim the scheduler makes, on a node whose allocatable
    # has none of it; NodeResourcesFit leaves it to DynamicResources there.
    extended_resources: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Emulation:
    """The release plumb decides as, its gates, and what each change in the window does there.

    ``minor``: 34 to 37; ``server``: the API server's gitVersion ("" when pinned and not read);
    ``pinned``: set by ``--emulated-version``; ``gates``: every gate of ``GATES`` the release has,
    with its value in force.
    """

    minor: int = NEWEST
    server: str = dataclasses.field(default="", compare=False)
    pinned: bool = dataclasses.field(default=False, compare=False)
    gates: Mapping[str, bool] = dataclasses.field(default_factory=dict)

    # v1.36 (#135573, balanced_allocation.go): NodeResourcesBalancedAllocation scores the
    # change in balance the pod brings: 50 + (50 + with - without) // 2. Before: the balance
    # with the pod.
    balanced_change: bool = True
    # ImageLocality and image volumes (image_locality.go): 0 before v1.36 (ignored); 1 in
    # v1.36 (#130231: their images add to the sum, the threshold counts containers only);
    # 2 from v1.37 (#138951: each image volume counts in the threshold too).
    image_volumes: int = 2
    # NodeDeclaredFeatures, when its gate is on (plugins/nodedeclaredfeatures; the features a
    # pod needs from component-helpers nodedeclaredfeatures/features/registry.go): 0 no such
    # plugin (v1.34); 1 v1.35 (RestartAllContainersOnContainerExits; the message names the
    # features missing); 2 v1.36 (+ UserNamespacesHostNetworkSupport; "node(s) didn't match
    # Pod's required features"); 3 from v1.37 (+ VolumeBindMountOptions).
    declared_features: int = 3
    # v1.37 (#140180, preemption.go): a preemption that finds a node adds "preemption: found
    # a potential placement for pod on node N, preempting K victims" to the FailedScheduling
    # message and the PodScheduled condition.
    preemption_sentence: bool = True
    # Before v1.37 (dynamicresources.go PostFilter): DynamicResources' PostFilter, which runs
    # before DefaultPreemption's, says "no new claims to deallocate" for a pod without claims,
    # and the message joins it to preemption's words with ", "; from v1.37 it says nothing.
    dra_postfilter_sentence: bool = False
    # v1.37 (preemption/util.go FilterVictimsWithPDBViolation): a victim counts against its
    # PDBs until the first one it overdraws; before, every PDB matching it was charged.
    pdb_first_violation: bool = True
    # v1.35 (preemption.go prepareCandidate, prepareCandidateAsync; v1.36 executor.go): a
    # victim already being deleted gets no API call (no DisruptionTarget, no deletion, no
    # Preempted event); with every victim being deleted, nothing is done at all (lower-priority
    # pods nominated to the node keep their nomination). Before, each victim was preempted.
    deleting_victims_skipped: bool = True
    # v1.37 (plugin.go mergeAffinityTermNamespacesIfNotEmpty by pointer): the incoming pod's
    # namespaceSelector selects only the namespaces it matches; before, a selector matching an
    # empty label set (DoesNotExist, NotIn) matched existing pods of every namespace.
    namespace_selector_fixed: bool = True
    # v1.37 (#139057, scheduling_queue.go addPod): a pod with scheduling gates and a
    # nominatedNodeName holds room on that node; before, only pods in the active queue did.
    gated_nominations: bool = True
    # v1.37 (#140047, component-helpers resource/helpers.go): a pod being resized counts the
    # largest of its spec, actuated and allocated totals; before, the largest per container.
    resize_pod_totals: bool = True
    # NodeVolumeLimits' driver check, with VolumeLimitScaling on (nodevolumelimits/csi.go
    # checkCSIDriverOnNode): from v1.36 only a CSIDriver with preventPodSchedulingIfMissing
    # asks for it; in v1.35 (the field did not exist) any CSIDriver object does.
    csi_driver_opt_in: bool = True
    # v1.36 (schedule_one.go handleSchedulingFailure: ``pod = podInfo.Pod`` after re-reading
    # the informer's pod): a binding cycle that fails clears the nominatedNodeName written
    # before PreBind (NominatedNodeNameForExpectation); in v1.35 the clear compares with the
    # pod as queued, without it, and sends nothing: the nomination stays until the binding.
    failure_rereads_nomination: bool = True
    # v1.35 (schedule_one.go handleBindingCycleError): a failed binding cycle always passes
    # clearNominatedNode; v1.34's newFailureNominatingInfo passes none while
    # NominatedNodeNameForExpectation is on (the nominator then follows the pod's status).
    failure_clears_gated_nomination: bool = True
    # DynamicResources' allocator: its features and its release's behaviour.
    devices: DeviceFeatures = DeviceFeatures()

    @property
    def version(self) -> str:
        """The release as ``--emulated-version`` names it: "1.37"."""
        return f"1.{self.minor}"

    def gate(self, name: str) -> bool:
        """The gate's value in force (False where the release has no such gate)."""
        return self.gates.get(name, False)

    def describe(self) -> str:
        """One line for the log: which release, why, and the gates set apart from defaults."""
        if self.pinned:
            why = "pinned by --emulated-version"
        elif self.server and _minor_of(self.server) != self.minor:
            why = (
                f"the API server is {self.server}, outside the releases plumb follows "
                f"(v1.{OLDEST} to v1.{NEWEST}): the nearest one"
            )
        else:
            why = f"the API server is {self.server}" if self.server else "the default"
        changed = sorted(
            f"{name}={str(value).lower()}"
            for name, value in self.gates.items()
            if value != GATES[name].defaults[self.minor]
        )
        gates = f"; feature gates {','.join(changed)}" if changed else ""
        return f"deciding as kube-scheduler v{self.version} ({why}){gates}"


class EmulationError(ValueError):
    """A bad ``--emulated-version`` or ``--feature-gates`` (the message says which and why)."""


def emulate(
    minor: int, gates: Mapping[str, bool] | None = None, *, server: str = "", pinned: bool = False
) -> Emulation:
    """kube-scheduler v1.``minor``'s behaviour with ``gates`` set over its defaults."""
    if minor not in MINORS:
        raise EmulationError(
            f"--emulated-version: 1.{minor} is not one plumb decides as; it follows "
            f"1.{OLDEST} to 1.{NEWEST}"
        )
    values = {g.name: g.defaults[minor] for g in GATES.values() if minor in g.defaults}
    for name, value in (gates or {}).items():
        values[name] = _settable(name, value, minor)
    return Emulation(
        minor=minor,
        server=server,
        pinned=pinned,
        gates=values,
        balanced_change=minor >= 36,
        image_volumes=0 if minor < 36 else 1 if minor == 36 else 2,
        declared_features={34: 0, 35: 1, 36: 2}.get(minor, 3),
        preemption_sentence=minor >= 37,
        dra_postfilter_sentence=minor < 37,
        pdb_first_violation=minor >= 37,
        deleting_victims_skipped=minor >= 35,
        namespace_selector_fixed=minor >= 37,
        gated_nominations=minor >= 37,
        resize_pod_totals=minor >= 37,
        csi_driver_opt_in=minor >= 36,
        failure_rereads_nomination=minor >= 36,
        failure_clears_gated_nomination=minor >= 35,
        devices=_device_features(minor, values),
    )


# The allocator variants of each release, most stable first, and the features each supports
# (SupportedFeatures in structured/internal/{stable,incubating,experimental}/allocator_*.go
# of k8s.io/dynamic-resource-allocation v0.3N); kube-scheduler runs the first that supports
# every feature on (structured/allocator.go NewAllocator). v1.34 counts DeviceBinding and
# DeviceStatus apart, so DRAResourceClaimDeviceStatus, on by default, selects experimental.
_BASIC = frozenset({"admin", "prioritized", "partitionable", "taints"})
_BOUND = _BASIC | {"binding", "consumable"}
_VARIANTS: Mapping[int, tuple[tuple[str, frozenset[str]], ...]] = {
    34: (
        ("stable", frozenset()),
        ("incubating", _BASIC),
        ("experimental", _BASIC | {"binding", "status", "consumable"}),
    ),
    35: (("stable", frozenset()), ("incubating", _BASIC), ("experimental", _BOUND)),
    36: (("stable", _BASIC), ("incubating", _BOUND), ("experimental", _BOUND | {"lists"})),
    37: (
        ("stable", _BASIC),
        ("incubating", _BOUND | {"fractional"}),
        ("experimental", _BOUND | {"fractional", "lists", "optional", "derived", "groups"}),
    ),
}


def _allocator_variant(minor: int, features: frozenset[str]) -> str:
    for name, supported in _VARIANTS[minor]:
        if features <= supported:
            return name
    return "experimental"


def _device_features(minor: int, gates: Mapping[str, bool]) -> DeviceFeatures:
    """AllocatorFeatures (dynamicresources.go) for these gates, and what the allocator variant
    they select does in this release (k8s.io/dynamic-resource-allocation structured/)."""
    status = gates.get("DRAResourceClaimDeviceStatus", False)
    binding = gates.get("DRADeviceBindingConditions", False) and status
    on = {
        "admin": gates.get("DRAAdminAccess", False),
        "prioritized": gates.get("DRAPrioritizedList", False),
        "partitionable": gates.get("DRAPartitionableDevices", False),
        "taints": gates.get("DRADeviceTaints", False),
        "binding": gates.get("DRADeviceBindingConditions", False) if minor == 34 else binding,
        "status": minor == 34 and status,
        "consumable": gates.get("DRAConsumableCapacity", False),
        "fractional": gates.get("DRAFractionalCapacityRange", False),
        "lists": gates.get("DRAListTypeAttributes", False),
        "optional": gates.get("DRAOptionalNodeOperations", False),
        "derived": gates.get("DRADerivedAttributes", False),
        "groups": gates.get("DRADeviceCompatibilityGroups", False),
    }
    variant = _allocator_variant(minor, frozenset(name for name, value in on.items() if value))
    # What the incubating variant gained in v1.36 and every experimental one has.
    newer = variant == "experimental" or (variant == "incubating" and minor >= 36)
    return DeviceFeatures(
        admin_access=on["admin"],
        prioritized_list=on["prioritized"],
        partitionable_devices=on["partitionable"],
        device_taints=on["taints"],
        binding_conditions=binding,
        consumable_capacity=on["consumable"],
        fractional_capacity_range=on["fractional"],
        counter_slices_everywhere=minor == 36,
        compatibility_groups=on["groups"],
        legacy_pools=minor == 34,
        distinct_attribute=newer,
        distinct_values=minor >= 35,
        distinct_per_request=minor <= 36,
        tolerations_in_results=minor >= 35,
        known_taint_effects_only=minor >= 35,
        binds_to_node=newer,
        claim_config_once=minor >= 37,
        limit_per_request=minor >= 37,
        cel_error_names_device=minor >= 37,
        strict_capacity=minor >= 37,
        extended_resources=gates.get("DRAExtendedResource", False),
    )


NEWEST_EMULATION = emulate(NEWEST)
"""kube-scheduler v1.37 with its default gates: what a profile decides as unless told."""


def _settable(name: str, value: bool, minor: int) -> bool:
    gate = GATES.get(name)
    if gate is None:
        raise EmulationError(
            f"--feature-gates: unrecognized feature gate: {name} (plumb honours "
            f"{', '.join(sorted(GATES))})"
        )
    if minor not in gate.defaults:
        raise EmulationError(
            f"--feature-gates: unrecognized feature gate: {name} (kube-scheduler "
            f"v1.{minor} has no such gate; it came in v1.{min(gate.defaults)})"
        )
    default = gate.defaults[minor]
    if minor in gate.locked and value != default:
        raise EmulationError(
            f"--feature-gates: cannot set feature gate {name} to {str(value).lower()}, "
            f"feature is locked to {str(default).lower()}"
        )
    return value


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``--feature-gates``' value, as kube-scheduler reads it: ``Name=true,Other=false``."""
    gates: dict[str, bool] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise EmulationError(f"--feature-gates: missing bool value for {item}")
        parsed = {"true": True, "false": False}.get(value.lower())
        if parsed is None:
            raise EmulationError(
                f"--feature-gates: invalid value of {name}={value}, err: strconv.ParseBool: "
                f'parsing "{value}": invalid syntax'
            )
        gates[name] = parsed
    return gates


def parse_emulated_version(text: str) -> int:
    """``--emulated-version``'s value: ``1.N`` or ``kube=1.N`` (kube-scheduler's forms)."""
    value = text.strip()
    component, sep, rest = value.partition("=")
    if sep:
        if component.strip() != "kube":
            raise EmulationError(
                f"--emulated-version: {value}: plumb emulates the kube component only"
            )
        value = rest.strip()
    match = re.fullmatch(r"v?1\.(\d+)", value)
    if match is None:
        raise EmulationError(
            f"--emulated-version: {text!r} is not a version of the form 1.N (major.minor)"
        )
    minor = int(match.group(1))
    emulate(minor)  # refuses a release outside the window
    return minor


def _minor_of(git_version: str) -> int | None:
    match = re.match(r"v?1\.(\d+)", git_version)
    return None if match is None else int(match.group(1))


def for_server(
    git_version: str, *, pinned: int | None = None, gates: Mapping[str, bool] | None = None
) -> Emulation:
    """The emulation for an API server of ``git_version`` (its ``/version``), or ``pinned``.

    A server release outside the window is decided as the nearest release of it; one whose
    version cannot be read, as the newest."""
    if pinned is not None:
        return emulate(pinned, gates, server=git_version, pinned=True)
    minor = _minor_of(git_version)
    if minor is None:
        minor = NEWEST
    return emulate(min(max(minor, OLDEST), NEWEST), gates, server=git_version)
