"""The scheduling cycle of a pod HTTP extenders are interested in, between the kernel's filters
and its choice, as kube-scheduler's schedulePod runs it (schedule_one.go).

The pod is decided alone (scheduler/loop.py ``_needs_own_batch``). The kernel's first run gives
the nodes every filter plugin passes; then:

1. none passes, or PreFilter refused the pod: the first run's decision stands, no extender is
   asked;
2. the pod is nominated to a node that passes: the filters are asked about that node alone,
   and if they keep it the pod goes there (evaluateNominatedNode); else, or on an error there,
   the full pass below;
3. the filters, one extender after another, over the feasible nodes (extendercalls.py); a
   non-ignorable error ends the attempt with its text (reason SchedulerError, no PostFilter);
4. what they dropped becomes rejections of plugin "Extender" checked after every built-in
   filter (each node its status's reason, counted verbatim in FailedScheduling; no words for a
   node dropped without one), and with two nodes or more left, the prioritizers' weighed
   total becomes a row added to each node's score;
5. the kernel runs again with those (extensions/judgements.py ``Judgement``): its filters
   leave exactly the nodes the extenders kept, its scores are normalised over them as
   kube-scheduler's are, and it chooses; with none left it explains the failure, and the
   verdicts go with the pod to PostFilter (only FailedNodes are Unschedulable there).

A node an extender answered with its own copy (``Nodes`` of one that is not nodeCacheCapable)
is scored as kube-scheduler scores it: a new NodeInfo without pods, nothing requested, no
images (``emptied``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

import numpy as np

from plumb.backend.records import objects
from plumb.extensions import extendercalls, extenders, judgements
from plumb.framework import compiling, cycle
from plumb.kernel import contract

Rerun = Callable[
    [judgements.Judgement, Collection[str]],
    Awaitable[tuple[cycle.Prepared, contract.Result | None]],
]
"""The kernel run again for the pod with this judgement and these nodes emptied: the batch
prepared (its compiled batch emptied so) and the kernel's result (None: no kernel run)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Extended:
    """The pod's decision once the extenders had their say, the batch it was decided from
    (for its trace) and the verdicts it goes to PostFilter with."""

    decision: cycle.Decision
    prepared: cycle.Prepared | None = None  # None: the first run's
    judgement: judgements.Judgement | None = None


async def decide(
    pod: objects.PodInfo,
    compiled: compiling.Compiled,
    result: contract.Result,
    *,
    nominated: str | None,
    configured: Sequence[extenders.Extender],
    calls: extendercalls.ExtenderCalls,
    pod_body: extendercalls.Body | None,
    node_body: extendercalls.BodyOf,
    judgement: judgements.Judgement | None,
    rerun: Rerun,
) -> Extended | None:
    """The extenders' part of the pod's cycle after the kernel's first run (``compiled``,
    ``result``); None when the first run did not decide the pod (deferred)."""
    uids = [p.uid for p in compiled.pods]
    if pod.uid not in uids:
        return None
    b = uids.index(pod.uid)
    held = {pod.uid: nominated} if nominated else {}
    first = cycle.explain(compiled, result, held)[b]
    codes = result.code[b]
    feasible = [name for n, name in enumerate(compiled.names) if int(codes[n]) == contract.PASS]
    if not feasible or first.node is None:
        return Extended(decision=first)
    if nominated and first.node == nominated:
        alone = await calls.filter(configured, pod_body, [nominated], node_body)
        if alone.error is None and alone.nodes:
            return Extended(decision=first)
    filtered = await calls.filter(configured, pod_body, feasible, node_body)
    if filtered.error is not None:
        return Extended(decision=failed(pod, len(compiled.names), filtered.error))
    # Only the nodes it was sent count: a copy of another node (an extender that is not
    # nodeCacheCapable may answer any) is not among the kernel's feasible nodes.
    sent = set(feasible)
    kept = [name for name in filtered.nodes if name in sent]
    if len(kept) == 1 and not filtered.changed(feasible):
        return Extended(decision=first)  # the only node: chosen unscored
    scores: Mapping[str, int] = {}
    if len(kept) > 1:
        scores = await calls.prioritize(configured, pod_body, filtered, node_body)
    verdicts = verdict(compiled.names, feasible, filtered, scores, judgement)
    prepared, again = await rerun(verdicts, filtered.fresh)
    decisions = list(prepared.early)
    if prepared.compiled is not None and again is not None:
        decisions.extend(cycle.explain(prepared.compiled, again))
    mine = [d for d in decisions if d.pod.uid == pod.uid]
    if not mine:
        return Extended(decision=first)
    return Extended(decision=mine[0], prepared=prepared, judgement=verdicts)


def failed(pod: objects.PodInfo, total: int, error: str) -> cycle.Decision:
    """An extender's error ends the attempt: reason SchedulerError, its text verbatim."""
    return cycle.Decision(
        pod=pod,
        node=None,
        feasible=0,
        total=total,
        message=error,
        plugins=frozenset({extenders.PLUGIN}),
        error=True,
    )


def verdict(
    names: Sequence[str],
    feasible: Sequence[str],
    filtered: extendercalls.Filtered,
    scores: Mapping[str, int],
    judgement: judgements.Judgement | None,
) -> judgements.Judgement:
    """The pod's judgement with the extenders' verdicts added: the feasible nodes they dropped
    rejected under plugin "Extender" with their status (FailedAndUnresolvable, FailedNodes:
    unresolvable or not; no status: no words, unresolvable), and their weighed scores."""
    index = {name: n for n, name in enumerate(names)}
    kept = set(filtered.nodes)
    groups: dict[tuple[str, bool], np.ndarray] = {}
    for name in feasible:
        if name in kept:
            continue
        reason, unresolvable = filtered.statuses.get(name, ("", True))
        mask = groups.get((reason, unresolvable))
        if mask is None:
            mask = groups[(reason, unresolvable)] = np.zeros(len(names), dtype=np.bool_)
        mask[index[name]] = True
    rejections = tuple(
        judgements.Rejected(extenders.PLUGIN, mask, reason, unresolvable)
        for (reason, unresolvable), mask in groups.items()
    )
    row = None
    if scores:
        row = np.zeros(len(names), dtype=np.int64)
        for name, total in scores.items():
            row[index[name]] += total
    if judgement is None:
        return judgements.Judgement(nodes=tuple(names), rejections=rejections, extender_score=row)
    return dataclasses.replace(
        judgement,
        rejections=(*judgement.rejections, *rejections),
        extender_score=row,
    )


def emptied(compiled: compiling.Compiled, nodes: Collection[str]) -> compiling.Compiled:
    """The batch with ``nodes`` as kube-scheduler scores an extender's copy of a node: no pod
    on it, nothing requested, no image present (its count rows, which PreScore reads from the
    whole snapshot, stay)."""
    if not nodes:
        return compiled
    columns = [compiled.index[name] for name in nodes if name in compiled.index]
    cluster = compiled.cluster
    requested = cluster.requested.copy()
    nonzero = cluster.nonzero_requested.copy()
    requested[:, columns] = 0
    nonzero[:, columns] = 0
    image = compiled.batch.image_score.copy()
    image[:, columns] = 0
    return dataclasses.replace(
        compiled,
        cluster=dataclasses.replace(cluster, requested=requested, nonzero_requested=nonzero),
        batch=dataclasses.replace(compiled.batch, image_score=image),
    )
