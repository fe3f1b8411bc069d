"""The pod-group cycle: a group's members decided as one batch against one snapshot, and either
at least the group's minimum placed together or none of them.

As kube-scheduler's scheduleOnePodGroup (v1.37, GenericWorkload): the members are tried in
``gangscheduling.member_order``, each on the snapshot with the earlier ones placed (the kernel
decides a batch as if one pod at a time), PlacementFeasible is asked after each, and the cycle
stops once the remaining members can no longer reach the minimum. If the minimum is reached,
every member that fits is assumed and bound (members beyond the minimum too; those that fit
nowhere get their own FailedScheduling and are tried again); if not, nothing is assumed and
every member gets FailedScheduling in the words of the group's API, and the group is tried
again after a backoff. An upstream PodGroup gets its PodGroupInitiallyScheduled condition.

scheduler-plugins' Coscheduling reaches the same all-or-nothing through Permit waits, pod by
pod; plumb decides its groups here too, and writes Coscheduling's words.

A group whose members a SchedulingPolicy with ``spec.gangs`` governs is first tried in one
topology domain at a time, least fragmentation first (framework/gangdomains.py; the trials in
scheduler/domaintrials.py), each trial unreserved whole when its minimum does not fit; only
when no single domain holds it is it tried across domains, freely (ScheduleAnyway) or as one
deviation on the policy's budget (DoNotSchedule), and refused in the budget's words once the
budget is spent.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from plumb import events as events_module
from plumb.backend import queue as queue_module
from plumb.backend.records import groupobjects, objects
from plumb.backend.records.groupobjects import GroupRef, PodGroup
from plumb.framework import cycle, emulation, gangdomains, scoring
from plumb.framework.plugins import gangscheduling
from plumb.framework.plugins.gangscheduling import Feasibility, Progress
from plumb.observability import metrics as metrics_module
from plumb.observability import trace
from plumb.policy import spec
from plumb.preemption import evaluator, search
from plumb.scheduler import domaintrials, meters

if TYPE_CHECKING:
    from plumb.scheduler import loop, postfilter

logger = logging.getLogger("plumb.scheduler")

GANG_PLUGINS = frozenset({gangscheduling.NAME})
# plumb_podgroup_schedule_attempts_total's results (kube-scheduler's words).
SCHEDULED, UNSCHEDULABLE, ERROR = "scheduled", "unschedulable", "error"
# scheduler-plugins v0.34.7 is a kube-scheduler v1.34: its PostFilter words are that release's
# (DynamicResources' "no new claims to deallocate" first), whatever the cluster runs.
COSCHEDULING_KUBE = emulation.emulate(34)


@dataclasses.dataclass(frozen=True, slots=True)
class Tried:
    """A member the cycle tried, where it fit (its decision's node, None: nowhere) and what
    Reserve took for it there (the member is assumed while the rest are tried)."""

    entry: queue_module.Entry
    decision: cycle.Decision
    held: loop.Held | None = None


@dataclasses.dataclass(kw_only=True)
class Walk:
    """A group's members as the cycle goes through them (mutable, one cycle's)."""

    progress: Progress
    # Whether PlacementFeasible stops the cycle once the minimum is out of reach (upstream).
    stops: bool = True
    tried: list[Tried] = dataclasses.field(default_factory=list)
    untried: list[queue_module.Entry] = dataclasses.field(default_factory=list)
    records: dict[str, trace.Trace] = dataclasses.field(default_factory=dict)
    # Where PlacementFeasible stopped the cycle (the remaining members cannot reach the
    # minimum), None while it goes on.
    stop: Progress | None = None
    total: int = 0  # nodes in the last snapshot
    policy: spec.Policy | None = None
    # Where the policy's spec.gangs rule put the group (None without the rule), and, set when
    # no single domain holds it and the budget allows no deviation, the words it is refused in.
    topology: trace.GroupDomainRecord | None = None
    blocked: str = ""

    def fresh(self) -> Walk:
        """A new walk from where this one started (its progress and policy): a trial's."""
        return Walk(progress=self.progress, policy=self.policy)


