"""Devices counted in arrays: DynamicResources' Filter verdict on every node at once, for the
claims where counting a node's free matching devices is exactly what the allocator finds.

The structured allocator (allocator.py) searches one node at a time, device after device,
with backtracking. For the common claim (every request ``exactly`` one class and its
selectors, ExactCount or All, no constraints, no admin access, no capacity requests) on a
node whose devices are plain (node-local slices in complete, valid pools; no taints, no
shared counters, no binding conditions, no multiple allocations, no capacity policy that
refuses them), that search has no choice that matters: requests whose free matching devices
do not overlap are independent, so a full solution exists iff each request finds enough of
them (``count`` of its free matches for ExactCount; for All, every match free and at least
one), and requests asking for the very same devices (same class and selectors) need the sum
of their counts. The allocator's search is exhaustive, so it finds a solution exactly then,
and says "cannot allocate all claims" otherwise.

``DeviceTable`` lays out the node-local devices of the store as arrays: each device's node
index, whether it is free in the store's allocated state, and per distinct request (class,
its selectors, the request's selectors) whether it matches, from the selector verdicts the
matcher caches (each expression once per device until its slice changes). A pod's verdict is
then a few ``bincount`` calls per request over those arrays. A node where the count might
not be the allocator's answer (a device not plain, a selector error the search could meet,
requests whose free matches overlap, more results than a claim may hold) is left undecided:
the allocator decides it as before. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from fractions import Fraction
from types import MappingProxyType

import numpy as np

from plumb.backend.cache import dra, snapshot
from plumb.backend.records import draobjects
from plumb.framework import emulation
from plumb.framework.devices import allocator, capacities

RequestKey = tuple[str, tuple[str, ...], tuple[str, ...]]
"""(class name, the class's selectors, the request's selectors): what a request matches."""
_EMPTY: Mapping[str, Fraction] = MappingProxyType({})


@dataclasses.dataclass(frozen=True, slots=True)
class DeviceGroup:
    """The pod's requests that match one set of devices (same class and selectors): how many
    devices they take together (``every``: all of them), the devices free and matching in
    the table (``available``), and how many of those each node has (``have``)."""

    key: RequestKey
    count: int
    every: bool
    available: snapshot.BoolArray
    have: snapshot.Int64Array


@dataclasses.dataclass(frozen=True, slots=True)
class FastVerdict:
    """Per node: ``decided`` where the count is the allocator's answer, and there ``passes``
    whether the claims fit (elsewhere ``passes`` means nothing); the pod's device groups."""

    decided: snapshot.BoolArray
    passes: snapshot.BoolArray
    groups: tuple[DeviceGroup, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class _Request:
    key: RequestKey
    device_class: draobjects.DeviceClass
    every: bool  # mode All
    count: int


def simple_requests(
    claims: Sequence[draobjects.ResourceClaim], store: dra.DraStore
) -> list[list[_Request]] | None:
    """The claims' requests, claim by claim, if every one is of the kind counting decides;
    None if one is not (the allocator decides the pod on every node)."""
    found: list[list[_Request]] = []
    for claim in claims:
        if claim.spec.constraints:
            return None
        requests: list[_Request] = []
        for request in claim.spec.requests:
            spec = request.exactly
            if spec is None or request.first_available:
                return None
            if spec.admin_access or spec.capacity or not all(spec.selectors):
                return None
            if spec.mode not in (draobjects.EXACT_COUNT, draobjects.ALL):
                return None
            device_class = store.device_class(spec.device_class)
            if device_class is None or not all(device_class.selectors):
                return None
            every = spec.mode == draobjects.ALL
            if not every and spec.count < 0:
                return None
            key = (device_class.name, device_class.selectors, spec.selectors)
            requests.append(_Request(key, device_class, every, 0 if every else spec.count))
        found.append(requests)
    return found


def _plain(device: draobjects.Device, features: emulation.DeviceFeatures) -> bool:
    """Whether the allocator takes the device on its match and freedom alone (when no other
    claim holds a share or capacity of it)."""
    if (
        device.consumes_counters
        or device.binding_conditions
        or device.taints
        or device.allow_multiple_allocations
        or device.selection is not None
    ):
        return False
    if not features.consumable_capacity or not device.capacity:
        return True
    try:
        return capacities.fits(
            {},
            device.capacity,
            allocated=_EMPTY,
            allocating=_EMPTY,
            fractional=features.fractional_capacity_range,
            strict=features.strict_capacity,
        )
    except capacities.CapacityError:
        return False


class _SliceDevices:
    """What is known of one slice's devices, kept until the slice changes: whether each is
    plain, and per request whether each matches it (and whether evaluating failed)."""

    __slots__ = ("_matched", "piece", "plain")

    def __init__(self, piece: draobjects.ResourceSlice, features: emulation.DeviceFeatures) -> None:
        self.piece = piece
        self.plain = all(_plain(device, features) for device in piece.devices)
        self._matched: dict[RequestKey, tuple[snapshot.BoolArray, snapshot.BoolArray]] = {}

    def same(self, piece: draobjects.ResourceSlice) -> bool:
        kept = self.piece
        return kept is piece or (
            bool(piece.resource_version) and kept.resource_version == piece.resource_version
        )

    def matched(
        self, request: _Request, matches: allocator.DeviceMatcher
    ) -> tuple[snapshot.BoolArray, snapshot.BoolArray]:
        found = self._matched.get(request.key)
        if found is not None:
            return found
        piece = self.piece
        expressions = (*request.device_class.selectors, *request.key[2])
        ok = np.zeros(len(piece.devices), dtype=np.bool_)
        bad = np.zeros(len(piece.devices), dtype=np.bool_)
        for i, device in enumerate(piece.devices):
            try:
                # The class's selectors, then the request's, each stopping at the first no.
                ok[i] = all(
                    matches(e, piece.driver, piece.pool, piece, device) for e in expressions
                )
            except Exception:  # the matcher's errors: the allocator's to word
                bad[i] = True
        self._matched[request.key] = (ok, bad)
        return ok, bad


class DeviceTable:
    """The node-local devices of the store's pools as the nodes of one ``statics`` see them
    (built for one slices generation, release and matcher): arrays per device, the match
    arrays per request, and the free array for the latest allocated state. What it knows of
    each slice (``kept``, by name) is reused from the table before while the slice is the
    same, so a slice that changes costs its own devices only."""

    def __init__(
        self,
        statics: snapshot.NodeStatics,
        store: dra.DraStore,
        features: emulation.DeviceFeatures,
        matches: allocator.DeviceMatcher,
        kept: dict[str, _SliceDevices],
    ) -> None:
        self.statics, self.store, self.features, self.matches = statics, store, features, matches
        self.generation = store.slices_generation
        total = len(statics)
        rules = allocator.pool_rules(features)
        nodes: list[int] = []
        self.slices: list[_SliceDevices] = []
        self.ids: dict[dra.DeviceId, int] = {}
        self.kept: dict[str, _SliceDevices] = {}
        plain = np.ones(total, dtype=np.bool_)
        for n, node in enumerate(statics.nodes):
            for pool in store.pools(node, rules):
                if pool.incomplete or pool.invalid or pool.counter_sets or pool.other_slices:
                    plain[n] = False
                for piece in pool.slices:
                    local = (
                        piece.selection.node_name == node.name
                        and not piece.per_device_node_selection
                        and not piece.shared_counters
                    )
                    if not local:
                        plain[n] = False
                        continue
                    known = kept.get(piece.name)
                    if known is None or not known.same(piece):
                        known = _SliceDevices(piece, features)
                    self.kept[piece.name] = known
                    self.slices.append(known)
                    plain[n] &= known.plain
                    for device in piece.devices:
                        device_id = (pool.driver, pool.name, device.name)
                        seen = self.ids.get(device_id)
                        if seen is not None:  # one pool published for two nodes
                            plain[n] = plain[nodes[seen]] = False
                        else:
                            self.ids[device_id] = len(nodes)
                        nodes.append(n)
        self.node = np.array(nodes, dtype=np.intp)
        self.plain = plain
        self._matched: dict[RequestKey, tuple[snapshot.BoolArray, snapshot.BoolArray]] = {}
        self._state: dra.AllocatedState | None = None
        self._free = np.ones(len(nodes), dtype=np.bool_)
        self._odd = np.zeros(total, dtype=np.bool_)

    def current(
        self,
        statics: snapshot.NodeStatics,
        store: dra.DraStore,
        features: emulation.DeviceFeatures,
        matches: allocator.DeviceMatcher,
    ) -> bool:
        """Whether the table still describes these nodes, slices, release and matcher."""
        return (
            statics is self.statics
            and store is self.store
            and store.slices_generation == self.generation
            and features == self.features
            and matches is self.matches
        )

    def per_node(self, mask: snapshot.BoolArray) -> snapshot.Int64Array:
        """How many of the devices ``mask`` marks each node has."""
        counted: snapshot.Int64Array = np.bincount(self.node[mask], minlength=len(self.statics))
        return counted

    def matched(self, request: _Request) -> tuple[snapshot.BoolArray, snapshot.BoolArray]:
        """Per device: whether it matches the request's class and selectors, and whether
        evaluating them failed (the allocator would stop there with an error)."""
        found = self._matched.get(request.key)
        if found is not None:
            return found
        pieces = [kept.matched(request, self.matches) for kept in self.slices]
        ok = np.concatenate([p[0] for p in pieces]) if pieces else np.zeros(0, dtype=np.bool_)
        bad = np.concatenate([p[1] for p in pieces]) if pieces else np.zeros(0, dtype=np.bool_)
        ok.flags.writeable = bad.flags.writeable = False
        self._matched[request.key] = (ok, bad)
        return ok, bad

    def free(self, state: dra.AllocatedState) -> tuple[snapshot.BoolArray, snapshot.BoolArray]:
        """Per device whether no claim holds it; per node whether a device of it is held in
        a way counting does not know (a share, consumed capacity)."""
        if state is self._state:
            return self._free, self._odd
        before = self._state.devices if self._state is not None else frozenset()
        for device_id in before - state.devices:
            i = self.ids.get(device_id)
            if i is not None:
                self._free[i] = True
        for device_id in state.devices - before:
            i = self.ids.get(device_id)
            if i is not None:
                self._free[i] = False
        odd = np.zeros(len(self.statics), dtype=np.bool_)
        for device_id in {*state.consumed, *(share[:3] for share in state.shared)}:
            i = self.ids.get(device_id)
            if i is not None:
                odd[self.node[i]] = True
        self._state, self._odd = state, odd
        return self._free, odd


class Availability:
    """The device table, rebuilt when the nodes, the slices, the release or the matcher
    change; ``verdict`` for a pod's claims. One per process, as the selector verdicts are."""

    def __init__(self) -> None:
        self._table: DeviceTable | None = None

    def table(
        self,
        statics: snapshot.NodeStatics,
        store: dra.DraStore,
        features: emulation.DeviceFeatures,
        matches: allocator.DeviceMatcher,
    ) -> DeviceTable:
        table = self._table
        if table is None or not table.current(statics, store, features, matches):
            same = (
                table is not None
                and table.store is store
                and table.features == features
                and table.matches is matches
            )
            kept = table.kept if table is not None and same else {}
            table = self._table = DeviceTable(statics, store, features, matches, kept)
        return table

    def verdict(
        self,
        claims: Sequence[draobjects.ResourceClaim],
        statics: snapshot.NodeStatics,
        store: dra.DraStore,
        features: emulation.DeviceFeatures,
        matches: allocator.DeviceMatcher,
    ) -> FastVerdict | None:
        """Filter's verdict on every node for ``claims`` (the pod's claims still to
        allocate), where counting decides it; None when it decides no node."""
        requests = simple_requests(claims, store)
        if requests is None:
            return None
        table = self.table(statics, store, features, matches)
        free, odd = table.free(store.allocated(consumable=features.consumable_capacity))
        undecided = ~table.plain | odd
        # Requests by what they match: (matches, total count, asks for all).
        groups: dict[RequestKey, tuple[snapshot.BoolArray, int, bool]] = {}
        for claim_requests in requests:
            fixed = sum(r.count for r in claim_requests)
            if fixed > allocator.RESULTS_LIMIT:
                return None  # an error on every node: the allocator words it
            results: snapshot.Int64Array | int = fixed
            for request in claim_requests:
                ok, bad = table.matched(request)
                if bad.any():
                    undecided |= table.per_node(bad) > 0
                if request.every:
                    results = results + table.per_node(ok)
                known = groups.get(request.key)
                if known is None:
                    groups[request.key] = (ok, request.count, request.every)
                elif request.every or known[2]:
                    return None  # all of a set and more of it: rare, the allocator's
                else:
                    groups[request.key] = (ok, known[1] + request.count, False)
            if not isinstance(results, int):
                # "All" on a node with too many matches: an error there, the allocator's.
                undecided |= results > allocator.RESULTS_LIMIT
        passes = np.ones(len(statics), dtype=np.bool_)
        found: list[DeviceGroup] = []
        for key, (ok, count, every) in groups.items():
            available = ok & free
            for other in found:
                overlap = available & other.available
                if overlap.any():
                    undecided |= table.per_node(overlap) > 0
            have = table.per_node(available)
            found.append(DeviceGroup(key, count, every, available, have))
            if every:
                passes &= (have == table.per_node(ok)) & (have > 0)
            else:
                passes &= have >= count
        return FastVerdict(decided=~undecided, passes=passes, groups=tuple(found))


STATIC, COLUMNS, DEFER = "static", "columns", "defer"


class Sharing:
    """Which claim pods of one batch are decided together, and how, so that the batch decides
    as the same pods one at a time (cycle.prepare asks, pod after pod in queue order).

    A pod whose claims counting decides on every node (``FastVerdict.decided`` everywhere)
    has known devices: its groups' ``available`` devices. Such a pod is decided with
    ``COLUMNS`` when its caller allows it: each group a column of the kernel's resources,
    ``have`` devices per node, the pod asking for ``count`` of them, so each placement takes
    them from the pods after it (they ask for the same set, or a set apart). Otherwise it keeps
    its Filter verdict (``STATIC``), which holds only while no pod before it in the batch can
    take a device it could. Any other pod with claims (the allocator decides it somewhere, a
    claim allocated already) has unknown devices: it is decided only first among the batch's
    claim pods, and every claim pod after it waits. So does a pod that shares a claim with an
    earlier one, or whose devices an earlier pod may take otherwise than through its column
    (``DEFER``: the next batch)."""

    def __init__(self) -> None:
        self._claim_pods = 0
        self._opaque = False
        self._claims: set[str] = set()
        self._static: list[snapshot.BoolArray] = []
        self._columns: dict[RequestKey, snapshot.BoolArray] = {}
        self.have: dict[RequestKey, snapshot.Int64Array] = {}
        """Per column (in the order they came), the devices each node has at the start."""

    def admit(
        self, claims: Sequence[str], counted: FastVerdict | None, columns: bool
    ) -> tuple[str, tuple[tuple[RequestKey, int], ...]]:
        """How a pod with these claims (keys) and this count is decided (STATIC, COLUMNS or
        DEFER), and with COLUMNS what it asks of each column; ``columns``: the pod may be."""
        if self._opaque or self._claims.intersection(claims):
            return DEFER, ()
        if counted is None or not counted.decided.all():
            if self._claim_pods:
                return DEFER, ()
            self._opaque = True
            return self._admitted(claims, STATIC, ())
        columns = columns and not any(g.every for g in counted.groups)
        for group in counted.groups:
            if any((group.available & taken).any() for taken in self._static):
                return DEFER, ()
            for key, taken in self._columns.items():
                same = columns and key == group.key
                if not same and (group.available & taken).any():
                    return DEFER, ()
        if not columns:
            self._static.extend(g.available for g in counted.groups)
            return self._admitted(claims, STATIC, ())
        for group in counted.groups:
            self._columns.setdefault(group.key, group.available)
            self.have.setdefault(group.key, group.have)
        asked = tuple((g.key, g.count) for g in counted.groups)
        return self._admitted(claims, COLUMNS, asked)

    def _admitted(
        self, claims: Sequence[str], how: str, asked: tuple[tuple[RequestKey, int], ...]
    ) -> tuple[str, tuple[tuple[RequestKey, int], ...]]:
        self._claim_pods += 1
        self._claims.update(claims)
        return how, asked
