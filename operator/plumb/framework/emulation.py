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
    )
}
"""The gates ``--feature-gates`` takes, by name."""


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
