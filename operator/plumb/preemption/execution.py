"""The executor: a preemption's writes, the preemptor's nomination and each victim's eviction.

kube-scheduler's Executor (executor.go) without its in-memory preemption of waiting pods: the
preemptor's status.nominatedNodeName, awaited since no victim is touched before it is written;
a nomination cleared in the background; and each victim preempted as PreemptPod does, the
DisruptionTarget condition, then the deletion (uid-guarded), then the Preempted event.

Each write goes through the recorder's ``events.Writes`` (bounded, gated by leadership, a
refusal logged, never raised) to the recorder's API client; the event is the recorder's. The
writes the loop must wait for (``nominate``, ``preempt``) are awaited and say whether they were
done.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, runtime_checkable

from plumb import events
from plumb.backend.records import objects
from plumb.backend.records.groupobjects import PodGroup
from plumb.k8s import client as k8s_client

logger = logging.getLogger(__name__)

# A preemption victim's condition, as kube-scheduler v1.34 writes it
# (pkg/scheduler/framework/preemption/preemption.go, NewEvaluator's PreemptPod).
DISRUPTION_TARGET = objects.DISRUPTION_TARGET
PREEMPTION_BY_SCHEDULER = objects.PREEMPTION_BY_SCHEDULER
PREEMPTION_MESSAGE = "{scheduler}: preempting to accommodate a higher priority {preemptor}"
# kube-scheduler's preemptor types (fwk.PodGroupKeyType for a PodGroup), in the message above.
POD_PREEMPTOR, GROUP_PREEMPTOR = "pod", "podgroup"


@runtime_checkable
class PodsApi(events.EventsApi, Protocol):
    """The recorder's API and pod deletion, which ``preempt`` needs (k8s.client.ApiClient)."""

    async def delete_pod(
        self, *, namespace: str, name: str, uid: str
    ) -> k8s_client.ApiResponse: ...


class Executor:
    """Nominates a preemptor's node and preempts its victims, through ``recorder``'s API client
    and writes (only while their gate allows); the recorder posts the Preempted event."""

    def __init__(self, recorder: events.Recorder) -> None:
        self._recorder = recorder
        self._api = recorder.api
        self._writes = recorder.writes

    async def nominate(self, pod: objects.PodInfo, node: str) -> bool:
        """Set the preemptor's status.nominatedNodeName to ``node``; awaited, since its victims
        are deleted only once the nomination is written. False when this replica may not act
        or the API server refused (logged)."""
        if not self._writes.may_act("nominatedNodeName", pod):
            return False
        patch = _status_patch(pod, {"nominatedNodeName": node})
        response = await self._writes.send(
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
        self._writes.spawn(self._clear_nomination(pod))

    async def preempt(self, victim: objects.PodInfo, preemptor: objects.PodInfo, node: str) -> bool:
        """Preempt one victim for a pod: ``evict``, then the Preempted event."""
        evicted = await self.evict(victim, preemptor.scheduler_name, POD_PREEMPTOR, node)
        if evicted is True:
            self._recorder.preempted(victim, preemptor, node)
        return evicted is not False

    async def preempt_for_group(
        self, victim: objects.PodInfo, group: PodGroup, scheduler_name: str
    ) -> bool:
        """Preempt one victim for a pod group (the whole cluster its domain, "cluster" its
        node, as kube-scheduler's PodGroup preemption names it): ``evict``, then the
        Preempted event, related to the PodGroup."""
        evicted = await self.evict(victim, scheduler_name, GROUP_PREEMPTOR, "cluster")
        if evicted is True:
            self._recorder.preempted_by_group(victim, group)
        return evicted is not False

    async def evict(
        self, victim: objects.PodInfo, scheduler_name: str, preemptor: str, node: str
    ) -> bool | None:
        """Evict one victim as kube-scheduler's PreemptPod does: the DisruptionTarget
        condition ("<scheduler>: preempting to accommodate a higher priority <preemptor>"),
        then the deletion (only of the pod with the victim's uid).

        True when the victim is deleted; None when it was gone already (404, or the name now
        belongs to another pod: see ``_gone``), and then, as in kube-scheduler, no event is
        posted. False when this replica may not act, or the API server refused the condition
        or the deletion (logged): kube-scheduler does not delete a victim whose condition it
        could not write."""
        subject = f"Pod {victim.key}"
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": PREEMPTION_BY_SCHEDULER,
            "message": PREEMPTION_MESSAGE.format(scheduler=scheduler_name, preemptor=preemptor),
            "lastProbeTime": None,
            "lastTransitionTime": events.timestamp("seconds"),
        }
        if not isinstance(self._api, PodsApi):
            logger.error("could not preempt %s: this API client cannot delete pods", subject)
            return False
        if not self._writes.may_act("DisruptionTarget condition", victim):
            return False
        patched = await self._writes.send(
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
            return None
        if not patched.ok:
            return False
        if not self._writes.may_act("deletion", victim):
            return False
        deleted = await self._writes.send(
            "deletion",
            subject,
            self._api.delete_pod(namespace=victim.namespace, name=victim.name, uid=victim.uid),
            expected=_gone,
        )
        if deleted is None:
            return False
        if _gone(deleted):
            logger.info("preemption victim %s is gone already", victim.key)
            return None
        if not deleted.ok:
            return False
        logger.info("preempted %s on %s for a %s", victim.key, node, preemptor)
        return True

    async def _clear_nomination(self, pod: objects.PodInfo) -> None:
        # null removes the field (a strategic merge patch, like a JSON merge patch).
        patch = _status_patch(pod, {"nominatedNodeName": None})
        await self._writes.send(
            "nominatedNodeName",
            f"Pod {pod.key}",
            self._api.patch_pod_status(namespace=pod.namespace, name=pod.name, patch=patch),
            expected=_gone,
        )


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
