"""Trace records of a cycle's decisions: each ``Decision`` in observability's terms.

The scheduler adds what only it learns later (the budget after the policy counted the attempt,
the bind latency, the final result) and hands the records to the tracer. Nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping, Sequence

from plumb.backend import queue
from plumb.backend.cache import dra, snapshot
from plumb.backend.records import draobjects, objects
from plumb.extensions import interface
from plumb.framework import claimrejections, cycle, scoring
from plumb.framework.plugins import (
    dynamicresources,
    interpodaffinity,
    noderesourcesfit,
    podtopologyspread,
)
from plumb.kernel import contract
from plumb.observability import trace

_NONE: Mapping[str, trace.Rejection] = types.MappingProxyType({})

PolicyRef = tuple[str, str, int]
"""A governing SchedulingPolicy: namespace, name, generation."""

# Reasons given by the kernel's dynamic filters. Static reasons name their plugin in the compiled
# batch, and NodeResourcesFit gives the rest ("Insufficient cpu", "Too many pods").
_DYNAMIC_REASONS = {
    podtopologyspread.MISSING_LABEL: podtopologyspread.NAME,
    podtopologyspread.CONSTRAINTS_NOT_MATCH: podtopologyspread.NAME,
    interpodaffinity.AFFINITY_RULES_NOT_MATCH: interpodaffinity.NAME,
    interpodaffinity.ANTI_AFFINITY_RULES_NOT_MATCH: interpodaffinity.NAME,
    interpodaffinity.EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: interpodaffinity.NAME,
}


def build(
    decisions: Sequence[cycle.Decision],
    entries: Mapping[str, queue.Entry],
    snap: snapshot.Snapshot,
    profile: scoring.Profile,
    policy: PolicyRef | None,
    prepared: cycle.Prepared,
    kernel_seconds: float | None,
    store: dra.DraStore | None = None,
) -> dict[str, trace.Trace]:
    """The trace of each decision of one cycle, by pod uid; with the DRA ``store``, a failed
    pod with claims says which claim was rejected where (framework/claimrejections.py).

    ``decisions`` come in the order they were made (those needing no kernel, then the kernel's
    in batch order): a pod placed earlier in the kernel run is an input of the later ones."""
    compiled = prepared.compiled
    plugin_of = dict(_DYNAMIC_REASONS)
    if compiled is not None:
        plugin_of |= {reason.message: reason.plugin for reason in compiled.static_reasons}
    early = {decision.pod.uid for decision in prepared.early}
    weights = dict(zip(contract.SCORE_PLUGINS, profile.weights, strict=False))
    weights |= {e.name: e.weight for e in profile.extensions if e.name in score_names(profile)}
    hashed = hashes(
        decisions,
        prepared,
        snap.generation,
        len(snap),
        profile,
        policy,
        devices=prepared.devices_generation,
    )
    traces = {}
    for decision in decisions:
        pod, entry = decision.pod, entries[decision.pod.uid]
        in_kernel = compiled is not None and pod.uid not in early
        candidates, inputs, plan = hashed[pod.uid]
        traces[pod.uid] = trace.Trace(
            pod=pod.key,
            uid=pod.uid,
            result=trace.SCHEDULED if decision.node else trace.UNSCHEDULABLE,
            node=decision.node,
            message=decision.message,
            attempts=entry.attempts,
            feasible=decision.feasible,
            total=decision.total,
            rejected=rejections(decision, plugin_of),
            quota=decision.quota,
            candidates=candidates,
            weights=weights,
            plugins={e.name: e.version for e in profile.extensions},
            profile=profile.name,
            config=profile.config,
            kube=profile.kube.version,
            policy=None if policy is None else f"{policy[0]}/{policy[1]}",
            generation=None if policy is None else policy[2],
            snapshot=snap.generation,
            input_hash=inputs,
            plan_hash=plan,
            queue_wait_ms=trace.ms(max(0.0, entry.popped_at - entry.activated_at)),
            started=entry.popped_at,
            activated=entry.activated_at,
            kernel_ms=None if not in_kernel or kernel_seconds is None else trace.ms(kernel_seconds),
            batch=len(compiled.pods) if compiled is not None and in_kernel else 0,
            hinted=decision.hinted,
            claims=()
            if store is None
            else claim_rejections(decision, prepared, snap, store, profile),
        )
    return traces


def score_names(profile: scoring.Profile) -> tuple[str, ...]:
    """The plugins a candidate's scores name: the kernel's, then the profile's scoring Python
    plugins."""
    extra = tuple(e.name for e in profile.extensions if e.runs(interface.SCORE) and e.weight)
    return (*contract.SCORE_PLUGINS, *extra)


def claim_rejections(
    decision: cycle.Decision,
    prepared: cycle.Prepared,
    snap: snapshot.Snapshot,
    store: dra.DraStore,
    profile: scoring.Profile,
) -> tuple[trace.ClaimRejection, ...]:
    """Which of a failed pod's claims DynamicResources rejected on which nodes, and why."""
    pod = decision.pod
    if decision.node is not None or decision.error or not pod.resource_claims:
        return ()
    features = profile.kube.devices
    if decision.prefiltered:
        return claimrejections.before_nodes(pod, store, features, decision.total)
    verdicts = prepared.devices.get(pod.uid)
    if verdicts is None:
        return ()
    return claimrejections.on_nodes(
        pod,
        verdicts,
        snap.statics,
        store,
        features,
        dynamicresources.MATCHER,
        decision.devices_taken,
    )


