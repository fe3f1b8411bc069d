"""DynamicResources: a pod's ResourceClaims allocated on the node it goes to, as kube-scheduler's
plugin decides it (plugins/dynamicresources/dynamicresources.go), over plumb's DRA store.

- PreEnqueue (the queue, backend/cache/dra.py ``pod_claims``): a pod whose claims are not all
  there waits, untried.
- PreFilter (``prefilter``): the pod's claims looked up; a claim allocated and reserved for as
  many pods as it may be (and not this one) is "resourceclaim in use"; one being allocated for
  another pod (assumed, not yet written) waits; a request's DeviceClass must exist. Each
  failure names no node: every node is rejected for it, UnschedulableAndUnresolvable.
- Filter (``filter``): per node, a claim allocated already must be reachable from it
  ("resourceclaim not available on the node"); the claims still to allocate go through the
  structured allocator (framework/devices/allocator.py) with the devices every other claim
  holds (allocated, or assumed by plumb) taken. Its words are the node's reason; an allocator
  error (a broken selector, a missing class) ends the pod's attempt as an error. kube-scheduler
  runs this filter after every other but NodeDeclaredFeatures, so its reasons are compiled as
  reasons checked last (kernel/contract.py), and the allocator runs only on nodes the filters
  before it left (the static ones: resources and constraints are the kernel's, and a node that
  fails those reports them first).
- Score (``filter`` too): with prioritized lists, the node's allocation scores the subrequests
  it chose (computeScore), normalised over the feasible nodes in the kernel.
- Reserve (``allocate_on``): the chosen node's allocation found again over the store as it is
  then, and assumed there until PreBind's write is seen (claimreservations.py writes it).
- Extended resources backed by DRA (DRAExtendedResource): the claim the scheduler makes for
  them joins the pod's claims, last, node by node (extendedresources.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from plumb.backend.cache import dra, snapshot
from plumb.backend.records import draobjects, objects
from plumb.framework import emulation
from plumb.framework.devices import allocator, availability, expressions
from plumb.framework.plugins import extendedresources

NAME = "DynamicResources"
# Filter's and PreFilter's words (dynamicresources.go).
IN_USE = "resourceclaim in use"
NOT_AVAILABLE = "resourceclaim not available on the node"
BEING_ALLOCATED = "resource claim {claim} is in the process of being allocated"
NO_CLASS = "request {request}: device class {device_class} does not exist"
NO_PRIORITIZED_LIST = (
    "resource claim {claim}, request {request}: has subrequests, but the DRAPrioritizedList "
    "feature is disabled"
)
UNKNOWN_REQUEST = "resource claim {claim}, request {request}: unknown request type"
# statusUnschedulable is UnschedulableAndUnresolvable: evicting pods frees no device here.
UNRESOLVABLE = True
# resourceapi.ResourceClaimReservedForMaxSize.
RESERVED_FOR_MAX = 256
# A Filter error: how kube-scheduler's framework wraps it (runtime/framework.go RunFilterPlugins).
FILTER_ERROR = 'running "{plugin}" filter plugin: {error}'
# PostFilter's words, which the FailedScheduling message carries before DefaultPreemption's:
# for a pod whose PreFilter kept no claims, and for one with claims it could not help (both up
# to v1.36 only, Emulation.dra_postfilter_sentence), and after freeing an idle claim or
# deleting the claim an earlier cycle made for extended resources (every release).
NO_CLAIMS = "no new claims to deallocate"
STILL_NOT_SCHEDULABLE = "still not schedulable"
DEALLOCATED = "deallocation of ResourceClaim completed"


def post_filter_words(kube: emulation.Emulation, said: str) -> str:
    """What DynamicResources' PostFilter ``said`` (one of the three above) as the release
    prints it ("" when it prints nothing)."""
    if said in (DEALLOCATED, extendedresources.DELETED) or kube.dra_postfilter_sentence:
        return said
    return ""


@dataclasses.dataclass(frozen=True, slots=True)
class Failure:
    """PreFilter's verdict on every node, or an allocator error (``error``: the attempt ends
    as an error, retried after a backoff, as kube-scheduler's Error status)."""

    message: str
    error: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PodDevices:
    """PreFilter's state: the pod's claims in spec order, those still to allocate, and its
    extended resources a class maps (None: none)."""

    claims: tuple[draobjects.ResourceClaim, ...]
    to_allocate: tuple[draobjects.ResourceClaim, ...]
    extended: extendedresources.PodResources | None = None

    @property
    def empty(self) -> bool:
        return not self.claims and self.extended is None


