"""Kernel runs as the scheduler made them, kept so that a snapshot dump can make them again.

A ``Run`` is what a batch was decided from, besides the cache: the pods in queue order, the
SchedulingPolicy rules joined to their own, the scoring profile (zone factors as they were),
the policy's reference, and the cache state its snapshot saw (the journal's sequence number;
backend/cache/journal.py). ``RunLog`` keeps the last runs; ``snapshot`` writes them with the cache
(backend/cache/dumps.py) as one JSON document (``capture`` on the event loop, then
``Capture.encode`` in a worker thread: app/debug.py), and ``replay`` decides a run again over
the cache rewound to that state, giving each pod's node, input hash and plan hash: the trace
line's.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import codec, dumps, nominations
from plumb.backend.records import objects, specs
from plumb.framework import cycle, deviation, scoring, traces
from plumb.framework.plugins import dynamicresources, podtopologyspread
from plumb.kernel import contract
from plumb.preemption import evaluator, search

FORMAT = "plumb.dev/snapshot/v1"
DEFAULT_LIMIT = 1_000


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    """One kernel run: its inputs besides the cache, and where the cache stood."""

    seq: int  # the cache journal's sequence number when the snapshot was taken
    generation: int  # the snapshot's generation: the trace lines' "snapshot"
    nodes: int
    pods: tuple[objects.PodInfo, ...]  # as the queue gave them, in batch order
    rules: tuple[specs.SpreadConstraint, ...] = ()  # the policy's, joined to each pod's own
    profile: scoring.Profile = scoring.DEFAULT
    policy: traces.PolicyRef | None = None
    # A deviation run: one pod decided without the policy's rules, sent to the node that
    # raises these hard rules' skew least.
    deviation: tuple[specs.SpreadConstraint, ...] | None = None
    # Room held for nominated pods of at least the batch's priority, and the batch pods' own
    # nominations (such a pod goes to its node when that node fits it).
    held: tuple[nominations.Nomination, ...] = ()
    nominated: tuple[nominations.Nomination, ...] = ()
    # A preemption search (PostFilter) for the run's one pod, already governed.
    preemption: PreemptionInputs | None = None
    # The DRA store's generation (an input hash's "devices" for the pods with claims).
    devices: int = 0
    # The cycle's clock (seconds since the epoch): what the Python plugins read as now.
    clock: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PreemptionInputs:
    """What a preemption search read besides the cache and the run."""

    budgets: tuple[evaluator.DisruptionBudget, ...] = ()
    rules: evaluator.Rules = evaluator.NO_RULES
    exempt: frozenset[str] = frozenset()  # uids of pods a SchedulingPolicy protects
    nominated_node: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Replayed:
    """A pod's decision made again: what its trace line says, if the replay is faithful."""

    uid: str
    pod: str  # namespace/name
    node: str | None
    input_hash: str
    plan_hash: str
    # The FailedScheduling message as far as the run makes it: the filters' diagnosis, with
    # the PostFilter plugins' words where no preemption search follows (PreFilter rejected
    # every node, or preemption is disabled); a preemption run's: its outcome's sentence.
    message: str
    victims: tuple[str, ...] = ()  # a preemption run's: namespace/name, most important first
    # A preemption run's: what the PostFilter plugins add to the FailedScheduling message
    # (DynamicResources' words, then DefaultPreemption's), as the scheduler wrote it.
    post_filter: str = ""
    # A decision's: no node fits and a preemption search followed (its run's ``post_filter``
    # ends the message).
    searched: bool = False


