"""The ceiling: a raw binder that binds each pod to a precomputed node the moment our watch sees
it, with many bindings in flight. No filtering, no scoring, no cache: what is left is the API
server's own cost of creating and binding, the physical limit any scheduler's throughput is
read against.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from plumb.k8s import client as k8s_client

JSON = dict[str, object]
CONCURRENCY = 64
"""Bindings in flight, as many as plumb's default --bind-concurrency."""


class CeilingError(RuntimeError):
    """A binding the raw binder sent was refused."""


class RawBinder:
    """Binds pods by name to the node node_for(name) chooses; feed it with on_added."""

    def __init__(
        self,
        api: k8s_client.ApiClient,
        namespace: str,
        node_for: Callable[[str], str],
        *,
        concurrency: int = CONCURRENCY,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._node_for = node_for
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._workers = [asyncio.create_task(self._work()) for _ in range(concurrency)]
        self.failures: list[str] = []

    async def warm_up(self) -> None:
        """Opens the connections the workers will use, so the first bindings pay no TLS
        handshakes that a scheduler, connected long before, does not pay either."""
        await asyncio.gather(
            *(self._api.request("GET", "/readyz") for _ in range(len(self._workers)))
        )

    async def on_added(self, pod: dict[str, object]) -> None:
        metadata = pod["metadata"]
        spec = pod.get("spec")
        assert isinstance(metadata, dict)
        assert isinstance(spec, dict)
        if not spec.get("nodeName"):
            self._queue.put_nowait((str(metadata["name"]), str(metadata["uid"])))

    async def _work(self) -> None:
        while True:
            name, uid = await self._queue.get()
            node = self._node_for(name)
            try:
                response = await self._api.bind(
                    namespace=self._namespace, name=name, uid=uid, node=node
                )
                if not response.ok:
                    self.failures.append(f"{name} -> {node}: HTTP {response.status}")
            except k8s_client.TransportError as error:
                self.failures.append(f"{name} -> {node}: {error}")

    async def stop(self) -> None:
        for worker in self._workers:
            worker.cancel()
        for worker in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker
