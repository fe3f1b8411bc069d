"""VolumeBinding's PreBind over the API: bind the plan's PVs to their claims, ask for dynamic
provisioning on the chosen node, then wait until the PV controller has bound every claim.

What kube-scheduler v1.34's volume binder does (BindPodVolumes):

1. Each chosen PV gets ``spec.claimRef`` naming the claim (with its uid) and, unless the PV was
   bound to that claim already, the annotation ``pv.kubernetes.io/bound-by-controller: yes``;
   each claim to provision gets ``volume.kubernetes.io/selected-node: <node>``. Each write is
   conditional on the resourceVersion the decision saw (kube-scheduler updates its cached copy),
   so a PV or claim changed meanwhile answers 409 and the pod is retried. The first failed write
   ends PreBind with the API server's message.
2. Every second, up to ``bind_timeout`` (kube-scheduler's bindTimeoutSeconds, 600 by default),
   it reads the objects again: done when every claim is fully bound (volumeName and
   ``pv.kubernetes.io/bind-completed``); failed when the pod or the node is gone, a PV's node
   affinity no longer matches the node, a PV's claimRef was reset, or a provisioner dropped the
   selected-node annotation; on the deadline, ``context deadline exceeded``.

Failures read as kube-scheduler's FailedScheduling does: ``running PreBind plugin
"VolumeBinding": ...``. The caller then forgets the plan's assumptions (``Volumes.forget``)
and retries the pod, as Unreserve does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from plumb.backend.cache import volumes
from plumb.framework.plugins import volumebinding
from plumb.k8s import client as k8s_client

# VolumeBindingArgs.bindTimeoutSeconds's default, and the binder's poll interval.
BIND_TIMEOUT = 600.0
POLL_INTERVAL = 1.0
PREFIX = f'running PreBind plugin "{volumebinding.NAME}": '
DEADLINE = "context deadline exceeded"


class VolumeApi(Protocol):
    """The part of the API client PreBind uses (k8s.client.ApiClient; a fake in tests)."""

    async def get_persistent_volume(self, *, name: str) -> k8s_client.ApiResponse: ...

    async def patch_persistent_volume(
        self, *, name: str, patch: k8s_client.JSON
    ) -> k8s_client.ApiResponse: ...

    async def get_persistent_volume_claim(
        self, *, namespace: str, name: str
    ) -> k8s_client.ApiResponse: ...

    async def patch_persistent_volume_claim(
        self, *, namespace: str, name: str, patch: k8s_client.JSON
    ) -> k8s_client.ApiResponse: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class Watched:
    """What PreBind asks the caller's cache each poll, as kube-scheduler asks its listers:
    whether the pod (this uid) still exists, and the node's labels (None: the node is gone)."""

    pod_exists: Callable[[], bool]
    node_labels: Callable[[], Mapping[str, str] | None]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PreBindResult:
    """``ok``, or the FailedScheduling message of the failure."""

    ok: bool
    message: str = ""


OK = PreBindResult(ok=True)


class _Failed(Exception):
    """A condition that fails the binding (the message is kube-scheduler's error text)."""


def _failed(message: str) -> PreBindResult:
    return PreBindResult(ok=False, message=PREFIX + message)


def claim_ref(claim: volumes.Claim) -> k8s_client.JSON:
    """The ObjectReference kube-scheduler puts in the PV's claimRef (reference.GetReference)."""
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": claim.namespace,
        "name": claim.name,
        "uid": claim.uid,
        "resourceVersion": claim.resource_version,
    }


def pv_patch(binding: volumes.StaticBinding) -> k8s_client.JSON:
    """GetBindVolumeToClaim as a merge patch, conditional on the PV's version."""
    pv, claim = binding.pv, binding.claim
    metadata: dict[str, Any] = {"resourceVersion": pv.resource_version}
    if not pv.bound_to(claim) and not pv.bound_by_controller:
        metadata["annotations"] = {volumes.BOUND_BY_CONTROLLER: "yes"}
    patch: k8s_client.JSON = {"metadata": metadata}
    ref = pv.claim
    if ref is None or (ref.namespace, ref.name, ref.uid) != (
        claim.namespace,
        claim.name,
        claim.uid,
    ):
        patch["spec"] = {"claimRef": claim_ref(claim)}
    return patch


def claim_patch(claim: volumes.Claim, node: str) -> k8s_client.JSON:
    """The selected-node annotation that asks for provisioning, conditional on the version."""
    return {
        "metadata": {
            "resourceVersion": claim.resource_version,
            "annotations": {volumes.SELECTED_NODE: node},
        }
    }


