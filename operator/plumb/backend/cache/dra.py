"""The Dynamic Resource Allocation store: ResourceSlices, DeviceClasses, ResourceClaims and
ResourceClaimTemplates as the watches report them, the pools each node sees, the devices
allocated, and the allocations plumb decided that the watch has not shown yet.

What kube-scheduler's DynamicResources plugin reads through its DRA manager, in plumb's shape:

- ``claim`` / ``device_class`` / ``template``: the objects by key (a claim as PreBind wrote it
  while the watch has not caught up, as kube-scheduler's assume cache answers).
- ``pools(node)``: GatherPools for one node (k8s.io/dynamic-resource-allocation structured):
  the slices of each pool's newest generation reachable from the node by nodeName, by a
  nodeSelector against its labels, by allNodes, or device by device; a pool with fewer slices
  of that generation than resourceSliceCount is incomplete; a device name twice makes it
  invalid. Node-local slices are indexed by node name, the others kept apart, so a node's
  pools cost its own slices plus the shared ones, not every slice in the cluster. How a
  release gathers differs (``PoolRules``).
- ``allocated(consumable)``: every device allocated in any claim's status.allocation (claims
  of every scheduler), results with admin access left out, plus the allocations plumb
  assumed (``assume``) until the watch shows the claim allocated or gone: kube-scheduler's
  allocatedDevices and in-flight claims (dra_manager.go, allocateddevices.go).
- ``pod_claims(pod)``: each claim a pod names, or why one cannot be used yet in
  kube-scheduler's words (foreachPodResourceClaim, which PreEnqueue and PreFilter run).
- ``extended_class(resource)`` / ``extended_claim(pod_uid)``: the DeviceClass backing an
  extended resource (its ExtendedResourceCache), and the claim made for a pod's extended
  resources (annotated, owned by the pod: findExtendedResourceClaim).

Every write notes its undo in the cache's journal (backend/cache/journal.py), so a snapshot
dump rewinds DRA state with the pods and nodes. Only the event loop calls this class.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from fractions import Fraction
from types import MappingProxyType
from typing import Any, TypeVar

from plumb.backend.cache import journal as journal_module
from plumb.backend.records import draobjects, objects, specs

PLUGIN = "DynamicResources"
"""kube-scheduler's name for the plugin: the rejecting plugin plumb's queue knows pods by
(framework/plugins/dynamicresources.py's NAME is the same)."""

DeviceId = tuple[str, str, str]
"""(driver, pool, device)."""
SharedDeviceId = tuple[str, str, str, str]
"""(driver, pool, device, shareID): one share of a device allocated with consumable capacity."""

_NAME_FIELD = "metadata.name"
_Held = TypeVar("_Held")
_EMPTY_CONSUMED: Mapping[DeviceId, Mapping[str, Fraction]] = MappingProxyType({})


def claim_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PoolRules:
    """How the release in force gathers a node's pools; GatherPools changed from one release
    to the next (and kube-scheduler picks the stable allocator under v1.34 and v1.35's
    default gates, the incubating one from v1.36).

    ``whole_pool`` (v1.35+): a pool whose slices reachable from the node fall short of
    resourceSliceCount is judged on all its slices of that generation (it may span nodes),
    a pool with a newer generation elsewhere is ignored, and an incomplete or invalid pool
    keeps no slices; before, it was judged on the node's slices alone and kept them.
    ``partitionable`` (DRAPartitionableDevices, on from v1.36): slices with per-device node
    selection or shared counters are used, and the counter sets are gathered apart;
    otherwise such slices are left out. ``counter_slices_everywhere`` (v1.36's allocator):
    slices publishing shared counters belong to every node's pool, whatever their node
    selection. ``compatibility_groups`` (DRADeviceCompatibilityGroups, alpha in v1.37):
    without it a slice whose devices name compatibility groups is left out, which leaves
    its pool incomplete.
    """

    whole_pool: bool = True
    partitionable: bool = True
    counter_slices_everywhere: bool = False
    compatibility_groups: bool = False


NEWEST_POOL_RULES = PoolRules()
"""kube-scheduler v1.37's with its default gates."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class AllocatedState:
    """The devices taken, as the allocator reads them (structured.AllocatedState).

    ``devices``: allocated whole; ``shared``: shares of devices allocated with consumable
    capacity (a result with a shareID), and ``consumed`` the capacity those shares take, per
    device. Without consumable capacity every share counts its device whole and the other
    two are empty."""

    devices: frozenset[DeviceId] = frozenset()
    shared: frozenset[SharedDeviceId] = frozenset()
    consumed: Mapping[DeviceId, Mapping[str, Fraction]] = dataclasses.field(
        default_factory=lambda: _EMPTY_CONSUMED
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimLookup:
    """A pod's claims: (pod claim name, claim) for each that is needed, in spec order, and
    ``error``, kube-scheduler's words for the first that cannot be used ("" when none)."""

    claims: tuple[tuple[str, draobjects.ResourceClaim], ...] = ()
    error: str = ""


def _uses_compatibility_groups(piece: draobjects.ResourceSlice) -> bool:
    return any(c.compatibility_groups for d in piece.devices for c in d.consumes_counters)


def _term_matches(term: specs.NodeSelectorTerm, name: str, labels: Mapping[str, str]) -> bool:
    """A node selector term on one node: its requirements ANDed; an empty term matches none."""
    if not term.expressions and not term.fields:
        return False
    if not all(r.matches(labels) for r in term.expressions):
        return False
    return all(r.key == _NAME_FIELD and r.matches({_NAME_FIELD: name}) for r in term.fields)


def reaches(selection: draobjects.NodeSelection, node: objects.NodeInfo) -> bool:
    """NodeMatches: whether a slice's, a device's or an allocation's node selection
    includes the node."""
    if selection.node_name:
        return selection.node_name == node.name
    if selection.all_nodes:
        return True
    if selection.terms is not None:
        return any(_term_matches(t, node.name, node.labels) for t in selection.terms)
    return False


def _slice_reaches(piece: draobjects.ResourceSlice, node: objects.NodeInfo) -> bool:
    selection = piece.selection
    if selection.node_name or selection.all_nodes or selection.terms:
        return reaches(selection, node)
    if piece.per_device_node_selection:
        return any(d.selection is not None and reaches(d.selection, node) for d in piece.devices)
    return False  # nothing known set (a future extension): kube-scheduler skips the slice


def _first_duplicate(pieces: Iterable[draobjects.ResourceSlice]) -> str:
    seen: set[str] = set()
    for piece in pieces:
        for device in piece.devices:
            if device.name in seen:
                return f"duplicate device name {device.name}"
            seen.add(device.name)
    return ""


def _counter_problem(
    counter_sets: Mapping[str, draobjects.CounterSet],
    pieces: Iterable[draobjects.ResourceSlice],
) -> str:
    for piece in pieces:
        for device in piece.devices:
            for consumption in device.consumes_counters:
                found = counter_sets.get(consumption.counter_set)
                if found is None:
                    return f"counter set {consumption.counter_set} not found"
                for counter in consumption.counters:
                    if counter not in found.counters:
                        return f"counter {counter} not found in counter set {found.name}"
    return ""


def _has_binding_conditions(pool: draobjects.Pool) -> bool:
    return any(d.binding_conditions for s in pool.slices for d in s.devices)


def _resource_version(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


class DraStore:
    """ResourceSlices, DeviceClasses, ResourceClaims and templates, fed by watch events; the
    pools and allocated devices derived from them; allocations assumed by plumb.

    ``on_*(body, ...)`` applies one event (``body`` None: deleted); ``resync_*`` makes a kind
    match a full list. ``generation`` grows with every change, ``slices_generation`` with
    every change of the slices (for callers that cache what they derive from either).
    """

    def __init__(self, journal: journal_module.Journal | None = None) -> None:
        self._journal = journal if journal is not None else journal_module.Journal(0)
        self.generation = 0
        self.slices_generation = 0
        self._slices: dict[str, draobjects.ResourceSlice] = {}
        # Slices by the node they name; the others (node selectors, all nodes, per device).
        self._local: dict[str, dict[str, draobjects.ResourceSlice]] = {}
        self._shared: dict[str, draobjects.ResourceSlice] = {}
        self._by_pool: dict[tuple[str, str], dict[str, draobjects.ResourceSlice]] = {}
        self._counter_slices: dict[str, draobjects.ResourceSlice] = {}
        self._classes: dict[str, draobjects.DeviceClass] = {}
        self._claims: dict[str, draobjects.ResourceClaim] = {}
        self._templates: dict[str, draobjects.ClaimTemplate] = {}
        self._pending: dict[str, journal_module.Pending] = {}
        # What each claim takes (its effective allocation and its pending one), and the sums.
        self._taking: dict[str, tuple[draobjects.AllocatedDevice, ...]] = {}
        self._dedicated: collections.Counter[DeviceId] = collections.Counter()
        self._shares: collections.Counter[SharedDeviceId] = collections.Counter()
        self._consumed: dict[DeviceId, dict[str, Fraction]] = {}
        self._allocated_views: dict[bool, AllocatedState] = {}
        # Pod uid -> keys of the claims reserved for it (status.reservedFor).
        self._reserved: dict[str, set[str]] = {}
        self._consumers: dict[str, tuple[str, ...]] = {}  # claim key -> those uids
        # Extended resource name -> the class backing it (None: to be rebuilt).
        self._backing: dict[str, draobjects.DeviceClass] | None = None
        # Pod uid -> keys of the claims made for its extended resources.
        self._extended: dict[str, set[str]] = {}
        self._extended_owner: dict[str, str] = {}  # claim key -> that pod uid
        # Node name -> (slices_generation, its labels, the rules, its pools) when gathered.
        self._pool_cache: dict[
            str, tuple[int, Mapping[str, str], PoolRules, tuple[draobjects.Pool, ...]]
        ] = {}

    # Events --------------------------------------------------------------------------------

    def on_slice(self, body: Mapping[str, Any] | None, name: str) -> None:
        self._put_slice(name, None if body is None else draobjects.parse_slice(body))

    def on_class(self, body: Mapping[str, Any] | None, name: str) -> None:
        self._put_class(name, None if body is None else draobjects.parse_class(body))

    def on_claim(
        self, body: Mapping[str, Any] | None, namespace: str, name: str
    ) -> tuple[draobjects.ResourceClaim | None, draobjects.ResourceClaim | None]:
        """Returns the claim as the store answered for it before and after the event."""
        key = claim_key(namespace, name)
        before = self.claim(namespace, name)
        self._put_claim(key, None if body is None else draobjects.parse_claim(body))
        return before, self.claim(namespace, name)

    def on_template(self, body: Mapping[str, Any] | None, namespace: str, name: str) -> None:
        key = claim_key(namespace, name)
        self._put_template(key, None if body is None else draobjects.parse_template(body))

    def resync_slices(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        listed = {s.name: s for s in map(draobjects.parse_slice, bodies)}
        for name in set(self._slices) - set(listed):
            self._put_slice(name, None)
        for name, piece in listed.items():
            self._put_slice(name, piece)

    def resync_classes(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        listed = {c.name: c for c in map(draobjects.parse_class, bodies)}
        for name in set(self._classes) - set(listed):
            self._put_class(name, None)
        for name, device_class in listed.items():
            self._put_class(name, device_class)

    def resync_claims(
        self, bodies: Iterable[Mapping[str, Any]]
    ) -> list[tuple[draobjects.ResourceClaim | None, draobjects.ResourceClaim | None]]:
        """Returns (before, after) of each claim the list changed."""
        listed = {c.key: c for c in map(draobjects.parse_claim, bodies)}
        changed = []
        for key in [*(set(self._claims) - set(listed)), *listed]:
            namespace, _, name = key.partition("/")
            before = self.claim(namespace, name)
            self._put_claim(key, listed.get(key))
            after = self.claim(namespace, name)
            if before != after:
                changed.append((before, after))
        return changed

    def resync_templates(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        listed = {f"{t.namespace}/{t.name}": t for t in map(draobjects.parse_template, bodies)}
        for key in set(self._templates) - set(listed):
            self._put_template(key, None)
        for key, template in listed.items():
            self._put_template(key, template)

    # Queries -------------------------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> draobjects.ResourceClaim | None:
        """The claim as the watch last showed it, or as plumb's PreBind wrote it while the
        watch has not caught up."""
        key = claim_key(namespace, name)
        pending = self._pending.get(key)
        if pending is not None and pending.written is not None:
            return pending.written
        return self._claims.get(key)

    def claims(self) -> Iterator[draobjects.ResourceClaim]:
        """Every claim (as ``claim`` answers), in no particular order."""
        for key, claim in self._claims.items():
            pending = self._pending.get(key)
            yield pending.written if pending is not None and pending.written else claim

    def device_class(self, name: str) -> draobjects.DeviceClass | None:
        return self._classes.get(name)

    def classes(self) -> tuple[draobjects.DeviceClass, ...]:
        """Every DeviceClass, by name."""
        return tuple(self._classes[name] for name in sorted(self._classes))

    def extended_class(self, resource: str) -> draobjects.DeviceClass | None:
        """The DeviceClass backing an extended resource: the class named by the implicit
        ``deviceclass.resource.kubernetes.io/<class>``, else the one whose
        extendedResourceName it is (of several, the newest; of those the first by name, as
        kube-scheduler's ExtendedResourceCache prefers them)."""
        if self._backing is None:
            backing: dict[str, draobjects.DeviceClass] = {}
            for device_class in self._classes.values():
                named = device_class.extended_resource_name
                held = backing.get(named) if named else None
                if named and (held is None or _preferred(device_class, held)):
                    backing[named] = device_class
            for device_class in self._classes.values():
                implicit = draobjects.IMPLICIT_EXTENDED_PREFIX + device_class.name
                backing[implicit] = device_class
            self._backing = backing
        return self._backing.get(resource)

    def extended_claim(self, pod_uid: str) -> draobjects.ResourceClaim | None:
        """The claim made for the pod's extended resources (as ``claim`` answers), if any."""
        for key in sorted(self._extended.get(pod_uid, ())):
            namespace, _, name = key.partition("/")
            claim = self.claim(namespace, name)
            if claim is not None:
                return claim
        return None

    def template(self, namespace: str, name: str) -> draobjects.ClaimTemplate | None:
        return self._templates.get(claim_key(namespace, name))

    def resource_slice(self, name: str) -> draobjects.ResourceSlice | None:
        return self._slices.get(name)

    def slices(self) -> tuple[draobjects.ResourceSlice, ...]:
        """Every ResourceSlice, by name."""
        return tuple(self._slices[name] for name in sorted(self._slices))

    def pending(self, namespace: str, name: str) -> journal_module.Pending | None:
        """The allocation plumb assumed for the claim, not yet seen in the watch."""
        return self._pending.get(claim_key(namespace, name))

    def claims_reserved_for(self, pod_uid: str) -> tuple[str, ...]:
        """Keys (namespace/name) of the claims whose status.reservedFor names the pod."""
        return tuple(sorted(self._reserved.get(pod_uid, ())))

    def __len__(self) -> int:
        return len(self._slices) + len(self._classes) + len(self._claims) + len(self._templates)

    def pod_claims(self, pod: objects.PodInfo) -> ClaimLookup:
        """foreachPodResourceClaim: each claim the pod names, or the first reason one cannot
        be used yet (not created, missing, being deleted, not the pod's own)."""
        found: list[tuple[str, draobjects.ResourceClaim]] = []
        where = f"{pod.namespace}/{pod.name}"
        for entry in pod.resource_claims:
            if entry.claim_name:
                name, own = entry.claim_name, False
            elif entry.template_name:
                if entry.name not in pod.claim_statuses:
                    return ClaimLookup(
                        tuple(found), f'pod "{where}": ResourceClaim not created yet'
                    )
                name, own = pod.claim_statuses[entry.name], True
                if not name:
                    continue  # the controller decided no claim is needed
            else:
                return ClaimLookup(
                    tuple(found),
                    f'pod "{where}", spec.resourceClaim "{entry.name}": '
                    "none of the supported fields are set",
                )
            claim = self.claim(pod.namespace, name)
            if claim is None:
                error = f'could not find ResourceClaim "{pod.namespace}/{name}"'
                return ClaimLookup(tuple(found), error)
            if claim.deleting:
                return ClaimLookup(tuple(found), f'resourceclaim "{name}" is being deleted')
            if own and claim.owner_uid != pod.uid:
                return ClaimLookup(
                    tuple(found),
                    f"ResourceClaim {pod.namespace}/{name} was not created for Pod {where} "
                    "(Pod is not owner)",
                )
            found.append((entry.name, claim))
        return ClaimLookup(tuple(found))

    def allocated(self, *, consumable: bool = True) -> AllocatedState:
        """The devices taken by every claim's allocation and every assumed one.
        ``consumable``: DRAConsumableCapacity (on from v1.36)."""
        view = self._allocated_views.get(consumable)
        if view is not None:
            return view
        devices = {d for d, n in self._dedicated.items() if n > 0}
        if consumable:
            view = AllocatedState(
                devices=frozenset(devices),
                shared=frozenset(s for s, n in self._shares.items() if n > 0),
                consumed=MappingProxyType(
                    {d: MappingProxyType(dict(c)) for d, c in self._consumed.items()}
                ),
            )
        else:
            devices.update(s[:3] for s, n in self._shares.items() if n > 0)
            view = AllocatedState(devices=frozenset(devices))
        self._allocated_views[consumable] = view
        return view

    def pools(
        self, node: objects.NodeInfo, rules: PoolRules = NEWEST_POOL_RULES
    ) -> tuple[draobjects.Pool, ...]:
        """GatherPools for ``node``: its pools by (driver, pool name), those with devices
        that have binding conditions last (v1.36+'s order; before, Go's map order, which any
        order matches). Slices in a pool are in name order."""
        cached = self._pool_cache.get(node.name)
        if (
            cached is not None
            and cached[0] == self.slices_generation
            and cached[1] == node.labels
            and cached[2] == rules
        ):
            return cached[3]
        result = self._gather(node, rules)
        self._pool_cache[node.name] = (self.slices_generation, node.labels, rules, result)
        return result

    def _gather(self, node: objects.NodeInfo, rules: PoolRules) -> tuple[draobjects.Pool, ...]:
        candidates = list(self._local.get(node.name, {}).values())
        candidates += self._shared.values()
        if rules.counter_slices_everywhere:
            candidates += (s for s in self._counter_slices.values() if s.selection.node_name)
            candidates = list({s.name: s for s in candidates}.values())
        newest: dict[tuple[str, str], list[draobjects.ResourceSlice]] = {}
        for piece in candidates:
            if not self._usable(piece, rules):
                continue
            if not (
                (rules.counter_slices_everywhere and piece.shared_counters)
                or _slice_reaches(piece, node)
            ):
                continue
            pool_id = (piece.driver, piece.pool)
            group = newest.get(pool_id)
            if group is None or piece.generation > group[0].generation:
                newest[pool_id] = [piece]
            elif piece.generation == group[0].generation:
                group.append(piece)
        pools = []
        for pool_id, group in newest.items():
            pool = self._pool(pool_id, group, rules)
            if pool is not None:
                pools.append(pool)
        pools.sort(key=lambda p: (_has_binding_conditions(p), p.driver, p.name))
        return tuple(pools)

    def _usable(self, piece: draobjects.ResourceSlice, rules: PoolRules) -> bool:
        if not rules.partitionable and (piece.per_device_node_selection or piece.shared_counters):
            return False
        return rules.compatibility_groups or not _uses_compatibility_groups(piece)

    def _pool(
        self,
        pool_id: tuple[str, str],
        group: list[draobjects.ResourceSlice],
        rules: PoolRules,
    ) -> draobjects.Pool | None:
        driver, name = pool_id
        generation, count = group[0].generation, group[0].slice_count
        group.sort(key=lambda s: s.name)
        every: list[draobjects.ResourceSlice] | None = None
        if len(group) != count:
            if not rules.whole_pool:
                return self._built(pool_id, group, None, rules, incomplete=True)
            every = []
            for piece in self._by_pool.get(pool_id, {}).values():
                if piece.generation > generation:
                    return None  # being replaced by a newer generation: ignored
                # Every slice of the generation counts, those left out above for lacking
                # partitionable devices too; only compatibility groups still leave one out.
                if piece.generation == generation and (
                    rules.compatibility_groups or not _uses_compatibility_groups(piece)
                ):
                    every.append(piece)
            if len(every) != count:
                return draobjects.Pool(
                    driver=driver, name=name, generation=generation, slices=(), incomplete=True
                )
        return self._built(pool_id, group, every, rules, incomplete=False)

    def _built(
        self,
        pool_id: tuple[str, str],
        group: list[draobjects.ResourceSlice],
        every: list[draobjects.ResourceSlice] | None,
        rules: PoolRules,
        *,
        incomplete: bool,
    ) -> draobjects.Pool:
        driver, name = pool_id
        generation = group[0].generation
        keep = not rules.whole_pool  # v1.34: an invalid pool keeps its slices
        if rules.partitionable:
            devices = [s for s in group if not s.shared_counters]
            counters = [s for s in group if s.shared_counters]
        else:
            devices, counters = list(group), []
        others: list[draobjects.ResourceSlice] = []
        if every is not None and len(every) > len(group):
            names = {s.name for s in group}
            for piece in sorted(every, key=lambda s: s.name):
                if piece.name in names:
                    continue
                if rules.partitionable and piece.shared_counters:
                    counters.append(piece)
                else:
                    others.append(piece)

        def invalid(reason: str) -> draobjects.Pool:
            return draobjects.Pool(
                driver=driver,
                name=name,
                generation=generation,
                slices=tuple(devices) if keep else (),
                incomplete=incomplete,
                invalid=reason,
            )

        duplicate = _first_duplicate(devices)
        if duplicate:
            return invalid(duplicate)
        if not rules.partitionable:
            return draobjects.Pool(
                driver=driver,
                name=name,
                generation=generation,
                slices=tuple(devices),
                incomplete=incomplete,
            )
        counter_sets: dict[str, draobjects.CounterSet] = {}
        for piece in counters:
            for counter_set in piece.shared_counters:
                if counter_set.name in counter_sets:
                    return invalid(f"duplicate counter set name {counter_set.name}")
                counter_sets[counter_set.name] = counter_set
        problem = _counter_problem(counter_sets, devices) or _counter_problem(counter_sets, others)
        if problem:
            return invalid(problem)
        return draobjects.Pool(
            driver=driver,
            name=name,
            generation=generation,
            slices=tuple(devices),
            incomplete=incomplete,
            counter_sets=MappingProxyType(counter_sets),
            other_slices=tuple(others),
        )

    # Assumptions (DynamicResources' Reserve, PreBind and Unreserve) -------------------------

    def assume(self, key: str, allocation: draobjects.Allocation, pod_uid: str) -> None:
        """Hold ``allocation`` for the claim ``key`` (namespace/name), its devices taken,
        until the watch shows the claim allocated or gone, or ``forget``."""
        self._put_pending(
            key, journal_module.Pending(claim=key, allocation=allocation, pod_uid=pod_uid)
        )

    def assume_written(self, claim: draobjects.ResourceClaim, pod_uid: str) -> None:
        """PreBind wrote the claim (allocation, reservedFor): ``claim`` as the API returned
        it stands for the watched one until the watch brings its resourceVersion or a newer
        one (kube-scheduler's AssumeClaimAfterAPICall)."""
        allocation = claim.allocation or draobjects.Allocation()
        pending = journal_module.Pending(
            claim=claim.key, allocation=allocation, pod_uid=pod_uid, written=claim
        )
        self._put_pending(claim.key, pending)

    def forget(self, key: str) -> None:
        """Drop what plumb assumed or wrote for claim ``key`` (a claim it made and deletes)."""
        if key in self._pending:
            self._put_pending(key, None)

    def forget_unwritten(self, key: str) -> None:
        """Unreserve: drop the allocation assumed for claim ``key`` (the pod was not bound),
        unless PreBind wrote it: the API server holds it then, and the claim as written stands
        until the watch brings that version or a newer one, as kube-scheduler's assume cache
        keeps a claim after its API call (Unreserve restores only an allocation in flight)."""
        pending = self._pending.get(key)
        if pending is not None and pending.written is None:
            self._put_pending(key, None)

    # Dumps ---------------------------------------------------------------------------------

    def state(self) -> journal_module.DraState:
        """What the store holds now (frozen records, shared with it)."""
        return journal_module.DraState(
            slices=self.slices(),
            classes=self.classes(),
            claims=tuple(self._claims[k] for k in sorted(self._claims)),
            templates=tuple(self._templates[k] for k in sorted(self._templates)),
            pending=tuple(self._pending[k] for k in sorted(self._pending)),
        )

    def restore(self, state: journal_module.DraState) -> None:
        """Hold ``state`` (a dump being rebuilt); call on an empty store."""
        for piece in state.slices:
            self._put_slice(piece.name, piece)
        for device_class in state.classes:
            self._put_class(device_class.name, device_class)
        for claim in state.claims:
            self._put_claim(claim.key, claim)
        for template in state.templates:
            self._put_template(f"{template.namespace}/{template.name}", template)
        for pending in state.pending:
            self._put_pending(pending.claim, pending)

    # Writes --------------------------------------------------------------------------------

    def _put_slice(self, name: str, piece: draobjects.ResourceSlice | None) -> None:
        before = self._slices.get(name)
        if before is None and piece is None:
            return
        if before is not None:
            self._local.get(before.selection.node_name, {}).pop(name, None)
            if not self._local.get(before.selection.node_name, True):
                del self._local[before.selection.node_name]
            self._shared.pop(name, None)
            self._counter_slices.pop(name, None)
            in_pool = self._by_pool.get((before.driver, before.pool), {})
            in_pool.pop(name, None)
            if not in_pool:
                self._by_pool.pop((before.driver, before.pool), None)
            del self._slices[name]
        if piece is not None:
            self._slices[name] = piece
            if piece.selection.node_name:
                self._local.setdefault(piece.selection.node_name, {})[name] = piece
            else:
                self._shared[name] = piece
            if piece.shared_counters:
                self._counter_slices[name] = piece
            self._by_pool.setdefault((piece.driver, piece.pool), {})[name] = piece
        if before != piece:
            self.generation += 1
            self.slices_generation += 1
            self._pool_cache.clear()
            self._journal.note(journal_module.Reslice(name=name, slice=before))

    def _swap(self, table: dict[str, _Held], key: str, value: _Held | None) -> _Held | None:
        """Put ``value`` under ``key`` in ``table`` (None: remove it) and return what was
        there; the store's generation moves on if that differs."""
        before = table.pop(key, None)
        if value is not None:
            table[key] = value
        if before != value:
            self.generation += 1
        return before

    def _put_class(self, name: str, device_class: draobjects.DeviceClass | None) -> None:
        before = self._swap(self._classes, name, device_class)
        if before != device_class:
            self._backing = None
            self._journal.note(journal_module.Reclass(name=name, device_class=before))

    def _put_template(self, key: str, template: draobjects.ClaimTemplate | None) -> None:
        before = self._swap(self._templates, key, template)
        if before != template:
            self._journal.note(journal_module.Retemplate(key=key, template=before))

    def _put_claim(self, key: str, claim: draobjects.ResourceClaim | None) -> None:
        before = self._swap(self._claims, key, claim)
        if before != claim:
            self._journal.note(journal_module.Reclaim(key=key, claim=before))
        pending = self._pending.get(key)
        if pending is not None and _confirms(pending, claim):
            self._put_pending(key, None)  # recounts the claim too
        else:
            self._recount(key)

    def _put_pending(self, key: str, pending: journal_module.Pending | None) -> None:
        before = self._swap(self._pending, key, pending)
        if before != pending:
            self._journal.note(journal_module.Repend(key=key, pending=before))
        self._recount(key)

    def _recount(self, key: str) -> None:
        """Bring the allocated devices and reservations up to date with claim ``key``."""
        pending = self._pending.get(key)
        claim = (
            pending.written if pending is not None and pending.written else self._claims.get(key)
        )
        taking: tuple[draobjects.AllocatedDevice, ...] = ()
        if claim is not None and claim.allocation is not None:
            taking = claim.allocation.devices
        if pending is not None and pending.written is None:
            taking += pending.allocation.devices
        taking = tuple(r for r in taking if not r.admin_access)
        before = self._taking.get(key, ())
        if taking != before:
            self._count(before, -1)
            self._count(taking, +1)
            if taking:
                self._taking[key] = taking
            else:
                self._taking.pop(key, None)
            self._allocated_views.clear()
        self._index_extended(key, claim)
        consumers = tuple(c.uid for c in claim.reserved_for) if claim is not None else ()
        if consumers == self._consumers.get(key, ()):
            return
        for uid in self._consumers.pop(key, ()):
            keys = self._reserved.get(uid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._reserved[uid]
        if consumers:
            self._consumers[key] = consumers
        for uid in consumers:
            self._reserved.setdefault(uid, set()).add(key)

    def _index_extended(self, key: str, claim: draobjects.ResourceClaim | None) -> None:
        owner = claim.owner_uid if claim is not None and claim.extended else ""
        before = self._extended_owner.get(key, "")
        if owner == before:
            return
        if before:
            keys = self._extended[before]
            keys.discard(key)
            if not keys:
                del self._extended[before]
            del self._extended_owner[key]
        if owner:
            self._extended.setdefault(owner, set()).add(key)
            self._extended_owner[key] = owner

    def _count(self, results: tuple[draobjects.AllocatedDevice, ...], sign: int) -> None:
        for result in results:
            device = result.device_id
            if not result.share_id:
                self._dedicated[device] += sign
                if self._dedicated[device] <= 0:
                    del self._dedicated[device]
                continue
            share = (*device, result.share_id)
            self._shares[share] += sign
            if self._shares[share] <= 0:
                del self._shares[share]
            if not result.consumed_capacity:
                continue
            consumed = self._consumed.setdefault(device, {})
            for capacity, amount in result.consumed_capacity.items():
                total = consumed.get(capacity, Fraction(0)) + sign * amount.value
                if total:
                    consumed[capacity] = total
                else:
                    consumed.pop(capacity, None)
            if not consumed:
                del self._consumed[device]


def _preferred(device_class: draobjects.DeviceClass, held: draobjects.DeviceClass) -> bool:
    """Of two classes naming the same extended resource, whether ``device_class`` wins: the
    newer (creationTimestamps are RFC 3339 in UTC, compared as text), of equals the first
    by name."""
    newer = (device_class.creation_timestamp, held.name)
    return newer > (held.creation_timestamp, device_class.name)


def _confirms(pending: journal_module.Pending, claim: draobjects.ResourceClaim | None) -> bool:
    """Whether the watch's claim makes an assumed allocation moot: the claim is gone; not yet
    written, it shows an allocation; written, the watch has the version PreBind wrote or a
    newer one, allocated or not (deallocated since: its devices are free)."""
    if claim is None:
        return True
    if pending.written is None:
        return claim.allocation is not None
    written = _resource_version(pending.written.resource_version)
    return _resource_version(claim.resource_version) >= written
