"""VolumeBinding: a pod's claims must be bound, or bindable on the node (PreFilter, filter), and
for the node chosen, which PV each unbound claim binds to or that it is provisioned there (plan).

As kube-scheduler v1.34's VolumeBinding and its volume binder:

- PreFilter: every claim must exist (an ephemeral one may not exist yet, and must be the pod's
  own), not be Lost nor being deleted; a claim not fully bound (volumeName and the PV
  controller's bind-completed annotation) must be of a WaitForFirstConsumer class without a
  volumeName, else the pod "has unbound immediate PersistentVolumeClaims".
- Filter, per node: each bound claim's PV must exist and its required node affinity match the
  node's labels (kube-scheduler checks a node with labels only, so matchFields see the name
  ""). Each
  unbound claim carrying ``volume.kubernetes.io/selected-node`` fits only that node and is
  provisioned there; the others, smallest request first, each take the smallest available PV of
  their class that fits (capacity, volume mode, attributes class, access modes, selector,
  node affinity; a PV pre-bound to the claim is taken if it fits the node, and no other), and
  those left over need dynamic provisioning: a class with a provisioner other than
  ``kubernetes.io/no-provisioner`` whose allowedTopologies the node matches.
  A claim to provision whose capacity is tracked (volumecapacity: its CSIDriver has
  storageCapacity) also needs a CSIStorageCapacity of its class that reaches the node and holds
  it; the claims to provision are checked in order, and the first that fails decides.
- Reasons, in kube-scheduler's order, several per node possible: NODE_CONFLICT, BIND_CONFLICT,
  NOT_ENOUGH_SPACE, PV_NOT_EXIST.
- Score (StorageCapacityScoring; volumecapacity has the function and the shape): per node, the
  PVs chosen for the claims against their capacities, else the volumes to provision against the
  capacity found for them; 0 for a pod whose claims are all bound.

Ties between PVs of equal size go to the first by name (kube-scheduler's order there is its
cache's, which is not defined).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from plumb.backend.cache import csiobjects, snapshot, volumes
from plumb.backend.records import objects, specs
from plumb.framework.plugins import nodeaffinity, volumecapacity

NAME = "VolumeBinding"
# kube-scheduler's ConflictReasons (volumebinding/binder.go).
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
REASONS = (NODE_CONFLICT, BIND_CONFLICT, NOT_ENOUGH_SPACE, PV_NOT_EXIST)
# PreFilter (volume_binding.go).
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
# Every Filter failure is UnschedulableAndUnresolvable: evicting pods binds no volume.
UNRESOLVABLE = True
PREFILTER_CODE = volumes.UNSCHEDULABLE_AND_UNRESOLVABLE
NAME_FIELD = "metadata.name"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PodClaims:
    """The pod's claims as PreFilter sorted them (GetPodVolumeClaims)."""

    bound: tuple[volumes.Claim, ...] = ()
    delayed: tuple[volumes.Claim, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.bound and not self.delayed


def prefilter(
    pod: objects.PodInfo, store: volumes.Volumes
) -> tuple[tuple[str, str] | None, PodClaims]:
    """((code, message) of a failure or None, the pod's bound and delayed claims)."""
    found: list[volumes.Claim] = []
    for ref in pod.claims:
        claim = store.claim(pod.namespace, ref.name)
        if claim is None:
            if ref.ephemeral:
                message = (
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim "
                    f'"{ref.name}"'
                )
                return (PREFILTER_CODE, message), PodClaims()
            return (PREFILTER_CODE, f'persistentvolumeclaim "{ref.name}" not found'), PodClaims()
        if claim.phase == volumes.CLAIM_LOST:
            message = (
                f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume '
                f'"{claim.volume_name}"'
            )
            return (PREFILTER_CODE, message), PodClaims()
        if claim.deleting:
            message = f'persistentvolumeclaim "{claim.name}" is being deleted'
            return (PREFILTER_CODE, message), PodClaims()
        if ref.ephemeral and claim.controller_uid != pod.uid:
            message = (
                f"PVC {claim.namespace}/{claim.name} was not created for pod "
                f"{pod.namespace}/{pod.name} (pod is not owner)"
            )
            return (PREFILTER_CODE, message), PodClaims()
        found.append(claim)
    bound: list[volumes.Claim] = []
    delayed: list[volumes.Claim] = []
    immediate = False
    for claim in found:
        if claim.fully_bound:
            bound.append(claim)
            continue
        storage_class = store.storage_class(claim.class_name) if claim.class_name else None
        if storage_class is not None and storage_class.binding_mode is None:
            message = (
                f'running PreFilter plugin "{NAME}": VolumeBindingMode not set for '
                f'StorageClass "{claim.class_name}"'
            )
            return (volumes.ERROR, message), PodClaims()
        if storage_class is not None and storage_class.delayed and not claim.volume_name:
            delayed.append(claim)
        else:
            immediate = True
    if immediate:
        return (PREFILTER_CODE, UNBOUND_IMMEDIATE), PodClaims()
    return None, PodClaims(bound=tuple(bound), delayed=tuple(delayed))


# Node affinity of a PV over the statics --------------------------------------------------------


def pv_fits(pv: volumes.PersistentVolume, statics: snapshot.NodeStatics) -> snapshot.BoolArray:
    """Where the PV's required node affinity matches the node's labels (CheckNodeAffinity)."""
    n = len(statics)
    if pv.node_terms is None:
        return np.ones(n, dtype=np.bool_)
    any_term = np.zeros(n, dtype=np.bool_)
    for term in pv.node_terms:
        any_term |= _term(term, statics)
    return any_term


def _term(term: specs.NodeSelectorTerm, statics: snapshot.NodeStatics) -> snapshot.BoolArray:
    n = len(statics)
    none = np.zeros(n, dtype=np.bool_)
    if not term.expressions and not term.fields:
        return none
    ok = np.ones(n, dtype=np.bool_)
    for requirement in term.expressions:
        match = nodeaffinity.label_requirement(requirement, statics)
        if match is None:
            return none
        ok &= match
    for requirement in term.fields:
        # The node kube-scheduler checks has labels only: its name is "".
        if (
            requirement.key != NAME_FIELD
            or requirement.operator not in ("In", "NotIn")
            or len(requirement.values) != 1
        ):
            return none
        if requirement.operator == "In" and requirement.values[0] != "":
            return none
        if requirement.operator == "NotIn" and requirement.values[0] == "":
            return none
    return ok


def pv_fits_labels(pv: volumes.PersistentVolume, labels: Mapping[str, str]) -> bool:
    """pv_fits for one node given by its labels (the plan's node)."""
    if pv.node_terms is None:
        return True
    for term in pv.node_terms:
        if not term.expressions and not term.fields:
            continue
        ok = all(_label_one(r, labels) for r in term.expressions) and all(
            r.key == NAME_FIELD
            and len(r.values) == 1
            and (
                (r.operator == "In" and r.values[0] == "")
                or (r.operator == "NotIn" and r.values[0] != "")
            )
            for r in term.fields
        )
        if ok:
            return True
    return False


def _label_one(requirement: specs.Requirement, labels: Mapping[str, str]) -> bool:
    operator, values = requirement.operator, requirement.values
    if operator in ("In", "NotIn") and not values:
        return False
    if operator in ("Exists", "DoesNotExist") and values:
        return False
    return requirement.matches(labels)


# Matching claims to PVs ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Candidates:
    """One delayed claim's PVs, node aside: ``prebound`` the first PV bound to it that passes
    the node-independent checks (it alone is considered then), else ``free`` from smallest."""

    claim: volumes.Claim
    prebound: volumes.PersistentVolume | None
    free: tuple[volumes.PersistentVolume, ...]


def _candidates(claim: volumes.Claim, store: volumes.Volumes) -> _Candidates:
    """FindMatchingVolume's checks that do not depend on the node."""
    request = claim.request or 0
    free: list[volumes.PersistentVolume] = []
    for pv in store.pvs_of_class(claim.class_name):
        if pv.claim is not None and not pv.bound_to(claim):
            continue
        if pv.capacity < request or pv.volume_mode != claim.volume_mode:
            continue
        if pv.attributes_class != claim.attributes_class or pv.deleting:
            continue
        if pv.bound_to(claim):
            return _Candidates(claim=claim, prebound=pv, free=())
        if pv.phase != volumes.AVAILABLE:
            continue
        if claim.selector_problem is not None:
            continue
        if claim.selector is not None and not claim.selector.matches(pv.labels):
            continue
        if not claim.access_modes <= pv.access_modes:
            continue
        free.append(pv)
    free.sort(key=lambda pv: (pv.capacity, pv.name))
    return _Candidates(claim=claim, prebound=None, free=tuple(free))


def _by_size(claims: tuple[volumes.Claim, ...]) -> list[volumes.Claim]:
    return sorted(claims, key=lambda claim: claim.request or 0)


def _provisionable(claim: volumes.Claim, store: volumes.Volumes, labels: Mapping[str, str]) -> bool:
    """checkVolumeProvisions for one claim and node: a provisioner, and allowedTopologies."""
    storage_class = store.storage_class(claim.class_name)
    if storage_class is None:
        return False
    if not storage_class.provisioner or storage_class.provisioner == volumes.NO_PROVISIONER:
        return False
    terms = storage_class.allowed_topologies
    if not terms:
        return True
    return any(term and all(labels.get(key) in allowed for key, allowed in term) for term in terms)


Found = csiobjects.StorageCapacity | None
"""The CSIStorageCapacity that holds a volume to provision (None: its capacity is untracked)."""


def _provisions(
    claims: list[volumes.Claim], store: volumes.Volumes, labels: Mapping[str, str]
) -> tuple[bool, bool, tuple[Found, ...]]:
    """checkVolumeProvisions for one node: (every claim provisionable there, enough storage,
    each claim's capacity found); the first claim that fails decides."""
    found: list[Found] = []
    for claim in claims:
        if not _provisionable(claim, store, labels):
            return False, True, ()
        storage_class = store.storage_class(claim.class_name)
        assert storage_class is not None  # _provisionable checked it
        enough, capacity = volumecapacity.capacity_for(claim, storage_class, store, labels)
        if not enough:
            return True, False, ()
        found.append(capacity)
    return True, True, tuple(found)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _NodeResult:
    reasons: tuple[str, ...]
    bindings: tuple[volumes.StaticBinding, ...] = ()
    provisions: tuple[volumes.Claim, ...] = ()
    capacities: tuple[Found, ...] = ()  # per provision, when the node fits


def _find(
    node: str,
    labels: Mapping[str, str],
    claims: PodClaims,
    candidates: list[_Candidates],
    store: volumes.Volumes,
    fits: dict[str, bool],
) -> _NodeResult:
    """FindPodVolumes for one node; ``fits`` memoises PV name -> fits this node."""

    def fit(pv: volumes.PersistentVolume) -> bool:
        known = fits.get(pv.name)
        if known is None:
            known = fits[pv.name] = pv_fits_labels(pv, labels)
        return known

    node_ok, pvs_found = True, True
    for claim in claims.bound:
        pv = store.pv(claim.volume_name)
        if pv is None:
            pvs_found = False
            break
        if not fit(pv):
            node_ok = False
            break
    unbound_ok, enough = True, True
    bindings: list[volumes.StaticBinding] = []
    provisions: list[volumes.Claim] = []
    capacities: tuple[Found, ...] = ()
    done = False
    for claim in claims.delayed:
        if claim.selected_node is not None:
            if claim.selected_node != node:
                unbound_ok, done = False, True
                break
            provisions.append(claim)
    if not done:
        chosen: set[str] = set()
        for candidate in candidates:
            picked = None
            if candidate.prebound is not None:
                if candidate.prebound.name not in chosen and fit(candidate.prebound):
                    picked = candidate.prebound
            else:
                picked = next(
                    (pv for pv in candidate.free if pv.name not in chosen and fit(pv)), None
                )
            if picked is None:
                provisions.append(candidate.claim)
                unbound_ok = False
                continue
            chosen.add(picked.name)
            bindings.append(volumes.StaticBinding(claim=candidate.claim, pv=picked))
        if provisions:
            unbound_ok, enough, capacities = _provisions(provisions, store, labels)
    reasons = []
    if not node_ok:
        reasons.append(NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(BIND_CONFLICT)
    if not enough:
        reasons.append(NOT_ENOUGH_SPACE)
    if not pvs_found:
        reasons.append(PV_NOT_EXIST)
    return _NodeResult(
        reasons=tuple(reasons),
        bindings=tuple(bindings),
        provisions=tuple(provisions),
        capacities=capacities,
    )


def _matching_candidates(claims: PodClaims, store: volumes.Volumes) -> list[_Candidates]:
    to_match = tuple(c for c in claims.delayed if c.selected_node is None)
    return [_candidates(claim, store) for claim in _by_size(to_match)]


def filter(
    statics: snapshot.NodeStatics, store: volumes.Volumes, claims: PodClaims
) -> dict[str, snapshot.BoolArray]:
    """Per reason (in REASONS order, only those some node has): where the node fails with it."""
    n = len(statics)
    if claims.empty:
        return {}
    masks = {reason: np.zeros(n, dtype=np.bool_) for reason in REASONS}
    candidates = _matching_candidates(claims, store)
    simple = len(candidates) <= 1 and all(c.selected_node is None for c in claims.delayed)
    if simple:
        _filter_vectorised(statics, store, claims, candidates, masks)
    else:
        for i, node in enumerate(statics.nodes):
            result = _find(node.name, node.labels, claims, candidates, store, {})
            for reason in result.reasons:
                masks[reason][i] = True
    return {reason: mask for reason, mask in masks.items() if mask.any()}


def _filter_vectorised(
    statics: snapshot.NodeStatics,
    store: volumes.Volumes,
    claims: PodClaims,
    candidates: list[_Candidates],
    masks: dict[str, snapshot.BoolArray],
) -> None:
    """The filter over all nodes at once, for bound claims and at most one claim to match."""
    n = len(statics)
    decided = np.zeros(n, dtype=np.bool_)
    for claim in claims.bound:
        pv = store.pv(claim.volume_name)
        if pv is None:
            masks[PV_NOT_EXIST] |= ~decided
            break
        misfit = ~pv_fits(pv, statics) & ~decided
        masks[NODE_CONFLICT] |= misfit
        decided |= misfit
    if not candidates:
        return
    candidate = candidates[0]
    if candidate.prebound is not None:
        matched = pv_fits(candidate.prebound, statics)
    else:
        matched = np.zeros(n, dtype=np.bool_)
        for pv in candidate.free:
            matched |= pv_fits(pv, statics)
            if matched.all():
                break
    if matched.all():
        return
    # Nodes without a PV: dynamic provisioning, where the class has a provisioner and the
    # node matches its allowedTopologies, and, if tracked, a capacity holds the volume there.
    provisionable = _provisionable_mask(candidate.claim, store, statics)
    masks[BIND_CONFLICT] |= ~matched & ~provisionable
    storage_class = store.storage_class(candidate.claim.class_name)
    if storage_class is not None and provisionable.any():
        enough = volumecapacity.capacity_index(candidate.claim, storage_class, store, statics)[0]
        masks[NOT_ENOUGH_SPACE] |= ~matched & provisionable & ~enough


def _provisionable_mask(
    claim: volumes.Claim, store: volumes.Volumes, statics: snapshot.NodeStatics
) -> snapshot.BoolArray:
    n = len(statics)
    storage_class = store.storage_class(claim.class_name)
    if (
        storage_class is None
        or not storage_class.provisioner
        or storage_class.provisioner == volumes.NO_PROVISIONER
    ):
        return np.zeros(n, dtype=np.bool_)
    if not storage_class.allowed_topologies:
        return np.ones(n, dtype=np.bool_)
    any_term = np.zeros(n, dtype=np.bool_)
    for term in storage_class.allowed_topologies:
        if not term:
            continue
        ok = np.ones(n, dtype=np.bool_)
        for key, allowed in term:
            wanted = [w for w in (statics.value_id(key, v) for v in allowed) if w >= 0]
            ok &= np.isin(statics.label_ids(key), wanted)
        any_term |= ok
    return any_term


def plan(
    pod: objects.PodInfo, node: objects.NodeInfo, store: volumes.Volumes, claims: PodClaims
) -> volumes.BindingPlan:
    """For the node the pod was placed on: the PV each unbound claim binds to, and the claims to
    provision there (empty when every claim is bound). Raises ValueError when the node does not
    fit the pod's claims (the filter said otherwise, or the store changed since)."""
    plan_empty = volumes.BindingPlan(
        namespace=pod.namespace, pod=pod.name, pod_uid=pod.uid, node=node.name
    )
    if not claims.delayed:
        return plan_empty
    candidates = _matching_candidates(claims, store)
    result = _find(node.name, node.labels, claims, candidates, store, {})
    if result.reasons:
        raise ValueError(
            f"pod {pod.namespace}/{pod.name} does not fit node {node.name}: "
            + ", ".join(result.reasons)
        )
    return dataclasses.replace(plan_empty, bindings=result.bindings, provisions=result.provisions)


# Score (StorageCapacityScoring) ----------------------------------------------------------------


def score(
    statics: snapshot.NodeStatics,
    store: volumes.Volumes,
    claims: PodClaims,
    shape: volumecapacity.Shape,
) -> np.ndarray:
    """VolumeBinding's score per node (0-100, not normalised): what the node's volumes for the
    pod would leave free, through ``shape``. Nodes the filter rejects score 0 (never read)."""
    n = len(statics)
    scores = np.zeros(n, dtype=np.int64)
    if not claims.delayed:
        return scores  # every claim bound: nothing binds or is provisioned, no class scored
    candidates = _matching_candidates(claims, store)
    if len(candidates) == 1 and all(c.selected_node is None for c in claims.delayed):
        return _score_one_claim(statics, store, candidates[0], shape)
    for i, node in enumerate(statics.nodes):
        result = _find(node.name, node.labels, claims, candidates, store, {})
        if not result.reasons:
            scores[i] = volumecapacity.node_score(_uses(result), shape)
    return scores


def _uses(result: _NodeResult) -> list[volumecapacity.ClassUse]:
    """The classes a node's volumes use: the static bindings' when there are any, else the
    provisions whose capacity was checked (volume_binding.go Score)."""
    requested: dict[str, int] = {}
    capacity: dict[str, int] = {}
    if result.bindings:
        for binding in result.bindings:
            name = binding.pv.storage_class
            requested[name] = requested.get(name, 0) + (binding.claim.request or 0)
            capacity[name] = capacity.get(name, 0) + binding.pv.capacity
    else:
        for claim, found in zip(result.provisions, result.capacities, strict=True):
            if found is None:
                continue
            name = claim.class_name
            requested[name] = requested.get(name, 0) + (claim.request or 0)
            # Not summed: two claims of a class on one node share its capacity. kube-scheduler
            # reads the capacity field (a CSIStorageCapacity with only maximumVolumeSize makes
            # it dereference nil); plumb reads none as 0.
            capacity[name] = found.capacity or 0
    return [volumecapacity.ClassUse(requested[name], capacity[name]) for name in requested]


def _score_one_claim(
    statics: snapshot.NodeStatics,
    store: volumes.Volumes,
    candidate: _Candidates,
    shape: volumecapacity.Shape,
) -> np.ndarray:
    """``score`` for bound claims and one claim to match, over all nodes at once: per node the
    smallest PV that fits it (or the one pre-bound), else the capacity found to provision."""
    n = len(statics)
    scores = np.zeros(n, dtype=np.int64)
    claim = candidate.claim
    request = claim.request or 0
    pvs = (candidate.prebound,) if candidate.prebound is not None else candidate.free
    taken = np.zeros(n, dtype=np.bool_)
    for pv in pvs:
        here = pv_fits(pv, statics) & ~taken
        if here.any():
            scores[here] = volumecapacity.class_score(request, pv.capacity, shape)
            taken |= here
        if taken.all():
            return scores
    storage_class = store.storage_class(claim.class_name)
    if storage_class is None:
        return scores
    _enough, considered, found = volumecapacity.capacity_index(claim, storage_class, store, statics)
    for i, capacity in enumerate(considered):
        here = (found == i) & ~taken
        if here.any():
            scores[here] = volumecapacity.class_score(request, capacity.capacity or 0, shape)
    return scores
