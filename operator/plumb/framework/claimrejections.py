"""Which of a pod's ResourceClaims kept it off the nodes, and why: what a trace line and
``plumb explain`` say of a claim pod no node fits.

kube-scheduler's Filter says "cannot allocate all claims" of a node without naming a claim.
plumb names it, node by node, from DynamicResources' verdicts of the cycle:

- a claim allocated already that the node cannot reach: "resourceclaim not available on the
  node";
- of the claims still to allocate, each one that cannot be allocated on the node even alone,
  with the words the allocator gives for it alone; when each would fit alone but not all at
  once (they compete for the same devices, or a constraint joins them), the claims together
  (``claim`` "") with the node's reason;
- a PreFilter rejection (every node): the first of the pod's claims that gives it alone;
- a node whose devices the pod's claims could have had alone but that pods placed before it in
  its batch took (a device column of the kernel fell short): the claim still to allocate (or
  the claims together), "the devices left went to pods placed before it in its batch".

Worked out after the decision, for failed pods only, over the DRA store as it is then: the
allocator runs again once per claim on the nodes it rejected, only when the pod has several
claims to allocate. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from plumb.backend.cache import dra, snapshot
from plumb.backend.records import draobjects, objects
from plumb.framework import emulation
from plumb.framework.devices import allocator
from plumb.framework.plugins import dynamicresources
from plumb.observability import trace

TOGETHER = ""
"""The ``claim`` of a rejection that no claim alone gives: the pod's claims together."""
TAKEN_IN_BATCH = (
    f"{allocator.CANNOT_ALLOCATE}: the devices left went to pods placed before it in its batch"
)


def on_nodes(
    pod: objects.PodInfo,
    verdicts: dynamicresources.NodeVerdicts,
    statics: snapshot.NodeStatics,
    store: dra.DraStore,
    features: emulation.DeviceFeatures,
    matches: dynamicresources.Matcher,
    taken: Sequence[int] = (),
) -> tuple[trace.ClaimRejection, ...]:
    """Which claim DynamicResources' Filter rejected on which nodes (``verdicts``, the cycle's
    for the pod alone; ``taken``, the nodes whose devices pods placed before it in its batch
    took) and why, the claims rejected on most nodes first."""
    failing = [int(n) for n in np.flatnonzero(verdicts.fails)]
    later = [n for n in taken if not verdicts.fails[n]]
    if not failing and not later:
        return ()
    rejected: dict[tuple[str, str], list[str]] = {}

    def put(claim: str, reason: str, n: int) -> None:
        rejected.setdefault((claim, reason), []).append(statics.nodes[n].name)

    devices = dynamicresources.prefilter(pod, store, features)
    if later:
        pending = devices.to_allocate if isinstance(devices, dynamicresources.PodDevices) else ()
        holder = pending[0].key if len(pending) == 1 else TOGETHER
        for n in later:
            put(holder, TAKEN_IN_BATCH, n)
    if not isinstance(devices, dynamicresources.PodDevices):
        # The claims changed since the cycle (deleted, allocated for another pod): the nodes'
        # reasons as they were, put down to no claim.
        for n in failing:
            put(TOGETHER, verdicts.reasons[int(verdicts.reason[n])], n)
        return _ordered(rejected)
    allocating = []
    for n in failing:
        reason = verdicts.reasons[int(verdicts.reason[n])]
        if reason != dynamicresources.NOT_AVAILABLE:
            allocating.append(n)
            continue
        unreachable = dynamicresources.unavailable(devices, [statics.nodes[n]])
        for claim in unreachable or ():
            put(claim.key, reason, n)
        if not unreachable:
            put(TOGETHER, reason, n)
    if not allocating:
        return _ordered(rejected)
    if len(devices.to_allocate) == 1:
        (claim,) = devices.to_allocate
        for n in allocating:
            put(claim.key, verdicts.reasons[int(verdicts.reason[n])], n)
        return _ordered(rejected)
    visit = np.zeros(len(statics), dtype=np.bool_)
    visit[allocating] = True
    alone = {
        claim.key: dynamicresources.filter(
            dynamicresources.PodDevices(claims=(claim,), to_allocate=(claim,)),
            statics,
            visit,
            store,
            features,
            matches,
            scored=False,
        )
        for claim in devices.to_allocate
    }
    for n in allocating:
        named = False
        for key, found in alone.items():
            if found.error is None and found.fails[n]:
                put(key, found.reasons[int(found.reason[n])], n)
                named = True
        if not named:
            put(TOGETHER, verdicts.reasons[int(verdicts.reason[n])], n)
    return _ordered(rejected)


def before_nodes(
    pod: objects.PodInfo,
    store: dra.DraStore,
    features: emulation.DeviceFeatures,
    total: int,
) -> tuple[trace.ClaimRejection, ...]:
    """Which claim DynamicResources' PreFilter turned the pod away for (on all ``total``
    nodes): the first of its claims that gives a reason alone."""
    for entry in pod.resource_claims:
        alone = dataclasses.replace(pod, resource_claims=(entry,))
        found = dynamicresources.prefilter(alone, store, features)
        if isinstance(found, dynamicresources.Failure):
            return (
                trace.ClaimRejection(claim=_key(pod, entry), reason=found.message, nodes=total),
            )
    return ()


def _key(pod: objects.PodInfo, entry: draobjects.PodResourceClaim) -> str:
    """The claim a pod's entry names: namespace/name, or the entry's own name while the claim
    made from its template is not there yet."""
    name = entry.claim_name or pod.claim_statuses.get(entry.name) or entry.name
    return f"{pod.namespace}/{name}"


def _ordered(rejected: Mapping[tuple[str, str], list[str]]) -> tuple[trace.ClaimRejection, ...]:
    found = [
        trace.ClaimRejection(
            claim=claim,
            reason=reason,
            nodes=len(nodes),
            examples=tuple(nodes[: trace.EXAMPLE_NODES]),
        )
        for (claim, reason), nodes in rejected.items()
    ]
    return tuple(sorted(found, key=lambda r: (-r.nodes, r.claim == TOGETHER, r.claim, r.reason)))
