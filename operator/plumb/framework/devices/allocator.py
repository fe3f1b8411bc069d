"""DynamicResources' structured allocator: the devices kube-scheduler gives a pod's claims.

The story of one ``allocate`` call (Filter, for one node; structured/internal/incubating of
k8s.io/dynamic-resource-allocation, the variant kube-scheduler runs with its default gates):

1. the pools the node reaches come gathered (the DRA store's ``pools(node, pool_rules(...))``,
   GatherPools: sorted, the incomplete and invalid ones marked);
2. check every claim's requests (classes, features, counts, "All" resolved to its devices,
   at most 32 results per claim) and build its constraints; a problem here is an error that
   stops the pod's scheduling cycle (``AllocationFailed``), as it would on any node;
3. search: claim after claim, request after request, device after device, the first device in
   pool order that is free (or shared: admin access, allowMultipleAllocations), matches the
   class's and the request's selectors, is not kept away by a taint, has room in its counters
   and capacity and keeps the claim's constraints; backtrack when a later one finds nothing.
   ``firstAvailable`` tries its subrequests in order. The first full solution wins;
4. write each claim's allocation: results in search order, configs (class, then claim) and
   the node selector. No solution: ``Unallocatable`` with the Filter's words.

Selectors are evaluated through an injected ``DeviceMatcher`` (framework/devices/expressions.py
implements one); results are cached per device and request, as Go does. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from plumb.backend.cache import dra
from plumb.backend.records import draobjects, objects, specs
from plumb.framework import emulation
from plumb.framework.devices import searching

DeviceId = searching.DeviceId
DeviceMatcher = searching.DeviceMatcher

# resourceapi.AllocationResultsMaxSize and FirstAvailableDeviceRequestMaxSize (v1.34 to v1.37).
RESULTS_LIMIT = searching.RESULTS_LIMIT
SUBREQUESTS_LIMIT = 8
# The Filter's reasons (dynamicresources.go Filter; allocator_incubating.go Allocate).
CANNOT_ALLOCATE = "cannot allocate all claims"
INVALID_POOLS = "invalid resource pools were encountered"
FROM_CLASS, FROM_CLAIM = "FromClass", "FromClaim"


def pool_rules(features: emulation.DeviceFeatures) -> dra.PoolRules:
    """How the DRA store gathers a node's pools for the release and gates in force."""
    return dra.PoolRules(
        whole_pool=not features.legacy_pools,
        partitionable=features.partitionable_devices,
        counter_slices_everywhere=features.counter_slices_everywhere,
        compatibility_groups=features.compatibility_groups,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Allocated:
    """Every claim allocated: one allocation per claim, in the claims' order."""

    allocations: tuple[draobjects.Allocation, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Unallocatable:
    """The claims do not fit this node: Filter's UnschedulableAndUnresolvable, these words."""

    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class AllocationFailed:
    """The claims cannot be allocated anywhere as they stand (a class missing, a broken
    selector, a feature off...): Filter returns an Error with these words, which stops the
    pod's scheduling cycle (it is retried after a backoff)."""

    message: str


AllocationOutcome = Allocated | Unallocatable | AllocationFailed


def allocate(
    *,
    node: objects.NodeInfo,
    claims: Sequence[draobjects.ResourceClaim],
    pools: Sequence[draobjects.Pool],
    classes: Mapping[str, draobjects.DeviceClass],
    state: dra.AllocatedState,
    features: emulation.DeviceFeatures,
    matches: DeviceMatcher,
) -> AllocationOutcome:
    """What kube-scheduler's Filter finds on ``node`` for ``claims`` (the pod's claims still to
    allocate, in the pod's order), searching ``pools`` (the node's, as gathered with
    ``pool_rules(features)``), with ``state``'s devices taken by other claims."""
    if not claims:
        return Allocated(())
    # The search recurses once per device taken (three frames), as Go's allocateOne does: a
    # pod with many claims of many devices goes deeper than Python's default 1,000 frames.
    requests = sum(len(c.spec.requests) + 1 for c in claims)
    depth = 3 * (RESULTS_LIMIT * len(claims) + requests) + 500
    if sys.getrecursionlimit() < depth:
        sys.setrecursionlimit(depth)
    search = searching.DeviceSearch(
        node, tuple(claims), tuple(pools), classes, state, features, matches
    )
    try:
        search.prepare()
        if not search.one(0, 0, 0, 0, False, (0, 0, 0)):
            invalid = any(p.invalid for p in search.pools) and not features.legacy_pools
            return Unallocatable(INVALID_POOLS if invalid else CANNOT_ALLOCATE)
        return Allocated(tuple(_allocation(search, c) for c in range(len(claims))))
    except searching.Fatal as error:
        return AllocationFailed(str(error))


def score(claims: Iterable[tuple[draobjects.ResourceClaim, draobjects.Allocation]]) -> int:
    """DynamicResources' Score on a node (computeScore; only with DRAPrioritizedList): for
    every subrequest allocated, 8 minus its place in its request's firstAvailable. ``claims``:
    each of the pod's claims with its allocation, existing or found for the node."""
    total = 0
    for claim, allocation in claims:
        chosen = {d.request for d in allocation.devices if "/" in d.request}
        for request in claim.spec.requests:
            if request.exactly is not None:
                continue
            for place, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in chosen:
                    total += SUBREQUESTS_LIMIT - place
    return total


# --- step 4: the allocations written --------------------------------------------------------


def _allocation(search: searching.DeviceSearch, c: int) -> draobjects.Allocation:
    """Step 4: the claim's allocation from the search's solution: its results in the order
    they were taken, its configs and its node selector."""
    claim = search.claims[c]
    f = search.features
    devices = tuple(
        draobjects.AllocatedDevice(
            request=res.request.full_name,
            driver=res.candidate.device_id[0],
            pool=res.candidate.device_id[1],
            device=res.candidate.device_id[2],
            admin_access=True if res.request.spec.admin_access else None,
            tolerations=res.request.spec.tolerations if f.tolerations_in_results else (),
            binding_conditions=(
                res.candidate.device.binding_conditions if f.binding_conditions else ()
            ),
            binding_failure_conditions=(
                res.candidate.device.binding_failure_conditions if f.binding_conditions else ()
            ),
            share_id=res.share_id,
            consumed_capacity=MappingProxyType(dict(res.consumed)),
        )
        for res in search.results[c]
    )
    return draobjects.Allocation(
        devices=devices,
        config=_config(search, c),
        node_selection=_node_selection(search, claim, search.results[c]),
    )


def _chosen(search: searching.DeviceSearch, c: int, r: int) -> searching.Request:
    data = search.requests[(c, r, 0)]
    return search.requests[(c, r, data.selected)] if data.parent else data


def _config(search: searching.DeviceSearch, c: int) -> tuple[tuple[str, draobjects.Opaque], ...]:
    claim = search.claims[c]
    once = search.features.claim_config_once
    config: list[tuple[str, draobjects.Opaque]] = []
    by_class: dict[str, tuple[int, int]] = {}
    for r in range(len(claim.spec.requests)):
        data = _chosen(search, c, r)
        name = data.device_class.name
        if name in by_class:
            first, end = by_class[name]
            for i in range(first, end):
                source, opaque = config[i]
                requests = (*opaque.requests, data.full_name)
                config[i] = (source, dataclasses.replace(opaque, requests=requests))
            continue
        first = len(config)
        for opaque in data.device_class.config:
            config.append((FROM_CLASS, dataclasses.replace(opaque, requests=(data.full_name,))))
        by_class[name] = (first, len(config))
    chosen = [_chosen(search, c, r).full_name for r in range(len(claim.spec.requests))]
    for opaque in claim.spec.config:
        if not opaque.requests:
            config.append((FROM_CLAIM, opaque))
            continue
        for r, request in enumerate(claim.spec.requests):
            named = request.name in opaque.requests or (
                bool(request.first_available) and chosen[r] in opaque.requests
            )
            if named:
                config.append((FROM_CLAIM, opaque))
                if once:
                    break
    if once:
        # v1.37: a config that names every request (or its chosen subrequest) is for all.
        config = [
            (source, dataclasses.replace(opaque, requests=()))
            if opaque.requests
            and all(
                request.name in opaque.requests or chosen[r] in opaque.requests
                for r, request in enumerate(claim.spec.requests)
            )
            else (source, opaque)
            for source, opaque in config
        ]
    return tuple(config)


def _node_selection(
    search: searching.DeviceSearch,
    claim: draobjects.ResourceClaim,
    results: Sequence[searching.DeviceResult],
) -> draobjects.NodeSelection | None:
    """createNodeSelector: the node itself once a device is local to it (or binds to it);
    else the slices' selectors merged into one term; None: reachable everywhere."""
    fields: list[specs.Requirement] = []
    expressions: list[specs.Requirement] = []
    for res in results:
        s, device = res.candidate.slice, res.candidate.device
        selection = device.selection if s.per_device_node_selection else s.selection
        node_name = selection.node_name if selection is not None else ""
        if node_name or (search.features.binds_to_node and device.binds_to_node):
            name = specs.Requirement("metadata.name", "In", (search.node.name,))
            return draobjects.NodeSelection(terms=(specs.NodeSelectorTerm(fields=(name,)),))
        terms = selection.terms if selection is not None else None
        if not terms:
            continue
        if len(terms) > 1:
            raise searching.Fatal(
                f"create NodeSelector for claim {claim.name}: unsupported "
                f"ResourceSlice.NodeSelector with {len(terms)} terms"
            )
        _merge(terms[0].fields, fields)
        _merge(terms[0].expressions, expressions)
    if not fields and not expressions:
        return None
    term = specs.NodeSelectorTerm(expressions=tuple(expressions), fields=tuple(fields))
    return draobjects.NodeSelection(terms=(term,))


def _merge(new: Iterable[specs.Requirement], into: list[specs.Requirement]) -> None:
    for requirement in new:
        if not any(
            r.key == requirement.key
            and r.operator == requirement.operator
            and set(r.values) == set(requirement.values)
            for r in into
        ):
            into.append(requirement)
