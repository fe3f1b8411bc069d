"""The condition kube-scheduler writes on an upstream PodGroup after its first cycle:
PodGroupInitiallyScheduled, True (reason Scheduled) once the group's minimum was placed,
False (reason Unschedulable, the group's message) while it cannot be; never turned back from
True, and not written again when it says the same (schedule_one_podgroup.go)."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from plumb.backend.records import groupobjects
from plumb.backend.records.groupobjects import PodGroup
from plumb.events import Writes, timestamp
from plumb.k8s import client as k8s_client

logger = logging.getLogger("plumb.events")

TRUE, FALSE = "True", "False"


class GroupStatusApi(Protocol):
    """The part of the API client that writes a PodGroup's status (k8s.client.ApiClient)."""

    async def patch_pod_group_status(
        self, *, namespace: str, name: str, patch: dict[str, Any]
    ) -> k8s_client.ApiResponse: ...


class GroupConditions:
    """Writes PodGroupInitiallyScheduled through the recorder's ``writes`` (None: not at
    all, as in tests without an API server)."""

    def __init__(self, api: GroupStatusApi | None, writes: Writes) -> None:
        self._api = api
        self._writes = writes
        # What was last written per group uid, so that the same condition is not sent again
        # before the watch shows it.
        self._written: dict[str, tuple[str, str, str]] = {}

    def initially_scheduled(
        self, group: PodGroup, refused: str | None, *, error: bool = False
    ) -> None:
        """The group's cycle ended: placed (``refused`` None) or refused with that message
        (``error``: a scheduler error, reason SchedulerError, rather than Unschedulable)."""
        if self._api is None or group.api != groupobjects.UPSTREAM:
            return
        if refused is None:
            wanted = (TRUE, groupobjects.SCHEDULED_REASON, "")
        elif error:
            wanted = (FALSE, groupobjects.ERROR_REASON, refused)
        else:
            wanted = (FALSE, groupobjects.UNSCHEDULABLE_REASON, refused)
        current = self._written.get(group.uid) or group.initially_scheduled
        if current is not None and (current == wanted or current[0] == TRUE):
            return  # the same, or True already: kube-scheduler never turns it back
        self._written[group.uid] = wanted
        status, reason, message = wanted
        condition = {
            "type": groupobjects.INITIALLY_SCHEDULED,
            "status": status,
            "reason": reason,
            "message": message,
            "observedGeneration": group.generation,
            "lastTransitionTime": timestamp("seconds"),
        }
        patch = {"status": {"conditions": [condition]}}
        self._writes.spawn(self._send(self._api, group, patch))

    def forget(self, uid: str) -> None:
        """The PodGroup is gone."""
        self._written.pop(uid, None)

    async def _send(self, api: GroupStatusApi, group: PodGroup, patch: dict[str, Any]) -> None:
        await self._writes.send(
            f"condition {groupobjects.INITIALLY_SCHEDULED}",
            f"PodGroup {group.key}",
            api.patch_pod_group_status(namespace=group.namespace, name=group.name, patch=patch),
        )
