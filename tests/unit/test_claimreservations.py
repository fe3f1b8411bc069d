"""DynamicResources' claim writes against a fake API server (claimreservations.py): PreBind's
finalizer, allocation and reservation, each conditional on the version seen and tried again on
a conflict; Unreserve's patch; PostFilter's deallocation."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from plumb import claimreservations as writes
from plumb.backend.records import draobjects
from plumb.k8s import client as k8s_client

JSON = dict[str, Any]
POD = writes.PodRef(namespace="ns", name="trainer", uid="pod-uid")
ALLOCATION = {
    "devices": {"results": [{"request": "gpu", "driver": "d", "pool": "node-a", "device": "g0"}]},
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
        ]
    },
}


def claim_body(name: str = "gpu", **status: Any) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "ns", "name": name, "uid": f"{name}-uid", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}]}},
        "status": dict(status),
    }


class ClaimServer:
    """Claims by name, with resourceVersion preconditions as the API server has them."""

    def __init__(self, *claims: JSON) -> None:
        self.claims = {c["metadata"]["name"]: copy.deepcopy(c) for c in claims}
        self.calls: list[tuple[str, str]] = []
        self.version = 10
        # Before the n-th write (counting from 0), someone else changes the claim.
        self.interfere: dict[int, Any] = {}
        self.writes = 0

    def _answer(self, body: JSON | None, status: int = 200) -> k8s_client.ApiResponse:
        if body is None:
            return k8s_client.ApiResponse(status=404, body={"message": "not found"})
        return k8s_client.ApiResponse(status=status, body=copy.deepcopy(body))

    def _merge(self, name: str, patch: JSON, part: str) -> k8s_client.ApiResponse:
        """A JSON merge patch, applied only to the resourceVersion it names."""
        stored = self.claims.get(name)
        if stored is None:
            return self._answer(None)
        change = self.interfere.pop(self.writes, None)
        self.writes += 1
        if change is not None:
            change(stored)
            self.version += 1
            stored["metadata"]["resourceVersion"] = str(self.version)
        wanted = patch.get("metadata", {}).get("resourceVersion")
        if wanted is not None and wanted != stored["metadata"]["resourceVersion"]:
            message = (
                f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{name}": '
                "the object has been modified; please apply your changes to the latest version "
                "and try again"
            )
            return k8s_client.ApiResponse(status=409, body={"message": message})
        if part == "status":
            status = stored.setdefault("status", {})
            for key, value in (patch.get("status") or {}).items():
                if value is None:
                    status.pop(key, None)
                else:
                    status[key] = copy.deepcopy(value)
        else:
            finalizers = patch.get("metadata", {}).get("finalizers")
            if finalizers is not None:
                stored["metadata"]["finalizers"] = list(finalizers)
        assert "spec" not in patch  # a claim's spec is immutable
        self.version += 1
        stored["metadata"]["resourceVersion"] = str(self.version)
        return self._answer(stored)

    async def get_resource_claim(self, *, namespace: str, name: str) -> k8s_client.ApiResponse:
        self.calls.append(("get", name))
        return self._answer(self.claims.get(name))

    async def patch_resource_claim(
        self, *, namespace: str, name: str, patch: JSON
    ) -> k8s_client.ApiResponse:
        self.calls.append(("update", name))
        return self._merge(name, patch, "object")

    async def patch_resource_claim_status(
        self, *, namespace: str, name: str, patch: JSON, strategic: bool = False
    ) -> k8s_client.ApiResponse:
        if not strategic:
            self.calls.append(("update status", name))
            return self._merge(name, patch, "status")
        self.calls.append(("patch status", name))
        stored = self.claims[name]
        gone = {e["uid"] for e in patch["status"]["reservedFor"] if e.get("$patch") == "delete"}
        reserved = stored["status"].get("reservedFor") or []
        stored["status"]["reservedFor"] = [e for e in reserved if e["uid"] not in gone]
        return self._answer(stored)


def test_a_claim_the_cycle_allocated_gets_the_finalizer_then_allocation_and_reservation() -> None:
    server = ClaimServer(claim_body())
    outcome = asyncio.run(
        writes.reserve(server, POD, [writes.Reservation(body=claim_body(), allocation=ALLOCATION)])
    )
    assert outcome.ok, outcome.message
    stored = server.claims["gpu"]
    assert stored["metadata"]["finalizers"] == [draobjects.CLAIM_FINALIZER]
    assert stored["status"]["allocation"] == ALLOCATION
    assert stored["status"]["reservedFor"] == [
        {"resource": "pods", "name": "trainer", "uid": "pod-uid"}
    ]
    assert server.calls == [("update", "gpu"), ("update status", "gpu")]
    assert outcome.written == (stored,)


def test_a_shared_claim_allocated_already_is_only_reserved_beside_the_others() -> None:
    other = {"resource": "pods", "name": "first", "uid": "first-uid"}
    body = claim_body(allocation=ALLOCATION, reservedFor=[other])
    body["metadata"]["finalizers"] = [draobjects.CLAIM_FINALIZER]
    server = ClaimServer(body)
    outcome = asyncio.run(writes.reserve(server, POD, [writes.Reservation(body=body)]))
    assert outcome.ok, outcome.message
    assert server.claims["gpu"]["status"]["reservedFor"] == [other, POD.consumer()]
    assert server.calls == [("update status", "gpu")]


def test_a_claim_reserved_for_the_pod_already_is_not_written() -> None:
    body = claim_body(allocation=ALLOCATION, reservedFor=[POD.consumer()])
    server = ClaimServer(body)
    outcome = asyncio.run(writes.reserve(server, POD, [writes.Reservation(body=body)]))
    assert outcome.ok
    assert server.calls == []


def test_a_conflict_reads_the_claim_again_and_writes_on_the_latest() -> None:
    server = ClaimServer(claim_body())

    def labelled(stored: JSON) -> None:
        stored["metadata"]["labels"] = {"team": "ml"}

    server.interfere[1] = labelled  # between the finalizer and the status
    outcome = asyncio.run(
        writes.reserve(server, POD, [writes.Reservation(body=claim_body(), allocation=ALLOCATION)])
    )
    assert outcome.ok, outcome.message
    assert server.calls == [
        ("update", "gpu"),
        ("update status", "gpu"),  # 409
        ("get", "gpu"),
        ("update status", "gpu"),  # the finalizer is there already: no second update
    ]
    assert server.claims["gpu"]["metadata"]["labels"] == {"team": "ml"}
    assert server.claims["gpu"]["status"]["allocation"] == ALLOCATION


def test_a_claim_allocated_elsewhere_meanwhile_fails_prebind_in_kube_schedulers_words() -> None:
    server = ClaimServer(claim_body())

    def allocated(stored: JSON) -> None:
        stored["status"]["allocation"] = ALLOCATION

    server.interfere[0] = allocated
    outcome = asyncio.run(
        writes.reserve(server, POD, [writes.Reservation(body=claim_body(), allocation=ALLOCATION)])
    )
    assert not outcome.ok
    assert outcome.message == (
        'running PreBind plugin "DynamicResources": '
        "claim ns/gpu got allocated elsewhere in the meantime"
    )


def test_a_claim_deleted_meantime_fails_prebind() -> None:
    server = ClaimServer(claim_body())

    def deleting(stored: JSON) -> None:
        stored["metadata"]["deletionTimestamp"] = "2026-12-04T00:00:00Z"

    server.interfere[0] = deleting
    outcome = asyncio.run(
        writes.reserve(server, POD, [writes.Reservation(body=claim_body(), allocation=ALLOCATION)])
    )
    assert outcome.message.endswith("claim ns/gpu got deleted in the meantime")


def test_a_replica_that_may_not_act_writes_nothing() -> None:
    server = ClaimServer(claim_body())
    outcome = asyncio.run(
        writes.reserve(
            server,
            POD,
            [writes.Reservation(body=claim_body(), allocation=ALLOCATION)],
            gate=lambda: False,
        )
    )
    assert not outcome.ok
    assert server.calls == []


def test_unreserve_takes_the_pods_entry_off_and_leaves_the_allocation() -> None:
    other = {"resource": "pods", "name": "first", "uid": "first-uid"}
    body = claim_body(allocation=ALLOCATION, reservedFor=[other, POD.consumer()])
    server = ClaimServer(body)
    errors = asyncio.run(writes.unreserve(server, POD, [draobjects.parse_claim(body)]))
    assert errors == []
    assert server.claims["gpu"]["status"] == {"allocation": ALLOCATION, "reservedFor": [other]}
    assert writes.unreserve_patch("c", "p") == {
        "metadata": {"uid": "c"},
        "status": {"reservedFor": [{"$patch": "delete", "uid": "p"}]},
    }


def test_deallocation_clears_allocation_reservations_and_device_status() -> None:
    body = claim_body(allocation=ALLOCATION, reservedFor=[], devices=[{"driver": "d"}])
    server = ClaimServer(body)
    assert asyncio.run(writes.deallocate(server, body)) is None
    assert server.claims["gpu"]["status"] == {}
    stale = copy.deepcopy(body)
    stale["metadata"]["resourceVersion"] = "0"
    assert "the object has been modified" in str(asyncio.run(writes.deallocate(server, stale)))