def _reserved_for(claim: draobjects.ResourceClaim, pod: objects.PodInfo) -> bool:
    return any(c.uid == pod.uid for c in claim.reserved_for)


def _check_classes(
    claim: draobjects.ResourceClaim, store: dra.DraStore, features: emulation.DeviceFeatures
) -> str | None:
    for request in claim.spec.requests:
        if request.exactly is not None:
            if store.device_class(request.exactly.device_class) is None:
                return NO_CLASS.format(
                    request=request.name, device_class=request.exactly.device_class
                )
        elif request.first_available:
            if not features.prioritized_list:
                return NO_PRIORITIZED_LIST.format(claim=claim.key, request=request.name)
            for sub in request.first_available:
                if store.device_class(sub.device_class) is None:
                    return NO_CLASS.format(
                        request=f"{request.name}/{sub.name}", device_class=sub.device_class
                    )
        else:
            return UNKNOWN_REQUEST.format(claim=claim.key, request=request.name)
    return None


def prefilter(
    pod: objects.PodInfo, store: dra.DraStore, features: emulation.DeviceFeatures
) -> PodDevices | Failure | None:
    """The pod's claims (None: it has none, the plugin skips it), or why no node will do."""
    if not pod.resource_claims and not pod.device_requests:
        return None
    claims: tuple[draobjects.ResourceClaim, ...] = ()
    if pod.resource_claims:
        lookup = store.pod_claims(pod)
        if lookup.error:
            return Failure(lookup.error)
        claims = tuple(claim for _, claim in lookup.claims)
    extended = None
    if features.extended_resources:
        extended = extendedresources.prefilter(pod, store)
    if not claims and extended is None:
        return None
    to_allocate = []
    for claim in claims:
        if claim.allocation is not None:
            if len(claim.reserved_for) >= RESERVED_FOR_MAX and not _reserved_for(claim, pod):
                return Failure(IN_USE)
            continue
        if store.pending(claim.namespace, claim.name) is not None:
            return Failure(BEING_ALLOCATED.format(claim=claim.key))
        problem = claim.problem or _check_classes(claim, store, features)
        if problem is not None:
            return Failure(problem)
        to_allocate.append(claim)
    return PodDevices(claims=claims, to_allocate=tuple(to_allocate), extended=extended)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeVerdicts:
    """Filter over the nodes: ``fails`` and each failing node's reason (an index into
    ``reasons``), the raw score of each node that passes, or an error for the whole pod."""

    fails: snapshot.BoolArray
    reason: np.ndarray  # int32 per node, -1 where it passes
    reasons: tuple[str, ...]
    raw_score: np.ndarray  # int64 per node
    error: str | None = None
    # Counting's verdict for a pod whose claims are all still to allocate (availability.py).
    counted: availability.FastVerdict | None = None


Matcher = allocator.DeviceMatcher
# Selector verdicts, each kept until its device's slice changes (the feed forgets a deleted
# slice's): one cache for the process, as kube-scheduler's plugin keeps one.
VERDICTS = expressions.SelectorVerdicts()
# The node-local devices as arrays, with the match of each request kept per device.
AVAILABILITY = availability.Availability()


def matcher(verdicts: expressions.SelectorVerdicts) -> Matcher:
    """The allocator's selector evaluation, each verdict kept until its slice changes."""

    def matches(
        expression: str,
        driver: str,
        pool: str,
        slice: draobjects.ResourceSlice,
        device: draobjects.Device,
    ) -> bool:
        return verdicts.matches(expression, slice, device)

    return matches


def _classes(store: dra.DraStore) -> dict[str, draobjects.DeviceClass]:
    return {c.name: c for c in store.classes()}