async def prebind(
    api: VolumeApi,
    plan: volumes.BindingPlan,
    watched: Watched,
    *,
    bind_timeout: float = BIND_TIMEOUT,
    interval: float = POLL_INTERVAL,
    gate: Callable[[], bool] = lambda: True,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> PreBindResult:
    """Write the plan and wait for the PV controller; OK at once for an empty plan.

    ``gate`` (the leader's may_act) is asked before each write; a replica that may not act
    writes nothing more and fails the PreBind."""
    if plan.empty:
        return OK
    try:
        for binding in plan.bindings:
            if not gate():
                raise _Failed("not sent: this replica is not the leader")
            response = await api.patch_persistent_volume(
                name=binding.pv.name, patch=pv_patch(binding)
            )
            if not response.ok:
                raise _Failed(response.message())
        for claim in plan.provisions:
            if not gate():
                raise _Failed("not sent: this replica is not the leader")
            response = await api.patch_persistent_volume_claim(
                namespace=claim.namespace, name=claim.name, patch=claim_patch(claim, plan.node)
            )
            if not response.ok:
                raise _Failed(response.message())
    except _Failed as failure:
        return _failed(str(failure))
    except k8s_client.TransportError as error:
        return _failed(str(error))
    deadline = time.monotonic() + bind_timeout
    while True:
        await sleep(interval)
        try:
            if await _bound(api, plan, watched):
                return OK
        except _Failed as failure:
            return _failed(f"binding volumes: {failure}")
        except k8s_client.TransportError:
            pass  # kube-scheduler reads its informers here: a lost request is just a late one
        if time.monotonic() >= deadline:
            return _failed(f"binding volumes: {DEADLINE}")


async def _get_pv(api: VolumeApi, name: str) -> volumes.PersistentVolume | None:
    response = await api.get_persistent_volume(name=name)
    if response.status == 404:
        return None
    if not response.ok:
        raise k8s_client.TransportError(response.message())
    return volumes.parse_pv(response.body)


async def _get_claim(api: VolumeApi, namespace: str, name: str) -> volumes.Claim | None:
    response = await api.get_persistent_volume_claim(namespace=namespace, name=name)
    if response.status == 404:
        return None
    if not response.ok:
        raise k8s_client.TransportError(response.message())
    return volumes.parse_claim(response.body)


async def _bound(api: VolumeApi, plan: volumes.BindingPlan, watched: Watched) -> bool:
    """checkBindings: True when all is bound, False to wait, _Failed to give up."""
    labels = watched.node_labels()
    if labels is None:
        raise _Failed(f'failed to get node "{plan.node}": node "{plan.node}" not found')
    if not watched.pod_exists():
        raise _Failed(f'pod does not exist any more: pod "{plan.pod}" not found')
    for binding in plan.bindings:
        pv = await _get_pv(api, binding.pv.name)
        if pv is None:
            raise _Failed(
                f'failed to check binding: persistentvolume "{binding.pv.name}" not found'
            )
        claim = await _get_claim(api, binding.claim.namespace, binding.claim.name)
        if claim is None:
            raise _Failed(
                f'failed to check binding: persistentvolumeclaim "{binding.claim.key}" not found'
            )
        if not volumebinding.pv_fits_labels(pv, labels):
            raise _Failed(
                f'pv "{pv.name}" node affinity doesn\'t match node "{plan.node}": '
                "no matching NodeSelectorTerms"
            )
        if pv.claim is None or not pv.claim.uid:
            raise _Failed(f'ClaimRef got reset for pv "{pv.name}"')
        if not claim.fully_bound:
            return False
    for wanted in plan.provisions:
        claim = await _get_claim(api, wanted.namespace, wanted.name)
        if claim is None:
            raise _Failed(
                f'failed to check provisioning pvc: persistentvolumeclaim "{wanted.key}" not found'
            )
        if claim.selected_node != plan.node:
            raise _Failed(f'provisioning failed for PVC "{claim.name}"')
        if claim.volume_name:
            pv = await _get_pv(api, claim.volume_name)
            if pv is None:
                return False  # not seen yet, or deleted (the claim is then unbound)
            if not volumebinding.pv_fits_labels(pv, labels):
                raise _Failed(
                    f'pv "{pv.name}" node affinity doesn\'t match node "{plan.node}": '
                    "no matching NodeSelectorTerms"
                )
        if not claim.fully_bound:
            return False
    return True
