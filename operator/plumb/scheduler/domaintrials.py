"""Domain trials: a SchedulingPolicy's ``spec.gangs`` at work in a pod group's cycle.

The group is tried in one topology domain at a time, least fragmentation first
(framework/gangdomains.py chooses and orders them), each trial decided by the group cycle as
always but with every member confined to the domain, and unreserved whole when its minimum does
not fit; the first domain that places the minimum wins. When no single domain holds it, the
group is tried across domains: kept under ScheduleAnyway, kept as one deviation for the whole
group when the budget allows one (charged by the cycle when it binds, ``deviated`` marks each
member), and otherwise unreserved and refused in the budget's words (``Walk.blocked``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from plumb.backend import queue as queue_module
from plumb.backend.records.groupobjects import PodGroup
from plumb.framework import gangdomains, scoring
from plumb.framework.plugins import gangscheduling
from plumb.framework.plugins.gangscheduling import Feasibility
from plumb.observability import trace
from plumb.policy import spec

if TYPE_CHECKING:
    from plumb.scheduler import gangcycle, loop

# The most domains one cycle tries a group in (each a kernel run or more), the tightest first;
# a group none of them holds is tried across domains.
MAX_DOMAINS_TRIED = 8
SATISFIED = Feasibility.SATISFIED


class DomainTrials:
    """The group cycle's trials of a group in one domain at a time (``GangCycle`` holds one)."""

    def __init__(self, cycle: gangcycle.GangCycle, scheduler: loop.Scheduler) -> None:
        self._cycle = cycle
        self._scheduler = scheduler

    async def in_one_domain(
        self,
        ordered: list[queue_module.Entry],
        profile: scoring.Profile,
        start: gangcycle.Walk,
        group: PodGroup,
        rule: spec.GangTopology,
    ) -> gangcycle.Walk:
        """The group tried in one domain of the rule's key at a time, least fragmentation
        first; the first whose minimum is placed wins, and a trial that fails is unreserved
        whole. With members placed before all in one domain, only that one is tried; with
        them in several, the group already spans. No single domain holds it: tried across
        domains (``start``), kept when ScheduleAnyway or the budget allows one deviation for
        the group, else unreserved and ``blocked``."""
        s = self._scheduler
        policy = start.policy
        assert policy is not None
        key = rule.topology_key
        snap = s.cache.snapshot()
        held = gangdomains.domains_of(
            snap, key, (s.cache.node_of(uid) or "" for uid in s.cache.groups.placed(group.ref))
        )
        if len(held) > 1 or None in held:
            await self._cycle.try_members(ordered, profile, start)
            start.topology = trace.GroupDomainRecord(
                key=key,
                spans=True,
                text=f"members placed before are not all in one {key} domain; the others go "
                "where they fit",
            )
            return start
        needed = start.progress.minimum - start.progress.scheduled
        asked = gangdomains.demand([entry.pod for entry in ordered], needed)
        within = next(iter(held), None)
        rooms = gangdomains.candidates(snap, key, asked, within=within)
        tried: list[str] = []
        for room in rooms[:MAX_DOMAINS_TRIED]:
            trial = start.fresh()
            await self._cycle.try_members(ordered, profile, trial, (key, room.value))
            tried.append(room.value)
            if trial.stop is None and trial.progress.verdict is SATISFIED:
                if within is not None:
                    why = "where its members placed before are"
                else:
                    holding = "the 1 domain" if len(rooms) == 1 else f"the {len(rooms)} domains"
                    why = (
                        f"the tightest fit of {holding} whose free room holds its minimum: "
                        f"{room.describe()}"
                    )
                    if len(tried) > 1:
                        why += f" (tried {', '.join(tried)})"
                trial.topology = trace.GroupDomainRecord(
                    key=key, domain=room.value, tried=tuple(tried), text=why
                )
                return trial
            self._cycle.unreserve(trial)
        why = f"no single {key} domain holds its minimum {start.progress.minimum}"
        why += f" (tried {', '.join(tried)})" if tried else " (none has the free room)"
        await self._cycle.try_members(ordered, profile, start)
        if start.stop is not None or start.progress.verdict is not SATISFIED:
            start.topology = trace.GroupDomainRecord(
                key=key, tried=tuple(tried), text=f"{why}, nor do the domains together"
            )
            return start
        spans = gangdomains.domains_of(snap, key, _reserved(start))
        across = ", ".join(sorted(value or "(no domain)" for value in spans))
        if not rule.hard:
            start.topology = trace.GroupDomainRecord(
                key=key,
                tried=tuple(tried),
                spans=True,
                text=f"{why}; placed across {across} (whenUnsatisfiable ScheduleAnyway)",
            )
            return start
        name = f"SchedulingPolicy {policy.namespace}/{policy.name}"
        if s.policies.may_span(policy, group.uid):
            start.topology = trace.GroupDomainRecord(
                key=key,
                tried=tuple(tried),
                spans=True,
                deviation=True,
                text=f"{why}; placed across {across}, one deviation on {name}'s budget",
            )
            return start
        self._cycle.unreserve(start)
        blocked = f"{why}; spanning domains needs a deviation. {s.policies.budget_text(policy)}."
        start.topology = trace.GroupDomainRecord(key=key, tried=tuple(tried), text=blocked)
        start.blocked = f"{gangscheduling.GROUP_UNSCHEDULABLE}, {blocked}"
        return start

    def deviated(
        self, walk: gangcycle.Walk, group: PodGroup, member: gangcycle.Tried, record: trace.Trace
    ) -> trace.Trace:
        """A member placed as part of a group spanning domains on its policy's budget: its
        PolicyDeviation event, the policy's last decision, and its trace marked a deviation."""
        s = self._scheduler
        policy, topology = walk.policy, walk.topology
        assert policy is not None
        assert topology is not None
        assert member.held is not None
        node = member.held.node
        note = (
            f"Placed on {node} with pod group {group.key} beyond SchedulingPolicy "
            f"{policy.namespace}/{policy.name} (generation {policy.generation}): "
            f"{topology.text}. {s.policies.budget_text(policy)}."
        )
        s.state.recorder.deviated(member.entry.pod, note)
        s.policies.record(policy, member.entry.pod, node, deviation=True, message=note)
        return dataclasses.replace(record, message=note, deviation=True, budget=self.budget(policy))

    def budget(self, policy: spec.Policy) -> trace.BudgetRecord | None:
        """The policy's budget as a member's trace shows it (as a single pod's)."""
        return self._scheduler.budget_record(policy)


def _reserved(walk: gangcycle.Walk) -> list[str]:
    """The nodes the walk's members were reserved on."""
    return [member.held.node for member in walk.tried if member.held is not None]
