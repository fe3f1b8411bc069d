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
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from plumb import events as events_module
from plumb.backend import queue as queue_module
from plumb.backend.records import groupobjects
from plumb.backend.records.groupobjects import GroupRef, PodGroup
from plumb.framework import cycle, scoring
from plumb.framework.plugins import gangscheduling
from plumb.framework.plugins.gangscheduling import Feasibility, Progress
from plumb.observability import metrics as metrics_module
from plumb.observability import trace

if TYPE_CHECKING:
    from plumb.scheduler import loop

logger = logging.getLogger("plumb.scheduler")

GANG_PLUGINS = frozenset({gangscheduling.NAME})


@dataclasses.dataclass(frozen=True, slots=True)
class Tried:
    """A member the cycle tried, and where it fit (its decision's node, None: nowhere)."""

    entry: queue_module.Entry
    decision: cycle.Decision


class GangCycle:
    """Decides the pod groups the loop pops (``Scheduler.schedule_batch`` hands them over)."""

    def __init__(self, scheduler: loop.Scheduler) -> None:
        self._scheduler = scheduler

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
            siblings = len(s.queue.group_members(ref)) + placed_before
            if siblings < group.min_count:
                self._too_few(ordered, group, siblings)
                return
        policy = s.policies.governing(ordered[0].pod)
        decided = await s.decide_only(ordered, profile, policy)
        decisions = {decision.pod.uid: decision for decision in decided.decisions}
        deferred = {pod.uid for pod in decided.deferred}
        progress = Progress(gangscheduling.minimum(group), placed_before, len(ordered))
        stop = progress if progress.verdict is Feasibility.UNSCHEDULABLE else None
        tried: list[Tried] = []
        untried: list[queue_module.Entry] = []
        for entry in ordered:
            decision = decisions.get(entry.pod.uid)
            if stop is not None or decision is None or entry.pod.uid in deferred:
                untried.append(entry)
                continue
            tried.append(Tried(entry, decision))
            progress = progress.after(decision.node is not None)
            if progress.verdict is Feasibility.UNSCHEDULABLE:
                stop = progress
        if stop is None and progress.verdict is Feasibility.SATISFIED:
            self._place(tried, untried, decided, group)
            return
        self._refuse(tried, untried, decided, group, stop or progress)

    # Outcomes ------------------------------------------------------------------------------

    def _place(
        self,
        tried: list[Tried],
        untried: list[queue_module.Entry],
        decided: loop.Decided,
        group: PodGroup,
    ) -> None:
        """The minimum is placed: every member that fits is assumed and bound; the others
        report their own failure and are tried again (kube-scheduler: at once, the group
        going straight back to activeQ)."""
        s = self._scheduler
        for member in tried:
            record = decided.records[member.entry.pod.uid]
            if member.decision.node is not None:
                s.apply(member.entry, member.decision, record, decided.policy)
            else:
                self._fail(member.entry, record, member.decision.message, member.decision.plugins)
        for entry in untried:
            s.queue.requeue(entry)
        if group.api == groupobjects.UPSTREAM:
            s.state.group_conditions.initially_scheduled(group, None)

    def _refuse(
        self,
        tried: list[Tried],
        untried: list[queue_module.Entry],
        decided: loop.Decided,
        group: PodGroup,
        stop: Progress,
    ) -> None:
        """The minimum cannot be placed: nothing is assumed, and each member is told why in
        its group's words; the group is tried again after a backoff."""
        if group.api == groupobjects.COSCHEDULING:
            self._rejected_by_coscheduling(tried, untried, decided, group)
            return
        words = self._group_post_filter(group)
        status = f"{stop.message}, {words}" if words else stop.message
        for member in tried:
            record = decided.records[member.entry.pod.uid]
            decision = member.decision
            if decision.node is not None:
                message = f"{gangscheduling.GROUP_UNSCHEDULABLE}, {status}"
                self._fail(member.entry, record, message, GANG_PLUGINS)
            else:
                self._fail(member.entry, record, decision.message, decision.plugins | GANG_PLUGINS)
        for entry in untried:
            record = decided.records.get(entry.pod.uid) or self._bare_record(entry, decided)
            self._fail(entry, record, stop.message, GANG_PLUGINS)
        self._scheduler.state.group_conditions.initially_scheduled(group, status)

    def _group_post_filter(self, group: PodGroup) -> str:
        """The PodGroupPostFilter's words: DefaultPreemption's for the group, when no pod of
        lower priority than the group's runs anywhere (the only case plumb decides yet)."""
        lowest = self._scheduler.cache.lowest_priority()
        if lowest is None or lowest >= (group.priority or 0):
            return gangscheduling.NO_GROUP_VICTIMS
        return ""

    def _too_few(self, ordered: list[queue_module.Entry], group: PodGroup, siblings: int) -> None:
        """Coscheduling's PreFilter: fewer pods of the group exist than minMember. Every member
        is refused without a kernel run, as each of scheduler-plugins' attempts is."""
        s = self._scheduler
        total = len(s.cache.snapshot())
        for entry in ordered:
            pod = entry.pod
            reason = gangscheduling.NOT_ENOUGH_SIBLINGS.format(
                pod=pod.name, count=siblings, minimum=group.min_count
            )
            message = (
                f"0/{total} nodes are available: {reason}. preemption: 0/{total} nodes are "
                f"available: {total} Preemption is not helpful for scheduling., "
                + gangscheduling.GROUP_REJECTED.format(group=group.key, pod=pod.name)
            )
            record = trace.Trace(
                pod=pod.key,
                uid=pod.uid,
                result=trace.UNSCHEDULABLE,
                message=message,
                attempts=entry.attempts,
                total=total,
                profile=pod.scheduler_name,
            )
            self._fail(entry, record, message, frozenset({gangscheduling.COSCHEDULING}), wait=True)

    def _rejected_by_coscheduling(
        self,
        tried: list[Tried],
        untried: list[queue_module.Entry],
        decided: loop.Decided,
        group: PodGroup,
    ) -> None:
        """Coscheduling's words for a group whose minimum does not fit: the first member that
        fits nowhere is rejected after PostFilter, naming the group; the members that fit were
        waiting at Permit and are rejected with it."""
        plugins = frozenset({gangscheduling.COSCHEDULING})
        first = next((m for m in tried if m.decision.node is None), None)
        for member in tried:
            record = decided.records[member.entry.pod.uid]
            decision = member.decision
            if decision.node is not None:
                message = "0/1 nodes are available: 1 optimistic rejection in PostFilter."
                self._fail(member.entry, record, message, plugins, wait=True)
                continue
            rejected = gangscheduling.GROUP_REJECTED.format(
                group=group.key, pod=(first or member).entry.pod.name
            )
            message = f"{decision.message} {rejected}"
            self._fail(member.entry, record, message, decision.plugins | plugins, wait=True)
        for entry in untried:
            self._scheduler.queue.requeue(entry)

    def _invalid(self, ordered: list[queue_module.Entry], group: PodGroup, error: str) -> None:
        """validatePodGroup refused the group: every member ends its attempt in that error
        (reason SchedulerError) and is tried again after a backoff; the PodGroup's condition
        says so."""
        s = self._scheduler
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

    def _fail(
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
        s.state.recorder.failed_scheduling(pod, message, step=step)
        refused = dataclasses.replace(
            record, result=trace.UNSCHEDULABLE, node=None, message=message
        )
        s.tracer.emit(refused, repeat_after=step)

    @staticmethod
    def _bare_record(entry: queue_module.Entry, decided: loop.Decided) -> trace.Trace:
        pod = entry.pod
        return trace.Trace(
            pod=pod.key,
            uid=pod.uid,
            result=trace.UNSCHEDULABLE,
            attempts=entry.attempts,
            total=decided.total,
            profile=pod.scheduler_name,
        )
