"""The scheduling loop: pop a pod, decide on a snapshot, assume it in the cache, bind in the
background, report. This file tells the main story in two rooms, as kube-scheduler's
``ScheduleOne`` does: the scheduling cycle here (pop, snapshot, decide, assume) hands each pod
over to the binding cycle (scheduler/binding.py: prebind, bind, report, step back). Both share
one state (scheduler/state.py), which cluster events reach through the ``ClusterFeed``
(scheduler/feed.py, ``Scheduler.feed``); the parts live in backend/, framework/, binder.py and
events.py.

With leader election the loop runs only on the leader (the app layer starts ``run`` when the
lease is gained and cancels it, then calls ``stand_down``, when it is lost); ``may_act`` is
asked again before each batch, and the binder asks it before each POST, so nothing is decided
or bound once the lease went unrenewed past its deadline.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from typing import Any

from plumb import claimreservations, groupconditions, prebind, runs
from plumb import events as events_module
from plumb.backend import queue as queue_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import journal as journal_module
from plumb.backend.cache import volumes as volumes_module
from plumb.backend.records import groupobjects, objects
from plumb.binder import Binder
from plumb.events import Recorder
from plumb.extensions import extenders, judgements, registry
from plumb.framework import compiling, cycle, deviation, scoring, signatures, traces
from plumb.framework.plugins import (
    capacityscheduling,
    dynamicresources,
    gangscheduling,
    podtopologyspread,
)
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb.k8s import gates
from plumb.kernel import contract
from plumb.kernel import executor as kernel_executor
from plumb.observability import metrics as metrics_module
from plumb.observability import spans as spans_module
from plumb.observability import trace, tracing
from plumb.policy import engine, spec, store
from plumb.preemption import evaluator, search
from plumb.scheduler import (
    binding,
    extendercycle,
    feed,
    gangcycle,
    meters,
    postfilter,
    profiles,
)
from plumb.scheduler import state as state_module

DEFAULT_BATCH = kernel_executor.BATCH
STALLED_CYCLE_SECONDS = 60.0
"""A batch still being decided after this long means the loop is stuck (liveness fails)."""


logger = logging.getLogger("plumb.scheduler")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Held:
    """What Reserve took for a pod on its node: the volumes' plan and the claims' devices."""

    node: str
    plan: volumes_module.BindingPlan | None = None
    devices: dynamicresources.Reserved | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Decided:
    """A batch's decisions on one snapshot before anything is carried out: each pod's, in
    batch order, with its trace; those decided before the kernel (``early``) and those put
    off to a later batch (``deferred``); the profile and policy they were decided under."""

    decisions: list[cycle.Decision]
    records: dict[str, trace.Trace]
    early: frozenset[str]
    deferred: tuple[objects.PodInfo, ...]
    profile: scoring.Profile
    policy: spec.Policy | None
    total: int  # nodes in the snapshot
    # The Python plugins' verdicts per pod uid (its preemption search keeps their rejections).
    judged: Mapping[str, judgements.Judgement] = dataclasses.field(default_factory=dict)
    clock: float = 0.0  # the cycle's clock (what the plugins read as now)


class Scheduler:
    """Runs scheduling cycles one after another; holds the feed that keeps the shared state
    in step with the cluster, and the binding cycle each decision is handed over to."""

    def __init__(
        self,
        *,
        served: profiles.Served,
        binder: Binder,
        recorder: Recorder,
        kernel: contract.KernelRunner,
        batch_size: int = DEFAULT_BATCH,
        queue: queue_module.SchedulingQueue | None = None,
        tracer: tracing.Tracer | None = None,
        metrics: metrics_module.Metrics | None = None,
        journal: int = journal_module.DEFAULT_LIMIT,
        may_act: gates.Gate = gates.always,
        clock: Callable[[], float] = time.monotonic,
        offload: postfilter.Offload | None = None,
        volume_api: prebind.VolumeApi | None = None,
        claim_api: claimreservations.ExtendedClaimApi | None = None,
        group_api: groupconditions.GroupStatusApi | None = None,
        extensions: registry.Registry | None = None,
    ) -> None:
        cache = cache_module.Cache(journal)  # keeps the last `journal` writes' undos
        self.state = state_module.SchedulerState(
            served=served,
            cache=cache,
            queue=queue if queue is not None else queue_module.SchedulingQueue(),
            # SchedulingPolicies: fed by the app layer's reconciler, asked per batch.
            policies=engine.PolicyEngine(cache),
            recorder=recorder,
            # One trace line per decision, and each pod's last decision for the debug endpoint.
            tracer=tracer if tracer is not None else tracing.Tracer(),
            # Attempts, latencies and kernel runs, counted as they happen (a registry of its
            # own unless the app layer serves one).
            metrics=metrics if metrics is not None else metrics_module.Metrics(),
            # The condition an upstream PodGroup gets after its first cycle.
            group_conditions=groupconditions.GroupConditions(group_api, recorder.writes),
            extensions=extensions,
        )
        # What the cluster told us comes in here (the app layer's watch handlers call it).
        self.feed = feed.ClusterFeed(self.state)
        # What we decided is carried out there, in the background.
        self.binding = binding.BindingCycle(
            self.state,
            binder=binder,
            may_act=may_act,
            volume_api=volume_api,
            claim_api=claim_api,
        )
        self.queue.backoff_policy = served.backoff
        self._kernel = meters.timed(kernel, self.metrics)
        self.batch_size = batch_size
        # The last kernel runs' inputs, for snapshot dumps that ``plumb replay`` reads.
        self.runs = runs.RunLog()
        self._may_act = may_act
        self._clock = clock
        self._cycle_started: float | None = None  # when the batch being decided was popped
        # Preemption after a failed cycle; its kernel runs go where ``offload`` sends them
        # (the kernel's thread in the app; at once with the reference kernel by default).
        # Pod groups, all or nothing (their own batches: ``_together``).
        self.gangs = gangcycle.GangCycle(self)
        self.post_filter = postfilter.PostFilter(
            cache=self.cache,
            nominations=self.state.nominations,
            budgets=self.state.budgets,
            policies=self.policies,
            recorder=recorder,
            metrics=self.metrics,
            offload=offload if offload is not None else postfilter.inline,
            runs=self.runs,
            claim_api=claim_api,
            extenders=lambda: self.served.extenders,
            extender_calls=self.state.extender_calls,
            bodies=self.state.bodies,
        )

    # Read access to the shared state, for the app layer, its probes and tests.

    @property
    def served(self) -> profiles.Served:
        """The configuration in force (``reconfigure`` replaces it)."""
        return self.state.served

    @property
    def cache(self) -> cache_module.Cache:
        return self.state.cache

    @property
    def queue(self) -> queue_module.SchedulingQueue:
        return self.state.queue

    @property
    def policies(self) -> engine.PolicyEngine:
        return self.state.policies

    @property
    def tracer(self) -> tracing.Tracer:
        return self.state.tracer

    @property
    def metrics(self) -> metrics_module.Metrics:
        return self.state.metrics

    def stalled(self) -> str | None:
        """Why the loop looks stuck (for liveness), or None: a batch decided for too long."""
        started = self._cycle_started
        if started is not None and self._clock() - started > STALLED_CYCLE_SECONDS:
            return (
                f"the scheduling loop has been deciding one batch for "
                f"{self._clock() - started:.0f} s (more than {STALLED_CYCLE_SECONDS:.0f} s)"
            )
        return None

    # The loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule pods until cancelled; waits for the first resync before the first pod."""
        # The replica running this loop is the one that schedules (the leader, with election).
        self.metrics.set_leader(True)
        try:
            await self.feed.synced.wait()
            while True:
                entries = await self.next_batch()
                if not self._may_act():
                    # The lease went unrenewed; the app layer is about to cancel this loop.
                    for entry in entries:
                        self.queue.requeue(entry)
                    await asyncio.sleep(0.1)
                    continue
                self._cycle_started = self._clock()
                try:
                    await self.decide(entries)
                finally:
                    self._cycle_started = None
        finally:
            self._cycle_started = None
            self.metrics.set_leader(False)

    async def next_batch(self) -> list[queue_module.Entry]:
        """The next batch to decide, waiting for its first pod: pods that may share a kernel
        run, or one pod group's members."""
        return await self.queue.pop_batch(
            self.batch_size,
            alone=self._needs_own_batch,
            group=self._group,
            together=self._together,
        )

    def reconfigure(self, served: profiles.Served) -> None:
        """Serve ``served`` from the next batch on (a reload): the queue, the cache and the
        bindings in flight stay. Raises profiles.ReconfigureError when it needs a restart."""
        profiles.check_replacement(self.served, served)
        if served.bodies_kept != self.served.bodies_kept:
            # Bodies no extender needs now go; those newly needed come with the objects'
            # next events (rawbodies.py).
            self.state.bodies.clear()
        self.state.served = served
        self.queue.backoff_policy = served.backoff

    async def decide(self, entries: list[queue_module.Entry]) -> None:
        """``schedule_batch``, with failures isolated: a batch that raises (the kernel, a
        plugin, a policy) is decided again one pod at a time, and a pod that raises alone ends
        its attempt in an internal error and is retried after a backoff. Pods decided before
        the failure keep their decision."""
        try:
            await self.schedule_batch(entries)
            return
        except Exception as error:
            if len(entries) == 1:
                self._internal_error(entries[0], error)
                return
            logger.exception(
                "deciding a batch of %d pods failed; deciding them one at a time", len(entries)
            )
        for entry in entries:
            if self.queue.where(entry.pod.uid) is not queue_module.Where.IN_FLIGHT:
                continue  # decided before the failure (or deleted meanwhile)
            try:
                await self.schedule_batch([entry])
            except Exception as error:
                self._internal_error(entry, error)

    def _internal_error(self, entry: queue_module.Entry, error: Exception) -> None:
        """The pod's attempt failed inside plumb: FailedScheduling (reason SchedulerError, as
        kube-scheduler reports its own errors), counted as an error, retried after a backoff."""
        pod = entry.pod
        if self.queue.where(pod.uid) is not queue_module.Where.IN_FLIGHT:
            return
        logger.error("scheduling %s failed: %s", pod.key, error, exc_info=error)
        message = f"internal error: {type(error).__name__}: {error}"
        meters.count_errors(self.metrics, self.queue, [entry])
        step = self.queue.backoff_duration(entry.attempts)
        self.queue.backoff(pod.uid)
        self.binding.failed_nomination(pod, written=False)
        self.state.recorder.failed_scheduling(
            pod, message, step=step, reason=events_module.SCHEDULER_ERROR
        )
        profile = self.served.get(pod.scheduler_name)
        self.tracer.emit(
            trace.Trace(
                pod=pod.key,
                uid=pod.uid,
                result=trace.SCHEDULER_ERROR,
                message=message,
                attempts=entry.attempts,
                profile=pod.scheduler_name,
                config="" if profile is None else profile.config,
                kube="" if profile is None else profile.kube.version,
            ),
            repeat_after=step,
            level=logging.ERROR,
        )

    async def schedule_batch(self, entries: list[queue_module.Entry]) -> None:
        """One scheduling cycle for a batch of pods, decided as if one at a time.

        The batch shares one governing SchedulingPolicy, or none (``pop_batch`` groups them):
        its rules join each pod's own constraints and its weights score the nodes. The members
        of a pod group come as a batch of their own, decided all or nothing
        (scheduler/gangcycle.py)."""
        profile = self.served.get(entries[0].pod.scheduler_name)
        if profile is None:  # not ours any more (cannot happen while the names are fixed)
            for entry in entries:
                self.queue.delete(entry.pod.uid)
            return
        ref = self._together(entries[0].pod)
        if ref is not None:
            await self.gangs.schedule(entries, ref, profile)
            return
        policy = self.policies.governing(entries[0].pod)
        decided = await self.decide_only(entries, profile, policy)
        await self.carry_out(entries, decided)

    async def decide_only(
        self,
        entries: list[queue_module.Entry],
        profile: scoring.Profile,
        policy: spec.Policy | None,
        *,
        together: Collection[str] = (),
    ) -> Decided:
        """The batch's decisions on one snapshot, in ``entries``' order, with their traces:
        nothing is assumed, bound or reported yet. ``together``: more pods decided with this
        batch (the other members of a pod group), whose nominations hold no room for it."""
        by_uid = {entry.pod.uid: entry for entry in entries}
        pods = [entry.pod for entry in entries]
        if policy is not None:
            pods = [self.policies.govern(pod, policy) for pod in pods]
        snap = self.cache.snapshot()
        if policy is not None:
            profile = self.policies.profile(policy, snap, profile)
        # Room held for nominated pods of at least the batch's priority (one per batch), and
        # the batch pods' own nominations.
        held = self.state.nominations.holding(
            pods[0].priority, excluding=by_uid.keys() | set(together)
        )
        own = tuple(n for pod in pods if (n := self.state.nominations.get(pod.uid)) is not None)
        every = [n.pod for n in self.state.nominations.all()] if self.cache.quotas else []
        now = time.time()  # the cycle's clock, as the Python plugins read it
        compile_started = self.queue.now()  # the stages' times, on the queue's clock
        judged: dict[str, judgements.Judgement] = {}
        if profile.extensions:
            judged = await self.state.plugin_calls.judge(pods, snap, profile.extensions, now)
            meters.count_judgements(self.metrics, judged)
        prepared = cycle.prepare(
            pods,
            snap,
            self.cache,
            profile,
            nominated=[(h.pod, h.node) for h in held],
            every_nominated=every,
            judged=judged,
            now=now,
        )
        self.runs.record(
            runs.Run(
                seq=self.cache.journal.seq,
                generation=snap.generation,
                nodes=len(snap),
                pods=tuple(entry.pod for entry in entries),
                rules=() if policy is None else self.policies.constraints(policy),
                profile=profile,
                policy=_ref(policy),
                held=tuple(held),
                nominated=own,
                devices=self.cache.dra.generation,
                clock=now,
            )
        )
        decisions = list(prepared.early)
        kernel_seconds = None
        stages = [(spans_module.COMPILE, compile_started, self.queue.now())]
        if prepared.compiled is not None:
            compiled = prepared.compiled
            if self.served.extenders:
                compiled = _unbatched(compiled)
                prepared = dataclasses.replace(prepared, compiled=compiled)
            # The kernel runs on its own thread over copies; the loop keeps handling events.
            started = time.perf_counter()
            kernel_started = self.queue.now()
            result = await self._kernel(compiled.cluster, compiled.batch)
            kernel_seconds = time.perf_counter() - started
            stages.append((spans_module.KERNEL, kernel_started, self.queue.now()))
            nominated = {n.pod.uid: n.node for n in own}
            explained = cycle.explain(compiled, result, nominated)
            if len(pods) == 1 and not together and self._extended(pods[0]):
                # The HTTP extenders between the filters and the choice: the kernel again.
                seconds = [kernel_seconds]

                async def rerun(
                    verdicts: judgements.Judgement, fresh: Collection[str]
                ) -> tuple[cycle.Prepared, contract.Result | None]:
                    again = cycle.prepare(
                        pods,
                        snap,
                        self.cache,
                        profile,
                        nominated=[(h.pod, h.node) for h in held],
                        every_nominated=every,
                        judged={pods[0].uid: verdicts},
                        now=now,
                    )
                    if again.compiled is None:
                        return again, None
                    ready = extendercycle.emptied(_unbatched(again.compiled), fresh)
                    started = time.perf_counter()
                    found = await self._kernel(ready.cluster, ready.batch)
                    seconds.append(time.perf_counter() - started)
                    return dataclasses.replace(again, compiled=ready), found

                extenders_started = self.queue.now()
                extended = await extendercycle.decide(
                    pods[0],
                    compiled,
                    result,
                    nominated=nominated.get(pods[0].uid),
                    configured=self.served.extenders,
                    calls=self.state.extender_calls,
                    pod_body=self.state.bodies.pod(pods[0].uid),
                    node_body=self.state.bodies.node,
                    judgement=judged.get(pods[0].uid),
                    rerun=rerun,
                )
                if extended is not None:
                    explained = [extended.decision]
                    if extended.prepared is not None:
                        prepared = dataclasses.replace(
                            extended.prepared, early=[], deferred=prepared.deferred
                        )
                    if extended.judgement is not None:
                        judged = {**judged, pods[0].uid: extended.judgement}
                    kernel_seconds = sum(seconds)
                    stages.append((spans_module.EXTENDERS, extenders_started, self.queue.now()))
            decisions.extend(explained)
        meters.count_device_runs(self.metrics, prepared)
        records = traces.build(
            decisions, by_uid, snap, profile, _ref(policy), prepared, kernel_seconds, self.cache.dra
        )
        if self.tracer.spans.enabled:
            self._staged(records, prepared, stages)
        return Decided(
            decisions=decisions,
            records=records,
            early=frozenset(decision.pod.uid for decision in prepared.early),
            deferred=prepared.deferred,
            profile=profile,
            policy=policy,
            total=len(snap),
            judged=judged,
            clock=now,
        )

    def _staged(
        self,
        records: Mapping[str, trace.Trace],
        prepared: cycle.Prepared,
        stages: Sequence[tuple[str, float, float]],
    ) -> None:
        """Record the cycle's stages on the attempts that went through them (compile for all,
        the kernel run and the extenders for the kernel's), and make the batch's span (tracing
        on)."""
        early = {decision.pod.uid for decision in prepared.early}
        for uid, record in records.items():
            for name, start, end in stages if uid not in early else stages[:1]:
                record.staged(name, start, end)
        run = [record for uid, record in records.items() if uid not in early]
        kernel = next((stage for stage in stages if stage[0] == spans_module.KERNEL), None)
        if kernel is not None and len(run) > 1:
            self.tracer.spans.batch(run, kernel[1], kernel[2])

    async def carry_out(self, entries: list[queue_module.Entry], decided: Decided) -> None:
        """Assume and bind the pods placed, put back those deferred, and report (after
        PostFilter and deviations) those that no node fits."""
        by_uid = {entry.pod.uid: entry for entry in entries}
        decisions, records, profile, policy = (
            decided.decisions,
            decided.records,
            decided.profile,
            decided.policy,
        )
        for pod in decided.deferred:
            self.queue.requeue(by_uid[pod.uid])
        early = decided.early
        blocked: list[cycle.Decision] = []
        failed: list[cycle.Decision] = []
        for decision in decisions:
            uid = decision.pod.uid
            if policy is not None and self._may_deviate(policy, decision):
                blocked.append(decision)
            elif (
                decision.node is None
                and not decision.error
                and (uid not in early or _over_quota(decision))
            ):
                failed.append(decision)  # a filter rejected every node: PostFilter may help
            elif decision.node is not None and self.gangs.orphan(decision.pod):
                # Coscheduling's Permit: a pod labelled for a PodGroup that does not exist.
                refused = dataclasses.replace(records[uid], result=trace.UNSCHEDULABLE, node=None)
                self.apply(by_uid[uid], self.gangs.no_pod_group(decision), refused, policy)
            else:
                if decision.prefiltered:
                    decision = _prefiltered(decision, profile)
                self.apply(by_uid[uid], decision, records[uid], policy)
        for decision in blocked:
            # After the others are placed, one at a time: each deviation moves the skew.
            assert policy is not None
            uid = decision.pod.uid
            await self._deviate(
                by_uid[uid], decision, records[uid], policy, decided.judged.get(uid), decided.clock
            )
        for decision in failed:
            uid = decision.pod.uid
            await self._fail(
                by_uid[uid], decision, records[uid], policy, profile, decided.judged.get(uid)
            )

    async def _fail(
        self,
        entry: queue_module.Entry,
        decision: cycle.Decision,
        record: trace.Trace,
        policy: spec.Policy | None,
        profile: scoring.Profile,
        judgement: judgements.Judgement | None = None,
    ) -> None:
        """A pod no node fits: preemption (PostFilter) first, then the failure is reported."""
        if self.queue.where(entry.pod.uid) is not queue_module.Where.IN_FLIGHT:
            return
        if not profile.preemption:
            # DefaultPreemption disabled: DynamicResources' words (up to v1.36) are the
            # PostFilter's only.
            words = search.post_filter_words(profile.kube, "")
            message = f"{decision.message} {words}" if words else decision.message
            self.apply(entry, dataclasses.replace(decision, message=message), record, policy)
            return
        searched = self.queue.now()
        outcome = await self.post_filter.run(decision, policy, profile, judgement)
        if self.tracer.spans.enabled:
            record.staged(spans_module.POST_FILTER, searched, self.queue.now())
        if outcome.retry:
            self.queue.requeue(entry)  # room appeared since the cycle: a new attempt
            return
        record = dataclasses.replace(record, preemption=outcome.preemption)
        failed = outcome.decision
        if self.gangs.orphan(failed.pod):  # Coscheduling's PostFilter, after DefaultPreemption
            failed = dataclasses.replace(
                failed, message=f"{failed.message}, {gangscheduling.CANNOT_FIND_GROUP}"
            )
        self.apply(entry, failed, record, policy)

    def _report_revert(self, policy: spec.Policy, reverted: store.Reversion) -> None:
        self.state.recorder.policy_event(
            namespace=policy.namespace,
            name=policy.name,
            uid=policy.uid,
            kind="Warning",
            reason="Reverted",
            note=(
                f"Reverted from generation {reverted.from_generation} to generation "
                f"{reverted.to_generation}: {reverted.message}"
            ),
        )
        self.queue.move_all()  # the generation back in force may fit the waiting pods

    def _may_deviate(self, policy: spec.Policy, decision: cycle.Decision) -> bool:
        """Whether a failed decision was blocked by the policy's hard spread rules alone
        could lift (and the budget is asked only then)."""
        return (
            decision.node is None
            and podtopologyspread.NAME in decision.plugins
            and any(rule.hard for rule in policy.topology)
            and self.policies.may_deviate(policy, decision.pod)
        )

    async def _deviate(
        self,
        entry: queue_module.Entry,
        blocked: cycle.Decision,
        record: trace.Trace,
        policy: spec.Policy,
        judgement: judgements.Judgement | None = None,
        clock: float = 0.0,
    ) -> None:
        """Place a pod beyond the policy's maxSkew on its budget, or let it wait (the Python
        plugins' verdicts from its cycle, ``judgement``, still hold)."""
        rules = [c for c in self.policies.constraints(policy) if c.hard]
        snap = self.cache.snapshot()
        base = self.served.get(entry.pod.scheduler_name)
        if base is None:
            self.queue.delete(entry.pod.uid)
            return
        profile = self.policies.profile(policy, snap, base)
        judged = {} if judgement is None else {entry.pod.uid: judgement}
        prepared = cycle.prepare([entry.pod], snap, self.cache, profile, judged=judged)
        self.runs.record(
            runs.Run(
                seq=self.cache.journal.seq,
                generation=snap.generation,
                nodes=len(snap),
                pods=(entry.pod,),
                profile=profile,
                policy=_ref(policy),
                deviation=tuple(rules),
                clock=clock,
            )
        )
        found, deviated = None, record
        if prepared.compiled is not None and not prepared.deferred:
            compiled = prepared.compiled
            started = time.perf_counter()
            result = await self._kernel(compiled.cluster, compiled.batch)
            seconds = time.perf_counter() - started
            deviated = traces.rerun(record, entry.pod, snap, profile, _ref(policy), seconds)
            found = deviation.least_skew(entry.pod, rules, snap, compiled, result, self.cache)
        if found is None or not self.policies.may_deviate(policy, entry.pod):
            await self._fail(entry, blocked, record, policy, profile, judgement)
            return
        if self.queue.where(entry.pod.uid) is not queue_module.Where.IN_FLIGHT:
            return
        if found.node not in self.cache.nodes:
            self.queue.requeue(entry)
            return
        # Charged now, so the note tells the budget as it stands; refunded if the placement
        # does not stand (the binding fails or is abandoned).
        self.policies.spend(policy, entry.pod)
        note = (
            f"Placed on {found.node} beyond SchedulingPolicy {policy.namespace}/{policy.name} "
            f"(generation {policy.generation}): {found.describe()}; no node met the policy. "
            f"{self.policies.budget_text(policy)}."
        )
        logger.warning("pod %s deviates: %s", entry.pod.key, note)
        self.state.recorder.deviated(entry.pod, note)
        placed = dataclasses.replace(blocked, node=found.node, message=note)
        record = dataclasses.replace(
            deviated,
            node=found.node,
            plan_hash=traces.deviation_plan_hash(entry.pod.uid, found.node),
        )
        if not self.apply(entry, placed, record, policy, deviation=True):
            self.policies.refund(policy, entry.pod)

    def apply(
        self,
        entry: queue_module.Entry,
        decision: cycle.Decision,
        record: trace.Trace,
        policy: spec.Policy | None = None,
        *,
        deviation: bool = False,
    ) -> bool:
        """Carry out a decision: report a failure, or assume the pod and bind it in the
        background. Returns whether a binding was started."""
        pod = entry.pod
        if self.queue.where(pod.uid) is not queue_module.Where.IN_FLIGHT:
            return False  # deleted, or bound by someone else, while the kernel ran
        message, budget = decision.message, None
        if policy is not None:
            if decision.node is None and podtopologyspread.NAME in decision.plugins:
                message = f"{message} {self.policies.budget_text(policy)}."
            outcome = self.policies.record(
                policy, pod, decision.node, deviation=deviation, message=message
            )
            if outcome.reverted is not None:
                self._report_revert(policy, outcome.reverted)
            budget = self.budget_record(policy)
        record = dataclasses.replace(record, message=message, deviation=deviation, budget=budget)
        if decision.node is None and decision.error:
            # A plugin's error (kube-scheduler's Error status): reason SchedulerError, a
            # backoff, no wait for a cluster event.
            meters.count_errors(self.metrics, self.queue, [entry])
            step = self.queue.backoff_duration(entry.attempts)
            self.queue.backoff(pod.uid)
            self.binding.failed_nomination(pod, written=False)
            self.state.recorder.failed_scheduling(
                pod, message, step=step, reason=events_module.SCHEDULER_ERROR
            )
            self.tracer.emit(
                dataclasses.replace(record, result=trace.SCHEDULER_ERROR),
                repeat_after=step,
                level=logging.ERROR,
            )
            return False
        if decision.node is None:
            self.queue.unschedulable(pod.uid, decision.plugins)
            self.metrics.attempt(metrics_module.UNSCHEDULABLE, self.queue.now() - entry.popped_at)
            meters.count_quota_refusal(self.metrics, pod, decision.plugins, message)
            step = self.queue.backoff_duration(entry.attempts)
            self.state.recorder.failed_scheduling(pod, message, step=step)
            self.tracer.emit(record, repeat_after=step)
            return False
        reserving = self.queue.now()
        held = self.reserve(entry, decision.node)
        if held is None:
            self.queue.requeue(entry)  # the node, a volume, a claim or a device changed
            return False
        refused = self._extensions_refuse(entry, held, decision)
        if self.tracer.spans.enabled:
            record.staged(spans_module.RESERVE, reserving, self.queue.now())
        if refused is not None:
            unplaced = dataclasses.replace(record, result=trace.UNSCHEDULABLE, node=None)
            return self.apply(entry, refused, unplaced, policy, deviation=deviation)
        self.bind(entry, held, record, policy, deviation=deviation)
        return True

    def _extensions_refuse(
        self, entry: queue_module.Entry, held: Held, decision: cycle.Decision
    ) -> cycle.Decision | None:
        """The Python plugins' Reserve and Permit for a pod reserved on its node: None when
        they let it through; else the pod's reservation is undone and the decision says why
        (a rejection, as kube-scheduler's FitError over that one node, or an error)."""
        profile = self.served.get(entry.pod.scheduler_name)
        if profile is None or not profile.extensions:
            return None
        refusal = self.state.hooks.reserve(profile.extensions, entry.pod, held.node)
        if refusal is None:
            return None
        self.unreserve(entry, held)
        if refusal.why:
            self.metrics.plugin_failure(refusal.plugin, refusal.point, refusal.why)
        reason = refusal.message.removeprefix("0/1 nodes are available: 1 ").removesuffix(".")
        return cycle.Decision(
            pod=decision.pod,
            node=None,
            feasible=0,
            total=1,
            message=refusal.message,
            reasons={} if refusal.error else {reason: 1},
            plugins=frozenset({refusal.plugin}),
            error=refusal.error,
        )

    def reserve(self, entry: queue_module.Entry, node_name: str) -> Held | None:
        """The Reserve plugins for a pod placed on ``node_name``: its volumes' and claims'
        choices on that node, then the pod itself, assumed in the cache. None, with nothing
        assumed, when the node, a volume, a claim or a device changed while the kernel ran."""
        pod = entry.pod
        node = self.cache.nodes.info(node_name)
        if node is None:
            return None
        plan = None
        if pod.claims:
            try:
                # VolumeBinding's Reserve: which PV each unbound claim takes on this node.
                plan = volume_plugins.plan(pod, node, self.cache.volumes)
            except ValueError:
                return None
        devices = None
        profile = self.served.get(pod.scheduler_name)
        asks = pod.resource_claims or pod.device_requests
        if asks and profile is not None and dynamicresources.NAME in profile.filters:
            # DynamicResources' Reserve: the claims' allocation on this node, assumed.
            started = time.perf_counter()
            devices = dynamicresources.allocate_on(
                pod, node, self.cache.dra, profile.kube.devices, dynamicresources.MATCHER
            )
            meters.count_reserve(self.metrics, devices is not None, time.perf_counter() - started)
            if devices is None:
                return None
            for claim, allocation in devices.claims:
                if allocation is not None:
                    self.cache.dra.assume(claim.key, allocation, pod.uid)
            if devices.extended is not None:
                extended = devices.extended
                self.cache.dra.assume(extended.pending, extended.allocation, pod.uid)
        if plan is not None:
            self.cache.volumes.assume(plan)
        self.cache.assume(pod, node_name)
        return Held(node=node_name, plan=plan, devices=devices)

    def unreserve(self, entry: queue_module.Entry, held: Held) -> None:
        """Undo ``reserve`` for a pod that will not be bound (a pod group refused after its
        first members were reserved): nothing was written, so nothing is taken back from the
        API server."""
        pod = entry.pod
        if held.plan is not None:
            self.cache.volumes.forget(held.plan)
        devices = held.devices
        if devices is not None:
            for claim, allocation in devices.claims:
                if allocation is not None:
                    self.cache.dra.forget_unwritten(claim.key)
            if devices.extended is not None:
                self.cache.dra.forget(devices.extended.pending)
        self.cache.forget(pod.uid)

    def bind(
        self,
        entry: queue_module.Entry,
        held: Held,
        record: trace.Trace,
        policy: spec.Policy | None = None,
        *,
        deviation: bool = False,
    ) -> None:
        """Hand a reserved pod over to the binding cycle: it leaves the queue and is bound in
        the background (PreBind, Bind)."""
        pod = entry.pod
        self.post_filter.forget(pod.uid)  # placed: its nomination, if any, holds nothing now
        self.queue.done(pod.uid)
        charged = None
        if policy is not None:
            if deviation:
                charged = policy  # refunded should this binding not stand
            else:
                # Placed within the rules: a deviation an earlier attempt paid for (one whose
                # binding was cut short by a change of leader) is not used.
                self.policies.refund(policy, pod)
        self.binding.start(entry, held.node, record, held.plan, charged, held.devices)

    def budget_record(self, policy: spec.Policy) -> trace.BudgetRecord | None:
        """The policy's deviation budget as a trace line shows it (a pod's, a group member's)."""
        state = self.policies.budget_state(policy)
        if state is None:
            return None
        return trace.BudgetRecord(
            used=state.used,
            remaining=state.remaining,
            max_violations=state.max_violations,
            open=self.policies.may_deviate(policy),
            text=self.policies.budget_text(policy),
        )

    async def stand_down(self) -> None:
        """Leadership is lost (the loop was cancelled first): cancel the bindings in flight
        and forget their assumptions and the tries whose answer was lost, and put back the pods
        of a batch cut short while it was being decided, so every pod is in the queue for
        whoever leads next, this replica included (the watch drops those that were bound after
        all)."""
        cancelled = await self.binding.stand_down(alongside=self.post_filter.tasks)
        recalled = self.queue.recall()
        # Tries whose answer was lost are the term's: a replica that no longer leads reports
        # none of them, even if the watch then shows the pod where a try went (the next
        # leader may have bound it there).
        self.state.uncertain.clear()
        self.state.committed_late.clear()
        if cancelled or recalled:
            logger.info(
                "stood down: %d bindings in flight cancelled, %d pods being decided put back",
                cancelled,
                recalled,
            )

    def shares_batch(self, pod: objects.PodInfo) -> bool:
        """Whether the pod may be decided in one kernel run with others."""
        return not self._needs_own_batch(pod)

    def _needs_own_batch(self, pod: objects.PodInfo) -> bool:
        # Host ports are checked before the kernel, against pods already placed: a pod wanting
        # them is decided alone so an earlier pod of its batch cannot take the same port. A
        # nominated pod is too: it goes to its nominated node when that node fits it.
        # A pod with volume claims too: two pods of a batch could pick the same volume.
        # A pod the resource scorers count otherwise while scheduled than once placed (a
        # corner of pod-level requests) too: the kernel adds what it was scored with.
        # A pod whose extended resources a DeviceClass may back too (devices the batch's
        # device columns do not count). Pods with resource claims share batches: cycle.prepare
        # defers those whose devices an earlier pod of the batch could take
        # (framework/devices/availability.py Sharing). A pod a Python plugin judges by what
        # earlier pods of its batch did (``batch_dependent``) too.
        # A pod an HTTP extender is interested in too: the extenders judge it between two
        # kernel runs of its own (scheduler/extendercycle.py).
        profile = self.served.get(pod.scheduler_name)
        return (
            bool(pod.scheduling.host_ports or pod.claims or pod.nonzero_incoming)
            or pod.uid in self.state.nominations
            or any(self.cache.dra.extended_class(name) for name in _device_backed(pod))
            or (profile is not None and any(e.batch_dependent for e in profile.extensions))
            or self._extended(pod)
        )

    def _extended(self, pod: objects.PodInfo) -> bool:
        """Whether an HTTP extender is interested in the pod (one that manages no resource is
        in every pod; a pod whose body plumb does not hold, in every extender)."""
        configured = self.served.extenders
        if not configured:
            return False
        body = self.state.bodies.pod(pod.uid)
        return body is None or any(extenders.interested(e, body) for e in configured)

    def _together(self, pod: objects.PodInfo) -> groupobjects.GroupRef | None:
        """The pod group decided as one batch that the pod belongs to, if any: a group whose
        PodGroup exists (a pod naming one that does not is decided alone)."""
        ref, group = self.cache.groups.of(pod)
        return ref if group is not None else None

    def _group(self, pod: objects.PodInfo) -> Hashable:
        # One profile and one policy generation per batch, and one priority: the room
        # nominated pods hold depends on the priority of the pod being decided.
        return (pod.scheduler_name, self.policies.group(pod), pod.priority)

    def dump(self) -> dict[str, Any]:
        """The cache, its journal and the recent runs, for ``plumb replay`` (JSON values)."""
        return runs.snapshot(self.cache, self.runs, ",".join(sorted(self.served.names)))

    async def drain(self) -> None:
        """Wait for binds and report writes in flight (shutdown, tests); the extenders'
        connections are closed (a later call opens them again)."""
        await self.binding.drain()
        await self.post_filter.drain()
        await self.state.recorder.drain()
        await self.state.extender_calls.close()