def _allocate(
    claims: Sequence[draobjects.ResourceClaim],
    node: objects.NodeInfo,
    store: dra.DraStore,
    features: emulation.DeviceFeatures,
    state: dra.AllocatedState,
    matches: Matcher,
    classes: Mapping[str, draobjects.DeviceClass],
) -> allocator.AllocationOutcome:
    pools = store.pools(node, allocator.pool_rules(features))
    return allocator.allocate(
        node=node,
        claims=claims,
        pools=pools,
        classes=classes,
        state=state,
        features=features,
        matches=matches,
    )


def filter(
    devices: PodDevices,
    statics: snapshot.NodeStatics,
    visit: snapshot.BoolArray,
    store: dra.DraStore,
    features: emulation.DeviceFeatures,
    matches: Matcher,
    *,
    scored: bool,
    fast: bool = True,
) -> NodeVerdicts:
    """Filter (and Score, when ``scored``) on the nodes ``visit`` marks (those the filters
    before it pass); the others pass here, as kube-scheduler never asks this plugin of them.
    ``fast``: nodes where counting devices decides (framework/devices/availability.py) are
    decided so, the allocator runs on the others (off: the allocator on every node)."""
    total = len(statics)
    fails = np.zeros(total, dtype=np.bool_)
    reason = np.full(total, -1, dtype=np.int32)
    raw = np.zeros(total, dtype=np.int64)
    reasons: dict[str, int] = {}
    state = store.allocated(consumable=features.consumable_capacity)
    classes = _classes(store)  # once per pod, not per node

    def fail(n: int, message: str) -> None:
        fails[n] = True
        reason[n] = reasons.setdefault(message, len(reasons))

    allocated = [c for c in devices.claims if c.allocation is not None]
    todo = visit
    counted = (
        AVAILABILITY.verdict(devices.to_allocate, statics, store, features, matches)
        if fast and devices.to_allocate and devices.extended is None
        else None
    )
    if counted is not None:
        # Nodes where counting free matching devices is the allocator's answer (availability.py).
        decided = visit & counted.decided
        if allocated:
            decided &= np.fromiter(
                (all(_reaches(c, node) for c in allocated) for node in statics.nodes),
                dtype=np.bool_,
                count=total,
            )
        failing = decided & ~counted.passes
        if failing.any():
            fails[failing] = True
            reason[failing] = reasons.setdefault(allocator.CANNOT_ALLOCATE, len(reasons))
        if scored and allocated:
            raw[decided & counted.passes] = allocator.score(
                (c, c.allocation) for c in allocated if c.allocation is not None
            )
        todo = visit & ~decided
    for n in np.flatnonzero(todo):
        node = statics.nodes[int(n)]
        to_allocate = _to_allocate(devices, node)
        if isinstance(to_allocate, str):
            fail(int(n), to_allocate)
            continue
        if any(not _reaches(c, node) for c in allocated):
            fail(int(n), NOT_AVAILABLE)
            continue
        if not to_allocate:
            continue
        outcome = _allocate(to_allocate, node, store, features, state, matches, classes)
        if isinstance(outcome, allocator.AllocationFailed):
            return NodeVerdicts(
                fails=fails,
                reason=reason,
                reasons=tuple(reasons),
                raw_score=raw,
                error=FILTER_ERROR.format(plugin=NAME, error=outcome.message),
            )
        if isinstance(outcome, allocator.Unallocatable):
            fail(int(n), outcome.message)
            continue
        if scored:
            raw[n] = allocator.score(_with_allocations(devices, outcome.allocations))
    return NodeVerdicts(
        fails=fails,
        reason=reason,
        reasons=tuple(reasons),
        raw_score=raw,
        counted=None if allocated else counted,
    )


def _to_allocate(
    devices: PodDevices, node: objects.NodeInfo
) -> tuple[draobjects.ResourceClaim, ...] | str:
    """The claims to allocate on the node: the pod's own, then the claim its extended
    resources need there (if any); or the extended resources' failure there."""
    if devices.extended is None:
        return devices.to_allocate
    made = extendedresources.on_node(devices.extended, node)
    if isinstance(made, str):
        return made
    return devices.to_allocate if made is None else (*devices.to_allocate, made.claim)