class RunLog:
    """The last ``limit`` runs, oldest first."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._runs: collections.deque[Run] = collections.deque(maxlen=limit)

    def record(self, run: Run) -> None:
        self._runs.append(run)

    def __iter__(self) -> Iterator[Run]:
        return iter(self._runs)


def snapshot(cache: cache_module.Cache, log: RunLog, scheduler_name: str) -> dict[str, Any]:
    """The cache, its journal and the runs it can still rebuild, as one JSON document."""
    return capture(cache, log, scheduler_name).encode()


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Capture:
    """A snapshot taken but not yet encoded: ``capture`` copies the containers on the event
    loop (milliseconds), ``encode`` does the rest (seconds at 10,000 pods) in any thread,
    since the capture shares only frozen records with the live cache and run log."""

    taken: str
    scheduler_name: str
    cache: dumps.CacheCapture
    runs: tuple[Run, ...]

    def encode(self) -> dict[str, Any]:
        """The snapshot document's JSON values (``snapshot``'s)."""
        return dumps.materialise(self.encode_lazily())

    def encode_lazily(self) -> dict[str, Any]:
        """The document with its long arrays as iterators encoding one record at a time, to
        be written out as they go (see ``dumps.CacheCapture.encode_lazily``)."""
        return {
            "format": FORMAT,
            "taken": self.taken,
            "schedulerName": self.scheduler_name,
            "cache": self.cache.encode_lazily(),
            "runs": map(codec.encode, self.runs),
        }


def capture(cache: cache_module.Cache, log: RunLog, scheduler_name: str) -> Capture:
    """``snapshot``'s content at this instant, to ``encode`` later, off the event loop."""
    oldest = cache.journal.oldest
    return Capture(
        taken=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        scheduler_name=scheduler_name,
        cache=dumps.capture(cache),
        runs=tuple(run for run in log if run.seq >= oldest),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class SnapshotDocument:
    """A snapshot document read back."""

    taken: str
    cache: dumps.Dumped
    runs: tuple[Run, ...]

    def runs_of(self, uid: str) -> list[Run]:
        """The runs that decided pod ``uid``, oldest first (preemption searches aside)."""
        return [
            run
            for run in self.runs
            if run.preemption is None and any(pod.uid == uid for pod in run.pods)
        ]

    def preemption_after(self, decided: Run, uid: str) -> Run | None:
        """The preemption search for pod ``uid`` that followed the run ``decided``, if any."""
        later = False
        for run in self.runs:
            if run is decided:
                later = True
            elif later and any(pod.uid == uid for pod in run.pods):
                return run if run.preemption is not None else None
        return None


def load(data: Mapping[str, Any]) -> SnapshotDocument:
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
        raise dumps.DumpError(f"not a plumb snapshot (format {found!r}, want {FORMAT})")
    try:
        runs = codec.decode(tuple[Run, ...], data["runs"])
        return SnapshotDocument(
            taken=str(data["taken"]), cache=dumps.load(data["cache"]), runs=runs
        )
    except (KeyError, TypeError, codec.CodecError) as error:
        raise dumps.DumpError(f"a malformed plumb snapshot: {error}") from error


def replay(
    run: Run, cache: cache_module.Cache, kernel: contract.Kernel, pods: Sequence[objects.PodInfo]
) -> dict[str, Replayed]:
    """Decide ``pods`` (the run's, or the same pods read from elsewhere) as ``run`` did, over
    ``cache`` (rewound to ``run.seq``); each pod's decision and hashes, by uid."""
    if run.deviation is not None:
        return _replay_deviation(run, cache, kernel, pods[0])
    if run.preemption is not None:
        return _replay_preemption(run, cache, kernel, pods[0])
    snap = cache.snapshot()
    governed = [podtopologyspread.with_constraints(pod, run.rules) for pod in pods]
    held = [(h.pod, h.node) for h in run.held]
    prepared = cycle.prepare(governed, snap, cache, run.profile, nominated=held, now=run.clock)
    decisions = list(prepared.early)
    if prepared.compiled is not None:
        compiled = prepared.compiled
        own = {h.pod.uid: h.node for h in run.nominated}
        result = kernel(compiled.cluster, compiled.batch)
        decisions.extend(cycle.explain(compiled, result, own))
    hashed = traces.hashes(
        decisions,
        prepared,
        run.generation,
        run.nodes,
        run.profile,
        run.policy,
        devices=run.devices,
    )
    early = {d.pod.uid for d in prepared.early}
    return {
        d.pod.uid: Replayed(
            uid=d.pod.uid,
            pod=d.pod.key,
            node=d.node,
            input_hash=hashed[d.pod.uid][1],
            plan_hash=hashed[d.pod.uid][2],
            message=_message(d, run.profile, d.pod.uid in early),
            searched=d.node is None and d.pod.uid not in early and run.profile.preemption,
        )
        for d in decisions
    }


def _message(decision: cycle.Decision, profile: scoring.Profile, early: bool) -> str:
    """The FailedScheduling message as the scheduling loop (scheduler/loop.py) writes it
    before any preemption search: a PreFilter rejection gets DynamicResources' PostFilter
    words and DefaultPreemption's "not helpful" sentence; a pod the kernel found no node for,
    under a profile without preemption, DynamicResources' words alone."""
    if decision.node is not None or decision.error:
        return decision.message
    if decision.prefiltered:
        preemption = evaluator.not_helpful(decision.total) if profile.preemption else ""
    elif not early and not profile.preemption:
        preemption = ""
    else:
        return decision.message  # complete, or a preemption search (its run) follows
    words = search.post_filter_words(profile.kube, preemption)
    return f"{decision.message} {words}" if words else decision.message


def _replay_deviation(
    run: Run, cache: cache_module.Cache, kernel: contract.Kernel, pod: objects.PodInfo
) -> dict[str, Replayed]:
    assert run.deviation is not None
    snap = cache.snapshot()
    prepared = cycle.prepare([pod], snap, cache, run.profile, now=run.clock)
    found = None
    if prepared.compiled is not None and not prepared.deferred:
        compiled = prepared.compiled
        result = kernel(compiled.cluster, compiled.batch)
        found = deviation.least_skew(pod, run.deviation, snap, compiled, result, cache)
    node = None if found is None else found.node
    return {
        pod.uid: Replayed(
            uid=pod.uid,
            pod=pod.key,
            node=node,
            input_hash=traces.deviation_input_hash(
                pod, run.generation, run.nodes, run.profile, run.policy
            ),
            plan_hash="" if node is None else traces.deviation_plan_hash(pod.uid, node),
            message="" if found is None else found.describe(),
        )
    }


def _replay_preemption(
    run: Run, cache: cache_module.Cache, kernel: contract.Kernel, pod: objects.PodInfo
) -> dict[str, Replayed]:
    """A preemption search again: the nominated node and the victims, or the sentence."""
    assert run.preemption is not None
    inputs = run.preemption
    exempt = inputs.exempt
    found = search.search(
        pod,
        cache.snapshot(),
        cache,
        kernel,
        profile=run.profile,
        held=run.held,
        budgets=inputs.budgets,
        rules=inputs.rules,
        exempt=lambda p: p.uid in exempt,
        nominated_node=inputs.nominated_node,
    )
    node = None if found is None else found.outcome.node
    return {
        pod.uid: Replayed(
            uid=pod.uid,
            pod=pod.key,
            node=node,
            input_hash="",
            plan_hash="",
            message="" if found is None else found.outcome.message,
            victims=() if found is None else tuple(v.key for v in found.victims),
            post_filter=""
            if found is None
            else found.post_filter_message(_claims_said(pod, cache, run.profile)),
        )
    }


def _claims_said(pod: objects.PodInfo, cache: cache_module.Cache, profile: scoring.Profile) -> str:
    """What DynamicResources' PostFilter said before the search (scheduler/postfilter.py):
    a claim of the pod allocated where some node cannot reach it and reserved for no other
    pod was deallocated (its write taken to have succeeded), else the pod's claims could not
    help, or it has none."""
    if not pod.resource_claims or dynamicresources.NAME not in profile.filters:
        return dynamicresources.NO_CLAIMS
    devices = dynamicresources.prefilter(pod, cache.dra, profile.kube.devices)
    if not isinstance(devices, dynamicresources.PodDevices):
        return dynamicresources.NO_CLAIMS
    for claim in dynamicresources.unavailable(devices, cache.snapshot().statics.nodes):
        if not any(c.uid != pod.uid for c in claim.reserved_for):
            return dynamicresources.DEALLOCATED
    return dynamicresources.STILL_NOT_SCHEDULABLE