def devices(reserved: dynamicresources.Reserved) -> tuple[trace.DeviceRecord, ...]:
    """The devices Reserve gave the pod's claims (those allocated already too), in the pod's
    claim order and each allocation's result order."""
    return tuple(
        trace.DeviceRecord(
            claim=claim.key,
            request=device.request,
            driver=device.driver,
            pool=device.pool,
            device=device.device,
        )
        for claim, allocation in reserved.claims
        for device in (allocation or claim.allocation or _UNALLOCATED).devices
    )


_UNALLOCATED = draobjects.Allocation()


Hashed = tuple[tuple[trace.CandidateRecord, ...], str, str]
"""A decision's candidates as the trace shows them, its input hash and its plan hash."""


def hashes(
    decisions: Sequence[cycle.Decision],
    prepared: cycle.Prepared,
    generation: int,
    nodes: int,
    profile: scoring.Profile,
    policy: PolicyRef | None,
    *,
    devices: int = 0,
) -> dict[str, Hashed]:
    """Each decision's candidates and hashes (see trace.py), by pod uid: what the trace line
    carries and ``plumb replay`` recomputes. ``decisions`` come in the order they were made, a
    pod placed earlier in the kernel run being an input of the later ones; ``devices`` is the
    DRA store's generation, an input of the pods with claims."""
    early = {decision.pod.uid for decision in prepared.early}
    in_run = prepared.compiled is not None
    profile_digest = trace.digest(profile)
    names = score_names(profile)
    ahead: list[str] = []
    hashed = {}
    for decision in decisions:
        pod = decision.pod
        in_kernel = in_run and pod.uid not in early
        candidates = tuple(
            trace.CandidateRecord(
                node=c.node,
                score=c.total,
                scores=trace.Scores(names, c.scores),
            )
            for c in decision.candidates
        )
        plan = trace.plan_hash(pod.uid, decision.node, candidates)
        inputs = input_hash(
            pod,
            generation,
            nodes,
            profile_digest,
            policy,
            ahead if in_kernel else (),
            devices=devices if pod.resource_claims else None,
        )
        hashed[pod.uid] = (candidates, inputs, plan)
        if in_kernel and decision.node is not None:
            ahead.append(plan)
    return hashed


def rerun(
    blocked: trace.Trace,
    pod: objects.PodInfo,
    snap: snapshot.Snapshot,
    profile: scoring.Profile,
    policy: PolicyRef | None,
    kernel_seconds: float,
) -> trace.Trace:
    """A blocked pod's trace once the kernel has decided it alone again without the policy's
    hard spread rules (a deviation run): its rejections stay those that blocked it."""
    return dataclasses.replace(
        blocked,
        snapshot=snap.generation,
        input_hash=deviation_input_hash(pod, snap.generation, len(snap), profile, policy),
        kernel_ms=trace.ms(kernel_seconds),
        batch=1,
    )


def deviation_input_hash(
    pod: objects.PodInfo,
    generation: int,
    nodes: int,
    profile: scoring.Profile,
    policy: PolicyRef | None,
) -> str:
    """The input hash of a deviation run: ``pod`` decided alone without its policy's rules."""
    return input_hash(pod, generation, nodes, trace.digest(profile), policy, (), deviation=True)


def deviation_plan_hash(uid: str, node: str) -> str:
    """The plan hash of a deviation: the node, no candidates (the least skew chose it)."""
    return trace.plan_hash(uid, node, ())


def input_hash(
    pod: objects.PodInfo,
    generation: int,
    nodes: int,
    profile: str,
    policy: PolicyRef | None,
    ahead: Sequence[str],
    *,
    deviation: bool = False,
    devices: int | None = None,
) -> str:
    """``trace.input_hash`` of a pod as compiled, over snapshot ``generation`` of ``nodes``
    nodes (and DRA store generation ``devices``), scored by the profile whose
    ``trace.digest`` is ``profile`` (see trace.py)."""
    return trace.input_hash(
        pod=trace.digest(pod),
        profile=profile,
        policy=policy,
        snapshot=generation,
        nodes=nodes,
        ahead=ahead,
        deviation=deviation,
        devices=devices,
    )


def rejections(
    decision: cycle.Decision, plugin_of: Mapping[str, str]
) -> Mapping[str, trace.Rejection]:
    """How many nodes each filter plugin rejected, from a failed decision's reasons, the
    plugins that rejected most first.

    The kernel rejects a node for the first filter it fails, so each node counts for one
    plugin; only NodeResourcesFit gives one node several reasons (Insufficient cpu and
    memory), so its node count is what the other plugins leave."""
    grouped: dict[str, dict[str, int]] = {}
    # A PreFilter's refusal (CapacityScheduling's) names the one plugin that made it.
    fallback = noderesourcesfit.NAME
    if decision.prefiltered and len(decision.plugins) == 1:
        (fallback,) = decision.plugins
    for reason, count in sorted(decision.reasons.items()):
        plugin = plugin_of.get(reason, fallback)
        grouped.setdefault(plugin, {})[reason] = count
    nodes = {plugin: sum(reasons.values()) for plugin, reasons in grouped.items()}
    if noderesourcesfit.NAME in nodes and fallback == noderesourcesfit.NAME:
        others = sum(n for plugin, n in nodes.items() if plugin != noderesourcesfit.NAME)
        nodes[noderesourcesfit.NAME] = decision.total - decision.feasible - others
    if not grouped:
        return _NONE  # a scheduled pod's: one shared empty mapping, not a dict per trace kept
    return {
        plugin: trace.Rejection(nodes=nodes[plugin], reasons=grouped[plugin])
        for plugin in sorted(grouped, key=lambda p: (-nodes[p], p))
    }
