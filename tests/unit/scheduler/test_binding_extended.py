"""The binding cycle of a pod whose extended resource devices serve (DRAExtendedResource): the
claim made, allocated, reserved and named in the pod's status before the binding, and taken
back (deleted, its devices free again) when the binding fails."""

from __future__ import annotations

import copy
from typing import Any

from plumb import binder, events
from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.backend.records import draobjects
from plumb.framework.plugins import extendedresources
from plumb.k8s import client as k8s_client
from plumb_dev.testing import drabuilders as drab
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import Answer, FakeApi, ManualClock, reference_kernel
from tests.unit.test_claimreservations_extended import ClaimServerWithPods

GPU = "example.com/gpu"
DRIVER = "gpu.example.com"
POD = make_pod("devices", "ml").uid("uid-devices").scheduler("plumb").req(cpu="1", **{GPU: 1})
NODES = [make_node("small").capacity(cpu="4", memory="16Gi").obj()]


class Api(FakeApi):
    """Bindings and events as FakeApi answers them; claims and the pod's status as
    ClaimServerWithPods."""

    def __init__(self, *script: Answer) -> None:
        super().__init__(*script)
        self.claims = ClaimServerWithPods()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.claims, name)

    async def patch_pod_status(
        self, *, namespace: str, name: str, patch: dict[str, Any]
    ) -> k8s_client.ApiResponse:
        if "extendedResourceClaimStatus" in patch.get("status", {}):
            return await self.claims.patch_pod_status(namespace=namespace, name=name, patch=patch)
        return await super().patch_pod_status(namespace=namespace, name=name, patch=patch)


def scheduler(api: Api, clock: ManualClock) -> scheduler_module.Scheduler:
    s = scheduler_module.Scheduler(
        served=scheduler_module.defaults("plumb"),
        binder=binder.Binder(api),
        recorder=events.Recorder(api, instance="test", clock=clock),
        kernel=reference_kernel,
        queue=queue_module.SchedulingQueue(clock=clock),
        claim_api=api,
    )
    s.feed.on_dra(
        "DeviceClass", "ADDED", drab.make_class("gpu").driver(DRIVER).extended_resource(GPU).obj()
    )
    body = drab.make_slice("small-gpus", DRIVER).pool("small").node("small")
    s.feed.on_dra("ResourceSlice", "ADDED", body.devices(drab.device("gpu-0")).obj())
    s.feed.resync(NODES, [POD.obj()])
    return s


async def attempt(s: scheduler_module.Scheduler) -> None:
    entries = await s.queue.pop_batch(8)
    await s.schedule_batch(entries)
    await s.drain()


def taken(s: scheduler_module.Scheduler) -> set[tuple[str, str, str]]:
    return set(s.cache.dra.allocated().devices)


async def test_the_claim_is_made_and_named_in_the_pods_status_before_the_binding() -> None:
    api, clock = Api(), ManualClock()
    s = scheduler(api, clock)
    await attempt(s)
    name = "devices-extended-resources-x7k2q"
    assert api.binds == [("devices", "small")]
    assert [call for call in api.claims.calls if call[0] != "update"] == [
        ("create", name),
        ("update status", name),
        ("patch pod status", "devices"),
    ]
    stored = api.claims.claims[name]
    assert stored["metadata"]["ownerReferences"][0]["uid"] == "uid-devices"
    assert [r["device"] for r in stored["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
    status = api.claims.pod_patches[0]["status"]["extendedResourceClaimStatus"]
    assert status["resourceClaimName"] == name
    # Its device is the written claim's, as long as the watch has not shown it.
    assert taken(s) == {(DRIVER, "small", "gpu-0")}
    found = s.cache.dra.extended_claim("uid-devices")
    assert found is not None
    assert found.name == name
    assert s.cache.dra.pending("ml", extendedresources.IN_MEMORY) is None


async def test_a_binding_that_fails_deletes_the_claim_and_frees_its_device() -> None:
    failure = k8s_client.ApiResponse(status=500, body={"message": "etcd leader changed"})
    api, clock = Api(failure), ManualClock()
    s = scheduler(api, clock)
    await attempt(s)
    assert api.claims.claims == {}  # deleted, finalizer first
    assert ("delete", "devices-extended-resources-x7k2q") in api.claims.calls
    # Its device stays taken until the watch shows the claim gone (were the deletion lost,
    # another pod must not get it), then is free.
    assert taken(s) == {(DRIVER, "small", "gpu-0")}
    s.feed.on_dra(
        "ResourceClaim",
        "DELETED",
        {"metadata": {"namespace": "ml", "name": "devices-extended-resources-x7k2q"}},
    )
    assert taken(s) == set()
    assert s.queue.where("uid-devices") is queue_module.Where.BACKOFF
    # The next attempt makes a new claim and binds.
    clock.now += queue_module.INITIAL_BACKOFF
    api.claims.claims.clear()
    await attempt(s)
    assert api.binds == [("devices", "small"), ("devices", "small")]
    made = list(api.claims.claims.values())
    assert len(made) == 1
    assert made[0]["metadata"]["annotations"] == {draobjects.EXTENDED_CLAIM_ANNOTATION: "true"}
    assert copy.deepcopy(made[0]["status"]["reservedFor"]) == [
        {"resource": "pods", "name": "devices", "uid": "uid-devices"}
    ]


async def test_a_claim_an_earlier_attempt_left_is_deleted_before_trying_again() -> None:
    # plumb stopped after making the claim, before binding: the claim is found, every node
    # refuses the pod while it stands, and PostFilter deletes it.
    api, clock = Api(), ManualClock()
    s = scheduler(api, clock)
    left: dict[str, Any] = {
        "metadata": {
            "namespace": "ml",
            "name": "devices-extended-resources-ab12c",
            "uid": "left-uid",
            "resourceVersion": "7",
            "finalizers": [draobjects.CLAIM_FINALIZER],
            "annotations": {draobjects.EXTENDED_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "devices", "uid": "uid-devices"}
                | {"controller": True}
            ],
        },
        "spec": {
            "devices": {
                "requests": [
                    {"name": "container-0-request-1", "exactly": {"deviceClassName": "gpu"}}
                ]
            }
        },
        "status": {},
    }
    api.claims.claims[left["metadata"]["name"]] = copy.deepcopy(left)
    s.feed.on_dra("ResourceClaim", "ADDED", left)
    await attempt(s)
    assert api.binds == []
    assert api.claims.claims == {}
    (event,) = [e for e in api.events if e["reason"] == "FailedScheduling"]
    assert event["note"] == (
        f"0/1 nodes are available: 1 {extendedresources.STALE}. "
        f"{extendedresources.DELETED}, preemption: 0/1 nodes are available: "
        "1 Preemption is not helpful for scheduling."
    )


async def test_a_device_plugin_serving_the_resource_makes_no_claim_but_prebind_is_announced() -> (
    None
):
    # kube-scheduler keeps the pod's in-memory claim through the cycle, so its PreBind has
    # work: from v1.35 the pod is nominated to its node before it, claim or no claim.
    api, clock = Api(), ManualClock()
    s = scheduler(api, clock)
    s.feed.resync(
        [make_node("small").capacity(cpu="4", memory="16Gi", **{GPU: 1}).obj()], [POD.obj()]
    )
    await attempt(s)
    assert api.binds == [("devices", "small")]
    assert api.claims.calls == []
    assert [patch["status"].get("nominatedNodeName") for _, patch in api.patches] == ["small"]
