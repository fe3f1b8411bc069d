"""Scheduling decisions: compile a batch, run a kernel, and explain each result.

``compiling.compile_batch`` turns pods into the kernel's arrays; any kernel with the contract's
``run`` decides; ``explain`` turns its arrays back into a ``Decision`` per pod, with
kube-scheduler's FailedScheduling wording for the pods that fit nowhere.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import countrows, snapshot
from plumb.backend.records import objects
from plumb.extensions import calls, judgements, registry
from plumb.framework import compiling, diagnoses, scoring
from plumb.framework.devices import allocator, availability
from plumb.framework.plugins import (
    capacityscheduling,
    dynamicresources,
    interpodaffinity,
    noderesourcesfit,
    podtopologyspread,
)
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb.framework.schedconfig import plugins as schedconfig_plugins
from plumb.kernel import contract, reference

_NONE: Mapping[str, str] = MappingProxyType({})

_DYNAMIC_PLUGINS = {
    contract.RESOURCES: noderesourcesfit.NAME,
    contract.SPREAD_LABEL: podtopologyspread.NAME,
    contract.SPREAD_SKEW: podtopologyspread.NAME,
    contract.AFFINITY: interpodaffinity.NAME,
    contract.ANTI_AFFINITY: interpodaffinity.NAME,
    contract.EXISTING_ANTI_AFFINITY: interpodaffinity.NAME,
}
# Failures preemption could not cure (kube-scheduler's UnschedulableAndUnresolvable).
UNRESOLVABLE_CODES = frozenset({contract.SPREAD_LABEL, contract.AFFINITY})
_DYNAMIC_REASONS = {
    contract.SPREAD_LABEL: podtopologyspread.MISSING_LABEL,
    contract.SPREAD_SKEW: podtopologyspread.CONSTRAINTS_NOT_MATCH,
    contract.AFFINITY: interpodaffinity.AFFINITY_RULES_NOT_MATCH,
    contract.ANTI_AFFINITY: interpodaffinity.ANTI_AFFINITY_RULES_NOT_MATCH,
    contract.EXISTING_ANTI_AFFINITY: interpodaffinity.EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScoredNode:
    node: str
    total: int
    # normalised, per contract.SCORE_PLUGINS, then per scoring Python plugin of the profile
    scores: tuple[int, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Decision:
    """Where the pod goes, or why it cannot go anywhere."""

    pod: objects.PodInfo
    node: str | None
    feasible: int
    total: int
    message: str = ""
    unresolvable: bool = False
    reasons: dict[str, int] = dataclasses.field(default_factory=dict)
    # The filter plugins that rejected some node: the cluster events that may help this pod
    # are the ones that touch what these plugins look at.
    plugins: frozenset[str] = frozenset()
    candidates: tuple[ScoredNode, ...] = ()
    # Taken from the ranking of the pod before it (OpportunisticBatching), not by its own
    # scores, which ``candidates`` still shows.
    hinted: bool = False
    # A plugin's error, not a verdict (kube-scheduler's Error status): the attempt ends with
    # reason SchedulerError and a backoff, and no PostFilter runs.
    error: bool = False
    # DynamicResources' PreFilter rejected every node: PostFilter runs, finding nothing to
    # deallocate and no node preemption could help.
    prefiltered: bool = False
    # Nodes (by index) where only a device column fell short: the devices the pod's claims
    # could have had went to pods placed before it in its batch (explained in its trace).
    devices_taken: tuple[int, ...] = ()
    # A quota refusal's figures for a person (CapacityScheduling's PreFilter), "" otherwise.
    quota: str = ""


def unschedulable_as_written(pod: objects.PodInfo, total: int) -> Decision:
    """A pod whose spec cannot be evaluated: the problem is the message."""
    return Decision(
        pod=pod, node=None, feasible=0, total=total, message=pod.problem or "", unresolvable=True
    )


def node_reasons(compiled: compiling.Compiled, code: int, detail: int) -> list[str]:
    if code == contract.STATIC:
        return [compiled.static_reasons[detail - 1].message]
    if code == contract.RESOURCES:
        if detail & compiled.device_bits and not detail & ~compiled.device_bits:
            # Only a device column short: NodeResourcesFit passed, DynamicResources did not.
            return [allocator.CANNOT_ALLOCATE]
        return list(noderesourcesfit.reasons(detail & ~compiled.device_bits, compiled.resources))
    return [_DYNAMIC_REASONS[code]]


def explain(
    compiled: compiling.Compiled,
    result: contract.Result,
    nominated: Mapping[str, str] = _NONE,
) -> list[Decision]:
    """A decision per pod. A pod nominated to a node (by an earlier preemption) goes there when
    that node passes every filter, unscored, as kube-scheduler's evaluateNominatedNode does
    (such a pod is decided alone, so no later pod of its batch saw another placement)."""
    names = compiled.names
    decisions = []
    # The batch's small arrays as Python lists, once: reading numpy scalars one by one cost
    # more than the rest of the explanation.
    chosen_of, feasible_of = result.chosen.tolist(), result.feasible.tolist()
    hinted_of = result.hinted.tolist()
    extension_parts = compiled.extension_parts
    static_row_of = compiled.batch.static_row.tolist()
    top_of, top_scores_of = result.top.tolist(), result.top_scores.tolist()
    top_totals_of = np.take_along_axis(result.total, np.maximum(result.top, 0), axis=1).tolist()
    for b, pod in enumerate(compiled.pods):
        chosen, hinted = chosen_of[b], hinted_of[b]
        held = nominated.get(pod.uid)
        if chosen >= 0 and held is not None and held in compiled.index:
            n = compiled.index[held]
            if int(result.code[b, n]) == contract.PASS:
                chosen, hinted = n, False
        top_totals, top_scores = top_totals_of[b], top_scores_of[b]
        parts = extension_parts[static_row_of[b]] if extension_parts else ()
        candidates = tuple(
            ScoredNode(
                node=names[n],
                total=top_totals[rank],
                scores=(*top_scores[rank], *(int(part[n]) for part in parts)),
            )
            for rank, n in enumerate(top_of[b])
            if n >= 0
        )
        if chosen >= 0:
            decisions.append(
                Decision(
                    pod=pod,
                    node=names[chosen],
                    feasible=feasible_of[b],
                    total=len(names),
                    candidates=candidates,
                    hinted=hinted,
                )
            )
            continue
        codes, details = result.code[b], result.detail[b]
        per_node = [
            node_reasons(compiled, int(codes[n]), int(details[n])) for n in range(len(names))
        ]
        diagnosis = diagnoses.Diagnosis.count(len(names), per_node)
        decisions.append(
            Decision(
                pod=pod,
                node=None,
                feasible=0,
                total=len(names),
                message=diagnosis.message(),
                reasons=dict(diagnosis.reasons),
                plugins=_rejecting_plugins(compiled, codes, details),
                unresolvable=_all_unresolvable(compiled, b, codes, details),
                devices_taken=_devices_taken(compiled, codes, details),
            )
        )
    return decisions


def _devices_taken(
    compiled: compiling.Compiled, codes: np.ndarray, details: np.ndarray
) -> tuple[int, ...]:
    """The nodes where nothing but a device column fell short."""
    if not compiled.device_bits:
        return ()
    bits = compiled.device_bits
    short = (codes == contract.RESOURCES) & ((details & bits) != 0) & ((details & ~bits) == 0)
    return tuple(int(n) for n in np.flatnonzero(short))


def _rejecting_plugins(
    compiled: compiling.Compiled, codes: np.ndarray, details: np.ndarray
) -> frozenset[str]:
    """The filter plugins that rejected at least one node."""
    plugins = {
        _DYNAMIC_PLUGINS[int(code)] for code in np.unique(codes) if int(code) in _DYNAMIC_PLUGINS
    }
    if compiled.device_bits:
        short = details[codes == contract.RESOURCES]
        if not (short & ~compiled.device_bits).all():
            plugins.add(dynamicresources.NAME)
        if not (short & ~compiled.device_bits).any():
            plugins.discard(noderesourcesfit.NAME)
    static = np.unique(details[codes == contract.STATIC])
    plugins |= {compiled.static_reasons[int(d) - 1].plugin for d in static}
    return frozenset(plugins)


def beyond_allocatable(compiled: compiling.Compiled, b: int, n: int, bits: int) -> bool:
    """Whether pod ``b`` is short on node ``n`` of a resource it asks more of than the node has
    at all: NodeResourcesFit's UnschedulableAndUnresolvable (no eviction can make room). The
    pod count is never such a resource."""
    cluster = compiled.cluster
    wanted = compiled.batch.requests[b]
    if bits & compiled.device_bits and not bits & ~compiled.device_bits:
        return dynamicresources.UNRESOLVABLE  # DynamicResources' verdict: no eviction helps
    bits &= ~compiled.device_bits
    for r in range(wanted.shape[0]):
        if r == cluster.pods_column or not bits & (1 << r):
            continue
        if int(wanted[r]) > int(cluster.allocatable[r, n]):
            return True
    return False


def _all_unresolvable(
    compiled: compiling.Compiled, b: int, codes: np.ndarray, details: np.ndarray
) -> bool:
    """Whether no node could be freed up by preemption: every rejection is unresolvable
    (kube-scheduler's UnschedulableAndUnresolvable)."""
    for code in np.unique(codes):
        if int(code) == contract.STATIC:
            static = np.unique(details[codes == contract.STATIC])
            if not all(compiled.static_reasons[int(d) - 1].unresolvable for d in static):
                return False
        elif int(code) == contract.RESOURCES:
            short = np.flatnonzero(codes == contract.RESOURCES)
            if not all(beyond_allocatable(compiled, b, int(n), int(details[n])) for n in short):
                return False
        elif int(code) not in UNRESOLVABLE_CODES:
            return False
    return True


@dataclasses.dataclass(frozen=True, kw_only=True)
class Prepared:
    """A batch ready for the kernel, with the decisions that needed no kernel."""

    early: list[Decision]
    compiled: compiling.Compiled | None
    deferred: tuple[objects.PodInfo, ...] = ()
    # DynamicResources' verdicts per pod uid (those with claims it filtered), kept to explain
    # a failure (framework/claimrejections.py), and how long its PreFilter and Filter took.
    devices: Mapping[str, dynamicresources.NodeVerdicts] = dataclasses.field(default_factory=dict)
    device_runs: Mapping[str, DeviceRun] = dataclasses.field(default_factory=dict)
    devices_generation: int = 0  # the DRA store's, when the batch was prepared


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DeviceRun:
    """DynamicResources over every node for one pod: the extension point that ended it
    (PreFilter or Filter), its status in kube-scheduler's words, the seconds it took."""

    point: str
    status: str
    seconds: float


def prepare(
    pods: Sequence[objects.PodInfo],
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    profile: scoring.Profile = scoring.DEFAULT,
    nominated: Sequence[tuple[objects.PodInfo, str]] = (),
    every_nominated: Sequence[objects.PodInfo] = (),
    judged: Mapping[str, judgements.Judgement] | None = None,
    now: float = 0.0,
) -> Prepared:
    """Compile ``pods`` (in queue order) for the kernel, scored by ``profile``, with room held
    for the ``nominated`` pods; pods that need no kernel are decided at once.
    ``every_nominated``: all pods nominated to a node, whatever their priority (quotas count
    them). ``judged``: the profile's Python plugins' verdicts per pod uid (the scheduling loop
    has them made off the loop, watched, extensions/calls.py); None: made here, on this thread,
    with the cycle's clock ``now`` (a replay, the tests)."""
    total = len(snap)
    if judged is None:
        judged = judge_here(pods, snap, profile, now)
    early: list[Decision] = []
    ready: list[objects.PodInfo] = []
    devices: dict[str, dynamicresources.NodeVerdicts] = {}
    # Pods with claims share the batch as availability.Sharing lets them.
    sharing = availability.Sharing()
    device_columns: dict[str, tuple[tuple[availability.RequestKey, int], ...]] = {}
    columned: dict[str, dynamicresources.NodeVerdicts] = {}
    waiting: list[objects.PodInfo] = []
    columns_allowed: bool | None = None
    runs: dict[str, DeviceRun] = {}
    for pod in pods:
        extra = len({*pod.requests} - {objects.CPU, objects.MEMORY})
        if pod.problem is not None:
            early.append(unschedulable_as_written(pod, total))
        elif extra > compiling.MAX_COLUMNS - 3:
            early.append(
                Decision(
                    pod=pod,
                    node=None,
                    feasible=0,
                    total=total,
                    unresolvable=True,
                    message=f"the pod requests {extra} resources besides cpu, "
                    f"memory and pods; plumb checks at most "
                    f"{compiling.MAX_COLUMNS - 3}",
                )
            )
        elif total == 0:
            early.append(
                Decision(
                    pod=pod, node=None, feasible=0, total=0, message=diagnoses.NO_NODES_AVAILABLE
                )
            )
        elif (rejected := _volume_prefilter(pod, snap, cache, profile)) is not None:
            early.append(rejected)
        elif isinstance(found := _timed_verdicts(pod, snap, cache, profile, runs), Decision):
            early.append(found)
        elif (quota := _quota_prefilter(pod, cache, every_nominated, ready)) is not None:
            if quota.admission is capacityscheduling.Admission.DEFERRED:
                waiting.append(pod)
            else:
                early.append(_over_quota(pod, len(snap), quota))
        elif (refused := _judged_early(pod, total, judged.get(pod.uid))) is not None:
            early.append(refused)
        else:
            if found is not None:
                if columns_allowed is None:
                    columns_allowed = _device_columns_allowed(pods, cache, profile, nominated)
                claims = [claim.key for _, claim in cache.dra.pod_claims(pod).claims]
                how, asked = sharing.admit(
                    claims, found.counted, columns_allowed and _orders_as_alone(pod)
                )
                if how == availability.DEFER:
                    waiting.append(pod)
                    continue
                if how == availability.COLUMNS:
                    device_columns[pod.uid] = asked
                    columned[pod.uid] = found
                else:
                    devices[pod.uid] = found
            ready.append(pod)
    if len(device_columns) == 1:
        # One pod alone in its columns: its own verdict is as exact and costs no column.
        devices.update(columned)
        device_columns.clear()
    if not ready:
        return Prepared(
            early=early,
            compiled=None,
            deferred=tuple(waiting),
            devices={**devices, **columned},
            device_runs=runs,
            devices_generation=cache.dra.generation,
        )
    compiled = compiling.compile_batch(
        ready,
        snap,
        cache,
        profile=profile,
        nominated=nominated,
        order=pods,
        devices=devices,
        device_columns=device_columns,
        device_have=sharing.have if device_columns else {},
        judged=judged,
    )
    return Prepared(
        early=early,
        compiled=compiled,
        deferred=(*waiting, *compiled.deferred),
        devices={**devices, **columned},
        device_runs=runs,
        devices_generation=cache.dra.generation,
    )


def judge_here(
    pods: Sequence[objects.PodInfo],
    snap: snapshot.Snapshot,
    profile: scoring.Profile,
    now: float,
) -> Mapping[str, judgements.Judgement]:
    """The profile's Python plugins' verdicts, made on this thread (the installed plugins)."""
    if not profile.extensions:
        return {}
    found = registry.installed(frozenset(schedconfig_plugins.registry()))
    plugins = calls.instances(profile.extensions, found)
    return calls.judge_now(pods, snap, plugins, now)


def _judged_early(
    pod: objects.PodInfo, total: int, judgement: judgements.Judgement | None
) -> Decision | None:
    """A pod the Python plugins decided before any node is looked at: one failed (an error,
    kube-scheduler's SchedulerError) or a PreFilter refused it (its PostFilter may run)."""
    if judgement is None:
        return None
    if judgement.failure is not None:
        failure = judgement.failure
        return Decision(
            pod=pod,
            node=None,
            feasible=0,
            total=total,
            message=failure.message,
            plugins=frozenset({failure.plugin}),
            error=True,
        )
    if judgement.refused is not None:
        plugin, status = judgement.refused
        return Decision(
            pod=pod,
            node=None,
            feasible=0,
            total=total,
            message=f"{diagnoses.NO_NODES_PREFIX.format(total=total)} {status.reason}.",
            reasons={status.reason: total},
            unresolvable=status.unresolvable,
            plugins=frozenset({plugin}),
            prefiltered=True,
        )
    return None


def _device_columns_allowed(
    pods: Sequence[objects.PodInfo],
    cache: cache_module.Cache,
    profile: scoring.Profile,
    nominated: Sequence[tuple[objects.PodInfo, str]],
) -> bool:
    """Whether pods with claims may be decided by device columns in this batch: the kernel
    checks the columns with the resources (NodeResourcesFit's filter runs), no pod carries
    a required anti-affinity term (InterPodAffinity's filter could then fail a node after
    the resources, before DynamicResources), and the profile gives no pod hard default spread
    constraints (PodTopologySpread's, likewise)."""
    if noderesourcesfit.NAME not in profile.filters:
        return False
    if any(c.hard for c in profile.spread_defaults):
        return False
    if any(pod.scheduling.required_anti_affinity for pod in (*pods, *(p for p, _ in nominated))):
        return False
    return not any(c.kind == countrows.REQUIRED_ANTI_AFFINITY for c in cache.carriers())


def _orders_as_alone(pod: objects.PodInfo) -> bool:
    """Whether the kernel's first failing check on a node is the one kube-scheduler reports
    for this pod when a device column is short: no filter of the pod's own runs between
    NodeResourcesFit and DynamicResources (hard spread constraints, required pod affinity)."""
    s = pod.scheduling
    return not (any(c.hard for c in s.spread) or s.required_affinity or s.required_anti_affinity)


def _timed_verdicts(
    pod: objects.PodInfo,
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    profile: scoring.Profile,
    runs: dict[str, DeviceRun],
) -> Decision | dynamicresources.NodeVerdicts | None:
    """``device_verdicts``, its time and status kept in ``runs`` (for the metrics)."""
    started = time.perf_counter()
    found = device_verdicts(pod, snap, cache, profile)
    if found is None:
        return None
    seconds = time.perf_counter() - started
    if isinstance(found, Decision):
        point = PREFILTER if found.prefiltered else FILTER
        status = ERROR if found.error else UNRESOLVABLE
    else:
        point = FILTER
        status = UNRESOLVABLE if bool(found.fails.all()) else SUCCESS
    runs[pod.uid] = DeviceRun(point=point, status=status, seconds=seconds)
    return found


# Extension points and statuses, as kube-scheduler's plugin_execution_duration_seconds labels
# them (fwk.Code's String()).
PREFILTER, FILTER, RESERVE, PREBIND = "PreFilter", "Filter", "Reserve", "PreBind"
SUCCESS, ERROR, UNRESOLVABLE = "Success", "Error", "UnschedulableAndUnresolvable"


def _volume_prefilter(
    pod: objects.PodInfo,
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    profile: scoring.Profile,
) -> Decision | None:
    """The volume plugins' PreFilter: a pod whose claims rule out every node before any is
    looked at (a claim missing, an Immediate claim unbound, a ReadWriteOncePod claim in use).
    kube-scheduler's message names no node; its PostFilter part is DynamicResources' failure
    to find the state its own PreFilter never wrote: "not found"."""
    if not pod.claims:
        return None
    found = volume_plugins.verdicts(pod, snap.statics, cache.volumes, cache.claim_use())
    failure = found.prefilter
    if failure is None or failure.plugin not in profile.filters:
        return None
    return Decision(
        pod=pod,
        node=None,
        feasible=0,
        total=len(snap),
        message=f"{diagnoses.NO_NODES_PREFIX.format(total=len(snap))} {failure.message}. "
        f"{VOLUME_PREFILTER_POSTFILTER}",
        unresolvable=failure.unresolvable,
        plugins=frozenset({failure.plugin}),
    )


VOLUME_PREFILTER_POSTFILTER = "not found"


def _quota_prefilter(
    pod: objects.PodInfo,
    cache: cache_module.Cache,
    nominated: Sequence[objects.PodInfo],
    earlier: Sequence[objects.PodInfo],
) -> capacityscheduling.Verdict | None:
    """CapacityScheduling's PreFilter where the cluster has ElasticQuotas (plumb reads them
    whenever scheduler-plugins' CRD is served): None when the pod is admitted, else rejected or
    deferred (``earlier``: the pods this run places before it)."""
    if not cache.quotas:
        return None
    verdict = capacityscheduling.admit(pod, cache.quotas, nominated, earlier)
    return None if verdict.admission is capacityscheduling.Admission.ADMITTED else verdict


def _over_quota(pod: objects.PodInfo, total: int, verdict: capacityscheduling.Verdict) -> Decision:
    """A pod CapacityScheduling's PreFilter rejects: kube-scheduler's FitError with a PreFilter
    message; its PostFilter (CapacityScheduling's preemption) may still help it."""
    return Decision(
        pod=pod,
        node=None,
        feasible=0,
        total=total,
        message=f"{diagnoses.NO_NODES_PREFIX.format(total=total)} {verdict.message}.",
        reasons={verdict.message: total},
        plugins=frozenset({capacityscheduling.NAME}),
        prefiltered=True,
        quota=verdict.explained,
    )


def device_verdicts(
    pod: objects.PodInfo,
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    profile: scoring.Profile,
) -> Decision | dynamicresources.NodeVerdicts | None:
    """DynamicResources' PreFilter and Filter for a pod with claims: its verdict per node (the
    compiler makes them reasons checked last), or a decision that needs no kernel (PreFilter
    rejected every node; the allocator met an error)."""
    asks = pod.resource_claims or pod.device_requests
    if not asks or dynamicresources.NAME not in profile.filters:
        return None
    features = profile.kube.devices
    found = dynamicresources.prefilter(pod, cache.dra, features)
    if found is None:
        return None
    total = len(snap)
    if isinstance(found, dynamicresources.Failure):
        return Decision(
            pod=pod,
            node=None,
            feasible=0,
            total=total,
            message=f"{diagnoses.NO_NODES_PREFIX.format(total=total)} {found.message}.",
            unresolvable=True,
            plugins=frozenset({dynamicresources.NAME}),
            prefiltered=True,
        )
    verdicts = dynamicresources.filter(
        found,
        snap.statics,
        np.ones(total, dtype=np.bool_),
        cache.dra,
        features,
        dynamicresources.MATCHER,
        scored=profile.weights[contract.DYNAMIC_RESOURCES] > 0,
    )
    if verdicts.error is not None:
        return Decision(
            pod=pod,
            node=None,
            feasible=0,
            total=total,
            message=verdicts.error,
            plugins=frozenset({dynamicresources.NAME}),
            error=True,
        )
    return verdicts


def schedule_batch(
    pods: Sequence[objects.PodInfo],
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    kernel: contract.Kernel = reference.run,
) -> tuple[list[Decision], tuple[objects.PodInfo, ...]]:
    """Decide for ``pods`` in order, as if one at a time; returns decisions and deferred pods."""
    prepared = prepare(pods, snap, cache)
    decisions = list(prepared.early)
    if prepared.compiled is not None:
        compiled = prepared.compiled
        decisions.extend(explain(compiled, kernel(compiled.cluster, compiled.batch)))
    return decisions, prepared.deferred


def schedule(
    pod: objects.PodInfo,
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    kernel: contract.Kernel = reference.run,
) -> Decision:
    """One pod, one decision (tests and replay)."""
    decisions, _deferred = schedule_batch([pod], snap, cache, kernel)
    return decisions[0]
