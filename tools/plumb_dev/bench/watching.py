"""Our own watch on a namespace's pods: the time each pod was first seen bound is the bound time.

It runs in the bench process, not in the scheduler, so every scheduler is timed by the same
clock and the same watch latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import aiohttp

from plumb.k8s import client as k8s_client

JSON = dict[str, Any]
OnAdded = Callable[[JSON], Awaitable[None]]


class WatchError(RuntimeError):
    """The API server ended the watch with an error."""


class PodWatch:
    """Records bound[name] = monotonic time spec.nodeName was first seen on each pod,
    pending[name] = uid of each pod seen without one (a drain waits for all its pods there), and
    claimed[name] = the time the claims made from its templates were first seen recorded in its
    status (by the resourceclaim controller)."""

    def __init__(
        self,
        api: k8s_client.ApiClient,
        namespace: str,
        *,
        on_added: OnAdded | None = None,
        on_modified: OnAdded | None = None,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._on_added = on_added
        self._on_modified = on_modified
        self.bound: dict[str, float] = {}
        self.pending: dict[str, str] = {}
        self.claimed: dict[str, float] = {}
        self.events = 0
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        """Lists the namespace, then watches from that resourceVersion; returns once watching."""
        path = f"/api/v1/namespaces/{quote(self._namespace)}/pods"
        items, version = await self._api.list_all(path)
        for pod in items:
            self._see(pod)
        self._task = asyncio.create_task(self._watch(path, version))
        # The request is on its way once the task has started; a pod created after this point
        # shows up in the stream because the watch begins at the listed resourceVersion.
        await asyncio.wait(
            [asyncio.create_task(self._ready.wait()), self._task],
            return_when=asyncio.FIRST_COMPLETED,
        )
        if self._task.done():
            self._task.result()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def check(self) -> None:
        """Raises what ended the watch, if it ended."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            self._task.result()
            raise WatchError(f"the watch on pods in {self._namespace} ended unexpectedly")

    def _see(self, pod: JSON) -> None:
        name = pod["metadata"]["name"]
        if name not in self.claimed and (pod.get("status") or {}).get("resourceClaimStatuses"):
            self.claimed[name] = time.monotonic()
        if name in self.bound:
            return
        if (pod.get("spec") or {}).get("nodeName"):
            self.bound[name] = time.monotonic()
            self.pending.pop(name, None)
        else:
            self.pending[name] = pod["metadata"]["uid"]

    async def _watch(self, path: str, version: str) -> None:
        while True:
            params = {"watch": "true", "resourceVersion": version, "timeoutSeconds": "3600"}
            async with self._api.session.get(
                path, params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=None)
            ) as response:
                if response.status != 200:
                    text = await response.text()
                    raise WatchError(
                        f"watching pods in {self._namespace}: {response.status} {text}"
                    )
                self._ready.set()
                async for line in response.content:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        raise WatchError(
                            f"the watch on pods in {self._namespace} failed: {event['object']}"
                        )
                    pod = event["object"]
                    version = pod["metadata"]["resourceVersion"]
                    self.events += 1
                    self._see(pod)
                    if event["type"] == "ADDED" and self._on_added is not None:
                        await self._on_added(pod)
                    elif event["type"] == "MODIFIED" and self._on_modified is not None:
                        await self._on_modified(pod)
