"""VolumeBinding's PreBind against a fake API (prebind.py): the plan's PV bound to its claim and
the PV controller waited for, and each way it gives up."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping

from plumb import prebind
from plumb.backend.cache import volumes
from plumb.backend.records import objects
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb.k8s import client as k8s_client
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import small_clusters
from tests.support.volume_objects import (
    HOSTNAME,
    JSON,
    NS,
    pv_body,
    pvc_body,
    storage_class_body,
    store_of,
)

# --- PreBind ------------------------------------------------------------------------------------


class PrebindApi:
    """PVs and PVCs by name; ``controller`` runs after each poll's reads, as the PV controller."""

    def __init__(self, pvs: list[JSON], claims: list[JSON]) -> None:
        self.pvs = {p["metadata"]["name"]: p for p in pvs}
        self.claims = {c["metadata"]["name"]: c for c in claims}
        self.patches: list[tuple[str, str, JSON]] = []
        self.version = 100

    def _answer(self, body: JSON | None) -> k8s_client.ApiResponse:
        if body is None:
            return k8s_client.ApiResponse(status=404, body={"message": "not found"})
        return k8s_client.ApiResponse(status=200, body=copy.deepcopy(body))

    def _patch(self, kind: str, body: JSON | None, patch: JSON) -> k8s_client.ApiResponse:
        self.patches.append((kind, body["metadata"]["name"] if body else "", patch))
        if body is None:
            return self._answer(None)
        wanted = patch.get("metadata", {}).get("resourceVersion")
        if wanted is not None and wanted != body["metadata"].get("resourceVersion"):
            message = f'Operation cannot be fulfilled on {kind} "{body["metadata"]["name"]}"'
            return k8s_client.ApiResponse(status=409, body={"message": message})
        annotations = patch.get("metadata", {}).get("annotations") or {}
        body["metadata"].setdefault("annotations", {}).update(annotations)
        body["spec"].update(patch.get("spec") or {})
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        return self._answer(body)

    async def get_persistent_volume(self, *, name: str) -> k8s_client.ApiResponse:
        return self._answer(self.pvs.get(name))

    async def patch_persistent_volume(self, *, name: str, patch: JSON) -> k8s_client.ApiResponse:
        return self._patch("persistentvolumes", self.pvs.get(name), patch)

    async def get_persistent_volume_claim(
        self, *, namespace: str, name: str
    ) -> k8s_client.ApiResponse:
        return self._answer(self.claims.get(name))

    async def patch_persistent_volume_claim(
        self, *, namespace: str, name: str, patch: JSON
    ) -> k8s_client.ApiResponse:
        return self._patch("persistentvolumeclaims", self.claims.get(name), patch)

    def complete(self) -> None:
        """What the PV controller does with a PV whose claimRef names a claim."""
        for pv in self.pvs.values():
            ref = pv["spec"].get("claimRef")
            claim = self.claims.get(ref["name"]) if ref else None
            if claim is not None:
                claim["spec"]["volumeName"] = pv["metadata"]["name"]
                claim["metadata"]["annotations"][volumes.BIND_COMPLETED] = "yes"


def _planned() -> tuple[PrebindApi, volumes.BindingPlan]:
    pv = pv_body("pv-b", node="node-b")
    pv["metadata"]["resourceVersion"] = "7"
    claim = pvc_body("data", uid="c1")
    claim["metadata"]["resourceVersion"] = "8"
    store = store_of(pvs=(pv,), claims=(claim,))
    plan = volume_plugins.plan(
        small_clusters.pod(make_pod("web").claims("data"), "pod-uid"),
        objects.parse_node(make_node("node-b").obj()),
        store,
    )
    return PrebindApi([copy.deepcopy(pv)], [copy.deepcopy(claim)]), plan


NODE_B = {HOSTNAME: "node-b"}


def _run(
    api: PrebindApi,
    plan: volumes.BindingPlan,
    *,
    labels: Mapping[str, str] | None = NODE_B,
    exists: bool = True,
    polls_before_bound: int = 1,
    bind_timeout: float = 30.0,
) -> prebind.PreBindResult:
    polls = 0

    async def sleep(_: float) -> None:
        nonlocal polls
        polls += 1
        if polls == polls_before_bound:
            api.complete()

    watched = prebind.Watched(pod_exists=lambda: exists, node_labels=lambda: labels)
    return asyncio.run(
        prebind.prebind(api, plan, watched, bind_timeout=bind_timeout, interval=0, sleep=sleep)
    )


