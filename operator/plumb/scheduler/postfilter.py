"""PostFilter: when a pod fits nowhere, make room by preemption and carry it out (kube-scheduler).

The story of one failed pod (``PostFilter.run``):
0. DynamicResources' PostFilter first, for a pod with claims: a claim of the pod allocated
   where the pod cannot go, reserved for no other pod, is deallocated ("deallocation of
   ResourceClaim completed"; its watch event moves the pod back), else it says "still not
   schedulable" (up to v1.36); then DefaultPreemption, as below, either way;
1. the search (preemption/search.py) is read from the cache on the loop and decided on the
   kernel's thread: every node where evicting lower-priority pods would let the pod fit, the
   fewest and least important victims on each, the best node by kube-scheduler's order;
2. nothing found: the FailedScheduling message goes on with kube-scheduler's PostFilter text
   ("preemption: 0/N nodes are available: ...", after "no new claims to deallocate, " up to
   v1.36), and a nomination that no longer helps is cleared;
3. found: the pod is nominated (``status.nominatedNodeName``, written and confirmed before any
   victim is touched), lower-priority pods nominated to the same node lose their nomination,
   and the victims are preempted in the background (DisruptionTarget condition, delete with a
   uid precondition, Preempted event), all written by preemption/execution.py; from v1.35
   victims already being deleted are left alone, and with all of them so nothing is written.
   Until those writes are done, the pod does not search again ("not eligible due to a
   terminating pod on the nominated node"). The pod waits as unschedulable (from v1.37 the
   message says "preemption: found a potential placement for pod on node N, preempting K
   victims"); the victims' deletion moves it back, and its next cycle holds it to the
   nominated node while that node fits it.

Meanwhile every cycle of a pod of lower or equal priority counts the nominated pod as placed on
its node (backend/cache/nominations.py), so the freed room is not taken.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from plumb import claimreservations
from plumb import runs as runs_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import nominations
from plumb.backend.records import draobjects, groupobjects, objects
from plumb.events import Recorder
from plumb.extensions import extendercalls, judgements
from plumb.extensions import extenders as extenders_module
from plumb.framework import cycle, emulation, scoring, traces
from plumb.framework.plugins import capacityscheduling, dynamicresources, extendedresources
from plumb.kernel import contract, reference
from plumb.observability import metrics as metrics_module
from plumb.observability import trace
from plumb.policy import engine, spec
from plumb.preemption import evaluator, execution, groupsearch, quotavictims, search
from plumb.scheduler import rawbodies

logger = logging.getLogger("plumb.scheduler")

_Found = TypeVar("_Found")


class Offload(Protocol):
    """Runs a search with the kernel on the kernel's thread (kernel/executor.py's offload)."""

    def __call__(self, work: Callable[[contract.Kernel], _Found], /) -> Awaitable[_Found]: ...


async def inline(work: Callable[[contract.Kernel], _Found]) -> _Found:
    """An ``Offload`` that runs the search at once with the reference kernel (tests)."""
    return work(reference.run)


_IN_PROGRESS = evaluator.PREFIX + evaluator.NOT_ELIGIBLE_TERMINATING
# scheduler-plugins v0.34.7 is a kube-scheduler v1.34: CapacityScheduling's preemption behaves
# and speaks as that release's, whatever the cluster runs.
QUOTA_KUBE = emulation.emulate(34)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PostFilterResult:
    """What PostFilter did for a failed decision: its message now, and the trace's part."""

    decision: cycle.Decision
    preemption: trace.PreemptionRecord | None = None
    retry: bool = False  # the pod fits as things are now: try it again at once


