"""The resource pools one node reaches, gathered from ResourceSlices as the DRA allocator does.

kube-scheduler's structured allocator (k8s.io/dynamic-resource-allocation structured/internal,
pools_*.go GatherPools) looks at the slices naming the node and at those that do not name one
(node selector, all nodes, per-device selection), keeps those that reach the node, and groups
them by pool (driver, pool name), keeping the newest generation seen. A pool with fewer slices
than ``resourceSliceCount`` is looked up again among all slices: a newer generation elsewhere
retires it ("obsolete", left out), too few slices of its own generation leave it incomplete
(nothing is allocated from it, and "All" refuses to run), and a device name twice or a counter
set that does not add up makes it invalid. Pools come out sorted by driver and pool name, those
with binding conditions last, and the slices of a pool by name: the allocator's first-fit search
walks them in that order, so the order decides which device a pod gets.

Pure: no I/O. ``SliceIndex`` is built once per cycle (``index_slices``) and read per node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from fractions import Fraction
from types import MappingProxyType

from plumb.backend.records import draobjects, specs
from plumb.framework import emulation

PoolId = tuple[str, str]
DeviceId = tuple[str, str, str]
_NO_COUNTERS: Mapping[str, Mapping[str, Fraction]] = MappingProxyType({})


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class NodeView:
    """The node an allocation is computed for: its name and labels."""

    name: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class SliceIndex:
    """Every ResourceSlice, by what an allocation looks up: those naming a node (by node),
    the others, and all of a pool's (its completeness and counters need the slices that do
    not reach the node too)."""

    on_node: Mapping[str, tuple[draobjects.ResourceSlice, ...]]
    shared: tuple[draobjects.ResourceSlice, ...]
    by_pool: Mapping[PoolId, tuple[draobjects.ResourceSlice, ...]]

    def for_node(self, name: str) -> tuple[draobjects.ResourceSlice, ...]:
        return self.on_node.get(name, ()) + self.shared


def index_slices(slices: Iterable[draobjects.ResourceSlice]) -> SliceIndex:
    """The index of these slices, in their order (the informer's, for kube-scheduler)."""
    on_node: dict[str, list[draobjects.ResourceSlice]] = {}
    shared: list[draobjects.ResourceSlice] = []
    by_pool: dict[PoolId, list[draobjects.ResourceSlice]] = {}
    for s in slices:
        if s.selection.node_name and not s.per_device_node_selection:
            on_node.setdefault(s.selection.node_name, []).append(s)
        else:
            shared.append(s)
        by_pool.setdefault((s.driver, s.pool), []).append(s)
    return SliceIndex(
        on_node=MappingProxyType({k: tuple(v) for k, v in on_node.items()}),
        shared=tuple(shared),
        by_pool=MappingProxyType({k: tuple(v) for k, v in by_pool.items()}),
    )


def index_pools(pools: Iterable[draobjects.Pool]) -> SliceIndex:
    """The index of the slices the store's pools hold (each pool's slices of its newest
    generation): what ``index_slices`` gives for them."""
    return index_slices(s for pool in pools for s in pool.slices)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class GatheredPool:
    """A pool as the allocator sees it from one node.

    ``slices``: its slices with devices that reach the node (by name), the ones searched;
    ``elsewhere``: its other device slices (their allocated devices still use counters);
    ``counter_sets``: the counters its shared counter sets hold (PartitionableDevices on);
    ``invalid``: why it cannot be used ("" if it can)."""

    driver: str
    name: str
    incomplete: bool = False
    invalid: str = ""
    slices: tuple[draobjects.ResourceSlice, ...] = ()
    elsewhere: tuple[draobjects.ResourceSlice, ...] = ()
    counter_sets: Mapping[str, Mapping[str, Fraction]] = _NO_COUNTERS

    @property
    def id(self) -> PoolId:
        return (self.driver, self.name)

    @property
    def label(self) -> str:
        """The pool as Go's PoolID prints it: driver/pool."""
        return f"{self.driver}/{self.name}"


def node_matches(node: NodeView, selection: draobjects.NodeSelection | None) -> bool:
    """Whether a slice's (or a device's) node selection reaches the node (NodeMatches)."""
    if selection is None:
        return False
    if selection.node_name:
        return selection.node_name == node.name
    if selection.all_nodes:
        return True
    if selection.terms is not None:
        return any(_term_matches(term, node) for term in selection.terms)
    return False


def _term_matches(term: specs.NodeSelectorTerm, node: NodeView) -> bool:
    # nodeaffinity: a term without requirements matches no node; fields are metadata.name.
    if not term.expressions and not term.fields:
        return False
    fields = {"metadata.name": node.name}
    return all(r.matches(node.labels) for r in term.expressions) and all(
        r.matches(fields) for r in term.fields
    )


def _reaches(node: NodeView, s: draobjects.ResourceSlice) -> bool:
    if s.per_device_node_selection:
        return any(node_matches(node, d.selection) for d in s.devices)
    return node_matches(node, s.selection)


def _uses_compatibility_groups(s: draobjects.ResourceSlice) -> bool:
    return any(c.compatibility_groups for d in s.devices for c in d.consumes_counters)


def gather(
    node: NodeView, index: SliceIndex, features: emulation.DeviceFeatures
) -> tuple[GatheredPool, ...]:
    """The pools the node reaches, in the order the allocator searches them."""
    partitionable = features.partitionable_devices
    grouped: dict[PoolId, list[draobjects.ResourceSlice]] = {}
    for s in index.for_node(node.name):
        if not partitionable and (
            s.per_device_node_selection or (s.shared_counters and not features.legacy_pools)
        ):
            continue
        # plumb's allocator has no compatibility groups: such a slice is left out, which
        # leaves its pool incomplete (what kube-scheduler does with the gate off).
        if _uses_compatibility_groups(s):
            continue
        if _reaches(node, s):
            _add(grouped, s)
    plain: list[GatheredPool] = []
    binding: list[GatheredPool] = []
    for pool_id, slices in grouped.items():
        pool = _pool(pool_id, slices, index, features)
        if pool is None:
            continue
        has_conditions = any(d.binding_conditions for s in pool.slices for d in s.devices)
        (binding if has_conditions else plain).append(pool)
    plain.sort(key=lambda p: p.id)
    binding.sort(key=lambda p: p.id)
    return tuple(plain + binding)


def _add(
    grouped: dict[PoolId, list[draobjects.ResourceSlice]], s: draobjects.ResourceSlice
) -> None:
    key = (s.driver, s.pool)
    slices = grouped.get(key)
    if slices is None or s.generation > slices[0].generation:
        grouped[key] = [s]
    elif s.generation == slices[0].generation:
        slices.append(s)


def _pool(
    pool_id: PoolId,
    slices: list[draobjects.ResourceSlice],
    index: SliceIndex,
    features: emulation.DeviceFeatures,
) -> GatheredPool | None:
    count = slices[0].slice_count
    if len(slices) == count:
        return _build(pool_id, slices, None, features)
    if features.legacy_pools:
        # v1.34: an incomplete pool is kept, devices and all.
        return dataclasses.replace(_build(pool_id, slices, None, features), incomplete=True)
    generation = slices[0].generation
    everywhere: list[draobjects.ResourceSlice] = []
    for s in index.by_pool.get(pool_id, ()):
        if s.generation > generation:
            return None  # the driver is replacing this generation: ignore it
        if s.generation == generation and not _uses_compatibility_groups(s):
            everywhere.append(s)
    if len(everywhere) != count:
        return GatheredPool(driver=pool_id[0], name=pool_id[1], incomplete=True)
    return _build(pool_id, slices, everywhere, features)


def _build(
    pool_id: PoolId,
    slices: list[draobjects.ResourceSlice],
    everywhere: list[draobjects.ResourceSlice] | None,
    features: emulation.DeviceFeatures,
) -> GatheredPool:
    slices = sorted(slices, key=lambda s: s.name)
    partitionable = features.partitionable_devices
    devices: list[draobjects.ResourceSlice] = []
    counters: list[draobjects.ResourceSlice] = []
    elsewhere: list[draobjects.ResourceSlice] = []
    for s in slices:
        (counters if partitionable and s.shared_counters else devices).append(s)
    if everywhere is not None and len(slices) < len(everywhere):
        # Go tells the slices apart by name: one named as a slice reaching the node is skipped.
        names = {s.name for s in slices}
        for s in everywhere:
            if s.name not in names:
                (counters if partitionable and s.shared_counters else elsewhere).append(s)
    driver, name = pool_id
    broken = _duplicate_device(devices)
    if broken:
        return GatheredPool(driver=driver, name=name, invalid=broken, slices=tuple(devices))
    if not partitionable:
        return GatheredPool(driver=driver, name=name, slices=tuple(devices))
    sets: dict[str, Mapping[str, Fraction]] = {}
    for s in counters:
        for counter_set in s.shared_counters:
            if counter_set.name in sets:
                return GatheredPool(
                    driver=driver,
                    name=name,
                    invalid=f"duplicate counter set name {counter_set.name}",
                    slices=tuple(devices),
                )
            sets[counter_set.name] = MappingProxyType(
                {k: q.value for k, q in counter_set.counters.items()}
            )
    broken = _unknown_counter(sets, devices) or _unknown_counter(sets, elsewhere)
    return GatheredPool(
        driver=driver,
        name=name,
        invalid=broken,
        slices=tuple(devices),
        elsewhere=tuple(elsewhere),
        counter_sets=MappingProxyType(sets),
    )


def _duplicate_device(slices: Iterable[draobjects.ResourceSlice]) -> str:
    seen: set[str] = set()
    for s in slices:
        for d in s.devices:
            if d.name in seen:
                return f"duplicate device name {d.name}"
            seen.add(d.name)
    return ""


def _unknown_counter(
    sets: Mapping[str, Mapping[str, Fraction]], slices: Iterable[draobjects.ResourceSlice]
) -> str:
    for s in slices:
        for d in s.devices:
            for consumption in d.consumes_counters:
                counter_set = sets.get(consumption.counter_set)
                if counter_set is None:
                    return f"counter set {consumption.counter_set} not found"
                for counter in consumption.counters:
                    if counter not in counter_set:
                        return (
                            f"counter {counter} not found in counter set {consumption.counter_set}"
                        )
    return ""