def test_prebind_binds_the_pv_to_its_claim_and_waits_for_the_controller() -> None:
    api, plan = _planned()
    assert _run(api, plan, polls_before_bound=3) == prebind.OK
    ((kind, name, patch),) = api.patches
    assert (kind, name) == ("persistentvolumes", "pv-b")
    assert patch == {
        "metadata": {
            "resourceVersion": "7",
            "annotations": {volumes.BOUND_BY_CONTROLLER: "yes"},
        },
        "spec": {
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": NS,
                "name": "data",
                "uid": "c1",
                "resourceVersion": "8",
            }
        },
    }


def test_prebind_of_an_empty_plan_writes_nothing() -> None:
    api, _plan = _planned()
    empty = volumes.BindingPlan(namespace=NS, pod="web", pod_uid="u", node="node-b")
    assert _run(api, empty) == prebind.OK
    assert api.patches == []


def test_prebind_fails_when_the_pv_changed_since_the_decision() -> None:
    api, plan = _planned()
    api.pvs["pv-b"]["metadata"]["resourceVersion"] = "9"
    result = _run(api, plan)
    assert not result.ok
    assert result.message == (
        'running PreBind plugin "VolumeBinding": Operation cannot be fulfilled on '
        'persistentvolumes "pv-b"'
    )


def test_prebind_fails_on_its_deadline_and_when_the_claim_ref_is_reset() -> None:
    api, plan = _planned()
    result = _run(api, plan, polls_before_bound=10**6, bind_timeout=0)
    assert result.message == (
        'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
    )
    api, plan = _planned()

    async def reset(_: float) -> None:
        api.pvs["pv-b"]["spec"]["claimRef"] = None

    watched = prebind.Watched(pod_exists=lambda: True, node_labels=lambda: NODE_B)
    result = asyncio.run(prebind.prebind(api, plan, watched, sleep=reset))
    assert result.message == (
        'running PreBind plugin "VolumeBinding": binding volumes: ClaimRef got reset for pv "pv-b"'
    )


def test_prebind_gives_up_when_the_pod_is_gone_or_the_node_no_longer_fits() -> None:
    api, plan = _planned()
    assert "pod does not exist any more" in _run(api, plan, exists=False).message
    api, plan = _planned()
    result = _run(api, plan, labels={HOSTNAME: "node-x"}, polls_before_bound=5)
    assert result.message == (
        'running PreBind plugin "VolumeBinding": binding volumes: pv "pv-b" node affinity '
        'doesn\'t match node "node-b": no matching NodeSelectorTerms'
    )


def test_prebind_asks_for_provisioning_with_the_selected_node() -> None:
    claim = pvc_body("data", storage_class="fast", uid="c1")
    claim["metadata"]["resourceVersion"] = "3"
    store = store_of(
        claims=(claim,), classes=(storage_class_body("fast", provisioner="csi.example"),)
    )
    plan = volume_plugins.plan(
        small_clusters.pod(make_pod("web").claims("data"), "pod-uid"),
        objects.parse_node(make_node("node-b").obj()),
        store,
    )
    provisioned = pv_body("pvc-c1", csi=("csi.example", "h"), claim=(NS, "data"), phase="Bound")
    api = PrebindApi([], [copy.deepcopy(claim)])

    async def provision(_: float) -> None:
        api.pvs["pvc-c1"] = provisioned
        api.complete()

    watched = prebind.Watched(pod_exists=lambda: True, node_labels=lambda: NODE_B)
    assert asyncio.run(prebind.prebind(api, plan, watched, sleep=provision)) == prebind.OK
    ((kind, name, patch),) = api.patches
    assert (kind, name) == ("persistentvolumeclaims", "data")
    assert patch == {
        "metadata": {"resourceVersion": "3", "annotations": {volumes.SELECTED_NODE: "node-b"}}
    }
    # A provisioner that gives up removes the annotation: the pod is retried.
    api = PrebindApi([], [copy.deepcopy(claim)])

    async def give_up(_: float) -> None:
        api.claims["data"]["metadata"]["annotations"].pop(volumes.SELECTED_NODE, None)

    result = asyncio.run(prebind.prebind(api, plan, watched, sleep=give_up))
    assert result.message == (
        'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC '
        '"data"'
    )
