"""Telling users what happened to a pod: events and the PodScheduled condition, as kube-scheduler.

Writes are fire-and-forget tasks, bounded in number; a failed write is logged, never raised into
the scheduling loop.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from plumb.backend import objects, queue
from plumb.k8s import client as k8s_client

logger = logging.getLogger(__name__)

REPORTING_CONTROLLER = "plumb"
POLICY_API_VERSION = "scheduling.plumb.dev/v1alpha1"
# events.k8s.io/v1 refuses a note longer than 1 kB.
MAX_NOTE = 1024


def _now(precision: str = "microseconds") -> str:
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


class Gate(Protocol):
    """Whether this replica may write now (leader.Elector.may_act): only the leader reports."""

    def __call__(self) -> bool: ...


def _always() -> bool:
    return True


class Recorder:
    """Posts Scheduled / FailedScheduling events and patches the PodScheduled condition.

    Only while ``gate`` allows: a replica that lost the lease does not speak for the scheduler.
    """

    def __init__(
        self,
        api: EventsApi,
        *,
        instance: str,
        concurrency: int = 32,
        clock: Callable[[], float] = time.monotonic,
        gate: Gate = _always,
    ) -> None:
        self._api = api
        self._gate = gate
        self._instance = instance[:128]
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._clock = clock
        self._last_failure: dict[str, tuple[str, float]] = {}

    def scheduled(self, pod: objects.PodInfo, node: str) -> None:
        note = f"Successfully assigned {pod.namespace}/{pod.name} to {node}"
        self._spawn(self._event(_ref(pod), "Normal", "Scheduled", "Binding", note))

    def deviated(self, pod: objects.PodInfo, note: str) -> None:
        """PolicyDeviation: the pod was placed beyond a policy's maxSkew, on its budget."""
        self._spawn(self._event(_ref(pod), "Warning", "PolicyDeviation", "Scheduling", note))

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
        self._spawn(self._event(regarding, kind, reason, "Reconciling", note))

    def failed_scheduling(self, pod: objects.PodInfo, message: str, *, attempts: int = 1) -> None:
        """FailedScheduling, unless the same message went out within this pod's backoff step."""
        now = self._clock()
        last = self._last_failure.get(pod.uid)
        step = queue.SchedulingQueue.backoff_duration(attempts)
        if last is not None and last[0] == message and now - last[1] < step:
            return
        self._last_failure[pod.uid] = (message, now)
        self._spawn(self._event(_ref(pod), "Warning", "FailedScheduling", "Scheduling", message))
        if pod.scheduled_condition != ("False", "Unschedulable", message):
            self._spawn(self._unschedulable_condition(pod, message))

    def forget(self, uid: str) -> None:
        """The pod was scheduled or deleted: its failure history no longer matters."""
        self._last_failure.pop(uid, None)

    async def drain(self) -> None:
        """Wait for the writes already started (used at shutdown and by tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, coroutine: Any) -> None:
        if not self._gate():
            coroutine.close()  # never awaited: nothing is sent
            logger.debug("report dropped: this replica is not the leader")
            return
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _event(
        self, regarding: dict[str, str], kind: str, reason: str, action: str, note: str
    ) -> None:
        namespace, name = regarding["namespace"], regarding["name"]
        event = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
            "eventTime": _now(),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": action,
            "reason": reason,
            "type": kind,
            "note": note[:MAX_NOTE],
            "regarding": regarding,
        }
        subject = f"{regarding['kind']} {namespace}/{name}"
        await self._write(
            "event", subject, self._api.create_event(namespace=namespace, event=event)
        )

    async def _unschedulable_condition(self, pod: objects.PodInfo, message: str) -> None:
        # cluster-autoscaler reads PodScheduled=False/Unschedulable to decide on scale-up.
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": _now("seconds"),
        }
        patch = {"status": {"conditions": [condition]}}
        await self._write(
            "PodScheduled condition",
            f"Pod {pod.key}",
            self._api.patch_pod_status(namespace=pod.namespace, name=pod.name, patch=patch),
        )

    async def _write(self, what: str, subject: str, request: Any) -> None:
        async with self._slots:
            try:
                response: k8s_client.ApiResponse = await request
            except k8s_client.TransportError as error:
                logger.warning("could not write %s for %s: %s", what, subject, error)
                return
        if not response.ok and response.status != 404:
            logger.warning(
                "could not write %s for %s: HTTP %s: %s",
                what,
                subject,
                response.status,
                response.message(),
            )


def _ref(pod: objects.PodInfo) -> dict[str, str]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": pod.uid,
    }