def _reaches(claim: draobjects.ResourceClaim, node: objects.NodeInfo) -> bool:
    """Whether an allocated claim's devices are reachable from the node (its allocation's
    node selector; none: every node)."""
    assert claim.allocation is not None
    selection = claim.allocation.node_selection
    return selection is None or dra.reaches(selection, node)


def unavailable(
    devices: PodDevices, nodes: Sequence[objects.NodeInfo]
) -> list[draobjects.ResourceClaim]:
    """The pod's allocated claims some node cannot reach (Filter's unavailableClaims)."""
    return [
        claim
        for claim in devices.claims
        if claim.allocation is not None and any(not _reaches(claim, n) for n in nodes)
    ]


def _with_allocations(
    devices: PodDevices, allocations: Sequence[draobjects.Allocation]
) -> list[tuple[draobjects.ResourceClaim, draobjects.Allocation]]:
    found = iter(allocations)
    out = []
    for claim in devices.claims:
        allocation = claim.allocation if claim.allocation is not None else next(found)
        out.append((claim, allocation))
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Reserved:
    """Reserve's outcome on the chosen node: the claims PreBind writes, each with the
    allocation the cycle made for it (None: allocated already)."""

    node: str
    claims: tuple[tuple[draobjects.ResourceClaim, draobjects.Allocation | None], ...]
    # DRADeviceBindingConditions and DRAResourceClaimDeviceStatus on: PreBind stamps each
    # allocation with allocationTimestamp.
    stamped: bool = False
    # The claim PreBind makes for the pod's extended resources, and its allocation.
    extended: ExtendedClaim | None = None
    # The pod asks for extended resources a class backs: kube-scheduler's PreBindPreFlight
    # counts its in-memory claim even where the node's device plugin serves them all.
    extended_pod: bool = False

    @property
    def prebinds(self) -> bool:
        """Whether PreBind has work (kube-scheduler's PreBindPreFlight: the plugin keeps claims
        for the pod, so the nomination is written first where NominatedNodeNameForExpectation
        is on)."""
        return bool(self.claims) or self.extended_pod


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExtendedClaim:
    """Reserve's outcome for the pod's extended resources: the claim (in memory) and the
    pod's request mappings, its allocation on the node, and the key that allocation is
    assumed under until PreBind has created and written the claim."""

    made: extendedresources.NodeClaim
    allocation: draobjects.Allocation
    pending: str


def allocate_on(
    pod: objects.PodInfo,
    node: objects.NodeInfo,
    store: dra.DraStore,
    features: emulation.DeviceFeatures,
    matches: Matcher,
) -> Reserved | None:
    """Reserve: the claims' allocation on the chosen node, over the store as it is now; None
    when that no longer holds (a claim or device changed while the kernel ran: try again)."""
    devices = prefilter(pod, store, features)
    if devices is None:
        return Reserved(node=node.name, claims=())
    if isinstance(devices, Failure):
        return None
    to_allocate = _to_allocate(devices, node)
    if isinstance(to_allocate, str):
        return None
    for claim in devices.claims:
        if claim.allocation is not None and not _reaches(claim, node):
            return None
    outcome = _allocate(
        to_allocate,
        node,
        store,
        features,
        store.allocated(consumable=features.consumable_capacity),
        matches,
        _classes(store),
    )
    if not isinstance(outcome, allocator.Allocated):
        return None
    own = len(devices.to_allocate)
    found: Mapping[str, draobjects.Allocation] = {
        c.key: a for c, a in zip(devices.to_allocate, outcome.allocations[:own], strict=True)
    }
    extended = None
    if len(to_allocate) > own:
        assert devices.extended is not None
        made = extendedresources.on_node(devices.extended, node)
        assert isinstance(made, extendedresources.NodeClaim)
        extended = ExtendedClaim(
            made=made,
            allocation=outcome.allocations[own],
            pending=extendedresources.pending_key(pod),
        )
    return Reserved(
        node=node.name,
        claims=tuple((claim, found.get(claim.key)) for claim in devices.claims),
        stamped=features.binding_conditions,
        extended=extended,
        extended_pod=devices.extended is not None,
    )


MATCHER = matcher(VERDICTS)
