"""Telling users what happened to a pod: events and the PodScheduled condition, as kube-scheduler.

Reports are fire-and-forget tasks, bounded in number; a failed write is logged, never raised into
the scheduling loop. ``Writes`` is how they are sent: at most so many at a time, only while this
replica may act, each refusal logged. The preemption executor (preemption/execution.py) sends its
writes the same way, through the recorder's ``Writes``, and has the recorder post the Preempted
event.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from plumb.backend import queue
from plumb.backend.records import groupobjects, objects
from plumb.k8s import client as k8s_client
from plumb.k8s import gates

logger = logging.getLogger(__name__)

REPORTING_CONTROLLER = "plumb"
POLICY_API_VERSION = "scheduling.plumb.dev/v1alpha1"
# events.k8s.io/v1 refuses a note longer than 1 kB.
MAX_NOTE = 1024
PREEMPTED_NOTE = "Preempted by pod {uid} on node {node}"
PREEMPTED_BY_GROUP_NOTE = "Preempted by podgroup {uid} on node cluster"
# An event is tried up to this many times, waiting 1 s, 2 s, 4 s ... (at most 10 s) between.
EVENT_TRIES = 6
EVENT_RETRY_FIRST = 1.0
EVENT_RETRY_MAX = 10.0
UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"
"""PodScheduled=False reasons: no node fits; the scheduler itself failed (kube-scheduler's)."""


def timestamp(precision: str = "microseconds") -> str:
    """The time now in UTC, as the API server writes it ("...Z")."""
    now = datetime.datetime.now(datetime.UTC)
    return now.isoformat(timespec=precision).replace("+00:00", "Z")


class EventsApi(Protocol):
    """The part of the API client the recorder uses (k8s.client.ApiClient; a fake in tests)."""

    async def create_event(
        self, *, namespace: str, event: dict[str, Any]
    ) -> k8s_client.ApiResponse: ...

    async def patch_pod_status(
        self, *, namespace: str, name: str, patch: dict[str, Any]
    ) -> k8s_client.ApiResponse: ...


class Writes:
    """How the recorder sends its writes to the API server: at most ``concurrency`` in flight,
    only while ``gate`` allows (a replica that lost the lease does not speak for the scheduler),
    a refusal logged rather than raised. Background writes are tasks that ``drain`` waits for;
    one waiting to be tried again gives up once a drain begins."""

    def __init__(
        self,
        *,
        concurrency: int = 32,
        gate: gates.Gate = gates.always,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._gate = gate
        self._sleep = sleep
        self._draining = False
        self._wake = asyncio.Event()  # set while draining: a retry's wait ends at once
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def draining(self) -> bool:
        """Whether a drain is under way: a write about to be retried should give up instead."""
        return self._draining

    def allowed(self) -> bool:
        """Whether this replica may write now (the gate's answer)."""
        return self._gate()

    def may_act(self, what: str, pod: objects.PodInfo) -> bool:
        """``allowed``, with a debug line naming the write to ``pod`` that is not sent."""
        if self._gate():
            return True
        logger.debug("%s for Pod %s not written: this replica is not the leader", what, pod.key)
        return False

    def spawn(self, coroutine: Any) -> None:
        """Run ``coroutine`` (a report) in the background, or drop it unsent when not allowed."""
        if not self._gate():
            coroutine.close()  # never awaited: nothing is sent
            logger.debug("report dropped: this replica is not the leader")
            return
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send(
        self,
        what: str,
        subject: str,
        request: Any,
        *,
        expected: Callable[[k8s_client.ApiResponse], bool] = lambda r: r.status == 404,
        quiet: bool = False,
    ) -> k8s_client.ApiResponse | None:
        """Send one write; a refusal is logged unless ``expected`` of it (at debug level when
        ``quiet``: it will be tried again). None when the request never got an answer."""
        level = logging.DEBUG if quiet else logging.WARNING
        async with self._slots:
            try:
                response: k8s_client.ApiResponse = await request
            except k8s_client.TransportError as error:
                logger.log(level, "could not write %s for %s: %s", what, subject, error)
                return None
        if not response.ok and not expected(response):
            logger.log(
                level,
                "could not write %s for %s: HTTP %s: %s",
                what,
                subject,
                response.status,
                response.message(),
            )
        return response

    async def pause(self, seconds: float) -> None:
        """Waits before a retry, or until a drain begins."""
        waits = [
            asyncio.ensure_future(self._sleep(seconds)),
            asyncio.ensure_future(self._wake.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    async def drain(self) -> None:
        """Wait for the background writes already started; those waiting to be tried again give
        up instead of holding a shutdown for their backoff."""
        self._draining = True
        self._wake.set()
        try:
            while self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
        finally:
            self._draining = False
            self._wake.clear()


class Recorder:
    """Posts the Scheduled, FailedScheduling, PolicyDeviation, Preempted and SchedulingPolicy
    events and patches the PodScheduled condition, through ``writes`` (only while ``gate``
    allows).

    ``api`` and ``writes`` are the preemption executor's too (preemption/execution.py).
    """

    def __init__(
        self,
        api: EventsApi,
        *,
        instance: str,
        concurrency: int = 32,
        clock: Callable[[], float] = time.monotonic,
        gate: gates.Gate = gates.always,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.api = api
        self.writes = Writes(concurrency=concurrency, gate=gate, sleep=sleep)
        self._instance = instance[:128]
        self._clock = clock
        self._last_failure: dict[str, tuple[str, float]] = {}

    def scheduled(self, pod: objects.PodInfo, node: str) -> None:
        note = f"Successfully assigned {pod.namespace}/{pod.name} to {node}"
        self.writes.spawn(self._event(_ref(pod), "Normal", "Scheduled", "Binding", note))

    def deviated(self, pod: objects.PodInfo, note: str) -> None:
        """PolicyDeviation: the pod was placed beyond a policy's maxSkew, on its budget."""
        self.writes.spawn(self._event(_ref(pod), "Warning", "PolicyDeviation", "Scheduling", note))

    def policy_event(
        self, *, namespace: str, name: str, uid: str, kind: str, reason: str, note: str
    ) -> None:
        """An event regarding a SchedulingPolicy (a revert, for one)."""
        regarding = {
            "apiVersion": POLICY_API_VERSION,
            "kind": "SchedulingPolicy",
            "namespace": namespace,
            "name": name,
            "uid": uid,
        }
        self.writes.spawn(self._event(regarding, kind, reason, "Reconciling", note))

    def failed_scheduling(
        self,
        pod: objects.PodInfo,
        message: str,
        *,
        step: float = queue.INITIAL_BACKOFF,
        reason: str = UNSCHEDULABLE,
    ) -> None:
        """FailedScheduling, unless the same message went out within ``step`` (the pod's
        backoff); the PodScheduled=False condition with ``reason`` (Unschedulable, or
        SchedulerError for plumb's own failure, as kube-scheduler)."""
        now = self._clock()
        last = self._last_failure.get(pod.uid)
        if last is not None and last[0] == message and now - last[1] < step:
            return
        self._last_failure[pod.uid] = (message, now)
        self.writes.spawn(
            self._event(_ref(pod), "Warning", "FailedScheduling", "Scheduling", message)
        )
        if pod.scheduled_condition != ("False", reason, message):
            self.writes.spawn(self._unschedulable_condition(pod, message, reason))

    def preempted(self, victim: objects.PodInfo, preemptor: objects.PodInfo, node: str) -> None:
        """Preempted, regarding the victim (deleted) and related to the preemptor."""
        note = PREEMPTED_NOTE.format(uid=preemptor.uid, node=node)
        self.writes.spawn(
            self._event(
                _ref(victim), "Normal", "Preempted", "Preempting", note, related=_ref(preemptor)
            )
        )

    def preempted_by_group(self, victim: objects.PodInfo, group: groupobjects.PodGroup) -> None:
        """Preempted, regarding the victim (deleted) and related to the PodGroup whose members
        take its room (kube-scheduler names the whole cluster as the node)."""
        note = PREEMPTED_BY_GROUP_NOTE.format(uid=group.uid)
        related = {
            "apiVersion": f"{groupobjects.UPSTREAM}/{groupobjects.UPSTREAM_VERSION}",
            "kind": "PodGroup",
            "namespace": group.namespace,
            "name": group.name,
            "uid": group.uid,
        }
        self.writes.spawn(
            self._event(_ref(victim), "Normal", "Preempted", "Preempting", note, related=related)
        )

    def forget(self, uid: str) -> None:
        """The pod was scheduled or deleted: its failure history no longer matters."""
        self._last_failure.pop(uid, None)

    async def drain(self) -> None:
        """Wait for the writes already started (used at shutdown and by tests); events waiting
        to be tried again give up instead of holding a shutdown for their backoff."""
        await self.writes.drain()

    async def _event(
        self,
        regarding: dict[str, str],
        kind: str,
        reason: str,
        action: str,
        note: str,
        *,
        related: dict[str, str] | None = None,
    ) -> None:
        namespace, name = regarding["namespace"], regarding["name"]
        event = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
            "eventTime": timestamp(),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": action,
            "reason": reason,
            "type": kind,
            "note": note[:MAX_NOTE],
            "regarding": regarding,
        }
        if related is not None:
            event["related"] = related
        subject = f"{regarding['kind']} {namespace}/{name}"
        # Tried again on a lost connection, a 429 or a 5xx, as client-go's event sink does (up
        # to 12 tries there): an API server blip must not cost `kubectl describe` its events. A
        # 409 means an earlier try was stored although its answer was lost: done.
        for attempt in range(1, EVENT_TRIES + 1):
            last = attempt == EVENT_TRIES or self.writes.draining or not self.writes.allowed()
            response = await self.writes.send(
                "event",
                subject,
                self.api.create_event(namespace=namespace, event=event),
                expected=lambda r: r.status in (404, 409),
                quiet=not last,
            )
            if last or (response is not None and not _retryable(response)):
                return
            await self.writes.pause(min(EVENT_RETRY_FIRST * 2 ** (attempt - 1), EVENT_RETRY_MAX))

    async def _unschedulable_condition(
        self, pod: objects.PodInfo, message: str, reason: str
    ) -> None:
        # cluster-autoscaler reads PodScheduled=False/Unschedulable to decide on scale-up.
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": timestamp("seconds"),
        }
        patch = {"status": {"conditions": [condition]}}
        await self.writes.send(
            "PodScheduled condition",
            f"Pod {pod.key}",
            self.api.patch_pod_status(namespace=pod.namespace, name=pod.name, patch=patch),
        )


def _retryable(response: k8s_client.ApiResponse) -> bool:
    """An answer worth another try: throttled, or the server's own failure."""
    return response.status == 429 or response.status >= 500


def _ref(pod: objects.PodInfo) -> dict[str, str]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": pod.uid,
    }
