"""The API server's one Lease for leader-election tests: a store with resourceVersion checks as
the real one has, each replica's API over it (which can be cut off), and the election's timings."""

from __future__ import annotations

import copy
from typing import Any

from plumb import leader
from plumb.k8s import client as k8s_client

TIMINGS = leader.Timings(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)


class LeaseStore:
    """The API server's one Lease, with resourceVersion checks as the real one does."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.writes: list[dict[str, Any]] = []

    def _stamp(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(body)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.lease = stored
        self.writes.append(copy.deepcopy(stored))
        return copy.deepcopy(stored)


class CuttableLeaseApi:
    """One replica's view of the store; ``cut`` makes every request fail as a dead link."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self.cut = False

    def _check(self) -> None:
        if self.cut:
            raise k8s_client.TransportError("connection timed out")

    async def get_lease(
        self, *, namespace: str, name: str, request_timeout: float | None = None
    ) -> k8s_client.ApiResponse:
        self._check()
        if self.store.lease is None:
            return k8s_client.ApiResponse(status=404, body={"message": "not found"})
        return k8s_client.ApiResponse(status=200, body=copy.deepcopy(self.store.lease))

    async def create_lease(
        self, *, namespace: str, body: dict[str, Any], request_timeout: float | None = None
    ) -> k8s_client.ApiResponse:
        self._check()
        if self.store.lease is not None:
            return k8s_client.ApiResponse(status=409, body={"message": "already exists"})
        return k8s_client.ApiResponse(status=201, body=self.store._stamp(body))

    async def replace_lease(
        self,
        *,
        namespace: str,
        name: str,
        body: dict[str, Any],
        request_timeout: float | None = None,
    ) -> k8s_client.ApiResponse:
        self._check()
        current = self.store.lease
        assert current is not None
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return k8s_client.ApiResponse(status=409, body={"message": "conflict"})
        return k8s_client.ApiResponse(status=200, body=self.store._stamp(body))
