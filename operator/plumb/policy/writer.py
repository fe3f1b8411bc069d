"""Coalescing status writer: however often a policy changes, at most one status PATCH per policy
per interval.

Callers ``mark_dirty`` a policy whenever something its status shows changed (a pod placed, the
budget spent, a spec applied). ``run`` wakes when something is dirty, builds each dirty
policy's status once through the given ``StatusSource`` and sends only what differs from what
it last wrote, as a JSON merge patch on the status subresource (keys no longer wanted are sent
as null, which deletes them). Then it sleeps ``interval`` seconds before the next round, so
under load a policy's status is written about once a second, not once per scheduled pod.

Outcomes: 2xx records what was written; 404 means the policy is gone, so it is dropped; any
other answer, or no answer, leaves it dirty for the next round. A failing ``StatusSource`` is
logged and skipped. Nothing here raises into the caller's loop except cancellation.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol
from urllib.parse import quote

from plumb.k8s import client as k8s_client
from plumb.policy import spec as spec_module

__all__ = ["MERGE_PATCH", "StatusApi", "StatusSource", "StatusWriter", "merge_patch", "status_path"]

logger = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
GROUP_VERSION = "scheduling.plumb.dev/v1alpha1"
PLURAL = "schedulingpolicies"


class StatusApi(Protocol):
    """The part of the API client the writer uses (k8s.client.ApiClient; a fake in tests)."""

    async def request(
        self, method: str, path: str, *, body: Any = ..., content_type: str = ...
    ) -> k8s_client.ApiResponse: ...


class StatusSource(Protocol):
    """Builds the status plumb wants on a policy now; None when the policy is unknown."""

    def __call__(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


class Owner(Protocol):
    """The uid of the policy object by that name now ("" when unknown)."""

    def __call__(self, namespace: str, name: str) -> str: ...


def _no_owner(namespace: str, name: str) -> str:
    return ""


def status_path(namespace: str, name: str) -> str:
    return f"/apis/{GROUP_VERSION}/namespaces/{quote(namespace)}/{PLURAL}/{quote(name)}/status"


def merge_patch(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: changed keys with their
    new values, removed keys as null, nested objects diffed, lists replaced whole."""
    if old is None:
        return copy.deepcopy(dict(new))
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif key not in old or before != value:
            patch[key] = copy.deepcopy(value)
    return patch


class StatusWriter:
    """Writes each dirty policy's status at most once per ``interval`` seconds."""

    def __init__(
        self,
        api: StatusApi,
        source: StatusSource,
        *,
        interval: float = 1.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        owner: Owner = _no_owner,
    ) -> None:
        self._api = api
        self._source = source
        # What was written belongs to one object: a policy deleted and created again under the
        # same name starts from an empty status, so its first write must be whole.
        self._owner = owner
        self._owners: dict[spec_module.Key, str] = {}
        self._interval = interval
        self._sleep = sleep
        self._dirty: set[spec_module.Key] = set()
        self._written: dict[spec_module.Key, dict[str, Any]] = {}
        self._wake = asyncio.Event()

    @property
    def dirty(self) -> frozenset[spec_module.Key]:
        return frozenset(self._dirty)

    def mark_dirty(self, namespace: str, name: str) -> None:
        self._dirty.add((namespace, name))
        self._wake.set()

    def seed(self, namespace: str, name: str, status: Any, uid: str = "") -> None:
        """What the object's status holds now (on resume), so that the first patch also
        removes what plumb no longer wants there."""
        if isinstance(status, Mapping):
            self._written[(namespace, name)] = copy.deepcopy(dict(status))
            self._owners[(namespace, name)] = uid

    def forget(self, namespace: str, name: str) -> None:
        """The policy was deleted: nothing more to write for it."""
        self._dirty.discard((namespace, name))
        self._written.pop((namespace, name), None)
        self._owners.pop((namespace, name), None)

    async def run(self) -> None:
        """Write dirty statuses until cancelled: wait for one, write them all, pause."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.flush()
            except Exception:  # a bug here must not stop every later status write
                logger.exception("writing SchedulingPolicy statuses failed")
            await self._sleep(self._interval)

    async def flush(self) -> int:
        """One round: write every policy dirty now (marks made meanwhile wait for the next);
        returns how many patches the API server accepted."""
        keys, self._dirty = sorted(self._dirty), set()
        accepted = 0
        for key in keys:
            accepted += await self._write(key)
        return accepted

    async def _write(self, key: spec_module.Key) -> int:
        namespace, name = key
        try:
            wanted = self._source(namespace, name)
        except Exception:
            logger.exception("building the status of SchedulingPolicy %s/%s failed", *key)
            return 0
        if wanted is None:
            self.forget(namespace, name)
            return 0
        uid = self._owner(namespace, name)
        written = self._written.get(key)
        if uid and self._owners.get(key, uid) not in (uid, ""):
            written = None  # another object by the same name: its status starts empty
        patch = merge_patch(written, wanted)
        if not patch:
            return 0
        try:
            response = await self._api.request(
                "PATCH",
                status_path(namespace, name),
                body={"status": patch},
                content_type=MERGE_PATCH,
            )
        except k8s_client.TransportError as error:
            logger.warning("status of SchedulingPolicy %s/%s not written: %s", *key, error)
            self._again(key)
            return 0
        if response.ok:
            self._written[key] = copy.deepcopy(dict(wanted))
            self._owners[key] = uid
            return 1
        if response.status == 404:
            self.forget(namespace, name)
            return 0
        logger.warning(
            "status of SchedulingPolicy %s/%s not written: HTTP %d: %s; retrying",
            namespace,
            name,
            response.status,
            response.message(),
        )
        self._again(key)
        return 0

    def _again(self, key: spec_module.Key) -> None:
        self._dirty.add(key)
        self._wake.set()
