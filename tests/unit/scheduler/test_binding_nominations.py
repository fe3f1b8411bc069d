"""The nomination a binding cycle writes before a PreBind with work to do
(NominatedNodeNameForExpectation, on from v1.35), per release: written before the volume writes,
cleared when the PreBind fails from v1.36 and left in v1.35, never written in v1.34."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from plumb import binder, events
from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.backend.cache import volumes
from plumb.framework import emulation
from plumb.k8s import client as k8s_client
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, reference_kernel
from tests.support.volume_objects import JSON, pv_body, pvc_body, storage_class_body

POD = make_pod("web", "default").uid("uid-web").scheduler("plumb").req(cpu="100m").claims("data")


class VolumeCluster(FakeApi):
    """Bindings and pod status patches (FakeApi) and the volume API PreBind uses, recording
    every write in one ``log``; ``controller`` says what the PV controller does at each read of
    the claim: "bind" completes the binding, "drop" resets the selected node (a provisioner
    that gave up)."""

    def __init__(self, pvs: list[JSON], claims: list[JSON], controller: str) -> None:
        super().__init__()
        self.pvs = {p["metadata"]["name"]: p for p in pvs}
        self.claims = {c["metadata"]["name"]: c for c in claims}
        self.controller = controller
        self.log: list[tuple[str, Any]] = []

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, traceparent: str | None = None
    ) -> k8s_client.ApiResponse:
        self.log.append(("bind", node))
        return await super().bind(namespace=namespace, name=name, uid=uid, node=node)

    async def patch_pod_status(
        self, *, namespace: str, name: str, patch: dict[str, Any]
    ) -> k8s_client.ApiResponse:
        status = patch.get("status") or {}
        if "nominatedNodeName" in status:
            self.log.append(("nominatedNodeName", status["nominatedNodeName"]))
        return await super().patch_pod_status(namespace=namespace, name=name, patch=patch)

    def _answer(self, body: JSON | None) -> k8s_client.ApiResponse:
        if body is None:
            return k8s_client.ApiResponse(status=404, body={"message": "not found"})
        return k8s_client.ApiResponse(status=200, body=copy.deepcopy(body))

    def _patch(self, kind: str, body: JSON | None, patch: JSON) -> k8s_client.ApiResponse:
        self.log.append((kind, patch))
        if body is None:
            return self._answer(None)
        metadata = patch.get("metadata") or {}
        body["metadata"].setdefault("annotations", {}).update(metadata.get("annotations") or {})
        body["spec"].update(patch.get("spec") or {})
        return self._answer(body)

    async def get_persistent_volume(self, *, name: str) -> k8s_client.ApiResponse:
        return self._answer(self.pvs.get(name))

    async def patch_persistent_volume(self, *, name: str, patch: JSON) -> k8s_client.ApiResponse:
        return self._patch("persistentvolumes", self.pvs.get(name), patch)

    async def get_persistent_volume_claim(
        self, *, namespace: str, name: str
    ) -> k8s_client.ApiResponse:
        claim = self.claims.get(name)
        if claim is not None and self.controller == "bind":
            for pv in self.pvs.values():
                ref = pv["spec"].get("claimRef") or {}
                if ref.get("name") == name:
                    claim["spec"]["volumeName"] = pv["metadata"]["name"]
                    claim["metadata"]["annotations"][volumes.BIND_COMPLETED] = "yes"
        elif claim is not None and self.controller == "drop":
            claim["metadata"]["annotations"].pop(volumes.SELECTED_NODE, None)
        return self._answer(claim)

    async def patch_persistent_volume_claim(
        self, *, namespace: str, name: str, patch: JSON
    ) -> k8s_client.ApiResponse:
        return self._patch("persistentvolumeclaims", self.claims.get(name), patch)


async def _attempt(minor: int, controller: str, *, provisioned: bool = False) -> VolumeCluster:
    """One scheduling attempt of POD under kube-scheduler v1.``minor``'s defaults: its claim
    binds a local PV on n1, or (``provisioned``) is provisioned there."""
    if provisioned:
        storage_class = storage_class_body("fast", provisioner="csi.example")
        pvs: list[JSON] = []
    else:
        storage_class = storage_class_body()
        pvs = [pv_body("pv-1", node="n1")]
    claim = pvc_body("data", uid="c1", storage_class="fast" if provisioned else "local-wffc")
    api = VolumeCluster(copy.deepcopy(pvs), [copy.deepcopy(claim)], controller)
    s = scheduler_module.Scheduler(
        served=scheduler_module.defaults("plumb", emulation.emulate(minor)),
        binder=binder.Binder(api),
        recorder=events.Recorder(api, instance="test", clock=ManualClock()),
        kernel=reference_kernel,
        queue=queue_module.SchedulingQueue(clock=ManualClock()),
        volume_api=api,
    )
    s.cache.volumes.resync_pvs(pvs)
    s.cache.volumes.resync_pvcs([claim])
    s.cache.volumes.resync_storage_classes([storage_class])
    node = make_node("n1").capacity(cpu="4").obj()
    node["metadata"]["labels"]["kubernetes.io/hostname"] = "n1"
    s.feed.resync([node], [POD.obj()])
    entries = await s.queue.pop_batch(8)
    await s.schedule_batch(entries)
    await s.drain()
    return api


def _steps(api: VolumeCluster) -> list[str]:
    return [
        kind if kind != "nominatedNodeName" else f"nominatedNodeName={value}"
        for kind, value in api.log
    ]


@pytest.mark.parametrize("minor", [35, 36, 37])
async def test_the_pod_is_nominated_before_its_prebind_writes(minor: int) -> None:
    api = await _attempt(minor, "bind")
    assert _steps(api) == ["nominatedNodeName=n1", "persistentvolumes", "bind"]


async def test_v1_34_writes_no_nomination() -> None:
    api = await _attempt(34, "bind")
    assert _steps(api) == ["persistentvolumes", "bind"]


@pytest.mark.parametrize(
    ("minor", "steps"),
    [
        (34, ["persistentvolumeclaims"]),
        # v1.35 compares with the pod as queued (no nomination) and sends nothing.
        (35, ["nominatedNodeName=n1", "persistentvolumeclaims"]),
        (36, ["nominatedNodeName=n1", "persistentvolumeclaims", "nominatedNodeName=None"]),
        (37, ["nominatedNodeName=n1", "persistentvolumeclaims", "nominatedNodeName=None"]),
    ],
)
async def test_a_failed_prebind_clears_the_nomination_from_v1_36(
    minor: int, steps: list[str]
) -> None:
    api = await _attempt(minor, "drop", provisioned=True)
    assert _steps(api) == steps
    (failed,) = [e for e in api.events if e["reason"] == "FailedScheduling"]
    assert failed["note"] == (
        'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC '
        '"data"'
    )


async def test_a_pod_whose_claims_are_bound_is_not_nominated() -> None:
    # PreBindPreFlight skips: nothing to bind, the pod is bound at once.
    api = VolumeCluster([], [], "bind")
    s = scheduler_module.Scheduler(
        served=scheduler_module.defaults("plumb", emulation.emulate(37)),
        binder=binder.Binder(api),
        recorder=events.Recorder(api, instance="test", clock=ManualClock()),
        kernel=reference_kernel,
        queue=queue_module.SchedulingQueue(clock=ManualClock()),
        volume_api=api,
    )
    s.feed.resync([make_node("n1").capacity(cpu="4").obj()], [POD.copy().obj()])
    pv = pv_body("pv-1", claim=("default", "data"), phase="Bound")
    s.cache.volumes.resync_pvs([pv])
    s.cache.volumes.resync_pvcs([pvc_body("data", volume="pv-1", bound=True)])
    entries = await s.queue.pop_batch(8)
    await s.schedule_batch(entries)
    await s.drain()
    assert _steps(api) == ["bind"]
