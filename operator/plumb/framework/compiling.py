"""A batch of pods compiled against a snapshot into the kernel's arrays (kernel/contract.py).

Static filters (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, the
volume filters, and NodeDeclaredFeatures, which the kernel checks after every other) and the
raw static scores (TaintToleration, NodeAffinity, ImageLocality, VolumeBinding's storage
capacity for a pod with claims) are evaluated here with numpy,
per pod over every node; what changes as pods are placed (resources, spread and affinity
counts) becomes count rows and constraint tables the kernel evaluates and updates pod after pod.

The batch's ``scoring.Profile`` decides which filters run (a filter it does not enable is left
out: static ones here, NodeResourcesFit by ``Batch.fit_filter``, PodTopologySpread's hard
constraints and InterPodAffinity's required terms by not being compiled), the score weights,
the resource plugins' resources and strategy, and the plugin arguments (PodTopologySpread's
default constraints, InterPodAffinity's hardPodAffinityWeight, NodeAffinity's addedAffinity).

``compile_batch`` runs in phases, in the order the data flows: the request columns
(``_Columns``), the affinity terms carried, the tables filled pod after pod (``_fill``: one
typed table per Batch table, each turning its rows into the contract's arrays), what each pod
adds to the count rows, the cluster (``_cluster``), then the Batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import countrows, snapshot
from plumb.backend.records import draobjects, objects, specs
from plumb.extensions import interface, judgements
from plumb.framework import batchtables, scoring, signatures
from plumb.framework.devices import allocator, availability
from plumb.framework.plugins import (
    dynamicresources,
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodedeclaredfeatures,
    nodename,
    nodeports,
    noderesourcesfit,
    nodeunschedulable,
    nodevolumelimits,
    podtopologyspread,
    tainttoleration,
    volumebinding,
    volumecapacity,
)
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb.kernel import contract

# The kernel reports insufficient resources as one bit per column of an int64.
MAX_COLUMNS = 63
_NO_DEVICES: Mapping[str, dynamicresources.NodeVerdicts] = {}
_NO_DEVICE_COLUMNS: Mapping[str, tuple[tuple[availability.RequestKey, int], ...]] = {}
_NO_HAVE: Mapping[availability.RequestKey, contract.I64] = {}
_NO_JUDGEMENTS: Mapping[str, judgements.Judgement] = {}
# The name of a device column (availability.Sharing): a set of devices some pods of the batch
# ask for, as a resource each node has so many of; no resource is named so.
DEVICE_COLUMN = "<" + dynamicresources.NAME + " devices #{}>"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Compiled:
    """The kernel's input for a batch, and what is needed to explain its output."""

    pods: tuple[objects.PodInfo, ...]
    names: tuple[str, ...]
    resources: tuple[str, ...]  # request columns of this batch
    static_reasons: tuple[batchtables.StaticReason, ...]  # code c is static_reasons[c - 1]
    cluster: contract.Cluster
    batch: contract.Batch
    deferred: tuple[objects.PodInfo, ...] = ()  # did not fit this batch's columns; try again
    row_keys: tuple[countrows.RowKey, ...] = ()  # what each of the cluster's count rows counts
    # Per static row, per node: the static reason checked after every other filter that fails
    # there (NodeDeclaredFeatures'), 0 where none does (None: none anywhere); batch.static_code
    # holds it negated only where no static filter checked first fails.
    last_codes: contract.I32 | None = None
    # The resource columns that are device columns (a bit per column, as the kernel's
    # RESOURCES details): a node short there fails DynamicResources, not NodeResourcesFit.
    device_bits: int = 0
    # The Python plugins that score (the profile's order), and per static row each one's
    # normalised score per node (() for a row no plugin scored): the trace shows them.
    extension_names: tuple[str, ...] = ()
    extension_parts: tuple[tuple[contract.I64, ...], ...] = ()

    @property
    def index(self) -> Mapping[str, int]:
        """Node name to its column (names are the snapshot's, in name order)."""
        return {name: n for n, name in enumerate(self.names)}


@dataclasses.dataclass(frozen=True, slots=True)
class _Filters:
    """Which static filters the profile enables, where its addedAffinity's required terms
    match (None: it has none), NodeDeclaredFeatures' release (0: not run: the profile
    does not enable it, or its gate is off) and NodeVolumeLimits' driver check."""

    unschedulable: bool
    node_name: bool
    taints: bool
    node_affinity: bool
    ports: bool
    volumes: frozenset[str]  # the volume plugins enabled as filters
    enforced: contract.B1 | None
    declared_features: int
    csi_drivers: int

    @classmethod
    def of(cls, profile: scoring.Profile, statics: snapshot.NodeStatics) -> _Filters:
        enabled = profile.filters
        added = profile.added_required
        return cls(
            unschedulable=nodeunschedulable.NAME in enabled,
            node_name=nodename.NAME in enabled,
            taints=tainttoleration.NAME in enabled,
            node_affinity=nodeaffinity.NAME in enabled,
            ports=nodeports.NAME in enabled,
            volumes=enabled & frozenset(volume_plugins.PLUGINS),
            enforced=None if added is None else nodeaffinity.matches_terms(added, statics),
            declared_features=(
                profile.kube.declared_features
                if nodedeclaredfeatures.NAME in enabled
                and profile.kube.gate(nodedeclaredfeatures.NAME)
                else 0
            ),
            csi_drivers=nodevolumelimits.driver_check(
                profile.kube.gate(nodevolumelimits.GATE), profile.kube.csi_driver_opt_in
            ),
        )


