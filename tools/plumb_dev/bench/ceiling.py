"""The ceiling: a raw binder that does, per pod, the API work every scheduler must do here and
nothing else: it binds each pod to a precomputed node the moment it is handed the pod, then
posts the ``Scheduled`` event plumb posts, with plumb's concurrency for both. No filtering, no
scoring, no cache: what is left is the API server's own cost, the physical limit any
scheduler's throughput is read against. For pods that claim devices it first waits, as a
scheduler must, for their claims to exist, and writes each claim's allocation (``reserve``)
before the binding, as PreBind does.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import Awaitable, Callable
from typing import Any

from plumb.k8s import client as k8s_client

JSON = dict[str, Any]
CONCURRENCY = 64
"""Bindings in flight: plumb's default --bind-concurrency (app.runtime.RunSettings; a unit test
holds them equal, since the bench may not import the scheduler's layers)."""
EVENT_CONCURRENCY = 32
"""Events in flight: plumb's events.Recorder default (a unit test holds them equal)."""
REPORTING_CONTROLLER = "bench-ceiling"
Reserve = Callable[[JSON, str], Awaitable[str | None]]
"""(the pod as last seen, its node) → None once the pod's claims are allocated and reserved for
it there, else what went wrong."""
Ready = Callable[[JSON], bool]
"""Whether a pending pod as seen can be bound (its claims exist)."""


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
    events; feed it with on_added and on_modified (a watch) or submit (a drain's backlog).

    With ``reserve``, a pod is taken once ``ready`` says so (its claims made), and its claims
    are written before its binding."""

    def __init__(
        self,
        api: k8s_client.ApiClient,
        namespace: str,
        node_for: Callable[[str], str],
        *,
        concurrency: int = CONCURRENCY,
        event_concurrency: int = EVENT_CONCURRENCY,
        instance: str = "bench-ceiling",
        reserve: Reserve | None = None,
        ready: Ready | None = None,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._node_for = node_for
        self._instance = instance
        self._reserve = reserve
        self._ready = ready
        self._submitted: set[str] = set()
        self._queue: asyncio.Queue[tuple[str, str, JSON | None]] = asyncio.Queue()
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

    def submit(self, name: str, uid: str, pod: JSON | None = None) -> None:
        """Queues one pending pod for binding (``pod``: as seen, for ``reserve``)."""
        self._submitted.add(name)
        self._queue.put_nowait((name, uid, pod))

    async def on_added(self, pod: JSON) -> None:
        metadata, spec = pod["metadata"], pod.get("spec") or {}
        name = str(metadata["name"])
        if spec.get("nodeName") or name in self._submitted:
            return
        if self._ready is None or self._ready(pod):
            self.submit(name, str(metadata["uid"]), pod)

    async def on_modified(self, pod: JSON) -> None:
        """A pod not ready when added is taken when an update makes it so."""
        await self.on_added(pod)

    async def _work(self) -> None:
        while True:
            name, uid, pod = await self._queue.get()
            node = self._node_for(name)
            try:
                if self._reserve is not None:
                    problem = await self._reserve(pod or {}, node)
                    if problem:
                        self.failures.append(f"{name} -> {node}: {problem}")
                        continue
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
