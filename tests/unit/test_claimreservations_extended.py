"""The claim for a pod's extended resources backed by DRA over a fake API server
(claimreservations.make_extended, delete_extended): created under a generated name, given the
finalizer, allocated and reserved, named in the pod's status; deleted, finalizer first."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from plumb import claimreservations as writes
from plumb.backend.records import draobjects
from plumb.k8s import client as k8s_client
from tests.unit.test_claimreservations import ALLOCATION, POD, ClaimServer

JSON = dict[str, Any]
BODY: JSON = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {
        "generateName": "trainer-extended-resources-",
        "namespace": "ns",
        "annotations": {draobjects.EXTENDED_CLAIM_ANNOTATION: "true"},
    },
    "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {}}]}},
}


class ClaimServerWithPods(ClaimServer):
    """ClaimServer with creation (a name generated), deletion and pod status patches."""

    def __init__(self, *, pod_status: int = 200) -> None:
        super().__init__()
        self.pod_status = pod_status
        self.pod_patches: list[JSON] = []

    async def create_resource_claim(self, *, namespace: str, body: JSON) -> k8s_client.ApiResponse:
        created = copy.deepcopy(body)
        name = created["metadata"].pop("generateName") + "x7k2q"
        created["metadata"].update(name=name, uid=f"{name}-uid", resourceVersion="1")
        created["status"] = {}
        self.claims[name] = created
        self.calls.append(("create", name))
        return k8s_client.ApiResponse(status=201, body=copy.deepcopy(created))

    async def delete_resource_claim(
        self, *, namespace: str, name: str, uid: str
    ) -> k8s_client.ApiResponse:
        self.calls.append(("delete", name))
        stored = self.claims.get(name)
        if stored is None:
            return k8s_client.ApiResponse(status=404, body={"message": "not found"})
        assert stored["metadata"]["uid"] == uid
        assert not stored["metadata"].get("finalizers")  # else it would only be marked
        del self.claims[name]
        return k8s_client.ApiResponse(status=200, body={})

    async def patch_pod_status(
        self, *, namespace: str, name: str, patch: JSON
    ) -> k8s_client.ApiResponse:
        self.calls.append(("patch pod status", name))
        self.pod_patches.append(patch)
        return k8s_client.ApiResponse(status=self.pod_status, body={"message": "pods is forbidden"})


def status_patch(name: str) -> JSON:
    return {"status": {"extendedResourceClaimStatus": {"resourceClaimName": name}}}


def test_prebind_creates_allocates_and_reserves_the_claim_then_names_it_in_the_pods_status() -> (
    None
):
    server = ClaimServerWithPods()
    outcome = asyncio.run(writes.make_extended(server, POD, BODY, ALLOCATION, status_patch))
    assert outcome.ok, outcome.message
    name = "trainer-extended-resources-x7k2q"
    assert server.calls == [
        ("create", name),
        ("update", name),
        ("update status", name),
        ("patch pod status", "trainer"),
    ]
    stored = server.claims[name]
    assert stored["metadata"]["finalizers"] == [draobjects.CLAIM_FINALIZER]
    assert stored["status"] == {"allocation": ALLOCATION, "reservedFor": [POD.consumer()]}
    assert server.pod_patches == [status_patch(name)]
    assert outcome.written == (stored,)
    assert outcome.made is not None
    assert outcome.made["metadata"]["name"] == name


def test_a_pod_status_refused_fails_prebind_and_says_the_claim_was_made() -> None:
    server = ClaimServerWithPods(pod_status=403)
    outcome = asyncio.run(writes.make_extended(server, POD, BODY, ALLOCATION, status_patch))
    assert not outcome.ok
    assert outcome.message == (
        'running PreBind plugin "DynamicResources": update pod ns/trainer '
        "ExtendedResourceClaimStatus: pods is forbidden"
    )
    assert outcome.made is not None  # for Unreserve to delete


def test_a_replica_that_may_not_act_creates_nothing() -> None:
    server = ClaimServerWithPods()
    outcome = asyncio.run(
        writes.make_extended(server, POD, BODY, ALLOCATION, status_patch, gate=lambda: False)
    )
    assert not outcome.ok
    assert outcome.made is None
    assert server.calls == []


def test_deletion_takes_the_finalizer_off_first_and_a_claim_gone_is_fine() -> None:
    server = ClaimServerWithPods()
    outcome = asyncio.run(writes.make_extended(server, POD, BODY, ALLOCATION, status_patch))
    assert outcome.made is not None
    name = outcome.made["metadata"]["name"]
    server.calls.clear()
    # The claim as created is older than the one with the finalizer: a conflict, read again.
    assert asyncio.run(writes.delete_extended(server, outcome.made)) is None
    assert server.calls == [("update", name), ("get", name), ("update", name), ("delete", name)]
    assert name not in server.claims
    assert asyncio.run(writes.delete_extended(server, outcome.made)) is None