class PostFilter:
    """Preemption for the pods the loop could not place (one instance per Scheduler)."""

    def __init__(
        self,
        *,
        cache: cache_module.Cache,
        nominations: nominations.Nominations,
        budgets: Mapping[tuple[str, str], evaluator.DisruptionBudget],
        policies: engine.PolicyEngine,
        recorder: Recorder,
        metrics: metrics_module.Metrics,
        offload: Offload,
        runs: runs_module.RunLog | None = None,
        claim_api: claimreservations.ExtendedClaimApi | None = None,
        extenders: Callable[[], Sequence[extenders_module.Extender]] = tuple,
        extender_calls: extendercalls.ExtenderCalls | None = None,
        bodies: rawbodies.RawBodies | None = None,
    ) -> None:
        # The HTTP extenders in force (their preempt verbs), their clients, the bodies they
        # are sent.
        self._extenders = extenders
        self._extender_calls = extender_calls
        self._bodies = bodies if bodies is not None else rawbodies.RawBodies()
        self._cache = cache
        self._claim_api = claim_api  # DynamicResources' deallocation (None: no claims)
        self._nominations = nominations
        self._budgets = budgets
        self._policies = policies
        self._executor = execution.Executor(recorder)
        self._metrics = metrics
        self._offload = offload
        self._runs = runs
        self._evicting: dict[str, str] = {}  # preemptor uid -> node, while victims are written
        self.tasks: set[asyncio.Task[None]] = set()

    async def run(
        self,
        decision: cycle.Decision,
        policy: spec.Policy | None,
        profile: scoring.Profile,
        judgement: judgements.Judgement | None = None,
    ) -> PostFilterResult:
        """PostFilter for ``decision`` (a pod that fit nowhere); ``judgement``: the Python
        plugins' verdicts its cycle made (their rejections hold in the search)."""
        pod = decision.pod
        kube = profile.kube
        # DynamicResources' PostFilter picks its claim, and preemption reads the cache, before
        # anything is written: both judge the cluster as the cycle saw it (the deallocation's
        # watch event, which may come back at once, moves the pod for its next attempt).
        idle = self._idle_claim(decision, profile)
        if pod.uid in self._evicting:
            said = await self._free_claim(pod, idle)
            return self._failed(decision, search.post_filter_words(kube, _IN_PROGRESS, said))
        nominated = self._nominations.node_of(pod.uid) or ""
        snap = self._cache.snapshot()
        held = self._nominations.holding(pod.priority, excluding=(pod.uid,))
        quota, prefiltered = None, ""
        if self._cache.quotas:
            every = [n.pod for n in self._nominations.all()]
            quota = quotavictims.view_of(pod, self._cache.quotas, every)
            if decision.prefiltered and capacityscheduling.NAME in decision.plugins:
                prefiltered = next(iter(decision.reasons))
        plan = search.prepare(
            pod,
            snap,
            self._cache,
            profile=profile,
            held=held,
            quota=quota,
            prefiltered=prefiltered,
            # In a fixed order (kube-scheduler's, its informer's, is random): with a pod under
            # several budgets, which one v1.37 leaves unspent depends on it (split_by_budgets).
            budgets=[self._budgets[key] for key in sorted(self._budgets)],
            rules=self._rules(policy),
            exempt=self._exempt,
            nominated_node=nominated,
            judgement=judgement,
        )
        if plan is not None and quota is not None:
            # CapacityScheduling's preemption is scheduler-plugins' (a kube-scheduler v1.34).
            plan = dataclasses.replace(plan, kube=QUOTA_KUBE)
        read = self._cache.journal.seq  # the cache the search reads, before any write
        said = await self._free_claim(pod, idle)
        if plan is None:
            # It cannot be compiled alone: nothing to search.
            return PostFilterResult(decision=decision)
        if self._runs is not None:
            # For replay: the search's inputs besides the cache, where the cache stood.
            self._runs.record(
                runs_module.Run(
                    seq=read,
                    generation=snap.generation,
                    nodes=len(snap),
                    pods=(pod,),
                    profile=profile,
                    policy=None if policy is None else policy_ref(policy),
                    held=tuple(held),
                    preemption=runs_module.PreemptionInputs(
                        budgets=tuple(plan.budgets),
                        rules=plan.rules,
                        exempt=plan.exempt,
                        nominated_node=nominated,
                    ),
                )
            )
        searched = await self._offload(plan.find)
        if searched is None:
            return PostFilterResult(decision=decision, retry=True)
        found = await self._ask_extenders(pod, searched)
        outcome = found.outcome
        if outcome.message != _IN_PROGRESS:  # kube-scheduler counts each evaluation
            self._metrics.preemption_attempt()
        part = _trace_part(found)
        if outcome.node is None:
            # Nominate no node (ModeOverride ""): ``clear`` drops one held here or named by
            # the pod's status (dropped here at an earlier assume, or another replica's).
            if outcome.clear_nomination:
                self.clear(pod)
            return dataclasses.replace(
                self._failed(decision, found.post_filter_message(said)), preemption=part
            )
        if not await self._executor.nominate(pod, outcome.node):
            note = "preemption: the nomination could not be written; retrying after a backoff"
            return dataclasses.replace(self._failed(decision, note), preemption=part)
        self._nominations.nominate(pod, outcome.node)
        self._metrics.preemption_victims(len(found.victims))
        done = self._failed(decision, found.post_filter_message(said))
        # From v1.35 a victim already being deleted is left alone; with every victim so, the
        # preemption ends here, lower-priority nominations on the node kept.
        evict = tuple(
            v for v in found.victims if not (kube.deleting_victims_skipped and v.deleting)
        )
        logger.info(
            "pod %s preempts %s on node %s",
            pod.key,
            ", ".join(v.key for v in evict) or "nothing (victims terminating)",
            outcome.node,
        )
        if not evict and kube.deleting_victims_skipped:
            return dataclasses.replace(done, preemption=part)
        for other in self._nominations.on(outcome.node):
            if other.pod.priority < pod.priority:
                self.clear(other.pod)  # the room it was promised is taken by a more important pod
        self._evicting[pod.uid] = outcome.node
        task = asyncio.get_running_loop().create_task(self._evict(pod, outcome.node, evict))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return dataclasses.replace(done, preemption=part)

    async def _ask_extenders(self, pod: objects.PodInfo, searched: search.Found) -> search.Search:
        """callExtenders between the search and the choice: the HTTP extenders with a preempt
        verb that are interested in the pod, asked on the loop in turn about the candidates'
        victims, may drop candidates and replace their victims."""
        configured = [e for e in self._extenders() if e.preempt_verb]
        candidates = searched.candidates
        if not configured or not candidates or self._extender_calls is None:
            return searched.conclude()
        victims = {
            c.node: extendercalls.VictimsOn(
                uids=tuple(v.uid for v in c.victims), pdb_violations=c.pdb_violations
            )
            for c in candidates
        }
        answer = await self._extender_calls.preempt(
            configured, self._bodies.pod(pod.uid), victims, searched.pods_on(), self._bodies.pod
        )
        if isinstance(answer, str):
            return searched.conclude(refusal=answer)
        return searched.conclude(
            [searched.candidate(node, v.uids, v.pdb_violations) for node, v in answer.items()]
        )

    async def for_group(
        self,
        members: Sequence[objects.PodInfo],
        group: groupobjects.PodGroup,
        profile: scoring.Profile,
    ) -> groupsearch.GroupPreemption:
        """DefaultPreemption's PodGroupPostFilter for a group whose minimum fits nowhere
        (``members`` in their order): the search (preemption/groups.py) on the kernel's thread;
        when it finds a placement, each placed member is nominated to its node (written before
        any victim is touched) and the victims are preempted in the background."""
        priority = group.priority or 0
        snap = self._cache.snapshot()
        held = self._nominations.holding(priority, excluding=tuple(p.uid for p in members))
        prepared = groupsearch.prepare(
            members,
            group,
            snap,
            self._cache,
            profile=profile,
            nominated=[(h.pod, h.node) for h in held],
        )
        if isinstance(prepared, groupsearch.GroupPreemption):
            return prepared
        self._metrics.preemption_attempt()
        outcome = await self._offload(prepared.decide)
        if not outcome.victims:
            return outcome
        by_uid = {pod.uid: pod for pod in members}
        for uid, node in outcome.nominated.items():
            pod = by_uid[uid]
            if await self._executor.nominate(pod, node):
                self._nominations.nominate(pod, node)
        self._metrics.preemption_victims(len(outcome.victims))
        logger.info(
            "pod group %s preempts %s",
            group.key,
            ", ".join(victim.key for victim in outcome.victims),
        )
        scheduler_name = members[0].scheduler_name
        task = asyncio.get_running_loop().create_task(
            self._evict_for_group(group, scheduler_name, outcome.victims)
        )
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return outcome

    async def _evict_for_group(
        self,
        group: groupobjects.PodGroup,
        scheduler_name: str,
        victims: tuple[objects.PodInfo, ...],
    ) -> None:
        done = await asyncio.gather(
            *(self._executor.preempt_for_group(v, group, scheduler_name) for v in victims),
            return_exceptions=True,
        )
        for victim, result in zip(victims, done, strict=True):
            if result is not True:
                logger.warning(
                    "preempting %s for pod group %s failed: %s", victim.key, group.key, result
                )

    def _idle_claim(
        self, decision: cycle.Decision, profile: scoring.Profile
    ) -> draobjects.ResourceClaim | str:
        """DynamicResources' PostFilter (deallocateOrDeletePodClaims), its choice: a claim of
        the pod allocated where the pod cannot go and reserved for no other pod (deallocated),
        else the claim an earlier attempt made for its extended resources (deleted), or, when
        there is neither, what the plugin says."""
        pod = decision.pod
        asks = pod.resource_claims or pod.device_requests
        if not asks or dynamicresources.NAME not in profile.filters:
            return dynamicresources.NO_CLAIMS
        store = self._cache.dra
        devices = dynamicresources.prefilter(pod, store, profile.kube.devices)
        if not isinstance(devices, dynamicresources.PodDevices):
            return dynamicresources.NO_CLAIMS
        nodes = self._cache.snapshot().statics.nodes
        for claim in dynamicresources.unavailable(devices, nodes):
            if self._claim_api is not None and all(c.uid == pod.uid for c in claim.reserved_for):
                return claim
        stale = devices.extended.stale if devices.extended is not None else None
        if stale is not None and self._claim_api is not None:
            # A claim an earlier cycle made for the pod's extended resources (its binding
            # failed, or plumb stopped): deleted, and its deletion moves the pod back.
            return stale
        return dynamicresources.STILL_NOT_SCHEDULABLE

    async def _free_claim(self, pod: objects.PodInfo, idle: draobjects.ResourceClaim | str) -> str:
        """The deallocation (or deletion) ``_idle_claim`` chose, written; what the plugin
        says."""
        if isinstance(idle, str) or self._claim_api is None:
            return idle if isinstance(idle, str) else dynamicresources.STILL_NOT_SCHEDULABLE
        if idle.extended and idle.owner_uid == pod.uid:
            failed = await claimreservations.delete_extended(self._claim_api, idle.body)
            if failed is not None:
                logger.warning("deleting %s for %s: %s", idle.key, pod.key, failed)
                return dynamicresources.STILL_NOT_SCHEDULABLE
            logger.info("deleted %s, left by an earlier attempt of %s", idle.key, pod.key)
            return extendedresources.DELETED
        error = await claimreservations.deallocate(self._claim_api, idle.body)
        if error is not None:
            logger.warning("deallocating %s for %s: %s", idle.key, pod.key, error)
            return dynamicresources.STILL_NOT_SCHEDULABLE
        logger.info("deallocated %s: %s cannot use it where it is", idle.key, pod.key)
        return dynamicresources.DEALLOCATED

    def clear(self, pod: objects.PodInfo) -> None:
        """Drop ``pod``'s nomination here and in its status."""
        if self._nominations.remove(pod.uid) is not None or pod.nominated_node:
            self._executor.clear_nomination(pod)

    def forget(self, uid: str) -> None:
        """The pod is gone or bound: its nomination, if any, holds nothing any more."""
        self._nominations.remove(uid)

    async def _evict(
        self, pod: objects.PodInfo, node: str, victims: tuple[objects.PodInfo, ...]
    ) -> None:
        try:
            done = await asyncio.gather(
                *(self._executor.preempt(victim, pod, node) for victim in victims),
                return_exceptions=True,
            )
            for victim, result in zip(victims, done, strict=True):
                if result is not True:
                    logger.warning(
                        "preempting %s for %s on %s failed: %s", victim.key, pod.key, node, result
                    )
        finally:
            self._evicting.pop(pod.uid, None)

    async def drain(self) -> None:
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    def _failed(self, decision: cycle.Decision, post_filter: str) -> PostFilterResult:
        message = f"{decision.message} {post_filter}" if post_filter else decision.message
        return PostFilterResult(decision=dataclasses.replace(decision, message=message))

    def _rules(self, policy: spec.Policy | None) -> evaluator.Rules:
        if policy is None:
            return evaluator.NO_RULES
        rules = policy.preemption
        return evaluator.Rules(
            qos_order=rules.qos_order,
            same_namespace=rules.same_namespace,
            max_victims=rules.max_victims,
            source=f"SchedulingPolicy {policy.namespace}/{policy.name}",
        )

    def _exempt(self, pod: objects.PodInfo) -> bool:
        """Whether the SchedulingPolicy governing ``pod`` exempts its QoS class."""
        policy = self._policies.governing(pod)
        return policy is not None and pod.qos in policy.preemption.exempt_qos


def _trace_part(found: search.Search) -> trace.PreemptionRecord:
    outcome = found.outcome
    rejected: dict[str, int] = {}
    for reasons in outcome.rejected.values():
        for reason in reasons:
            rejected[reason] = rejected.get(reason, 0) + 1
    return trace.PreemptionRecord(
        node=outcome.node,
        victims=tuple(
            trace.Victim(pod=v.key, priority=v.priority, qos=v.qos) for v in found.victims
        ),
        candidates=len(outcome.candidates),
        searched=found.searched,
        pdb_violations=outcome.pdb_violations,
        rejected=rejected,
        message=outcome.message,
    )


def policy_ref(policy: spec.Policy) -> traces.PolicyRef:
    return (policy.namespace, policy.name, policy.generation)
