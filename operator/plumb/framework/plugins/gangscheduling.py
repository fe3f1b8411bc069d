"""GangScheduling (kube-scheduler v1.35+, the upstream PodGroup of scheduling.k8s.io) and
Coscheduling (scheduler-plugins, its PodGroup of scheduling.x-k8s.io): when a pod group may be
tried, whether a partial placement can still reach the group's minimum, and the words each
writes when a group is refused.

plumb decides a group as one batch against one snapshot (scheduler/gangcycle.py), as
kube-scheduler's pod-group cycle does: the members in ``member_order``, each placed where it
fits with the earlier ones assumed, ``feasible`` asked after each, and either at least the
minimum placed together or none. Both APIs get that all-or-nothing; the words differ.
"""

from __future__ import annotations

import dataclasses
import enum

from plumb.backend.records import objects
from plumb.backend.records.groupobjects import PodGroup

NAME = "GangScheduling"
COSCHEDULING = "Coscheduling"

# kube-scheduler's PreEnqueue reasons (kept in its log and in plumb's trace, never an event).
WAITING_FOR_GROUP = "waiting for pods's pod group {name!r} to appear in scheduling queue"
WAITING_FOR_MEMBERS = "waiting for minCount pods from a gang to appear in scheduling queue"
# The pod-group cycle's words (gangscheduling.PlacementFeasible, schedule_one_podgroup.go).
CANNOT_SATISFY = (
    "minCount ({minimum}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
)
GROUP_UNSCHEDULABLE = "pod group is unschedulable"
# DefaultPreemption's PodGroupPostFilter when no pod of lower priority runs anywhere.
NO_GROUP_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"
# Coscheduling's words (pkg/coscheduling/core/core.go and coscheduling.go, v0.34.7).
NOT_ENOUGH_SIBLINGS = (
    "pre-filter pod {pod} cannot find enough sibling pods, current pods number: {count}, "
    "minMember of group: {minimum}"
)
GROUP_REJECTED = (
    "PodGroup {group} gets rejected due to Pod {pod} is unschedulable even after PostFilter"
)
NO_POD_GROUP = "PodGroup not found"
CANNOT_FIND_GROUP = "can not find pod group"


class Feasibility(enum.Enum):
    """PlacementFeasible's verdict after a member was tried."""

    SATISFIED = "Success"  # the minimum is placed
    WAIT = "Wait"  # not yet, but the remaining members may reach it
    UNSCHEDULABLE = "Unschedulable"  # the remaining members cannot reach it: stop


@dataclasses.dataclass(frozen=True, slots=True)
class Progress:
    """A group's count while its members are tried: placed (before this cycle and in it) and
    still to try."""

    minimum: int
    scheduled: int
    remaining: int

    @property
    def verdict(self) -> Feasibility:
        if self.remaining + self.scheduled < self.minimum:
            return Feasibility.UNSCHEDULABLE
        if self.scheduled < self.minimum:
            return Feasibility.WAIT
        return Feasibility.SATISFIED

    @property
    def message(self) -> str:
        return CANNOT_SATISFY.format(
            minimum=self.minimum, scheduled=self.scheduled, remaining=self.remaining
        )

    def after(self, placed: bool) -> Progress:
        return Progress(self.minimum, self.scheduled + placed, self.remaining - 1)


def minimum(group: PodGroup) -> int:
    """The members that must be placed together: minCount for a gang, 1 for a basic group."""
    return group.min_count if group.gang else 1


def pre_enqueue(group: PodGroup | None, name: str, members: int) -> str | None:
    """GangScheduling's PreEnqueue for a pod of an upstream group: why it may not be tried
    yet (its PodGroup does not exist, or fewer than minCount members do), None if it may.
    ``members``: the group's members that exist (pending with this scheduler, assumed or
    bound), the pod included."""
    if group is None:
        return WAITING_FOR_GROUP.format(name=name)
    if group.gang and members < group.min_count:
        return WAITING_FOR_MEMBERS
    return None


def invalid(
    queued: list[objects.PodInfo], placed: list[objects.PodInfo], group: PodGroup
) -> str | None:
    """validatePodGroup: every member, queued or placed, must have the first queued member's
    schedulerName, the PodGroup's priority (0 when it has none) and one preemption policy;
    the first that does not is named (kube-scheduler's error), None when all do."""
    if not queued:
        return None
    scheduler_name = queued[0].scheduler_name
    priority = group.priority or 0
    policy = ""
    for pod in [*queued, *placed]:
        if pod.scheduler_name != scheduler_name:
            return (
                "all pods in a single pod group should have the same .spec.schedulerName set, "
                f'got: "{pod.scheduler_name}" and "{scheduler_name}"'
            )
        if pod.priority != priority:
            return (
                "all pods in a single pod group should have the same priority as the pod "
                f"group's priority, got {pod.priority} and {priority}"
            )
        if not policy:
            policy = pod.preemption_policy
        elif pod.preemption_policy != policy:
            return (
                "all pods in a single pod group should have the same preemption policy, got "
                f"{pod.preemption_policy} and {policy}"
            )
    return None


def member_order(pods: list[objects.PodInfo], attempts: dict[str, int]) -> list[objects.PodInfo]:
    """The order kube-scheduler tries a group's members in (PodGroupMemberPodsOrderingFunc):
    priority first, then the most attempts, then the earliest in line, then by name."""
    return sorted(
        pods,
        key=lambda pod: (
            -pod.priority,
            -attempts.get(pod.uid, 0),
            pod.creation_timestamp,
            pod.name,
        ),
    )