def _static(
    pod: objects.PodInfo,
    statics: snapshot.NodeStatics,
    cache: cache_module.Cache,
    tables: batchtables.Tables,
    verdicts: batchtables.Verdicts,
    filters: _Filters,
    devices: dynamicresources.NodeVerdicts | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per node: 0 where every static filter the profile enables passes, else the first
    failing filter's reason; and the reasons kube-scheduler checks after every other filter
    (DynamicResources', then NodeDeclaredFeatures'), 0 where they pass (None: neither runs
    for the pod)."""
    code = np.zeros(len(statics), dtype=np.int32)
    last = None

    def mark(fails: np.ndarray, reason: int) -> None:
        code[(code == 0) & fails] = reason

    pinned = nodeaffinity.prefilter_nodes(pod) if filters.node_affinity else None
    if pinned is not None:
        # NodeAffinity's PreFilter: a pod pinned to node names (DaemonSet pods) only visits
        # those; kube-scheduler reports every other node as not passing the plugin.
        outside = np.array([name not in pinned for name in statics.names], dtype=np.bool_)
        message = nodeaffinity.NOT_PREFILTERED if pinned else nodeaffinity.CONFLICT
        mark(outside, tables.reason(nodeaffinity.NAME, message, nodeaffinity.UNRESOLVABLE))
    if filters.unschedulable:
        mark(
            nodeunschedulable.filter(pod, statics),
            tables.reason(
                nodeunschedulable.NAME,
                nodeunschedulable.UNSCHEDULABLE,
                nodeunschedulable.UNRESOLVABLE,
            ),
        )
    if filters.node_name:
        mark(
            nodename.filter(pod, statics),
            tables.reason(nodename.NAME, nodename.MISMATCH, nodename.UNRESOLVABLE),
        )
    if filters.taints:
        mark(
            verdicts.taint_fails,
            tables.reason(
                tainttoleration.NAME, tainttoleration.UNTOLERATED, tainttoleration.UNRESOLVABLE
            ),
        )
    if filters.node_affinity:
        if filters.enforced is not None:  # the profile's addedAffinity, checked first
            mark(
                ~filters.enforced,
                tables.reason(nodeaffinity.NAME, nodeaffinity.ENFORCED, nodeaffinity.UNRESOLVABLE),
            )
        mark(
            verdicts.affinity_fails,
            tables.reason(nodeaffinity.NAME, nodeaffinity.MISMATCH, nodeaffinity.UNRESOLVABLE),
        )
    if filters.ports and pod.scheduling.host_ports:
        mark(
            nodeports.filter(pod, cache.used_ports(statics.names)),
            tables.reason(nodeports.NAME, nodeports.PORTS_IN_USE, nodeports.UNRESOLVABLE),
        )
    if filters.volumes and pod.claims:
        # VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone; kube-scheduler runs
        # them after NodeResourcesFit (see _resources_before_volumes).
        found = volume_plugins.verdicts(
            pod, statics, cache.volumes, cache.claim_use(), drivers=filters.csi_drivers
        )
        for verdict in found.filters:
            if verdict.plugin in filters.volumes:
                mark(
                    verdict.fails,
                    tables.reason(verdict.plugin, verdict.reason, verdict.unresolvable),
                )
    if devices is not None and devices.fails.any():
        last = np.zeros(len(statics), dtype=np.int32)
        for index, message in enumerate(devices.reasons):
            last[devices.reason == index] = tables.reason(
                dynamicresources.NAME, message, dynamicresources.UNRESOLVABLE
            )
    if filters.declared_features:
        needed = nodedeclaredfeatures.required(pod, filters.declared_features)
        if needed:
            if last is None:
                last = np.zeros(len(statics), dtype=np.int32)
            lacking = nodedeclaredfeatures.filter(needed, statics) & (last == 0)
            last[lacking] = tables.reason(
                nodedeclaredfeatures.NAME,
                nodedeclaredfeatures.reason(needed, filters.declared_features),
                nodedeclaredfeatures.UNRESOLVABLE,
            )
    return code, last


def _spread(
    b: int,
    pod: objects.PodInfo,
    statics: snapshot.NodeStatics,
    cache: cache_module.Cache,
    tables: batchtables.Tables,
    verdicts: batchtables.Verdicts,
    profile: scoring.Profile,
) -> bool:
    """Add the pod's spread constraints (hard ones only when PodTopologySpread filters);
    returns whether nodes missing a key are ignored when scoring (False only for the system
    default constraints)."""
    constraints = pod.scheduling.spread
    require_all = True
    if not constraints:
        constraints, require_all = _default_spread(pod, cache, profile)
    filtering = podtopologyspread.NAME in profile.filters
    scoring_soft = profile.weights[contract.SPREAD] != 0  # weighing 0, soft ones cost nothing
    constraints = tuple(
        constraint for constraint in constraints if (filtering if constraint.hard else scoring_soft)
    )
    honour_affinity = ~verdicts.affinity_fails
    tolerated = ~verdicts.taint_fails
    everywhere = np.ones(len(statics), dtype=np.bool_)
    for constraint in constraints:
        eligible = everywhere.copy()
        if constraint.node_affinity_policy == "Honor":
            eligible &= honour_affinity
        if constraint.node_taints_policy == "Honor":
            eligible &= tolerated
        selector = podtopologyspread.effective_selector(constraint, pod)
        tables.spread.append(
            pod=b,
            row=tables.row(podtopologyspread.selection(constraint, pod)),
            key=tables.key(constraint.topology_key),
            max_skew=constraint.max_skew,
            min_domains=constraint.min_domains,
            hard=constraint.hard,
            self_match=selector is not None and selector.matches(pod.labels),
            hostname=constraint.topology_key == podtopologyspread.HOSTNAME,
            eligible=eligible,
        )
    return require_all


def _default_spread(
    pod: objects.PodInfo, cache: cache_module.Cache, profile: scoring.Profile
) -> tuple[tuple[specs.SpreadConstraint, ...], bool]:
    """PodTopologySpread's default constraints for a pod without constraints of its own, and
    whether scoring requires all their keys on a node.

    kube-scheduler's buildDefaultConstraints: the profile's constraints ("System": the built-in
    ones; "List": ``spread_defaults``) with the selector of the pod's Services and workloads
    in place of theirs (their matchLabelKeys merged into a selector that is then replaced: no
    effect); none when that selector is empty. Only the system defaults score nodes missing a
    key (requireAllTopologies is false only for them)."""
    if profile.spread_defaulting == "List" and not profile.spread_defaults:
        return (), True
    selector = cache.workloads.default_selector(pod)
    if selector is None:
        return (), True
    if profile.spread_defaulting == "List":
        listed = tuple(
            dataclasses.replace(constraint, selector=selector, match_label_keys=())
            for constraint in profile.spread_defaults
        )
        return listed, True
    return podtopologyspread.default_constraints(selector), False


def _inter_pod(
    b: int,
    pod: objects.PodInfo,
    carriers: Sequence[countrows.Carrier],
    cache: cache_module.Cache,
    tables: batchtables.Tables,
    profile: scoring.Profile,
) -> bool:
    """Add the pod's inter-pod terms and the carried terms it matches (the required ones and
    existing pods' anti-affinity only when InterPodAffinity filters); returns the first-pod
    rule's "the pod matches all its own affinity terms"."""
    namespaces = cache.namespace_labels
    s = pod.scheduling
    self_match = False
    filtering = interpodaffinity.NAME in profile.filters
    hard_weight = profile.hard_pod_affinity_weight
    fixed = profile.kube.namespace_selector_fixed

    def incoming(term: specs.PodAffinityTerm) -> countrows.Matcher:
        return interpodaffinity.incoming_matcher(term, fixed)

    if s.required_affinity and filtering:
        matchers = tuple(incoming(term) for term in s.required_affinity)
        row = tables.row(countrows.Selection(matchers))
        for term in s.required_affinity:
            tables.affinity.append(pod=b, row=row, key=tables.key(term.topology_key), anti=False)
        self_match = all(m.matches(pod, namespaces) for m in matchers)
    for term in s.required_anti_affinity if filtering else ():
        row = tables.row(countrows.Selection((incoming(term),)))
        tables.affinity.append(pod=b, row=row, key=tables.key(term.topology_key), anti=True)

    # A score weighing 0 costs nothing: its terms get no count row and no table entry.
    scored = profile.weights[contract.INTER_POD] != 0

    def prefer(row: countrows.RowKey, topology_key: str, weight: int) -> None:
        tables.preferred.append(
            pod=b, row=tables.row(row), key=tables.key(topology_key), weight=weight
        )

    for weighted in s.preferred_affinity if scored else ():
        prefer(
            countrows.Selection((incoming(weighted.term),)),
            weighted.term.topology_key,
            weighted.weight,
        )
    for weighted in s.preferred_anti_affinity if scored else ():
        prefer(
            countrows.Selection((incoming(weighted.term),)),
            weighted.term.topology_key,
            -weighted.weight,
        )
    for carrier in carriers:
        if carrier.kind == countrows.REQUIRED_ANTI_AFFINITY:
            if not filtering:
                continue
        elif not scored or (carrier.kind == countrows.REQUIRED_AFFINITY and hard_weight <= 0):
            continue  # (kube-scheduler leaves required terms out at hardPodAffinityWeight 0)
        if not countrows.Matcher.of_term(carrier.term).matches(pod, namespaces):
            continue
        key = carrier.term.topology_key
        if carrier.kind == countrows.REQUIRED_ANTI_AFFINITY:
            tables.symmetric.append(pod=b, row=tables.row(carrier), key=tables.key(key))
        elif carrier.kind == countrows.REQUIRED_AFFINITY:
            prefer(carrier, key, hard_weight)
        elif carrier.kind == countrows.PREFERRED_AFFINITY:
            prefer(carrier, key, carrier.weight)
        else:
            prefer(carrier, key, -carrier.weight)
    return self_match


def _resources_before_volumes(
    pods: Sequence[objects.PodInfo], tables: batchtables.Tables, cluster: contract.Cluster
) -> None:
    """kube-scheduler runs the volume filters after NodeResourcesFit, so a node short of
    resources reports that, whatever its volumes: clear the volume reason there and let the
    kernel find the shortage. A pod with claims is decided alone (``Scheduler``), so the
    resources it meets are these."""
    volume_codes = [
        code
        for code, reason in enumerate(tables.reasons, 1)
        if reason.plugin in volume_plugins.PLUGINS
    ]
    if not volume_codes:
        return
    requests, requested, allocatable = tables.pods.requests, cluster.requested, cluster.allocatable
    for b, pod in enumerate(pods):
        if not pod.claims:
            continue
        asked = requests[b] > 0
        short = (requested[asked] + requests[b][asked][:, None] > allocatable[asked]).any(axis=0)
        row = tables.statics.codes[int(tables.pods.static_row[b])]
        row[np.isin(row, volume_codes) & short] = 0


_FIT_STRATEGIES = {
    scoring.LEAST_ALLOCATED: contract.LEAST_ALLOCATED,
    scoring.MOST_ALLOCATED: contract.MOST_ALLOCATED,
    scoring.BALANCED_ALLOCATION: contract.BALANCED_ALLOCATION,
    scoring.REQUESTED_TO_CAPACITY_RATIO: contract.REQUESTED_TO_CAPACITY_RATIO,
}


def _scored(resources: Sequence[tuple[str, int]]) -> list[tuple[str, int, bool]]:
    """The (name, weight, optional) of a resource plugin's resources a score can read (see
    noderesourcesfit.score_kind: the others are never scored and are left out)."""
    out = []
    for name, weight in resources:
        kind = noderesourcesfit.score_kind(name)
        if kind is not None:
            out.append((name, weight, kind == noderesourcesfit.IF_REQUESTED))
    return out


def _resource_fields(profile: scoring.Profile, column: Mapping[str, int]) -> dict[str, Any]:
    """The Batch fields of the resource plugins' arguments (kernel/contract.py)."""
    fit = _scored(profile.fit_resources)
    balanced = _scored(profile.balanced_resources)
    nonzero = {objects.CPU: 0, objects.MEMORY: 1}  # NodeResourcesFit reads non-zero requests
    shape = profile.fit_shape if profile.strategy == scoring.REQUESTED_TO_CAPACITY_RATIO else ()
    scale = contract.MAX_NODE_SCORE // noderesourcesfit.MAX_CUSTOM_PRIORITY_SCORE
    return {
        "fit_filter": noderesourcesfit.NAME in profile.filters,
        "fit_columns": np.array([column[name] for name, _, _ in fit], dtype=np.int32),
        "fit_weights": np.array([weight for _, weight, _ in fit], dtype=np.int64),
        "fit_nonzero": np.array(
            [nonzero.get(name, contract.NO_NONZERO) for name, _, _ in fit], dtype=np.int32
        ),
        "fit_optional": np.array([optional for _, _, optional in fit], dtype=np.bool_),
        "fit_shape_utilization": np.array([u for u, _ in shape], dtype=np.int64),
        "fit_shape_score": np.array([score * scale for _, score in shape], dtype=np.int64),
        "balanced_columns": np.array([column[name] for name, _, _ in balanced], dtype=np.int32),
        "balanced_optional": np.array([optional for _, _, optional in balanced], dtype=np.bool_),
        "balanced_change": profile.kube.balanced_change,
    }


def zone_scores(profile: scoring.Profile, snap: snapshot.Snapshot) -> contract.I64:
    """ZoneHealth's score per node: round(100 * the factor of the node's zone), 100 (neutral)
    for a node without the zone label or in a zone the profile has no factor for."""
    nodes = len(snap.statics)
    scores = np.full(nodes, contract.MAX_NODE_SCORE, dtype=np.int64)
    if not profile.zone_key or not profile.zone_factors:
        return scores
    ids = snap.statics.label_ids(profile.zone_key)
    per_zone = np.array(
        [
            round(contract.MAX_NODE_SCORE * profile.zone_factors.get(zone, 1.0))
            for zone in snap.statics.values(profile.zone_key)
        ],
        dtype=np.int64,
    )
    present = ids >= 0
    scores[present] = per_zone[ids[present]]
    return scores


def compile_batch(
    pods: Sequence[objects.PodInfo],
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    *,
    profile: scoring.Profile = scoring.DEFAULT,
    nominated: Sequence[tuple[objects.PodInfo, str]] = (),
    order: Sequence[objects.PodInfo] | None = None,
    devices: Mapping[str, dynamicresources.NodeVerdicts] = _NO_DEVICES,
    device_columns: Mapping[str, tuple[tuple[availability.RequestKey, int], ...]] = (
        _NO_DEVICE_COLUMNS
    ),
    device_have: Mapping[availability.RequestKey, contract.I64] = _NO_HAVE,
    judged: Mapping[str, judgements.Judgement] = _NO_JUDGEMENTS,
) -> Compiled:
    """Compile ``pods`` (in queue order) for the kernel against ``snap``, scored by
    ``profile``. ``nominated`` pods count as placed on their node (room held for them).
    ``order``: the batch as it was popped, pods decided without the kernel among them (which
    pods follow one another, for OpportunisticBatching); ``pods`` by default.
    ``devices``: DynamicResources' verdicts of the pods that keep them (reasons checked
    last); ``device_columns``: what the pods decided by device columns ask of each
    (availability.Sharing), ``device_have``: each column's devices per node. ``judged``: the
    Python plugins' verdicts per pod uid (their rejections checked last, their scores summed
    into the batch's extension score)."""
    names = {key: DEVICE_COLUMN.format(i) for i, key in enumerate(device_have)}
    columns = _Columns.of(pods, profile, tuple(names.values()))
    held = [(pod, node) for pod, node in nominated if node in snap.statics.index]
    carriers = _carriers(cache, held, columns.taken)
    tables = _fill(columns, snap.statics, cache, profile, carriers, devices, judged)
    if names:
        for b, pod in enumerate(columns.taken):
            for key, count in device_columns.get(pod.uid, ()):
                tables.pods.requests[b, columns.index[names[key]]] = count
        # Named among the batch's reasons, so traces know whose words these are.
        tables.reason(
            dynamicresources.NAME, allocator.CANNOT_ALLOCATE, dynamicresources.UNRESOLVABLE
        )
    for r, name in enumerate(columns.names):  # NodeResourcesFit's ignored resources
        if noderesourcesfit.fit_ignored(name, profile.fit_ignored, profile.fit_ignored_groups):
            tables.pods.requests[:, r] = 0
    row_keys = tuple(tables.rows)
    member = _member(columns.taken, row_keys, cache)
    cluster = _cluster(snap, cache, columns, held, row_keys, tuple(tables.keys))
    if profile.kube.devices.extended_resources:
        _leave_to_devices(cluster.allocatable, columns.names, cache)
    for key, name in names.items():
        cluster.allocatable[columns.index[name]] = device_have[key]
    if noderesourcesfit.NAME in profile.filters:
        _resources_before_volumes(columns.taken, tables, cluster)
    return Compiled(
        pods=columns.taken,
        names=snap.statics.names,
        resources=columns.names,
        static_reasons=tuple(tables.reasons),
        cluster=cluster,
        batch=_batch(
            tables,
            member,
            profile,
            snap,
            columns.index,
            signatures.continues(columns.taken, profile, pods if order is None else order),
        ),
        deferred=columns.deferred,
        row_keys=row_keys,
        last_codes=tables.statics.last_codes(len(snap.statics)),
        device_bits=sum(1 << columns.index[name] for name in names.values()),
        extension_names=_extension_names(profile),
        extension_parts=tuple(tables.statics.extension_parts),
    )


def _extension_names(profile: scoring.Profile) -> tuple[str, ...]:
    """The Python plugins that score for the profile, in its order."""
    return tuple(e.name for e in profile.extensions if e.runs(interface.SCORE) and e.weight)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Columns:
    """The batch's request columns, the pods that fit in them and those deferred (the kernel
    reports a shortage as a bit per column: at most MAX_COLUMNS)."""

    names: tuple[str, ...]
    index: Mapping[str, int]  # name to column
    taken: tuple[objects.PodInfo, ...]
    deferred: tuple[objects.PodInfo, ...]

    @classmethod
    def of(
        cls, pods: Sequence[objects.PodInfo], profile: scoring.Profile, reserved: Sequence[str] = ()
    ) -> _Columns:
        columns = [objects.CPU, objects.MEMORY, objects.PODS]
        # The resources the profile scores are columns whatever the pods request (a node's
        # ephemeral-storage is scored for a pod asking for none).
        for name, _weight, _optional in _scored(
            (*profile.fit_resources, *profile.balanced_resources)
        ):
            if name not in columns:
                columns.append(name)
        columns.extend(reserved)  # device columns (compile_batch)
        taken: list[objects.PodInfo] = []
        deferred: list[objects.PodInfo] = []
        for pod in pods:
            extra = [name for name in sorted(pod.requests) if name not in columns]
            if len(columns) + len(extra) > MAX_COLUMNS:
                deferred.append(pod)
                continue
            columns.extend(extra)
            taken.append(pod)
        return cls(
            names=tuple(columns),
            index={name: i for i, name in enumerate(columns)},
            taken=tuple(taken),
            deferred=tuple(deferred),
        )


def _carriers(
    cache: cache_module.Cache,
    held: Sequence[tuple[objects.PodInfo, str]],
    taken: Sequence[objects.PodInfo],
) -> list[countrows.Carrier]:
    """The affinity terms carried by placed pods, nominated pods and the batch's own, once
    each in that order."""
    return list(
        dict.fromkeys(
            [
                *cache.carriers(),
                *(c for pod, _node in held for c in countrows.carried(pod)),
                *(c for pod in taken for c in countrows.carried(pod)),
            ]
        )
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _StaticScores:
    """Which raw static scores the profile weighs (one weighing 0 is not computed: its row
    stays ``zeros``), its addedAffinity's preferred terms' raw score per node (None: it has
    none, or NodeAffinity weighs 0), how its release's ImageLocality counts image volumes
    (Emulation.image_volumes), and whether VolumeBinding scores (its weight, its filter, and
    the StorageCapacityScoring gate: off, kube-scheduler builds no scorer) with which shape."""

    taint: bool
    node_affinity: bool
    image: bool
    image_volumes: int
    volume: bool
    capacity_shape: volumecapacity.Shape
    added_preferred: contract.I64 | None
    zeros: contract.I64

    @classmethod
    def of(cls, profile: scoring.Profile, statics: snapshot.NodeStatics) -> _StaticScores:
        weights = profile.weights
        return cls(
            taint=bool(weights[contract.TAINT]),
            node_affinity=bool(weights[contract.NODE_AFFINITY]),
            image=bool(weights[contract.IMAGE_LOCALITY]),
            image_volumes=profile.kube.image_volumes,
            volume=bool(weights[contract.VOLUME_BINDING])
            and volumebinding.NAME in profile.filters
            and profile.kube.gate(volumecapacity.GATE),
            capacity_shape=profile.capacity_shape,
            added_preferred=(
                nodeaffinity.preferred_raw(profile.added_preferred, statics)
                if profile.added_preferred and weights[contract.NODE_AFFINITY]
                else None
            ),
            zeros=np.zeros(len(statics), dtype=np.int64),
        )


def _fill(
    columns: _Columns,
    statics: snapshot.NodeStatics,
    cache: cache_module.Cache,
    profile: scoring.Profile,
    carriers: Sequence[countrows.Carrier],
    devices: Mapping[str, dynamicresources.NodeVerdicts],
    judged: Mapping[str, judgements.Judgement] = _NO_JUDGEMENTS,
) -> batchtables.Tables:
    """The batch's tables, pod after pod in queue order (the order numbers the count rows,
    topology keys and static reasons); ``devices``: DynamicResources' verdicts per pod uid
    (cycle.prepare's)."""
    balanced = [name for name, _weight in profile.balanced_resources]
    tables = batchtables.Tables(
        pods=batchtables.PodTable.empty(len(columns.taken), columns.index, balanced)
    )
    filters = _Filters.of(profile, statics)
    scores = _StaticScores.of(profile, statics)
    for b, pod in enumerate(columns.taken):
        u = _static_row(
            pod,
            statics,
            cache,
            tables,
            (filters, scores, profile),
            devices.get(pod.uid),
            _judgement(judged.get(pod.uid), statics),
        )
        verdicts = tables.statics.verdicts[u]
        require_all = _spread(b, pod, statics, cache, tables, verdicts, profile)
        affinity_self = _inter_pod(b, pod, carriers, cache, tables, profile)
        tables.pods.append(pod, static_row=u, require_all=require_all, affinity_self=affinity_self)
    return tables


def _static_row(
    pod: objects.PodInfo,
    statics: snapshot.NodeStatics,
    cache: cache_module.Cache,
    tables: batchtables.Tables,
    settings: tuple[_Filters, _StaticScores, scoring.Profile],
    devices: dynamicresources.NodeVerdicts | None = None,
    judgement: judgements.Judgement | None = None,
) -> int:
    """The pod's row of the static table, evaluated for the first pod of its spec."""
    filters, scores, profile = settings
    # Replicas share a row, unless they claim volumes or devices (each its own claims; the
    # pods decided by device columns keep no verdict of their own here). Pods the Python
    # plugins judged share one where the plugins answered with the very same arrays.
    spec = (
        pod.scheduling,
        pod.node_name,
        pod.images,
        pod.image_volumes,
        pod.needed_features,
        pod.uid if pod.claims or devices is not None else "",
        () if judgement is None else _judged_alike(judgement),
    )
    u = tables.statics.index.get(spec)
    if u is not None:
        return u
    # TaintToleration's and NodeAffinity's verdicts serve both the filters and
    # PodTopologySpread's nodeTaintsPolicy / nodeAffinityPolicy: evaluate them once.
    verdicts = batchtables.Verdicts(
        taint_fails=tainttoleration.filter(pod, statics)[0],
        affinity_fails=nodeaffinity.filter(pod, statics),
    )
    code, last = _static(pod, statics, cache, tables, verdicts, filters, devices)
    if judgement is not None and judgement.rejections:
        last = _rejected(judgement, tables, len(statics), last)
    extension, parts = (
        _extension_score(judgement, profile, code, last)
        if judgement is not None and (judgement.scores or judgement.extender_score is not None)
        else (None, ())
    )
    zeros = scores.zeros
    taint = tainttoleration.score_raw(pod, statics) if scores.taint else zeros
    preferred = nodeaffinity.score_raw(pod, statics) if scores.node_affinity else zeros
    if scores.added_preferred is not None:
        preferred = preferred + scores.added_preferred
    image = imagelocality.score(pod, statics, scores.image_volumes) if scores.image else zeros
    volume = _volume_score(pod, statics, cache, scores) if pod.claims else zeros
    return tables.statics.append(
        spec,
        verdicts,
        code=code,
        last=last,
        taint=taint,
        affinity=preferred,
        image=image,
        volume=volume,
        dra=zeros if devices is None else devices.raw_score,
        extension=extension,
        extension_parts=parts,
    )


def _judged_alike(judgement: judgements.Judgement) -> tuple[object, ...]:
    """What makes two pods' judgements the same verdict: the same arrays (by identity: a
    plugin that keeps its answer in the NodeView hands every pod the same one), reasons and
    scores."""
    return (
        tuple((id(r.fails), r.plugin, r.reason, r.unresolvable) for r in judgement.rejections),
        tuple((name, id(scores)) for name, scores in judgement.scores.items()),
    )


def _judgement(
    found: judgements.Judgement | None, statics: snapshot.NodeStatics
) -> judgements.Judgement | None:
    """A pod's judgement if it was made over these very nodes (a preemption search reads a
    later snapshot: a node added or gone since, and the plugins' arrays no longer line up)."""
    if found is None or (found.nodes is not statics.names and found.nodes != statics.names):
        return None
    return found


def _rejected(
    judgement: judgements.Judgement,
    tables: batchtables.Tables,
    nodes: int,
    last: contract.I32 | None,
) -> contract.I32:
    """The Python plugins' Filter rejections, checked after every built-in filter (as a
    filter plugin added to a profile runs after the defaults): on each node the first one."""
    last = np.zeros(nodes, dtype=np.int32) if last is None else last.copy()
    for rejected in judgement.rejections:
        reason = tables.reason(rejected.plugin, rejected.reason, rejected.unresolvable)
        last[(last == 0) & rejected.fails] = reason
    return last


def _extension_score(
    judgement: judgements.Judgement,
    profile: scoring.Profile,
    code: contract.I32,
    last: contract.I32 | None,
) -> tuple[contract.I64, tuple[contract.I64, ...]]:
    """The Python plugins' weighted score sum per node, and each one's normalised score,
    normalised over the nodes that pass the static filters and every plugin's Filter; the HTTP
    extenders' total, weighed already, is added to the sum (not a part: no plugin's)."""
    passing = code == 0 if last is None else (code == 0) & (last == 0)
    total = np.zeros(code.shape[0], dtype=np.int64)
    parts = []
    for enabled in profile.extensions:
        raw = judgement.scores.get(enabled.name)
        if raw is None:
            continue
        score = judgements.normalised(raw, enabled.normalize, passing)
        parts.append(score)
        total += enabled.weight * score
    if judgement.extender_score is not None:
        total += judgement.extender_score
    return total, tuple(parts)


def _volume_score(
    pod: objects.PodInfo,
    statics: snapshot.NodeStatics,
    cache: cache_module.Cache,
    scores: _StaticScores,
) -> contract.I64:
    """VolumeBinding's storage-capacity score of a pod with claims (0 everywhere when the
    profile does not score it, or its PreFilter rejects the pod)."""
    if not scores.volume:
        return scores.zeros
    failure, claims = volumebinding.prefilter(pod, cache.volumes)
    if failure is not None:
        return scores.zeros
    return volumebinding.score(statics, cache.volumes, claims, scores.capacity_shape)


def _member(
    taken: Sequence[objects.PodInfo],
    row_keys: Sequence[countrows.RowKey],
    cache: cache_module.Cache,
) -> contract.I32:
    """Per batch pod, per count row: whether placing the pod adds to the row."""
    member = np.zeros((len(taken), len(row_keys)), dtype=np.int32)
    for b, pod in enumerate(taken):
        for t, key in enumerate(row_keys):
            member[b, t] = cache.rows.belongs(key, pod)
    return member


def _cluster(
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    columns: _Columns,
    held: Sequence[tuple[objects.PodInfo, str]],
    row_keys: Sequence[countrows.RowKey],
    key_names: Sequence[str],
) -> contract.Cluster:
    """The nodes as the batch starts, nominated pods counted where they are held."""
    statics = snap.statics
    domains = np.full((len(key_names), len(statics)), -1, dtype=np.int32)
    domain_counts = np.zeros(len(key_names), dtype=np.int32)
    for k, name in enumerate(key_names):
        domains[k] = statics.label_ids(name)
        domain_counts[k] = statics.domain_count(name)
    allocatable, requested = _resource_rows(snap, columns.names)
    nonzero_requested = np.array(snap.nonzero_requested.T, dtype=np.int64, order="C")
    counts = cache.count_rows(row_keys)
    column = columns.index
    for pod, node in held:
        n = statics.index[node]
        for name, amount in pod.requests.items():
            if name in column:
                requested[column[name], n] += amount
        requested[column[objects.PODS], n] += 1
        nonzero_requested[:, n] += pod.nonzero
        for t, key in enumerate(row_keys):
            counts[t, n] += cache.rows.belongs(key, pod)
    return contract.Cluster(
        allocatable=allocatable,
        requested=requested,
        nonzero_requested=nonzero_requested,
        name_hashes=np.array(snap.name_hashes, dtype=np.uint64),
        domains=domains,
        domain_counts=domain_counts,
        counts=counts,
        pods_column=column[objects.PODS],
        cpu_column=column[objects.CPU],
        memory_column=column[objects.MEMORY],
    )


# What a node "has" of a resource NodeResourcesFit leaves to DynamicResources: more than any
# pod asks, yet small enough that a score reading it cannot overflow.
DEVICE_BACKED = 1 << 40


def _leave_to_devices(
    allocatable: contract.I64, columns: Sequence[str], cache: cache_module.Cache
) -> None:
    """NodeResourcesFit's shouldDelegateResourceToDRA (DRAExtendedResource): a resource a
    DeviceClass maps is not checked on a node whose allocatable has none of it, where
    DynamicResources allocates it from devices (extendedresources.py)."""
    for r, name in enumerate(columns):
        if draobjects.device_backed_name(name) and cache.dra.extended_class(name) is not None:
            row = allocatable[r]
            row[row <= 0] = DEVICE_BACKED


def _resource_rows(
    snap: snapshot.Snapshot, columns: Sequence[str]
) -> tuple[contract.I64, contract.I64]:
    """Allocatable and requested in the batch's columns: the kernel's layout is a row per
    resource (the snapshot's a row per node); 0 for a resource no node has."""
    snap_column = {name: i for i, name in enumerate(snap.resources)}
    nodes = len(snap.statics)
    allocatable = np.zeros((len(columns), nodes), dtype=np.int64)
    requested = np.zeros((len(columns), nodes), dtype=np.int64)
    for i, name in enumerate(columns):
        if name in snap_column:
            allocatable[i] = snap.allocatable[:, snap_column[name]]
            requested[i] = snap.requested[:, snap_column[name]]
    return allocatable, requested


def _batch(
    tables: batchtables.Tables,
    member: contract.I32,
    profile: scoring.Profile,
    snap: snapshot.Snapshot,
    column: Mapping[str, int],
    continues: contract.B1,
) -> contract.Batch:
    """The batch's tables as the kernel's arrays, with the profile's weights and arguments."""
    return contract.Batch(
        **tables.arrays(len(snap.statics)),
        member=member,
        continues=continues,
        weights=np.array(profile.weights, dtype=np.int64),
        fit_strategy=_FIT_STRATEGIES[profile.strategy],
        zone_score=zone_scores(profile, snap),
        **_resource_fields(profile, column),
    )
