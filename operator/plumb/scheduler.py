"""The scheduling loop: pop a pod, decide on a snapshot, assume it in the cache, bind in the
background, report. This file tells the main story; the parts live in backend/, framework/,
binder.py and events.py.

Cluster events come in through ``Scheduler.on_pod`` / ``on_node`` (called by the app layer's
watch handlers) and through ``resync`` (a full list); the loop is ``Scheduler.run``. Everything
runs on one event loop, so the cache and the queue need no locks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from plumb.backend import cache as cache_module
from plumb.backend import journal as journal_module
from plumb.backend import objects
from plumb.backend import queue as queue_module
from plumb.binder import Binder, Outcome
from plumb.events import Recorder
from plumb.framework import cycle, deviation, runs, scoring, traces
from plumb.framework.plugins import (
    interpodaffinity,
    nodeaffinity,
    nodeports,
    noderesourcesfit,
    nodeunschedulable,
    podtopologyspread,
    tainttoleration,
)
from plumb.kernel import contract
from plumb.observability import metrics as metrics_module
from plumb.observability import trace, tracing
from plumb.policy import engine, spec, store

KernelRunner = Callable[[contract.Cluster, contract.Batch], Awaitable[contract.Result]]
DEFAULT_BATCH = 32

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Profile:
    """Which pods are ours."""

    scheduler_name: str


class Scheduler:
    """Owns the cache and the queue, and runs scheduling cycles one after another."""

    def __init__(
        self,
        *,
        profile: Profile,
        binder: Binder,
        recorder: Recorder,
        kernel: KernelRunner,
        batch_size: int = DEFAULT_BATCH,
        queue: queue_module.SchedulingQueue | None = None,
        tracer: tracing.Tracer | None = None,
        metrics: metrics_module.Metrics | None = None,
        journal: int = journal_module.DEFAULT_LIMIT,
    ) -> None:
        self.profile = profile
        # Attempts, latencies and kernel runs, counted as they happen (a registry of its own
        # unless the app layer serves one).
        self.metrics = metrics if metrics is not None else metrics_module.Metrics()
        self._kernel = self._timed(kernel)
        self.batch_size = batch_size
        self.cache = cache_module.Cache(journal)  # keeps the last `journal` writes' undos
        self.queue = queue if queue is not None else queue_module.SchedulingQueue()
        self._binder = binder
        self._recorder = recorder
        # One trace line per decision, and each pod's last decision for the debug endpoint.
        self.tracer = tracer if tracer is not None else tracing.Tracer()
        self._binds: set[asyncio.Task[None]] = set()
        self.synced = asyncio.Event()
        # SchedulingPolicies: fed by the app layer's reconciler, asked per batch.
        self.policies = engine.PolicyEngine(self.cache)
        # The last kernel runs' inputs, for snapshot dumps that ``plumb replay`` reads.
        self.runs = runs.RunLog()

    # Cluster events ------------------------------------------------------------------------

    def on_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A pod was listed, added, modified or deleted."""
        self._pod_event(event_type, objects.parse_pod(body))

    def _pod_event(self, event_type: str | None, pod: objects.PodInfo) -> None:
        if event_type == "DELETED":
            self.queue.delete(pod.uid)
            self._recorder.forget(pod.uid)
            self.tracer.forget(pod.key, pod.uid)
            was_placed = self.cache.state(pod.uid) is not None
            self.cache.remove_pod(pod.uid)
            if was_placed:
                self.queue.move_all(POD_REMOVED_HELPS)  # freed room may fit a waiting pod
            return
        if pod.node_name:
            self.queue.delete(pod.uid)
            before = self.cache.state(pod.uid)
            self.cache.add_pod(pod)
            if pod.terminal:
                self.queue.move_all(POD_REMOVED_HELPS)
            elif before is not cache_module.PodState.ADDED:
                # A pod newly placed, or our own binding confirmed: pods waiting for affinity
                # to it, or for its domain to fill, may fit now.
                self.queue.move_all(POD_ADDED_HELPS)
            return
        if self.cache.state(pod.uid) is cache_module.PodState.ASSUMED:
            return  # being bound by us; the watch has not caught up yet
        if pod.scheduler_name != self.profile.scheduler_name or pod.deleting or pod.terminal:
            self.queue.delete(pod.uid)
            return
        self.queue.add(pod)

    def on_node(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A node was listed, added, modified or deleted."""
        node = objects.parse_node(body)
        self.policies.observe_node(node.name, None if event_type == "DELETED" else body)
        if event_type == "DELETED":
            self.cache.remove_node(node.name)
            return
        if node.problem is not None:
            logger.warning(
                "node %s: %s; it is treated as having no resources", node.name, node.problem
            )
        before = self.cache.nodes.info(node.name)
        if self.cache.upsert_node(node):
            self.queue.move_all(None if before is None else node_change_helps(before, node))

    def on_workload(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A Service or controller changed: the default spread selector of pods may change."""
        self.cache.workloads.on_event(kind, event_type, body)

    def on_namespace(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A namespace's labels matter to affinity terms with a namespaceSelector."""
        metadata = body.get("metadata") or {}
        name = str(metadata.get("name", ""))
        labels = None if event_type == "DELETED" else dict(metadata.get("labels") or {})
        self.cache.set_namespace(name, labels)

    def relist_namespaces(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Make the namespaces' labels match a full list."""
        listed = {str((b.get("metadata") or {}).get("name", "")) for b in bodies}
        for name in self.cache.namespaces():
            if name not in listed:
                self.cache.set_namespace(name, None)
        for body in bodies:
            self.on_namespace(None, body)

    def relist_workloads(self, kind: str, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Make one kind of Service or controller match a full list."""
        self.cache.workloads.replace(kind, bodies)

    def relist_pods(self, mark: tuple[int, float], bodies: Sequence[Mapping[str, Any]]) -> None:
        """Bring the pods up to date with a list taken after ``mark`` (a watch's gap)."""
        for body in bodies:
            self.on_pod(None, body)
        self.sweep(mark, None, bodies)

    def relist_nodes(self, mark: tuple[int, float], bodies: Sequence[Mapping[str, Any]]) -> None:
        """Bring the nodes up to date with a list taken after ``mark`` (a watch's gap)."""
        for body in bodies:
            self.on_node(None, body)
        self.sweep(mark, bodies, None)

    def on_policy(self, event_type: str, body: Mapping[str, Any]) -> None:
        """A SchedulingPolicy was created, updated (its spec), resumed after a restart, or
        deleted; the pods waiting may fit under what is in force now."""
        if event_type == "DELETED":
            metadata = body.get("metadata") or {}
            self.policies.delete(str(metadata.get("namespace", "")), str(metadata.get("name", "")))
        elif event_type == "RESUMED":
            self.policies.resume(body)
        else:
            self.policies.apply(body)
        self.queue.move_all()

    def resync(self, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> None:
        """Make the cache and queue match a full list of nodes and pods."""
        nodes = list(nodes)
        node_infos = [objects.parse_node(body) for body in nodes]
        for info, body in zip(node_infos, nodes, strict=True):
            self.policies.observe_node(info.name, body)
        pod_infos = [objects.parse_pod(body) for body in pods]
        self.cache.reconcile(node_infos, pod_infos)
        # reconcile placed the bound pods; only the pending ones are left to queue.
        for pod in pod_infos:
            if not pod.node_name:
                self._pod_event(None, pod)
        self.queue.move_all()
        self.synced.set()

    def mark(self) -> tuple[int, float]:
        """Where the cache and queue stand before a full list is requested (for ``sweep``)."""
        return self.cache.tick, self.queue.now()

    def sweep(
        self,
        mark: tuple[int, float],
        nodes: Iterable[Mapping[str, Any]] | None,
        pods: Iterable[Mapping[str, Any]] | None,
    ) -> int:
        """Forget what a full list taken after ``mark`` no longer has: nodes and pods deleted
        while a watch was down (a re-list after such a gap cannot report deletions). A None
        list was not taken, and what it would hold is left as it is."""
        node_names = (
            None
            if nodes is None
            else {str((n.get("metadata") or {}).get("name", "")) for n in nodes}
        )
        pod_uids = (
            None if pods is None else {str((p.get("metadata") or {}).get("uid", "")) for p in pods}
        )
        swept = self.cache.sweep(node_names, pod_uids, listed_at=mark[0])
        if pod_uids is not None:
            swept += self.queue.sweep(pod_uids, mark[1])
        if swept:
            logger.warning("resync removed %d objects deleted while a watch was down", swept)
            self.queue.move_all()
        return swept

    # The loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule pods until cancelled; waits for the first resync before the first pod."""
        # No leader election yet: the instance running this loop is the one that schedules.
        self.metrics.set_leader(True)
        try:
            await self.synced.wait()
            while True:
                entries = await self.queue.pop_batch(
                    self.batch_size, alone=_needs_own_batch, group=self.policies.group
                )
                try:
                    await self.schedule_batch(entries)
                except Exception:
                    # One batch's failure must not stop the others: back them off, carry on.
                    logger.exception(
                        "scheduling %s failed unexpectedly", ", ".join(e.pod.key for e in entries)
                    )
                    self._count_errors(entries)
                    for entry in entries:
                        self.queue.backoff(entry.pod.uid)
        finally:
            self.metrics.set_leader(False)

    async def schedule_batch(self, entries: list[queue_module.Entry]) -> None:
        """One scheduling cycle for a batch of pods, decided as if one at a time.

        The batch shares one governing SchedulingPolicy, or none (``pop_batch`` groups them):
        its rules join each pod's own constraints and its weights score the nodes."""
        by_uid = {entry.pod.uid: entry for entry in entries}
        policy = self.policies.governing(entries[0].pod)
        pods = [entry.pod for entry in entries]
        profile = scoring.DEFAULT
        if policy is not None:
            pods = [self.policies.govern(pod, policy) for pod in pods]
        snap = self.cache.snapshot()
        if policy is not None:
            profile = self.policies.profile(policy, snap)
        prepared = cycle.prepare(pods, snap, self.cache, profile)
        self.runs.record(
            runs.Run(
                seq=self.cache.journal.seq,
                generation=snap.generation,
                nodes=len(snap),
                pods=tuple(entry.pod for entry in entries),
                rules=() if policy is None else self.policies.constraints(policy),
                profile=profile,
                policy=_ref(policy),
            )
        )
        decisions = list(prepared.early)
        kernel_seconds = None
        if prepared.compiled is not None:
            compiled = prepared.compiled
            # The kernel runs on its own thread over copies; the loop keeps handling events.
            started = time.perf_counter()
            result = await self._kernel(compiled.cluster, compiled.batch)
            kernel_seconds = time.perf_counter() - started
            decisions.extend(cycle.explain(compiled, result))
        for pod in prepared.deferred:
            self.queue.requeue(by_uid[pod.uid])
        records = traces.build(
            decisions, by_uid, snap, profile, _ref(policy), prepared, kernel_seconds
        )
        blocked: list[cycle.Decision] = []
        for decision in decisions:
            uid = decision.pod.uid
            if policy is not None and self._may_deviate(policy, decision):
                blocked.append(decision)
            else:
                self._apply(by_uid[uid], decision, records[uid], policy)
        for decision in blocked:
            # After the others are placed, one at a time: each deviation moves the skew.
            assert policy is not None
            uid = decision.pod.uid
            await self._deviate(by_uid[uid], decision, records[uid], policy)

    def _report_revert(self, policy: spec.Policy, reverted: store.Reversion) -> None:
        self._recorder.policy_event(
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
            and self.policies.may_deviate(policy)
        )

    async def _deviate(
        self,
        entry: queue_module.Entry,
        blocked: cycle.Decision,
        record: trace.Trace,
        policy: spec.Policy,
    ) -> None:
        """Place a pod beyond the policy's maxSkew on its budget, or let it wait."""
        rules = [c for c in self.policies.constraints(policy) if c.hard]
        snap = self.cache.snapshot()
        profile = self.policies.profile(policy, snap)
        prepared = cycle.prepare([entry.pod], snap, self.cache, profile)
        self.runs.record(
            runs.Run(
                seq=self.cache.journal.seq,
                generation=snap.generation,
                nodes=len(snap),
                pods=(entry.pod,),
                profile=profile,
                policy=_ref(policy),
                deviation=tuple(rules),
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
        if found is None or not self.policies.may_deviate(policy):
            self._apply(entry, blocked, record, policy)
            return
        if self.queue.where(entry.pod.uid) is not queue_module.Where.IN_FLIGHT:
            return
        if found.node not in self.cache.nodes:
            self.queue.requeue(entry)
            return
        self.policies.spend(policy)
        note = (
            f"Placed on {found.node} beyond SchedulingPolicy {policy.namespace}/{policy.name} "
            f"(generation {policy.generation}): {found.describe()}; no node met the policy. "
            f"{self.policies.budget_text(policy)}."
        )
        logger.warning("pod %s deviates: %s", entry.pod.key, note)
        self._recorder.deviated(entry.pod, note)
        placed = dataclasses.replace(blocked, node=found.node, message=note)
        record = dataclasses.replace(
            deviated,
            node=found.node,
            plan_hash=traces.deviation_plan_hash(entry.pod.uid, found.node),
        )
        self._apply(entry, placed, record, policy, deviation=True)

    def _apply(
        self,
        entry: queue_module.Entry,
        decision: cycle.Decision,
        record: trace.Trace,
        policy: spec.Policy | None = None,
        *,
        deviation: bool = False,
    ) -> None:
        pod = entry.pod
        if self.queue.where(pod.uid) is not queue_module.Where.IN_FLIGHT:
            return  # deleted, or bound by someone else, while the kernel ran
        message, budget = decision.message, None
        if policy is not None:
            if decision.node is None and podtopologyspread.NAME in decision.plugins:
                message = f"{message} {self.policies.budget_text(policy)}."
            outcome = self.policies.record(
                policy, pod, decision.node, deviation=deviation, message=message
            )
            if outcome.reverted is not None:
                self._report_revert(policy, outcome.reverted)
            budget = self._budget(policy)
        record = dataclasses.replace(record, message=message, deviation=deviation, budget=budget)
        if decision.node is None:
            self.queue.unschedulable(pod.uid, decision.plugins)
            self.metrics.attempt(metrics_module.UNSCHEDULABLE, self.queue.now() - entry.popped_at)
            self._recorder.failed_scheduling(pod, message, attempts=entry.attempts)
            step = queue_module.SchedulingQueue.backoff_duration(entry.attempts)
            self.tracer.emit(record, repeat_after=step)
            return
        if decision.node not in self.cache.nodes:
            self.queue.requeue(entry)  # the node went away while the kernel ran
            return
        self.cache.assume(pod, decision.node)
        self.queue.done(pod.uid)
        task = asyncio.get_running_loop().create_task(self._bind(entry, decision.node, record))
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)

    def _budget(self, policy: spec.Policy) -> trace.Budget | None:
        state = self.policies.budget_state(policy)
        if state is None:
            return None
        return trace.Budget(
            used=state.used,
            remaining=state.remaining,
            max_violations=state.max_violations,
            open=self.policies.may_deviate(policy),
            text=self.policies.budget_text(policy),
        )

    async def _bind(self, entry: queue_module.Entry, node: str, record: trace.Trace) -> None:
        pod = entry.pod
        started = time.monotonic()
        result = await self._binder.bind(pod, node)
        latency = time.monotonic() - started
        self._count_bind(entry, result.outcome, latency)
        bound = result.outcome is Outcome.BOUND
        if result.outcome not in (Outcome.GONE, Outcome.CONFLICT):  # not the zone's doing
            self.policies.observe_bind(pod, node, success=bound, latency=latency)
        if bound:
            self.tracer.emit(
                dataclasses.replace(record, result=trace.SCHEDULED, bind_ms=trace.ms(latency))
            )
            self._recorder.scheduled(pod, node)
            return
        self._recorder.forget(pod.uid)
        if self.cache.state(pod.uid) is cache_module.PodState.ASSUMED:
            self.cache.forget(pod.uid)
        if result.outcome in (Outcome.GONE, Outcome.CONFLICT):
            # Nothing to retry: the pod is gone, or bound elsewhere.
            message, step, level = result.message, 0.0, logging.INFO
        else:
            message = f"{result.message}; retrying after a backoff"
            step = queue_module.SchedulingQueue.backoff_duration(entry.attempts)
            level = logging.WARNING
            self.queue.retry(entry)
        failed = dataclasses.replace(
            record, result=trace.BIND_FAILED, message=message, bind_ms=trace.ms(latency)
        )
        self.tracer.emit(failed, repeat_after=step, level=level)

    def dump(self) -> dict[str, Any]:
        """The cache, its journal and the recent runs, for ``plumb replay`` (JSON values)."""
        return runs.snapshot(self.cache, self.runs, self.profile.scheduler_name)

    async def drain(self) -> None:
        """Wait for binds and report writes in flight (shutdown, tests)."""
        while self._binds:
            await asyncio.gather(*list(self._binds), return_exceptions=True)
        await self._recorder.drain()

    # Metrics (an attempt runs from its pop to its result: the binding's answer when placed) --

    def _timed(self, kernel: KernelRunner) -> KernelRunner:
        """``kernel``, each run's duration observed."""
        observe = self.metrics.kernel_run

        async def run(cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
            started = time.perf_counter()
            result = await kernel(cluster, batch)
            observe(time.perf_counter() - started)
            return result

        return run

    def _count_bind(self, entry: queue_module.Entry, outcome: Outcome, seconds: float) -> None:
        if outcome is Outcome.BOUND:
            self.metrics.binding(metrics_module.BOUND, seconds)
        elif outcome is Outcome.CONFLICT:
            self.metrics.binding(metrics_module.CONFLICT, seconds)
        elif outcome is Outcome.GONE:
            self.metrics.binding(metrics_module.GONE, seconds)
        else:
            self.metrics.binding(metrics_module.ERROR, seconds)
        now = self.queue.now()
        if outcome is Outcome.BOUND:
            self.metrics.attempt(metrics_module.SCHEDULED, now - entry.popped_at)
            self.metrics.pod_scheduled(now - entry.first_enqueued, entry.attempts)
        else:  # kube-scheduler counts a binding the API server refused as an error
            self.metrics.attempt(metrics_module.ERROR, now - entry.popped_at)

    def _count_errors(self, entries: list[queue_module.Entry]) -> None:
        """A batch failed unexpectedly: its pods still in flight ended their attempt in error
        (the others were decided before the failure, and counted then)."""
        now = self.queue.now()
        for entry in entries:
            if self.queue.where(entry.pod.uid) is queue_module.Where.IN_FLIGHT:
                self.metrics.attempt(metrics_module.ERROR, now - entry.popped_at)


# Which unschedulable pods a cluster event may help, by the filter plugins that rejected them
# (a coarse form of kube-scheduler's queueing hints).
POD_REMOVED_HELPS = frozenset(
    {noderesourcesfit.NAME, nodeports.NAME, podtopologyspread.NAME, interpodaffinity.NAME}
)
POD_ADDED_HELPS = frozenset({podtopologyspread.NAME, interpodaffinity.NAME})


def node_change_helps(before: objects.NodeInfo, after: objects.NodeInfo) -> frozenset[str]:
    """The plugins whose verdict a node update may change."""
    helps: set[str] = set()
    if before.allocatable != after.allocatable:
        helps.add(noderesourcesfit.NAME)
    if before.unschedulable != after.unschedulable:
        helps.add(nodeunschedulable.NAME)
    if before.taints != after.taints:
        helps |= {tainttoleration.NAME, podtopologyspread.NAME}
    if before.labels != after.labels:
        helps |= {nodeaffinity.NAME, podtopologyspread.NAME, interpodaffinity.NAME}
    return frozenset(helps)


def _ref(policy: spec.Policy | None) -> traces.PolicyRef | None:
    return None if policy is None else (policy.namespace, policy.name, policy.generation)


def _needs_own_batch(pod: objects.PodInfo) -> bool:
    # Host ports are checked before the kernel, against pods already placed: a pod wanting
    # them is decided alone so an earlier pod of its batch cannot take the same port.
    return bool(pod.scheduling.host_ports)