def _prefiltered(decision: cycle.Decision, profile: scoring.Profile) -> cycle.Decision:
    """A pod DynamicResources' PreFilter turned away: its PostFilter finds no claims to
    deallocate, and preemption no node it could help (every one unresolvable)."""
    preemption = evaluator.not_helpful(decision.total) if profile.preemption else ""
    words = search.post_filter_words(profile.kube, preemption)
    message = f"{decision.message} {words}" if words else decision.message
    return dataclasses.replace(decision, message=message)


def _unbatched(compiled: compiling.Compiled) -> compiling.Compiled:
    """The batch without OpportunisticBatching (off while extenders are configured)."""
    return dataclasses.replace(compiled, batch=signatures.unbatched(compiled.batch))


def _device_backed(pod: objects.PodInfo) -> Iterator[str]:
    """The resources the pod's containers ask for that a DeviceClass may back."""
    for container in pod.device_requests:
        for name, _place, _count in container.requests:
            yield name


def _ref(policy: spec.Policy | None) -> traces.PolicyRef | None:
    return None if policy is None else (policy.namespace, policy.name, policy.generation)


def _over_quota(decision: cycle.Decision) -> bool:
    """CapacityScheduling's PreFilter refused the pod: its PostFilter (preemption) may help."""
    return decision.prefiltered and capacityscheduling.NAME in decision.plugins
