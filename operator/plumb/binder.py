"""Binding pods to nodes through the API server, a bounded number at a time."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from typing import Protocol

from plumb.backend.records import objects
from plumb.k8s import client as k8s_client
from plumb.k8s import gates

MAX_THROTTLED_RETRIES = 5


class BindOutcome(enum.Enum):
    BOUND = "bound"
    GONE = "gone"  # 404: the pod (with this uid) no longer exists
    CONFLICT = "conflict"  # 409: already bound, or recreated under the same name
    RETRY = "retry"  # anything that may pass: 5xx, throttling that outlasted retries, timeout
    NOT_LEADER = "not-leader"  # not sent: this replica may not bind now (leader election)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BindResult:
    outcome: BindOutcome
    message: str = ""


class BindingApi(Protocol):
    """The part of the API client the binder uses (k8s.client.ApiClient; a fake in tests)."""

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, traceparent: str | None = None
    ) -> k8s_client.ApiResponse: ...


NOT_LEADER_MESSAGE = "not sent: this replica is not the leader (or its lease is not renewed)"


class Binder:
    """POSTs Bindings; at most ``concurrency`` in flight so a burst cannot swamp the server.

    ``gate`` is asked right before each POST (after waiting for a slot, and before each retry
    after a 429), so a leader whose lease went unrenewed sends nothing more."""

    def __init__(
        self, api: BindingApi, *, concurrency: int = 64, gate: gates.Gate = gates.always
    ) -> None:
        self._api = api
        self._slots = asyncio.Semaphore(concurrency)
        self._gate = gate

    async def bind(
        self, pod: objects.PodInfo, node: str, traceparent: str | None = None
    ) -> BindResult:
        """POST the pod's Binding to ``node``; ``traceparent``: the W3C header of the attempt's
        binding span (tracing on), so the API server's spans join the pod's trace."""
        async with self._slots:
            for _ in range(MAX_THROTTLED_RETRIES):
                if not self._gate():
                    return BindResult(outcome=BindOutcome.NOT_LEADER, message=NOT_LEADER_MESSAGE)
                try:
                    response = await self._api.bind(
                        namespace=pod.namespace,
                        name=pod.name,
                        uid=pod.uid,
                        node=node,
                        traceparent=traceparent,
                    )
                except k8s_client.TransportError as error:
                    return BindResult(outcome=BindOutcome.RETRY, message=str(error))
                if response.ok:
                    return BindResult(outcome=BindOutcome.BOUND)
                if response.status == 404:
                    return BindResult(outcome=BindOutcome.GONE, message=response.message())
                if response.status == 409:
                    return BindResult(outcome=BindOutcome.CONFLICT, message=response.message())
                if response.status != 429:
                    text = f"HTTP {response.status}: {response.message()}"
                    return BindResult(outcome=BindOutcome.RETRY, message=text)
                # Throttled: the assumption stays while we wait as long as the server asks.
                await asyncio.sleep(response.retry_after if response.retry_after else 1.0)
            return BindResult(outcome=BindOutcome.RETRY, message="throttled (HTTP 429) repeatedly")
