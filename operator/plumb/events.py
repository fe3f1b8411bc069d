"""Telling users what happened to a pod: events and the PodScheduled condition, as kube-scheduler;
and the writes of a preemption: the preemptor's nominated node, each victim's DisruptionTarget
condition, deletion and Preempted event.

Reports are fire-and-forget tasks, bounded in number; a failed write is logged, never raised into
the scheduling loop. The preemption writes the loop must wait for (``nominate``, ``preempt``) are
awaited and say whether they were done.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from plumb.backend import objects, queue
from plumb.k8s import client as k8s_client
from plumb.k8s import gates

logger = logging.getLogger(__name__)

REPORTING_CONTROLLER = "plumb"
POLICY_API_VERSION = "scheduling.plumb.dev/v1alpha1"
# events.k8s.io/v1 refuses a note longer than 1 kB.
MAX_NOTE = 1024
# A preemption victim's condition, as kube-scheduler v1.34 writes it
# (pkg/scheduler/framework/preemption/preemption.go, NewEvaluator's PreemptPod).
DISRUPTION_TARGET = objects.DISRUPTION_TARGET
PREEMPTION_BY_SCHEDULER = objects.PREEMPTION_BY_SCHEDULER
PREEMPTION_MESSAGE = "{scheduler}: preempting to accommodate a higher priority pod"
PREEMPTED_NOTE = "Preempted by pod {uid} on node {node}"
# An event is tried up to this many times, waiting 1 s, 2 s, 4 s ... (at most 10 s) between.
EVENT_TRIES = 6
EVENT_RETRY_FIRST = 1.0
EVENT_RETRY_MAX = 10.0
UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"
"""PodScheduled=False reasons: no node fits; the scheduler itself failed (kube-scheduler's)."""


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


@runtime_checkable
class PodsApi(EventsApi, Protocol):
    """The recorder's API and pod deletion, which ``preempt`` needs (k8s.client.ApiClient)."""

    async def delete_pod(
        self, *, namespace: str, name: str, uid: str
    ) -> k8s_client.ApiResponse: ...


class Recorder:
    """Posts Scheduled / FailedScheduling events and patches the PodScheduled condition; nominates
    a preemptor's node and preempts its victims.

    Only while ``gate`` allows: a replica that lost the lease does not speak for the scheduler.
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
        self._api = api
        self._gate = gate
        self._sleep = sleep
        self._draining = False
        self._wake = asyncio.Event()  # set while draining: a retry's wait ends at once
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
        self._spawn(self._event(_ref(pod), "Warning", "FailedScheduling", "Scheduling", message))
        if pod.scheduled_condition != ("False", reason, message):
            self._spawn(self._unschedulable_condition(pod, message, reason))

    async def nominate(self, pod: objects.PodInfo, node: str) -> bool:
        """Set the preemptor's status.nominatedNodeName to ``node``; awaited, since its victims
        are deleted only once the nomination is written. False when this replica may not act
        or the API server refused (logged)."""
        if not self._may_act("nominatedNodeName", pod):
            return False
        patch = _status_patch(pod, {"nominatedNodeName": node})
        response = await self._write(
            "nominatedNodeName",
            f"Pod {pod.key}",
            self._api.patch_pod_status(namespace=pod.namespace, name=pod.name, patch=patch),
            expected=_gone,
        )
        if response is not None and _gone(response):
            logger.info("not nominating %s for %s: the pod is gone", node, pod.key)
        return response is not None and response.ok

    def clear_nomination(self, pod: objects.PodInfo) -> None:
        """Remove the pod's status.nominatedNodeName (kube-scheduler's ClearNominatedNodeName),
        in the background."""
        self._spawn(self._clear_nomination(pod))

    async def preempt(self, victim: objects.PodInfo, preemptor: objects.PodInfo, node: str) -> bool:
        """Preempt one victim as kube-scheduler's PreemptPod does: the DisruptionTarget
        condition, then the deletion (only of the pod with the victim's uid), then a Preempted
        event regarding the victim and related to the preemptor.

        True when the victim is deleted or was gone already (404, or the name now belongs to
        another pod: see ``_gone``); then, as in kube-scheduler, no event is posted. False when this
        replica may not act, or the API server refused the condition or the deletion (logged):
        kube-scheduler does not delete a victim whose condition it could not write."""
        subject = f"Pod {victim.key}"
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": PREEMPTION_MESSAGE.format(scheduler=preemptor.scheduler_name),
            "lastProbeTime": None,
            "lastTransitionTime": _now("seconds"),
        }
        if not isinstance(self._api, PodsApi):
            logger.error("could not preempt %s: this API client cannot delete pods", subject)
            return False
        if not self._may_act("DisruptionTarget condition", victim):
            return False
        patched = await self._write(
            "DisruptionTarget condition",
            subject,
            self._api.patch_pod_status(
                namespace=victim.namespace,
                name=victim.name,
                patch=_status_patch(victim, {"conditions": [condition]}),
            ),
            expected=_gone,
        )
        if patched is None:
            return False
        if _gone(patched):
            logger.info("preemption victim %s is gone already", victim.key)
            return True
        if not patched.ok:
            return False
        if not self._may_act("deletion", victim):
            return False
        deleted = await self._write(
            "deletion",
            subject,
            self._api.delete_pod(namespace=victim.namespace, name=victim.name, uid=victim.uid),
            expected=_gone,
        )
        if deleted is None:
            return False
        if _gone(deleted):
            logger.info("preemption victim %s is gone already", victim.key)
            return True
        if not deleted.ok:
            return False
        logger.info(
            "preempted %s on %s for %s (uid %s)", victim.key, node, preemptor.key, preemptor.uid
        )
        note = PREEMPTED_NOTE.format(uid=preemptor.uid, node=node)
        self._spawn(
            self._event(
                _ref(victim), "Normal", "Preempted", "Preempting", note, related=_ref(preemptor)
            )
        )
        return True

    def forget(self, uid: str) -> None:
        """The pod was scheduled or deleted: its failure history no longer matters."""
        self._last_failure.pop(uid, None)

    async def drain(self) -> None:
        """Wait for the writes already started (used at shutdown and by tests); events waiting
        to be tried again give up instead of holding a shutdown for their backoff."""
        self._draining = True
        self._wake.set()
        try:
            while self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
        finally:
            self._draining = False
            self._wake.clear()

    def _may_act(self, what: str, pod: objects.PodInfo) -> bool:
        if self._gate():
            return True
        logger.debug("%s for Pod %s not written: this replica is not the leader", what, pod.key)
        return False

    def _spawn(self, coroutine: Any) -> None:
        if not self._gate():
            coroutine.close()  # never awaited: nothing is sent
            logger.debug("report dropped: this replica is not the leader")
            return
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
            "eventTime": _now(),
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
            last = attempt == EVENT_TRIES or self._draining or not self._gate()
            response = await self._write(
                "event",
                subject,
                self._api.create_event(namespace=namespace, event=event),
                expected=lambda r: r.status in (404, 409),
                quiet=not last,
            )
            if last or (response is not None and not _retryable(response)):
                return
            await self._pause(min(EVENT_RETRY_FIRST * 2 ** (attempt - 1), EVENT_RETRY_MAX))

    async def _pause(self, seconds: float) -> None:
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

    async def _clear_nomination(self, pod: objects.PodInfo) -> None:
        # null removes the field (a strategic merge patch, like a JSON merge patch).
        patch = _status_patch(pod, {"nominatedNodeName": None})
        await self._write(
            "nominatedNodeName",
            f"Pod {pod.key}",
            self._api.patch_pod_status(namespace=pod.namespace, name=pod.name, patch=patch),
            expected=_gone,
        )

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
            "lastTransitionTime": _now("seconds"),
        }
        patch = {"status": {"conditions": [condition]}}
        await self._write(
            "PodScheduled condition",
            f"Pod {pod.key}",
            self._api.patch_pod_status(namespace=pod.namespace, name=pod.name, patch=patch),
        )

    async def _write(
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


def _retryable(response: k8s_client.ApiResponse) -> bool:
    """An answer worth another try: throttled, or the server's own failure."""
    return response.status == 429 or response.status >= 500


_UID_PRECONDITION = ("UID in the precondition", "UID in precondition")


def _gone(response: k8s_client.ApiResponse) -> bool:
    """Whether the API server said the pod addressed is no longer there: 404; or the name now
    belongs to another pod, which a deletion's uid precondition answers with 409 and a patch's
    metadata.uid with 422 (metadata.uid: field is immutable)."""
    if response.status == 404:
        return True
    if response.status == 409:
        # Not any conflict: the uid precondition's, worded by the registry ("the UID in the
        # precondition (...) does not match the UID in record") or by the storage ("Precondition
        # failed: UID in precondition: ...").
        return any(words in response.message() for words in _UID_PRECONDITION)
    if response.status != 422 or not isinstance(response.body, dict):
        return False
    causes = (response.body.get("details") or {}).get("causes") or []
    return any(isinstance(c, dict) and c.get("field") == "metadata.uid" for c in causes)


def _status_patch(pod: objects.PodInfo, status: dict[str, Any]) -> dict[str, Any]:
    """A strategic merge patch of the pod's status, refused by the API server (422, metadata.uid
    is immutable) when the pod of that name is no longer the one with the pod's uid."""
    return {"metadata": {"uid": pod.uid}, "status": status}


def _ref(pod: objects.PodInfo) -> dict[str, str]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": pod.uid,
    }