class GangCycle:
    """Decides the pod groups the loop pops (``Scheduler.schedule_batch`` hands them over)."""

    def __init__(self, scheduler: loop.Scheduler) -> None:
        self._scheduler = scheduler
        # A SchedulingPolicy's spec.gangs: the group tried in one topology domain at a time.
        self._trials = domaintrials.DomainTrials(self, scheduler)

    def orphan(self, pod: objects.PodInfo) -> bool:
        """Whether the pod is labelled for a scheduler-plugins PodGroup that does not exist
        (Coscheduling binds no such pod: its Permit refuses it)."""
        ref, group = self._scheduler.cache.groups.of(pod)
        return ref is not None and ref.api == groupobjects.COSCHEDULING and group is None

    @staticmethod
    def no_pod_group(decision: cycle.Decision) -> cycle.Decision:
        """Coscheduling's Permit refusal of an ``orphan`` the filters placed: the binding
        cycle's words, on the one node chosen; it waits for its PodGroup."""
        return dataclasses.replace(
            decision,
            node=None,
            message=f"0/1 nodes are available: 1 {gangscheduling.NO_POD_GROUP}.",
            plugins=frozenset({gangscheduling.COSCHEDULING}),
        )

    async def schedule(
        self, entries: list[queue_module.Entry], ref: GroupRef, profile: scoring.Profile
    ) -> None:
        """One cycle for the group ``ref``'s members ``entries`` (all the queue holds)."""
        s = self._scheduler
        group = s.cache.groups.get(ref)
        if group is None:  # deleted since the pop: each member is decided on its own again
            for entry in entries:
                s.queue.requeue(entry)
            return
        attempts = {entry.pod.uid: entry.attempts for entry in entries}
        by_uid = {entry.pod.uid: entry for entry in entries}
        ordered = [
            by_uid[pod.uid]
            for pod in gangscheduling.member_order([e.pod for e in entries], attempts)
        ]
        placed_before = s.cache.groups.placed_count(ref)
        if group.api == groupobjects.UPSTREAM:
            invalid = gangscheduling.invalid(
                [entry.pod for entry in ordered],
                list(s.cache.groups.placed(ref).values()),
                group,
            )
            if invalid is not None:
                self._invalid(ordered, group, invalid)
                return
        if group.api == groupobjects.COSCHEDULING:
            siblings = s.queue.group_size(ref) + placed_before
            if siblings < group.min_count:
                self._too_few(ordered, group, siblings)
                return
        minimum = gangscheduling.minimum(group)
        # Coscheduling has no PlacementFeasible: scheduler-plugins tries every member.
        walk = Walk(
            progress=Progress(minimum, placed_before, len(ordered)),
            stops=group.api == groupobjects.UPSTREAM,
        )
        walk.policy = s.policies.governing(ordered[0].pod)
        if walk.stops and walk.progress.verdict is Feasibility.UNSCHEDULABLE:
            walk.stop = walk.progress
        rule = None if walk.policy is None else walk.policy.gangs
        if rule is None or walk.progress.verdict is Feasibility.UNSCHEDULABLE:
            await self.try_members(ordered, profile, walk)
        else:
            walk = await self._trials.in_one_domain(ordered, profile, walk, group, rule)
            if walk.blocked:
                self._blocked(walk, group)
                return
        if walk.stop is None and walk.progress.verdict is Feasibility.SATISFIED:
            await self._place(walk, group, profile)
            return
        s.metrics.podgroup_attempt(UNSCHEDULABLE)
        if group.api == groupobjects.COSCHEDULING:
            # scheduler-plugins runs a misfit's PostFilter while the members that fit wait
            # at Permit, still assumed; then its PostFilter rejects them.
            said = await self._coscheduling_post_filters(walk, profile)
            self.unreserve(walk)
            self._rejected_by_coscheduling(walk, group, said)
            return
        # kube-scheduler reverts the cycle's assumptions before the PodGroupPostFilter.
        self.unreserve(walk)
        members = [entry.pod for entry in ordered]
        await self._refuse(walk, group, walk.stop or walk.progress, members, profile)

    def unreserve(self, walk: Walk) -> None:
        """Undo every reservation the walk made (nothing of it stays assumed)."""
        for member in walk.tried:
            if member.held is not None:
                self._scheduler.unreserve(member.entry, member.held)

    async def try_members(
        self,
        ordered: list[queue_module.Entry],
        profile: scoring.Profile,
        walk: Walk,
        domain: tuple[str, str] | None = None,
    ) -> None:
        """Try the members in order, as many per kernel run as may share one: each that fits
        is reserved on its node at once, so the runs after see it; a member the kernel put off
        (its devices an earlier member of its run could take) goes first in the next run.
        Stops where PlacementFeasible says the minimum cannot be reached any more.
        ``domain``: (key, value) the members are confined to (decided as if each asked for it
        in its required node affinity; reserved and bound as they are)."""
        s = self._scheduler
        members = [entry.pod.uid for entry in ordered]
        pending = list(ordered)
        while pending and walk.stop is None:
            chunk = self._chunk(pending)
            pending = pending[len(chunk) :]
            asked = chunk
            if domain is not None:
                key, value = domain
                asked = [
                    dataclasses.replace(entry, pod=gangdomains.confine(entry.pod, key, value))
                    for entry in chunk
                ]
            decided = await s.decide_only(asked, profile, walk.policy, together=members)
            walk.records.update(decided.records)
            walk.total = decided.total
            decisions = {decision.pod.uid: decision for decision in decided.decisions}
            deferred = {pod.uid for pod in decided.deferred}
            put_off = []
            for entry in chunk:
                uid = entry.pod.uid
                if walk.stop is not None:
                    walk.untried.append(entry)
                    continue
                if uid in deferred and entry is not chunk[0]:
                    put_off.append(entry)
                    continue
                decision = decisions.get(uid)
                if decision is None:
                    walk.untried.append(entry)
                    continue
                held = None
                if decision.node is not None:
                    held = s.reserve(entry, decision.node)
                    if held is None:  # its node, volume or device changed meanwhile
                        walk.untried.append(entry)
                        continue
                walk.tried.append(Tried(entry, decision, held))
                walk.progress = walk.progress.after(held is not None)
                if walk.stops and walk.progress.verdict is Feasibility.UNSCHEDULABLE:
                    walk.stop = walk.progress
            pending = put_off + pending
        walk.untried.extend(pending)

    def _chunk(self, pending: list[queue_module.Entry]) -> list[queue_module.Entry]:
        """The members the next kernel run decides: the first, and those after it that may
        share its run (Scheduler.shares_batch), up to the batch size."""
        s = self._scheduler
        first = pending[0]
        if not s.shares_batch(first.pod):
            return [first]
        chunk = [first]
        for entry in pending[1:]:
            if len(chunk) >= s.batch_size or not s.shares_batch(entry.pod):
                break
            chunk.append(entry)
        return chunk

    # Outcomes ------------------------------------------------------------------------------

    async def _place(self, walk: Walk, group: PodGroup, profile: scoring.Profile) -> None:
        """The minimum is placed: every member reserved is bound; the others report their own
        failure and are tried again (kube-scheduler: at once, the group going straight back to
        activeQ, their FitError alone; Coscheduling: after their own PostFilter, in a v1.34
        kube-scheduler's words, the group's rejection not among them)."""
        s = self._scheduler
        s.metrics.podgroup_attempt(SCHEDULED)
        first = min(member.entry.first_enqueued for member in walk.tried)
        s.metrics.podgroup_placed(s.queue.now() - first)
        said: Mapping[str, postfilter.PostFilterResult] = {}
        if group.api == groupobjects.COSCHEDULING:
            said = await self._coscheduling_post_filters(walk, profile)
        told = _told(walk, group, trace.SCHEDULED, "")
        spanned = walk.topology is not None and walk.topology.deviation
        if spanned:
            assert walk.policy is not None
            # One deviation for the whole group, charged to its PodGroup before the members'
            # events, so that each tells the budget as it stands.
            s.policies.spend_span(walk.policy, group.uid)
        for member in walk.tried:
            entry, record = member.entry, told(walk.records[member.entry.pod.uid])
            if member.held is None:
                message = member.decision.message
                found = said.get(entry.pod.uid)
                if found is not None and found.preemption is not None:
                    if found.preemption.node is not None:
                        message = found.decision.message
                    else:
                        words = search.post_filter_words(
                            COSCHEDULING_KUBE, found.preemption.message
                        )
                        message = f"{message} {words}"
                    record = dataclasses.replace(record, preemption=found.preemption)
                self.fail(entry, record, message, member.decision.plugins)
            elif s.queue.where(entry.pod.uid) is queue_module.Where.IN_FLIGHT:
                if spanned:
                    record = self._trials.deviated(walk, group, member, record)
                s.bind(entry, member.held, record, walk.policy)
            else:  # deleted while the others were tried
                s.unreserve(entry, member.held)
        for entry in walk.untried:
            s.queue.requeue(entry)
        s.state.group_conditions.initially_scheduled(group, None)

    async def _refuse(
        self,
        walk: Walk,
        group: PodGroup,
        stop: Progress,
        members: list[objects.PodInfo],
        profile: scoring.Profile,
    ) -> None:
        """The minimum cannot be placed (nothing stays reserved): each member is told why in
        its group's words; the group is tried again after a backoff. For an upstream group the
        PodGroupPostFilter runs first: DefaultPreemption's workload-aware preemption, which may
        nominate the members and evict lower-priority pods for them."""
        s = self._scheduler
        preemption = await s.post_filter.for_group(members, group, profile)
        status = f"{stop.message}, {preemption.words}"
        # A member that fit: "pod group is unschedulable" first, unless the group now waits
        # for its victims to go (kube-scheduler's "waiting on preemption").
        prefixed = f"{gangscheduling.GROUP_UNSCHEDULABLE}, {status}"
        fitted = status if preemption.victims else prefixed
        told = _told(walk, group, trace.UNSCHEDULABLE, status)
        for member in walk.tried:
            record = told(walk.records[member.entry.pod.uid])
            decision = member.decision
            if member.held is not None:
                self.fail(member.entry, record, fitted, GANG_PLUGINS)
            else:
                self.fail(member.entry, record, decision.message, decision.plugins | GANG_PLUGINS)
        for entry in walk.untried:
            record = told(walk.records.get(entry.pod.uid) or _bare_record(entry, walk.total))
            self.fail(entry, record, stop.message, GANG_PLUGINS)
        s.state.group_conditions.initially_scheduled(group, status)

    def _blocked(self, walk: Walk, group: PodGroup) -> None:
        """No single domain holds the group, and its policy's budget allows it no deviation:
        nothing stays reserved, each member is told so, naming the policy and its budget, and
        the group is tried again after a backoff."""
        s = self._scheduler
        policy = walk.policy
        assert policy is not None
        s.metrics.podgroup_attempt(UNSCHEDULABLE)
        told = _told(walk, group, trace.UNSCHEDULABLE, walk.blocked)
        budget = self._trials.budget(policy)
        entries = [member.entry for member in walk.tried] + walk.untried
        for entry in entries:
            record = told(walk.records.get(entry.pod.uid) or _bare_record(entry, walk.total))
            record = dataclasses.replace(record, budget=budget)
            s.policies.record(policy, entry.pod, None, message=walk.blocked)
            self.fail(entry, record, walk.blocked, GANG_PLUGINS)
        status = walk.blocked.removeprefix(f"{gangscheduling.GROUP_UNSCHEDULABLE}, ")
        s.state.group_conditions.initially_scheduled(group, status)

    def _too_few(self, ordered: list[queue_module.Entry], group: PodGroup, siblings: int) -> None:
        """Coscheduling's PreFilter: fewer pods of the group exist than minMember. Every member
        is refused without a kernel run, as each of scheduler-plugins' attempts is."""
        s = self._scheduler
        s.metrics.podgroup_attempt(UNSCHEDULABLE)
        total = len(s.cache.snapshot())
        placed = s.cache.groups.placed_count(group.ref)
        walk = Walk(progress=Progress(group.min_count, placed, 0), untried=list(ordered))
        for entry in ordered:
            pod = entry.pod
            reason = gangscheduling.NOT_ENOUGH_SIBLINGS.format(
                pod=pod.name, count=siblings, minimum=group.min_count
            )
            words = search.post_filter_words(COSCHEDULING_KUBE, evaluator.not_helpful(total))
            rejected = gangscheduling.GROUP_REJECTED.format(group=group.key, pod=pod.name)
            message = f"0/{total} nodes are available: {reason}. {words}, {rejected}"
            record = _told(walk, group, trace.UNSCHEDULABLE, reason)(_bare_record(entry, total))
            self.fail(entry, record, message, frozenset({gangscheduling.COSCHEDULING}), wait=True)

    async def _coscheduling_post_filters(
        self, walk: Walk, profile: scoring.Profile
    ) -> dict[str, postfilter.PostFilterResult]:
        """Each misfit's PostFilter (DefaultPreemption, as scheduler-plugins' kube-scheduler
        runs it for any pod), by uid."""
        s = self._scheduler
        found = {}
        for member in walk.tried:
            uid = member.entry.pod.uid
            if member.held is None and s.queue.where(uid) is queue_module.Where.IN_FLIGHT:
                found[uid] = await s.post_filter.run(member.decision, walk.policy, profile)
        return found

    def _rejected_by_coscheduling(
        self, walk: Walk, group: PodGroup, said: Mapping[str, postfilter.PostFilterResult]
    ) -> None:
        """Coscheduling's words for a group whose minimum does not fit: a misfit's PostFilter
        words (``said``), then its rejection of the group (unless DefaultPreemption nominated
        a node: then Coscheduling's PostFilter does not run); the members that fit were
        waiting at Permit and are rejected with it."""
        plugins = frozenset({gangscheduling.COSCHEDULING})
        told = _told(walk, group, trace.UNSCHEDULABLE, "")
        for member in walk.tried:
            record = told(walk.records[member.entry.pod.uid])
            decision = member.decision
            if member.held is not None:
                message = "0/1 nodes are available: 1 optimistic rejection in PostFilter."
                self.fail(member.entry, record, message, plugins, wait=True)
                continue
            found = said.get(member.entry.pod.uid)
            if found is None:
                continue  # deleted, or bound by someone else, while the kernel ran
            preemption = found.preemption
            if preemption is not None and preemption.node is not None:
                self.fail(member.entry, record, found.decision.message, decision.plugins)
                continue
            words = search.post_filter_words(
                COSCHEDULING_KUBE, "" if preemption is None else preemption.message
            )
            rejected = gangscheduling.GROUP_REJECTED.format(
                group=group.key, pod=member.entry.pod.name
            )
            message = f"{decision.message} {words}, {rejected}"
            record = dataclasses.replace(record, preemption=preemption)
            self.fail(member.entry, record, message, decision.plugins | plugins, wait=True)
        for entry in walk.untried:
            self._scheduler.queue.requeue(entry)

    def _invalid(self, ordered: list[queue_module.Entry], group: PodGroup, error: str) -> None:
        """validatePodGroup refused the group: every member ends its attempt in that error
        (reason SchedulerError) and is tried again after a backoff; the PodGroup's condition
        says so."""
        s = self._scheduler
        s.metrics.podgroup_attempt(ERROR)
        for entry in ordered:
            pod = entry.pod
            if s.queue.where(pod.uid) is not queue_module.Where.IN_FLIGHT:
                continue
            step = s.queue.backoff_duration(entry.attempts)
            s.queue.backoff(pod.uid)
            s.metrics.attempt(metrics_module.ERROR, s.queue.now() - entry.popped_at)
            s.state.recorder.failed_scheduling(
                pod, error, step=step, reason=events_module.SCHEDULER_ERROR
            )
            record = trace.Trace(
                pod=pod.key,
                uid=pod.uid,
                result=trace.SCHEDULER_ERROR,
                message=error,
                attempts=entry.attempts,
                profile=pod.scheduler_name,
            )
            s.tracer.emit(record, repeat_after=step, level=logging.ERROR)
        s.state.group_conditions.initially_scheduled(group, error, error=True)

    # Reports -------------------------------------------------------------------------------

    def fail(
        self,
        entry: queue_module.Entry,
        record: trace.Trace,
        message: str,
        plugins: frozenset[str],
        *,
        wait: bool = False,
    ) -> None:
        """A member's attempt failed: FailedScheduling with ``message``; the member is tried
        again after a backoff (kube-scheduler retries a refused group on a timer), or, with
        ``wait``, once a cluster event may help (Coscheduling's pods wait as any pod does)."""
        s = self._scheduler
        pod = entry.pod
        if s.queue.where(pod.uid) is not queue_module.Where.IN_FLIGHT:
            return  # deleted, or bound by someone else, while the kernel ran
        step = s.queue.backoff_duration(entry.attempts)
        if wait:
            s.queue.unschedulable(pod.uid, plugins)
        else:
            s.queue.backoff(pod.uid)
        s.metrics.attempt(metrics_module.UNSCHEDULABLE, s.queue.now() - entry.popped_at)
        meters.count_quota_refusal(s.metrics, pod, plugins, message)
        s.state.recorder.failed_scheduling(pod, message, step=step)
        refused = dataclasses.replace(
            record, result=trace.UNSCHEDULABLE, node=None, message=message
        )
        s.tracer.emit(refused, repeat_after=step)


def _bare_record(entry: queue_module.Entry, total: int) -> trace.Trace:
    """The trace of a member no kernel run decided (the cycle stopped before it)."""
    pod = entry.pod
    return trace.Trace(
        pod=pod.key,
        uid=pod.uid,
        result=trace.UNSCHEDULABLE,
        attempts=entry.attempts,
        total=total,
        profile=pod.scheduler_name,
    )


def _told(
    walk: Walk, group: PodGroup, result: str, message: str
) -> Callable[[trace.Trace], trace.Trace]:
    """Adds the group's outcome to a member's trace."""
    record = trace.GroupRecord(
        name=group.key,
        api=group.api,
        minimum=walk.progress.minimum,
        scheduled=walk.progress.scheduled,
        members=len(walk.tried) + len(walk.untried),
        result=result,
        message=message,
        topology=walk.topology,
    )
    return lambda member: dataclasses.replace(member, group=record)
