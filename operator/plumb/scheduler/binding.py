"""The binding cycle: the second room of a scheduling attempt, run in the background once the
scheduling cycle (scheduler/loop.py) has assumed the pod on its node, as kube-scheduler binds
"asynchronously (we can do this b/c of the assumption step above)".

For each pod: PreBind (its volume claims bound, then its ResourceClaims allocated and reserved
for it, and the claim for its extended resources backed by DRA made), then the binding POST;
the outcome reported
(a Scheduled event and trace line, or a retry after a backoff); and on failure or cancellation
a step back (the assumption forgotten, the pod back in the queue). A PreBind with work to do is
announced first where NominatedNodeNameForExpectation is on (v1.35+): the pod's
status.nominatedNodeName names its node until the API server clears it at binding. A failed
binding cycle clears the pod's nomination (its PreBind's or a preemption's) as the failure
handler of the release plumb decides as does (``failed_nomination``). A deviation charged to
a policy's budget is refunded unless the binding stands. What it learns goes into the state it
shares with the feed and the scheduling cycle (scheduler/state.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from plumb import claimreservations, prebind
from plumb import events as events_module
from plumb.backend import queue as queue_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import volumes as volumes_module
from plumb.backend.records import draobjects, objects
from plumb.binder import NOT_LEADER_MESSAGE, Binder, BindOutcome, BindResult
from plumb.extensions import interface
from plumb.framework import traces
from plumb.framework.devices import statuses
from plumb.framework.plugins import dynamicresources, extendedresources
from plumb.k8s import client as k8s_client
from plumb.k8s import gates
from plumb.observability import metrics as metrics_module
from plumb.observability import trace
from plumb.observability.spans import BINDING, PRE_BIND
from plumb.policy import spec
from plumb.preemption import execution
from plumb.scheduler import meters
from plumb.scheduler import state as state_module

logger = logging.getLogger(__name__)


class BindingCycle:
    """Binds assumed pods in the background, and keeps the set of binds in flight."""

    def __init__(
        self,
        state: state_module.SchedulerState,
        *,
        binder: Binder,
        may_act: gates.Gate,
        volume_api: prebind.VolumeApi | None = None,
        claim_api: claimreservations.ExtendedClaimApi | None = None,
    ) -> None:
        self._state = state
        self._binder = binder
        self._may_act = may_act  # asked by PreBind before each write
        self._volume_api = volume_api  # VolumeBinding's PreBind writes (None: no volumes)
        self._claim_api = claim_api  # DynamicResources' writes (None: no claims)
        self._unreserves: set[asyncio.Task[None]] = set()
        self._binds: set[asyncio.Task[None]] = set()
        # Pod uid -> the claim PreBind made for its extended resources, until the pod is bound
        # (Unreserve deletes it otherwise).
        self._made: dict[str, Mapping[str, Any]] = {}
        # The nomination written before a PreBind (kube-scheduler's updatePod in bindingCycle).
        self._nominations = execution.Executor(state.recorder)

    def start(
        self,
        entry: queue_module.Entry,
        node: str,
        record: trace.Trace,
        plan: volumes_module.BindingPlan | None,
        charged: spec.Policy | None,
        devices: dynamicresources.Reserved | None = None,
    ) -> None:
        """Bind an assumed pod to ``node`` in the background; its trace names the devices
        Reserve gave its claims."""
        if devices is not None and devices.claims:
            record = dataclasses.replace(record, devices=traces.devices(devices))
        task = asyncio.get_running_loop().create_task(
            self._bind(entry, node, record, plan, charged, devices)
        )
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)

    async def _bind(
        self,
        entry: queue_module.Entry,
        node: str,
        record: trace.Trace,
        plan: volumes_module.BindingPlan | None = None,
        charged: spec.Policy | None = None,
        devices: dynamicresources.Reserved | None = None,
    ) -> None:
        """The binding cycle: PreBind (volumes, devices), then the binding; a deviation
        ``charged`` to a policy's budget is refunded unless the binding stands."""
        pod = entry.pod
        started = time.monotonic()
        stands = False
        try:
            stands = await self._binding(entry, node, record, plan, started, devices)
        finally:
            if charged is not None and not stands:
                self._state.policies.refund(charged, pod)

    async def _binding(
        self,
        entry: queue_module.Entry,
        node: str,
        record: trace.Trace,
        plan: volumes_module.BindingPlan | None,
        started: float,
        devices: dynamicresources.Reserved | None = None,
        tries: int = 0,
    ) -> bool:
        """Whether the pod was bound to ``node`` (by this try, or an earlier one). ``tries``:
        the bindings of a pod group's member already tried here (its PreBind done)."""
        pod = entry.pod
        # A try to a node an earlier lost try went to speaks for that node: its own answer
        # reports it, and the watch must not report it first.
        self._state.uncertain.get(pod.uid, {}).pop(node, None)
        spans = self._state.tracer.spans
        try:
            prebinding = self._state.queue.now()
            # PreBind's writes (volumes, claims, the nomination) carry its span's traceparent.
            traced = k8s_client.TRACEPARENT.set(spans.stage_headers(record, PRE_BIND))
            try:
                prebound = bool(tries) or await self._prebind(
                    entry, node, plan, devices, record, started
                )
            finally:
                k8s_client.TRACEPARENT.reset(traced)
            if not prebound:
                return False
            binding = self._state.queue.now()
            if spans.enabled and not tries:
                record.staged(PRE_BIND, prebinding, binding)
            answer = await self._bind_call(pod, node, spans.binding_header(record))
            if spans.enabled:
                record.staged(BINDING, binding, self._state.queue.now())
            if isinstance(answer, str):
                self._extender_refused(entry, node, record, plan, devices, started, answer)
                return False
            result = answer
        except asyncio.CancelledError:
            # Leadership lost (or shutdown) mid-request: whether the server got it or not, the
            # watch will tell; until then the pod waits in the queue like any other. The trace
            # line dates the attempt (its time less bind_ms), so no bind goes unaccounted for.
            if plan is not None:
                self._state.cache.volumes.forget(plan)
            self._forget_devices(pod, devices)
            self._step_back(entry)
            cancelled = dataclasses.replace(
                record,
                result=trace.BIND_FAILED,
                message="binding cancelled: this replica stopped leading; the watch shows "
                "whether the API server bound the pod",
                bind_ms=trace.ms(time.monotonic() - started),
            )
            self._state.tracer.emit(cancelled, level=logging.INFO)
            raise
        if result.outcome is BindOutcome.NOT_LEADER:
            self._forget_devices(pod, devices)
            self._step_back(entry)
            return False
        latency = time.monotonic() - started
        # The answer lost (or a 409 for our own earlier try), but the watch already shows the
        # pod on this very node: the API server committed our binding. It is counted, traced
        # and reported (the Scheduled event `kubectl describe` shows) as the success it was.
        committed = (
            result.outcome is not BindOutcome.BOUND
            and self._state.cache.state(pod.uid) is cache_module.PodState.ADDED
            and self._state.cache.node_of(pod.uid) == node
        )
        bound = result.outcome is BindOutcome.BOUND or committed
        outcome = BindOutcome.BOUND if bound else result.outcome
        meters.count_bind(
            self._state.metrics,
            self._state.queue,
            entry,
            outcome,
            latency,
            self._state.slo,
            trace_id=spans.kept(record, result=trace.SCHEDULED) if bound else "",
        )
        if outcome not in (BindOutcome.GONE, BindOutcome.CONFLICT):  # not the zone's doing
            self._state.policies.observe_bind(pod, node, success=bound, latency=latency)
        if pod.uid in self._state.committed_late:
            self._state.committed_late.discard(pod.uid)
            if committed:
                return True  # an earlier try to this node stood, and the watch reported it
        if bound:
            self._made.pop(pod.uid, None)  # the pod's now: the resourceclaim controller's care
            self._state.uncertain.pop(pod.uid, None)  # this try stands; an earlier one cannot
            self._state.tracer.emit(
                dataclasses.replace(record, result=trace.SCHEDULED, bind_ms=trace.ms(latency))
            )
            self._state.recorder.scheduled(pod, node)
            await self._post_bind(pod, node)
            return True
        self._state.recorder.forget(pod.uid)
        # Still assumed: the watch has not settled the pod. Otherwise it has: bound (ours,
        # committed although the answer was lost, or someone else's) or deleted; either way
        # there is nothing to retry, and a retry would decide a pod that is not pending.
        # A 409 (already bound, or recreated under its name) is retried like any failure
        # until the watch settles the pod, as kube-scheduler requeues a failed binding unless
        # its informer shows the pod assigned or gone: a 409 the watch never confirms (a proxy's,
        # a webhook's) would otherwise leave the pod pending for ever. A 404 is the server
        # saying the pod is gone; its deletion is on the way.
        settled = self._state.cache.state(pod.uid) is not cache_module.PodState.ASSUMED
        if not settled and result.outcome is not BindOutcome.GONE and self._holds_room(pod):
            # A pod group's member: bound again to the same node after a backoff, its room
            # (and its group's) held meanwhile, so that no other pod takes it and leaves the
            # group short of its minimum with the others bound.
            step = self._state.queue.backoff_duration(tries + 1)
            self._state.uncertain.setdefault(pod.uid, {})[node] = record
            held = dataclasses.replace(
                record,
                result=trace.BIND_FAILED,
                message=f"{result.message}; binding it to {node} again in {step:.0f} s: its "
                "pod group keeps its room",
                bind_ms=trace.ms(latency),
            )
            self._state.tracer.emit(held, repeat_after=step, level=logging.WARNING)
            try:
                await asyncio.sleep(step)
            except asyncio.CancelledError:
                self._forget_devices(pod, devices)
                self._step_back(entry)
                raise
            if self._state.cache.state(pod.uid) is not cache_module.PodState.ASSUMED:
                return False  # the watch settled it meanwhile: bound (reported) or gone
            again = time.monotonic()
            return await self._binding(entry, node, record, plan, again, devices, tries + 1)
        if not settled:
            self._state.cache.forget(pod.uid)
            self._forget_devices(pod, devices, unreserve=True)
            self._unreserve_extensions(pod, node)
        else:
            self._made.pop(pod.uid, None)  # bound after all, or gone with the claims it owns
        if result.outcome is BindOutcome.GONE or settled:
            # Nothing to retry: the pod is gone, or bound (elsewhere, or here after all).
            message, step, level = result.message, 0.0, logging.INFO
            if settled and result.outcome is not BindOutcome.GONE:
                message = f"{result.message}; not retried: the watch has settled the pod"
        else:
            message = f"{result.message}; retrying after a backoff"
            step = self._state.queue.backoff_duration(entry.attempts)
            level = logging.WARNING
            self._state.queue.retry(entry)
            self.failed_nomination(pod, written=self._prebind_nominated(pod, plan, devices))
            # No answer, the server's own failure, or a 409 that may be our own earlier try:
            # the binding may stand, which the watch will tell.
            self._state.uncertain.setdefault(pod.uid, {})[node] = record
        failed = dataclasses.replace(
            record, result=trace.BIND_FAILED, message=message, bind_ms=trace.ms(latency)
        )
        self._state.tracer.emit(failed, repeat_after=step, level=level)
        return False

    async def _bind_call(
        self, pod: objects.PodInfo, node: str, traceparent: str | None = None
    ) -> BindResult | str:
        """Bind as kube-scheduler does: an HTTP extender that binds and is interested in the
        pod first (it writes the Binding itself; its error text when it fails), the bind
        plugins (DefaultBinder: binder.py) when there is none or an ignorable one failed."""
        configured = self._state.served.extenders
        if any(e.bind_verb for e in configured):
            if not self._may_act():
                return BindResult(outcome=BindOutcome.NOT_LEADER, message=NOT_LEADER_MESSAGE)
            said = await self._state.extender_calls.bind(
                configured,
                self._state.bodies.pod(pod.uid),
                pod.namespace,
                pod.name,
                pod.uid,
                node,
            )
            if said == "":
                # Bound by the extender: the pod stays assumed on ``node`` until the watch
                # shows where it went.
                return BindResult(outcome=BindOutcome.BOUND)
            if said is not None:
                return said
        return await self._binder.bind(pod, node, traceparent)

    def _extender_refused(
        self,
        entry: queue_module.Entry,
        node: str,
        record: trace.Trace,
        plan: volumes_module.BindingPlan | None,
        devices: dynamicresources.Reserved | None,
        started: float,
        message: str,
    ) -> None:
        """The binding extender failed (handleBindingCycleError): the pod's reservations
        undone, FailedScheduling with reason SchedulerError and the extender's words, a retry
        after a backoff, unless the watch shows the pod bound meanwhile."""
        pod = entry.pod
        settled = self._state.cache.state(pod.uid) is not cache_module.PodState.ASSUMED
        self._unreserve_extensions(pod, node)
        if plan is not None:
            self._state.cache.volumes.forget(plan)
        self._forget_devices(pod, devices, unreserve=not settled)
        self._state.metrics.attempt(metrics_module.ERROR, self._state.queue.now() - entry.popped_at)
        step = self._state.queue.backoff_duration(entry.attempts)
        if not settled:
            self._state.cache.forget(pod.uid)
            self._state.queue.retry(entry)
            self.failed_nomination(pod, written=self._prebind_nominated(pod, plan, devices))
            self._state.recorder.failed_scheduling(
                pod, message, step=step, reason=events_module.SCHEDULER_ERROR
            )
        self._bind_failed(record, message, started, step)

    def _bind_failed(self, record: trace.Trace, message: str, started: float, step: float) -> None:
        """The trace line of a binding that failed before its request (PreBind, an
        extender's bind): BindFailed with ``message``, repeated no sooner than ``step``."""
        failed = dataclasses.replace(
            record,
            result=trace.BIND_FAILED,
            message=message,
            bind_ms=trace.ms(time.monotonic() - started),
        )
        self._state.tracer.emit(failed, repeat_after=step, level=logging.WARNING)

    def _unreserve_extensions(self, pod: objects.PodInfo, node: str) -> None:
        """The Python plugins' Unreserve for a pod whose binding failed."""
        profile = self._state.served.get(pod.scheduler_name)
        if profile is not None and profile.extensions:
            self._state.hooks.unreserve(profile.extensions, pod, node)

    async def _post_bind(self, pod: objects.PodInfo, node: str) -> None:
        """The Python plugins' PostBind, once the binding stands."""
        profile = self._state.served.get(pod.scheduler_name)
        if profile is not None and any(e.runs(interface.POST_BIND) for e in profile.extensions):
            await self._state.hooks.post_bind(profile.extensions, pod, node)

    def _holds_room(self, pod: objects.PodInfo) -> bool:
        """Whether a failed binding of ``pod`` is tried again in place: a member of a pod
        group that exists."""
        return self._state.cache.groups.of(pod)[1] is not None

    async def _prebind(
        self,
        entry: queue_module.Entry,
        node: str,
        plan: volumes_module.BindingPlan | None,
        devices: dynamicresources.Reserved | None,
        record: trace.Trace,
        started: float,
    ) -> bool:
        """The PreBind plugins in kube-scheduler's order: VolumeBinding's (the plan's claims
        bound; the PV controller finishes the binding), then DynamicResources' (each
        ResourceClaim allocated and reserved for the pod). On failure the assumptions go, the
        pod gets FailedScheduling with kube-scheduler's words and is retried after a backoff."""
        volumes = plan is not None and not plan.empty
        claims = devices is not None and devices.prebinds
        profile = self._state.served.get(entry.pod.scheduler_name)
        extensions = () if profile is None else profile.extensions
        binding_plugins = any(e.runs(interface.PRE_BIND) for e in extensions)
        if not volumes and not claims and not binding_plugins:
            return True
        pod = entry.pod
        nominated = await self._nominate(pod, node) if volumes or claims else False
        message = ""
        if plan is not None and volumes:
            message = await self._prebind_volumes(pod, plan)
        if not message and devices is not None and claims:
            message = await self._prebind_devices(pod, devices)
        if not message and binding_plugins:
            refusal = await self._state.hooks.pre_bind(extensions, pod, node)
            if refusal is not None:
                message = refusal.message
                if refusal.why:
                    self._state.metrics.plugin_failure(refusal.plugin, refusal.point, refusal.why)
        if not message:
            return True
        self._state.hooks.unreserve(extensions, pod, node)
        if plan is not None:
            self._state.cache.volumes.forget(plan)
        self._forget_devices(pod, devices, unreserve=True)
        if self._state.cache.state(pod.uid) is cache_module.PodState.ASSUMED:
            self._state.cache.forget(pod.uid)
        self._state.metrics.attempt(metrics_module.ERROR, self._state.queue.now() - entry.popped_at)
        step = self._state.queue.backoff_duration(entry.attempts)
        self._state.queue.retry(entry)
        self.failed_nomination(pod, written=nominated)
        self._state.recorder.failed_scheduling(pod, message, step=step)
        self._bind_failed(record, message, started, step)
        return False

    async def _prebind_volumes(self, pod: objects.PodInfo, plan: volumes_module.BindingPlan) -> str:
        """VolumeBinding's PreBind: "" when done, else the FailedScheduling message."""
        if self._volume_api is None:
            return f"{prebind.PREFIX}no API client for volume bindings"
        outcome = await prebind.prebind(
            self._volume_api,
            plan,
            prebind.Watched(
                pod_exists=lambda: self._state.cache.state(pod.uid) is not None,
                node_labels=lambda: _labels(self._state.cache.nodes.info(plan.node)),
            ),
            gate=self._may_act,
        )
        return "" if outcome.ok else outcome.message

    async def _prebind_devices(
        self, pod: objects.PodInfo, devices: dynamicresources.Reserved
    ) -> str:
        """DynamicResources' PreBind: "" when every claim is allocated and reserved for the
        pod (the writes assumed in the store until the watch shows them), else the message."""
        if self._claim_api is None:
            return f"{claimreservations.PREFIX}no API client for resource claims"
        started = time.perf_counter()
        reservations = [
            claimreservations.Reservation(
                body=claim.body,
                allocation=None
                if allocation is None
                else statuses.allocation_body(allocation, timestamp=_now(devices)),
            )
            for claim, allocation in devices.claims
        ]
        outcome = await claimreservations.reserve(
            self._claim_api, _pod_ref(pod), reservations, gate=self._may_act
        )
        store = self._state.cache.dra
        for body in outcome.written:
            store.assume_written(draobjects.parse_claim(body), pod.uid)
        if outcome.ok and devices.extended is not None:
            outcome = await self._make_extended(pod, devices.extended, timestamp=_now(devices))
        meters.count_prebind(self._state.metrics, outcome.ok, time.perf_counter() - started)
        return "" if outcome.ok else outcome.message

    async def _make_extended(
        self, pod: objects.PodInfo, extended: dynamicresources.ExtendedClaim, *, timestamp: str
    ) -> claimreservations.Outcome:
        """The claim for the pod's extended resources created, allocated and reserved, and
        named in the pod's status; what was written assumed in the store in place of the
        allocation Reserve assumed."""
        assert self._claim_api is not None
        made = extended.made
        outcome = await claimreservations.make_extended(
            self._claim_api,
            _pod_ref(pod),
            extendedresources.creation_body(pod, made.claim),
            statuses.allocation_body(extended.allocation, timestamp=timestamp),
            lambda name: extendedresources.status_patch(made.mappings, name),
            gate=self._may_act,
        )
        if outcome.made is not None:
            self._made[pod.uid] = outcome.made
        store = self._state.cache.dra
        for body in outcome.written:
            store.assume_written(draobjects.parse_claim(body), pod.uid)
            store.forget(extended.pending)  # its devices are the written claim's now
        return outcome

    def _forget_devices(
        self,
        pod: objects.PodInfo,
        devices: dynamicresources.Reserved | None,
        *,
        unreserve: bool = False,
    ) -> None:
        """DynamicResources' Unreserve: the allocations assumed for the pod forgotten, and
        (``unreserve``) its reservations taken off the claims in the background."""
        made = self._made.pop(pod.uid, None)
        if devices is None or not devices.prebinds:
            return
        store = self._state.cache.dra
        for claim, allocation in devices.claims:
            if allocation is not None:
                store.forget_unwritten(claim.key)  # a claim written stays: its devices are taken
        if devices.extended is not None:
            store.forget(devices.extended.pending)
        if not unreserve or self._claim_api is None:
            return
        claims = [
            current
            for claim, _ in devices.claims
            if (current := store.claim(claim.namespace, claim.name)) is not None
        ]
        if made is not None:
            # The claim as last written (finalizer on), if the store holds it.
            metadata = made.get("metadata") or {}
            written = store.claim(str(metadata.get("namespace")), str(metadata.get("name")))
            made = made if written is None else written.body or made
        task = asyncio.get_running_loop().create_task(
            self._unreserve(self._claim_api, _pod_ref(pod), claims, made)
        )
        self._unreserves.add(task)
        task.add_done_callback(self._unreserves.discard)

    @staticmethod
    async def _unreserve(
        api: claimreservations.ExtendedClaimApi,
        pod: claimreservations.PodRef,
        claims: list[draobjects.ResourceClaim],
        made: Mapping[str, Any] | None = None,
    ) -> None:
        for error in await claimreservations.unreserve(api, pod, claims):
            logger.warning("%s", error)
        if made is not None:
            failed = await claimreservations.delete_extended(api, made)
            if failed is not None:
                logger.warning("deleting the claim made for %s: %s", pod.name, failed)

    async def _nominate(self, pod: objects.PodInfo, node: str) -> bool:
        """Where NominatedNodeNameForExpectation is on, tell other components (the cluster
        autoscaler) the pod is about to be bound to ``node`` before a PreBind that has work to
        do, as kube-scheduler's binding cycle does; a failed write is logged, the binding goes
        on. Returns whether the pod is (or already was) nominated there."""
        profile = self._state.served.get(pod.scheduler_name)
        if profile is None or not profile.kube.gate(NOMINATION_GATE):
            return False
        if pod.nominated_node == node:
            return True  # updatePod sends nothing when the status already says so
        return await self._nominations.nominate(pod, node)

    def _prebind_nominated(
        self,
        pod: objects.PodInfo,
        plan: volumes_module.BindingPlan | None,
        devices: dynamicresources.Reserved | None,
    ) -> bool:
        """Whether this binding cycle nominated the pod before a PreBind with work to do."""
        profile = self._state.served.get(pod.scheduler_name)
        if profile is None or not profile.kube.gate(NOMINATION_GATE):
            return False
        return (plan is not None and not plan.empty) or (devices is not None and devices.prebinds)

    def failed_nomination(self, queued: objects.PodInfo, *, written: bool) -> None:
        """A binding cycle, or a scheduling cycle with an error, failed and the pod is queued
        again (handleBindingCycleError, schedulingCycle's errors): its nomination, a
        preemption's or the one written before its PreBind (``written``), is
        dropped here, and cleared in its status when the pod as the release compares it names
        a node (clearNominatedNode; updatePod): from v1.36 the newest the watch reported, a
        nomination this cycle wrote included; in v1.35 and v1.34 the pod as it was queued.
        v1.34 with NominatedNodeNameForExpectation on passes no nominating info: the
        nomination follows the pod's status."""
        profile = self._state.served.get(queued.scheduler_name)
        if profile is None:
            return
        kube = profile.kube
        newest = self._state.queue.pod(queued.uid) or queued
        if kube.gate(NOMINATION_GATE) and not kube.failure_clears_gated_nomination:
            if newest.nominated_node:
                self._state.nominations.nominate(newest, newest.nominated_node)
            return
        self._state.nominations.remove(queued.uid)
        if kube.failure_rereads_nomination:
            named = bool(newest.nominated_node) or written
        else:
            named = bool(queued.nominated_node)
        if named:
            self._nominations.clear_nomination(queued)

    def _step_back(self, entry: queue_module.Entry) -> None:
        """Undo the assumption of a pod whose binding was not (knowingly) made."""
        pod = entry.pod
        self._state.recorder.forget(pod.uid)
        if self._state.cache.state(pod.uid) is cache_module.PodState.ASSUMED:
            self._state.cache.forget(pod.uid)
            self._state.queue.retry(entry)

    async def stand_down(self, alongside: Iterable[asyncio.Task[None]] = ()) -> int:
        """Cancel the binds in flight (leadership lost) and wait until each has stepped back.
        The tasks ``alongside`` (preemptions being carried out) are cancelled and awaited with
        them, so all have settled before the queue recalls the batch being decided. Returns
        how many tasks were cancelled."""
        tasks = [*self._binds, *alongside]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)

    async def drain(self) -> None:
        """Wait for the binds in flight and their unreserves (shutdown, tests)."""
        while self._binds or self._unreserves:
            await asyncio.gather(*self._binds, *self._unreserves, return_exceptions=True)


NOMINATION_GATE = "NominatedNodeNameForExpectation"


def _labels(node: objects.NodeInfo | None) -> Mapping[str, str] | None:
    return None if node is None else node.labels


def _now(devices: dynamicresources.Reserved) -> str:
    """allocationTimestamp, where the release writes it."""
    return statuses.timestamp(datetime.datetime.now(datetime.UTC)) if devices.stamped else ""


def _pod_ref(pod: objects.PodInfo) -> claimreservations.PodRef:
    return claimreservations.PodRef(namespace=pod.namespace, name=pod.name, uid=pod.uid)
