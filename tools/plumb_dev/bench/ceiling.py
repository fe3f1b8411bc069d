"""The ceiling: a raw binder that does, per pod, the API work every scheduler must do here and
nothing else: it binds each pod to a precomputed node the moment it is handed the pod, then
posts the ``Scheduled`` event plumb posts, with plumb's concurrency for both. No filtering, no
scoring, no cache: what is left is the API server's own cost, the physical limit any
scheduler's throughput is read against.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import Callable
from typing import Any

from plumb.k8s import client as k8s_client

JSON = dict[str, Any]
CONCURRENCY = 64
"""Bindings in flight: plumb's default --bind-concurrency (app.runtime.RunSettings; a unit test
holds them equal, since the bench may not import the scheduler's layers)."""
EVENT_CONCURRENCY = 32
"""Events in flight: plumb's events.Recorder default (a unit test holds them equal)."""
REPORTING_CONTROLLER = "bench-ceiling"


class CeilingError(RuntimeError):
    """A binding the raw binder sent was refused."""


def scheduled_event(*, namespace: str, name: str, uid: str, node: str, instance: str) -> JSON:
    """The events.k8s.io/v1 ``Scheduled`` event, shaped as plumb's events.Recorder posts it."""
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
        "eventTime": now.replace("+00:00", "Z"),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
        "note": f"Successfully assigned {namespace}/{name} to {node}",
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": namespace,
            "name": name,
            "uid": uid,
        },
    }


class RawBinder:
    """Binds pods by name to the node node_for(name) chooses, then posts their Scheduled
    events; feed it with on_added (a watch) or submit (a drain's backlog)."""

    def __init__(
        self,
        api: k8s_client.ApiClient,
        namespace: str,
        node_for: Callable[[str], str],
        *,
        concurrency: int = CONCURRENCY,
        event_concurrency: int = EVENT_CONCURRENCY,
        instance: str = "bench-ceiling",
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._node_for = node_for
        self._instance = instance
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._workers = [asyncio.create_task(self._work()) for _ in range(concurrency)]
        self._event_slots = asyncio.Semaphore(event_concurrency)
        self._events: set[asyncio.Task[None]] = set()
        self.failures: list[str] = []
        self.events_posted = 0

    async def warm_up(self) -> None:
        """Opens the connections the workers will use, so the first bindings pay no TLS
        handshakes that a scheduler, connected long before, does not pay either."""
        await asyncio.gather(
            *(self._api.request("GET", "/readyz") for _ in range(len(self._workers)))
        )

    def submit(self, name: str, uid: str) -> None:
        """Queues one pending pod for binding."""
        self._queue.put_nowait((name, uid))

    async def on_added(self, pod: dict[str, object]) -> None:
        metadata = pod["metadata"]
        spec = pod.get("spec")
        assert isinstance(metadata, dict)
        assert isinstance(spec, dict)
        if not spec.get("nodeName"):
            self.submit(str(metadata["name"]), str(metadata["uid"]))

    async def _work(self) -> None:
        while True:
            name, uid = await self._queue.get()
            node = self._node_for(name)
            try:
                response = await self._api.bind(
                    namespace=self._namespace, name=name, uid=uid, node=node
                )
            except k8s_client.TransportError as error:
                self.failures.append(f"{name} -> {node}: {error}")
                continue
            if not response.ok:
                self.failures.append(f"{name} -> {node}: HTTP {response.status}")
                continue
            # As plumb: the event goes out in the background once the binding is answered.
            task = asyncio.create_task(self._event(name, uid, node))
            self._events.add(task)
            task.add_done_callback(self._events.discard)

    async def _event(self, name: str, uid: str, node: str) -> None:
        async with self._event_slots:
            body = scheduled_event(
                namespace=self._namespace, name=name, uid=uid, node=node, instance=self._instance
            )
            try:
                response = await self._api.create_event(namespace=self._namespace, event=body)
            except k8s_client.TransportError as error:
                self.failures.append(f"event for {name}: {error}")
                return
            if response.ok:
                self.events_posted += 1
            else:
                self.failures.append(f"event for {name}: HTTP {response.status}")

    async def stop(self) -> None:
        """Stops binding; waits for the events already on their way."""
        for worker in self._workers:
            worker.cancel()
        for worker in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        if self._events:
            await asyncio.gather(*self._events, return_exceptions=True)
