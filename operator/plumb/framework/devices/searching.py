"""The structured allocator's search: a pod's claims checked, then devices tried in pool order.

Go's ``allocator`` (structured/internal/incubating/allocator_incubating.go of
k8s.io/dynamic-resource-allocation): ``prepare`` checks every claim's requests
(validateDeviceRequest: class, features, count, "All" resolved, the limit of results) and
builds its constraints;
``one`` (allocateOne) looks for one device of one request, then recurses for the next, and
undoes what a device took (``Undo``, rollbackDevice) when what follows finds nothing. A device
is taken when it is free (or may be shared), matches the selectors, is not tainted against the
request, has counters and capacity left and keeps the claim's constraints (allocateDevice).
``Fatal`` carries the words of an error that stops the pod's cycle.

allocator.py holds the public API and writes the allocations of a solution. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from fractions import Fraction
from types import MappingProxyType
from typing import Protocol

from plumb.backend.cache import dra
from plumb.backend.records import draobjects, objects
from plumb.framework import emulation
from plumb.framework.devices import capacities, constraints

DeviceId = tuple[str, str, str]
PoolId = tuple[str, str]
Key = tuple[int, int, int]  # claim, request, subrequest
# resourceapi.AllocationResultsMaxSize (v1.34 to v1.37).
RESULTS_LIMIT = 32
_NO_SUCH_KEY_HINT = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the "
    "check with has() for optional fields"
)
_SHARES = uuid.UUID("6f0b7a52-3c1e-4f43-9d1a-2a7c0d9e5b11")
_EMPTY: Mapping[str, Fraction] = MappingProxyType({})


class DeviceMatcher(Protocol):
    """Evaluates one CEL selector for one device: True if it matches. On failure it raises an
    exception carrying CEL's error: ``detail`` (else its text) and ``at_compile`` (a compile
    error), as expressions.SelectorError does; the allocator words where it happened."""

    def __call__(
        self,
        expression: str,
        driver: str,
        pool: str,
        slice: draobjects.ResourceSlice,
        device: draobjects.Device,
        /,
    ) -> bool: ...


class Fatal(Exception):
    """An error that stops the pod's cycle: its text is kube-scheduler's."""


class _LimitExceeded(Exception):
    """More results than a claim may hold down this path (errAllocationResultMaxSizeExceeded)."""


def kobj(claim: draobjects.ResourceClaim) -> str:
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


def device_text(device_id: DeviceId) -> str:
    return "/".join(device_id)


@dataclasses.dataclass(frozen=True, slots=True)
class DeviceCandidate:
    device_id: DeviceId
    device: draobjects.Device
    slice: draobjects.ResourceSlice
    pool: draobjects.Pool


@dataclasses.dataclass(slots=True)
class Request:
    """A request, or one subrequest of a firstAvailable (requestData)."""

    spec: draobjects.RequestSpec
    name: str  # the request's, or the subrequest's own
    parent: str  # the request a subrequest belongs to, "" for a request
    device_class: draobjects.DeviceClass
    count: int = 0
    everything: list[DeviceCandidate] | None = None  # "All": the devices, known beforehand
    selected: int = 0  # a firstAvailable's subrequest in use (kept on subrequest 0)

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name


@dataclasses.dataclass(frozen=True, slots=True)
class DeviceResult:
    request: Request
    candidate: DeviceCandidate
    share_id: str = ""
    consumed: Mapping[str, draobjects.Quantity] = dataclasses.field(default_factory=dict)


class DeviceSearch:
    """One Allocate call's working state (Go's allocator struct)."""

    def __init__(
        self,
        node: objects.NodeInfo,
        claims: tuple[draobjects.ResourceClaim, ...],
        pools: tuple[draobjects.Pool, ...],
        classes: Mapping[str, draobjects.DeviceClass],
        state: dra.AllocatedState,
        features: emulation.DeviceFeatures,
        matches: DeviceMatcher,
    ) -> None:
        self.node, self.claims, self.pools, self.classes = node, claims, pools, classes
        self.state, self.features, self.matches = state, features, matches
        # Devices with a share allocated (the state's shared ids), worked out when needed.
        self._shared: frozenset[DeviceId] | None = None
        self.requests: dict[Key, Request] = {}
        self.constraints: list[list[constraints.Constraint]] = [[] for _ in claims]
        self.selectable: dict[tuple[DeviceId, Key], bool] = {}
        self.allocating: dict[DeviceId, set[int]] = {}
        self.allocating_capacity: dict[DeviceId, dict[str, Fraction]] = {}
        self.available_counters: dict[PoolId, dict[str, dict[str, Fraction]]] = {}
        self.consumed_counters: dict[PoolId, dict[str, dict[str, Fraction]]] = {}
        self.results: list[list[DeviceResult]] = [[] for _ in claims]

    # --- step 2: the claims' requests and constraints ---

    def prepare(self) -> None:
        f = self.features
        for c, claim in enumerate(self.claims):
            who = kobj(claim)
            total = 0
            for r, request in enumerate(claim.spec.requests):
                if request.first_available and not f.prioritized_list:
                    raise Fatal(
                        f"claim {who}, request {request.name}: has subrequests, but the "
                        "DRAPrioritizedList feature is disabled"
                    )
                if not f.consumable_capacity:
                    if request.exactly is not None and request.exactly.capacity:
                        raise Fatal(
                            f"claim {who}, request {request.name}: has capacity requests, but "
                            "the DRAConsumableCapacity feature is disabled"
                        )
                    for sub in request.first_available:
                        if sub.capacity:
                            raise Fatal(
                                f"claim {who}, subrequest {sub.name}: has capacity requests, "
                                "but the DRAConsumableCapacity feature is disabled"
                            )
                if request.first_available:
                    least = min(
                        self._validate((c, r, i), sub, sub.name, request.name).count
                        for i, sub in enumerate(request.first_available)
                    )
                else:
                    spec = request.exactly or draobjects.RequestSpec(device_class="")
                    least = self._validate((c, r, 0), spec, request.name, "").count
                if f.limit_per_request and least > RESULTS_LIMIT - total:
                    raise Fatal(
                        f"claim {who}, request {request.name}: adding {least} devices exceeds "
                        f"the claim limit of {RESULTS_LIMIT}, with {total} already accounted for"
                    )
                total += least
            if not f.limit_per_request and total > RESULTS_LIMIT:
                raise Fatal(
                    f"claim {who}: number of requested devices {total} exceeds the claim limit "
                    f"of {RESULTS_LIMIT}"
                )
            for i, constraint in enumerate(claim.spec.constraints):
                if constraint.match_attribute:
                    self.constraints[c].append(
                        constraints.MatchAttribute(constraint.requests, constraint.match_attribute)
                    )
                elif constraint.distinct_attribute and f.distinct_attribute:
                    self.constraints[c].append(
                        constraints.DistinctAttribute(
                            constraint.requests, constraint.distinct_attribute, f
                        )
                    )
                else:
                    raise Fatal(
                        f"claim {who}, constraint #{i}: empty constraint (unsupported "
                        "constraint type?)"
                    )

    def _validate(self, key: Key, spec: draobjects.RequestSpec, name: str, parent: str) -> Request:
        """validateDeviceRequest: the request's class, its count, "All" resolved."""
        claim = self.claims[key[0]]
        who = f"claim {kobj(claim)}, request {name}"
        for i, selector in enumerate(spec.selectors):
            if not selector:
                raise Fatal(
                    f"{who}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )
        if spec.admin_access and not self.features.admin_access:
            raise Fatal(f"{who}: admin access is requested, but the feature is disabled")
        if not spec.device_class:
            raise Fatal(f"{who}: missing device class name (unsupported request type?)")
        device_class = self.classes.get(spec.device_class)
        if device_class is None:
            raise Fatal(
                f"{who}: could not retrieve device class {spec.device_class}: "
                f'deviceclass.resource.k8s.io "{spec.device_class}" not found'
            )
        data = Request(spec=spec, name=name, parent=parent, device_class=device_class)
        self.requests[key] = data
        if spec.mode == draobjects.EXACT_COUNT:
            data.count = spec.count
        elif spec.mode == draobjects.ALL:
            data.everything = self._everything(key, data, who)
            data.count = len(data.everything)
        else:
            raise Fatal(f"{who}: unsupported count mode {spec.mode}")
        return data

    def _everything(self, key: Key, data: Request, who: str) -> list[DeviceCandidate]:
        found: list[DeviceCandidate] = []
        for pool in self.pools:
            label = f"{pool.driver}/{pool.name}"
            if pool.incomplete:
                raise Fatal(
                    f"{who}: asks for all devices, but resource pool {label} is currently "
                    "being updated"
                )
            if pool.invalid:
                raise Fatal(
                    f"{who}: asks for all devices, but resource pool {label} is currently invalid"
                )
            for s in pool.slices:
                for device in s.devices:
                    device_id = (s.driver, s.pool, device.name)
                    if not self._selectable(key, data, s, device, device_id):
                        continue
                    if self.features.consumable_capacity:
                        # v1.37: static capacity only, so "All" fails when one has no room.
                        strict = self.features.strict_capacity
                        try:
                            ok = self._fits(data, device, device_id, static=strict)
                        except capacities.CapacityError as error:
                            raise Fatal(
                                f"{who}: checking capacity for device {device.name}: {error}"
                            ) from None
                        if not ok:
                            continue
                    found.append(DeviceCandidate(device_id, device, s, pool))
        return found

    # --- step 3: the search ---

    def one(
        self, c: int, r: int, sub: int, d: int, in_sub: bool, start: tuple[int, int, int]
    ) -> bool:
        """allocateOne: find device ``d`` of request ``r`` (subrequest ``sub``) of claim ``c``,
        then everything after it; True when all claims are done. ``start`` (pool, slice,
        device) keeps a request's devices in pool order, so only combinations are tried."""
        if c >= len(self.claims):
            return True
        claim = self.claims[c]
        if r >= len(claim.spec.requests):
            try:
                return self.one(c + 1, 0, 0, 0, False, (0, 0, 0))
            except _LimitExceeded:
                return False
        key = (c, r, sub)
        data = self.requests[key]
        if not in_sub and data.parent:
            every_exceeded = True
            choice = 0
            while (c, r, choice) in self.requests:
                try:
                    done = self.one(c, r, choice, d, True, (0, 0, 0))
                except _LimitExceeded:
                    choice += 1
                    continue
                every_exceeded = False
                if done:
                    data.selected = choice
                    return True
                choice += 1
            if every_exceeded:
                raise _LimitExceeded
            return False
        all_mode = data.spec.mode == draobjects.ALL
        if all_mode and not data.everything:
            return False
        if d >= data.count:
            return self.one(c, r + 1, 0, 0, False, (0, 0, 0))
        if data.count - d > RESULTS_LIMIT - len(self.results[c]):
            raise _LimitExceeded
        if all_mode:
            assert data.everything is not None
            undo = self._take(key, data.everything[d], must=True)
            if undo is None:
                return False
            return self._next(undo, c, r, sub, d, in_sub, (0, 0, 0))
        return self._walk(key, data, d, in_sub, start)

    def _walk(
        self, key: Key, data: Request, d: int, in_sub: bool, start: tuple[int, int, int]
    ) -> bool:
        c, r, sub = key
        admin = data.spec.admin_access
        for p in range(start[0], len(self.pools)):
            pool = self.pools[p]
            if self.features.legacy_pools:
                if pool.invalid:
                    raise Fatal(f"pool {pool.name} is invalid: {pool.invalid}")
            elif pool.incomplete or pool.invalid:
                continue
            for si in range(start[1] if p == start[0] else 0, len(pool.slices)):
                s = pool.slices[si]
                first = start[2] if (p, si) == start[:2] else 0
                for di in range(first, len(s.devices)):
                    device = s.devices[di]
                    device_id = (pool.driver, pool.name, device.name)
                    if admin and c in self.allocating.get(device_id, ()):
                        continue
                    if not admin and self._in_use(device_id):
                        continue
                    if not self._selectable(key, data, s, device, device_id):
                        continue
                    if self.features.consumable_capacity and not self._capacity_ok(
                        c, data, device, device_id
                    ):
                        continue
                    undo = self._take(key, DeviceCandidate(device_id, device, s, pool), must=False)
                    if undo is None:
                        continue
                    if self._next(undo, c, r, sub, d, in_sub, (p, si, di + 1)):
                        return True
        return False

    def _next(
        self,
        undo: Undo,
        c: int,
        r: int,
        sub: int,
        d: int,
        in_sub: bool,
        start: tuple[int, int, int],
    ) -> bool:
        try:
            done = self.one(c, r, sub, d + 1, in_sub, start)
        except _LimitExceeded:
            undo.run()
            raise
        if not done:
            undo.run()
        return done

    def _shared_devices(self) -> frozenset[DeviceId]:
        if self._shared is None:
            self._shared = frozenset(share[:3] for share in self.state.shared)
        return self._shared

    def _allocated(self, device_id: DeviceId) -> bool:
        """IsDeviceAllocated: taken whole, by a share, or with capacity consumed."""
        return (
            device_id in self.state.devices
            or device_id in self.state.consumed
            or device_id in self._shared_devices()
        )

    def _in_use(self, device_id: DeviceId) -> bool:
        return device_id in self.state.devices or bool(self.allocating.get(device_id))

    def _capacity_in_use(self, device_id: DeviceId) -> bool:
        if device_id in self.state.consumed or device_id in self.allocating_capacity:
            return True
        # v1.37: a share without consumed capacity is recorded by its shareID only.
        return self.features.strict_capacity and device_id in self._shared_devices()

    def _selectable(
        self,
        key: Key,
        data: Request,
        s: draobjects.ResourceSlice,
        device: draobjects.Device,
        device_id: DeviceId,
    ) -> bool:
        """isSelectable: the class's and the request's selectors, the device's own node."""
        if device.binding_conditions and not self.features.binding_conditions:
            return False
        cached = self.selectable.get((device_id, key))
        if cached is not None:
            return cached
        ok = (
            self._selectors(
                key, device, device_id, s, data.device_class, data.device_class.selectors
            )
            and self._selectors(key, device, device_id, s, None, data.spec.selectors)
            and (
                not s.per_device_node_selection
                or (device.selection is not None and dra.reaches(device.selection, self.node))
            )
        )
        self.selectable[(device_id, key)] = ok
        return ok

    def _selectors(
        self,
        key: Key,
        device: draobjects.Device,
        device_id: DeviceId,
        s: draobjects.ResourceSlice,
        device_class: draobjects.DeviceClass | None,
        selectors: Sequence[str],
    ) -> bool:
        for i, expression in enumerate(selectors):
            try:
                if not self.matches(expression, device_id[0], device_id[1], s, device):
                    return False
            except Exception as error:  # the matcher's contract: CEL's words
                where = (
                    f"class {device_class.name}"
                    if device_class is not None
                    else f"claim {kobj(self.claims[key[0]])}"
                )
                detail = getattr(error, "detail", None)
                text = detail if isinstance(detail, str) else str(error)
                if getattr(error, "at_compile", False):
                    raise Fatal(f"{where}: selector #{i}: CEL compile error: {text}") from None
                if self.features.cel_error_names_device:
                    if "no such key:" in text:
                        text += _NO_SUCH_KEY_HINT
                    raise Fatal(
                        f"{where}: selector #{i} on device {device_text(device_id)}: CEL "
                        f"runtime error: {text}"
                    ) from None
                raise Fatal(f"{where}: selector #{i}: CEL runtime error: {text}") from None
        return True

    def _fits(
        self, data: Request, device: draobjects.Device, device_id: DeviceId, *, static: bool
    ) -> bool:
        return capacities.fits(
            data.spec.capacity,
            device.capacity,
            allocated=_EMPTY if static else self.state.consumed.get(device_id, _EMPTY),
            allocating=_EMPTY if static else self.allocating_capacity.get(device_id, _EMPTY),
            fractional=self.features.fractional_capacity_range,
            strict=self.features.strict_capacity,
        )

    def _capacity_ok(
        self,
        c: int,
        data: Request,
        device: draobjects.Device,
        device_id: DeviceId,
        *,
        again: bool = False,
    ) -> bool:
        try:
            return self._fits(data, device, device_id, static=False)
        except capacities.CapacityError as error:
            how = "rechecking" if again else "checking"
            raise Fatal(
                f"claim {kobj(self.claims[c])}, request {data.name}: {how} capacity for "
                f"device {device_text(device_id)}: {error}"
            ) from None

    def _take(self, key: Key, cand: DeviceCandidate, *, must: bool) -> Undo | None:
        """allocateDevice: take the candidate for the request if it is free, untainted, has
        counters and capacity left and keeps the constraints; None if not. ``must`` ("All"):
        a constraint it breaks is an error."""
        c = key[0]
        data = self.requests[key]
        f = self.features
        device, device_id = cand.device, cand.device_id
        admin = data.spec.admin_access
        shareable = f.consumable_capacity and device.allow_multiple_allocations
        if not shareable and admin and c in self.allocating.get(device_id, ()):
            return None
        if not admin and self._in_use(device_id):
            return None
        if not f.partitionable_devices and device.consumes_counters:
            return None
        undo = Undo(self, c, cand, data)
        if device.consumes_counters and not (shareable and self._capacity_in_use(device_id)):
            if not self._reserve_counters(cand):
                return None
            undo.counters = True
        if f.device_taints and constraints.taint_prevents(device, data.spec, f):
            undo.run()
            return None
        base, subrequest = (data.parent, data.name) if data.parent else (data.name, "")
        for constraint in self.constraints[c]:
            if not constraint.add(base, subrequest, device, device_id):
                undo.run()
                if must:
                    raise Fatal(
                        f"claim {kobj(self.claims[c])}, request {data.name}: cannot add device "
                        f"{device_text(device_id)} because a claim constraint would not be "
                        "satisfied"
                    )
                return None
            undo.constraints += 1
        if not shareable:
            self.allocating.setdefault(device_id, set()).add(c)
            undo.marked = True
        share_id = ""
        consumed: dict[str, draobjects.Quantity] = {}
        if f.consumable_capacity:
            try:
                ok = self._capacity_ok(c, data, device, device_id, again=True)
            except Fatal:
                undo.run()
                raise
            if not ok:
                undo.run()
                return None
            if shareable:
                try:
                    consumed = capacities.consumed(
                        data.spec.capacity,
                        device.capacity,
                        fractional=f.fractional_capacity_range,
                        strict=f.strict_capacity,
                    )
                except capacities.CapacityError as error:
                    undo.run()
                    raise Fatal(
                        f"claim {kobj(self.claims[c])}, request {data.name}: computing consumed "
                        f"capacity for device {device_text(device_id)}: {error}"
                    ) from None
                share_id = self._share_id(c, data, device_id)
                undo.capacity_existed = device_id in self.allocating_capacity
                into = self.allocating_capacity.setdefault(device_id, {})
                for name, q in consumed.items():
                    into[name] = into.get(name, Fraction(0)) + q.value
                undo.capacity = {name: q.value for name, q in consumed.items()}
        self.results[c].append(DeviceResult(data, cand, share_id, consumed))
        undo.result = True
        return undo

    def _share_id(self, c: int, data: Request, device_id: DeviceId) -> str:
        # kube-scheduler draws a random UUID; plumb derives one from the claim, the request,
        # the device and the place in the results, so a replay writes the same.
        claim = self.claims[c]
        place = len(self.results[c])
        seed = f"{claim.uid}/{claim.namespace}/{claim.name}/{data.full_name}/{device_id}/{place}"
        return str(uuid.uuid5(_SHARES, seed))

    def _reserve_counters(self, cand: DeviceCandidate) -> bool:
        """checkAvailableCounters: the pool's counters left once the devices others hold and
        those taken so far are counted; every counter of the pool must stay covered."""
        pool = cand.pool
        available = self.available_counters.get(pool.key)
        if available is None:
            available = {
                name: {k: q.value for k, q in counter_set.counters.items()}
                for name, counter_set in pool.counter_sets.items()
            }
            for s in pool.slices + pool.other_slices:
                for device in s.devices:
                    if not self._allocated((s.driver, s.pool, device.name)):
                        continue
                    for use in device.consumes_counters:
                        left = available.get(use.counter_set)
                        if left is None:
                            continue
                        for name, q in use.counters.items():
                            if name in left:
                                left[name] -= q.value
            self.available_counters[pool.key] = available
        taken = self.consumed_counters.setdefault(pool.key, {})
        for use in cand.device.consumes_counters:
            into = taken.setdefault(use.counter_set, {})
            for name, q in use.counters.items():
                into[name] = into.get(name, Fraction(0)) + q.value
        for set_name, counters in available.items():
            used = taken.get(set_name, {})
            for name, remaining in counters.items():
                if remaining < used.get(name, Fraction(0)):
                    self.release_counters(cand)
                    return False
        return True

    def release_counters(self, cand: DeviceCandidate) -> None:
        taken = self.consumed_counters[cand.pool.key]
        for use in cand.device.consumes_counters:
            into = taken[use.counter_set]
            for name, q in use.counters.items():
                into[name] -= q.value


class Undo:
    """What taking one device changed, undone in reverse when the search backtracks
    (deviceRollbackState and rollbackDevice)."""

    def __init__(self, search: DeviceSearch, c: int, cand: DeviceCandidate, data: Request) -> None:
        self.search, self.c, self.cand, self.data = search, c, cand, data
        self.counters = False
        self.constraints = 0
        self.marked = False
        self.capacity: dict[str, Fraction] | None = None
        self.capacity_existed = False
        self.result = False

    def run(self) -> None:
        search, device_id = self.search, self.cand.device_id
        if self.result:
            search.results[self.c].pop()
        if self.capacity is not None:
            into = search.allocating_capacity[device_id]
            for name, value in self.capacity.items():
                if name in into:
                    into[name] -= value
            if all(v == 0 for v in into.values()):
                del search.allocating_capacity[device_id]
            if self.capacity_existed and device_id not in search.allocating_capacity:
                search.allocating_capacity[device_id] = {}
        if self.marked:
            search.allocating[device_id].discard(self.c)
        data = self.data
        base, subrequest = (data.parent, data.name) if data.parent else (data.name, "")
        for constraint in reversed(search.constraints[self.c][: self.constraints]):
            constraint.remove(base, subrequest, device_id)
        if self.counters:
            search.release_counters(self.cand)
