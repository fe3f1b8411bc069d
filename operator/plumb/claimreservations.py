"""DynamicResources' writes over the API: a claim allocated and reserved for its pod (PreBind),
the reservation taken back (Unreserve), and an idle claim deallocated (PostFilter).

What kube-scheduler's plugin does (dynamicresources.go bindClaim, Unreserve,
deallocateOrDeletePodClaims), with the same words in its errors:

1. PreBind, per claim not yet reserved for the pod: a claim the cycle allocated first gets the
   finalizer ``resource.kubernetes.io/delete-protection`` (an update of the claim), then its
   status gets the allocation and the pod appended to ``reservedFor`` (an update of the status);
   a claim allocated already gets the reservation only. Both writes are conditional on the
   resourceVersion last seen (kube-scheduler updates its cached copy): on a conflict the claim
   is read again and the write tried again, up to five times (client-go's DefaultRetry); a
   claim deleted or allocated elsewhere meanwhile fails PreBind. plumb writes merge patches that
   carry the resourceVersion and the whole lists, which the API server applies exactly as those
   updates.
2. Unreserve: the pod's entry removed from ``reservedFor`` by a strategic merge patch (the
   allocation stays; PostFilter frees a claim no pod uses).
3. PostFilter: a claim allocated where the pod cannot go, reserved for no other pod, loses its
   allocation and reservations (``deallocation of ResourceClaim completed``).

Failures read as kube-scheduler's FailedScheduling does: ``running PreBind plugin
"DynamicResources": ...``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from plumb.backend.records import draobjects
from plumb.k8s import client as k8s_client

NAME = "DynamicResources"
PREFIX = f'running PreBind plugin "{NAME}": '
RETRIES = 5  # client-go retry.DefaultRetry's steps
DEALLOCATED = "deallocation of ResourceClaim completed"


class ClaimApi(Protocol):
    """The part of the API client these writes use (k8s.client.ApiClient; a fake in tests)."""

    async def get_resource_claim(self, *, namespace: str, name: str) -> k8s_client.ApiResponse: ...

    async def replace_resource_claim(
        self, *, namespace: str, name: str, body: k8s_client.JSON
    ) -> k8s_client.ApiResponse: ...

    async def replace_resource_claim_status(
        self, *, namespace: str, name: str, body: k8s_client.JSON
    ) -> k8s_client.ApiResponse: ...

    async def patch_resource_claim_status(
        self, *, namespace: str, name: str, patch: k8s_client.JSON
    ) -> k8s_client.ApiResponse: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    def consumer(self) -> dict[str, str]:
        """Its entry in a claim's status.reservedFor."""
        return {"resource": "pods", "name": self.name, "uid": self.uid}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Reservation:
    """One claim PreBind writes: ``body`` as the cycle saw it (the watched object), and the
    status.allocation the cycle chose (None: allocated already, reserved only)."""

    body: Mapping[str, Any]
    allocation: Mapping[str, Any] | None = None

    @property
    def key(self) -> str:
        metadata = self.body.get("metadata") or {}
        return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    """``ok``, or the FailedScheduling message; ``written``: each claim as the API server
    answered the last write (for the cache to assume until the watch shows it)."""

    ok: bool
    message: str = ""
    written: tuple[Mapping[str, Any], ...] = ()


class _ClaimWriteFailed(Exception):
    """A condition that fails PreBind (the message is kube-scheduler's error text)."""


def _metadata(body: Mapping[str, Any]) -> Mapping[str, Any]:
    return body.get("metadata") or {}


def _reserved_for(body: Mapping[str, Any], uid: str) -> bool:
    return any(
        entry.get("uid") == uid for entry in (body.get("status") or {}).get("reservedFor") or ()
    )


async def _read(api: ClaimApi, key: str, namespace: str, name: str) -> Mapping[str, Any]:
    response = await api.get_resource_claim(namespace=namespace, name=name)
    if not response.ok:
        raise _ClaimWriteFailed(f"get updated claim {key} after conflict: {response.message()}")
    body: Mapping[str, Any] = response.body
    return body


async def _reserve_one(
    api: ClaimApi, pod: PodRef, reservation: Reservation, gate: Callable[[], bool]
) -> Mapping[str, Any]:
    """bindClaim: the claim as the API server holds it after the writes."""
    key = reservation.key
    metadata = _metadata(reservation.body)
    namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
    allocation = reservation.allocation
    body: Mapping[str, Any] = reservation.body
    for attempt in range(RETRIES):
        if attempt:
            body = await _read(api, key, namespace, name)
        metadata = _metadata(body)
        if metadata.get("deletionTimestamp") is not None:
            raise _ClaimWriteFailed(f"claim {key} got deleted in the meantime")
        status = dict(body.get("status") or {})
        if allocation is not None:
            if status.get("allocation") is not None:
                raise _ClaimWriteFailed(f"claim {key} got allocated elsewhere in the meantime")
            finalizers = list(metadata.get("finalizers") or ())
            if draobjects.CLAIM_FINALIZER not in finalizers:
                if not gate():
                    raise _ClaimWriteFailed("not sent: this replica is not the leader")
                updated = {
                    **body,
                    "metadata": {
                        **metadata,
                        "finalizers": [*finalizers, draobjects.CLAIM_FINALIZER],
                    },
                }
                response = await api.replace_resource_claim(
                    namespace=namespace, name=name, body=updated
                )
                if response.status == 409:
                    continue
                if not response.ok:
                    raise _ClaimWriteFailed(f"add finalizer to claim {key}: {response.message()}")
                body = response.body
            status["allocation"] = dict(allocation)
        status["reservedFor"] = [*(status.get("reservedFor") or ()), pod.consumer()]
        if not gate():
            raise _ClaimWriteFailed("not sent: this replica is not the leader")
        response = await api.replace_resource_claim_status(
            namespace=namespace, name=name, body={**body, "status": status}
        )
        if response.status == 409:
            continue
        if not response.ok:
            what = "allocation and reservation" if allocation is not None else "reservation"
            raise _ClaimWriteFailed(f"add {what} to claim {key}: {response.message()}")
        written: Mapping[str, Any] = response.body
        return written
    what = "allocation and reservation" if allocation is not None else "reservation"
    raise _ClaimWriteFailed(
        f"add {what} to claim {key}: Operation cannot be fulfilled on "
        f'resourceclaims.resource.k8s.io "{name}": the object has been modified; please '
        "apply your changes to the latest version and try again"
    )


async def reserve(
    api: ClaimApi,
    pod: PodRef,
    reservations: Sequence[Reservation],
    *,
    gate: Callable[[], bool] = lambda: True,
) -> Outcome:
    """PreBind: every claim allocated (where the cycle allocated it) and reserved for ``pod``,
    in the pod's order; the first failure ends it. ``gate`` (the leader's may_act) is asked
    before each write."""
    written: list[Mapping[str, Any]] = []
    try:
        for reservation in reservations:
            if _reserved_for(reservation.body, pod.uid):
                continue
            written.append(await _reserve_one(api, pod, reservation, gate))
    except _ClaimWriteFailed as failure:
        return Outcome(ok=False, message=PREFIX + str(failure), written=tuple(written))
    except k8s_client.TransportError as error:
        return Outcome(ok=False, message=PREFIX + str(error), written=tuple(written))
    return Outcome(ok=True, written=tuple(written))


def unreserve_patch(claim_uid: str, pod_uid: str) -> k8s_client.JSON:
    """Unreserve's strategic merge patch: the pod's reservedFor entry deleted by uid."""
    return {
        "metadata": {"uid": claim_uid},
        "status": {"reservedFor": [{"$patch": "delete", "uid": pod_uid}]},
    }


async def unreserve(
    api: ClaimApi, pod: PodRef, claims: Sequence[draobjects.ResourceClaim]
) -> list[str]:
    """Unreserve: the pod's reservation taken off each allocated claim that holds one; returns
    the errors (kube-scheduler logs them: the next attempt gets here again)."""
    errors = []
    for claim in claims:
        if claim.allocation is None or not any(c.uid == pod.uid for c in claim.reserved_for):
            continue
        try:
            response = await api.patch_resource_claim_status(
                namespace=claim.namespace,
                name=claim.name,
                patch=unreserve_patch(claim.uid, pod.uid),
            )
        except k8s_client.TransportError as error:
            errors.append(f"unreserve {claim.key}: {error}")
            continue
        if not response.ok and response.status != 404:
            errors.append(f"unreserve {claim.key}: {response.message()}")
    return errors


async def deallocate(api: ClaimApi, body: Mapping[str, Any]) -> str | None:
    """PostFilter's deallocation of an idle claim (status cleared: allocation, reservedFor,
    devices), conditional on the version seen; None when done, else the error."""
    metadata = _metadata(body)
    status = {k: v for k, v in (body.get("status") or {}).items() if k not in _CLEARED}
    try:
        response = await api.replace_resource_claim_status(
            namespace=str(metadata.get("namespace", "")),
            name=str(metadata.get("name", "")),
            body={**body, "status": status},
        )
    except k8s_client.TransportError as error:
        return str(error)
    return None if response.ok else response.message()


_CLEARED = frozenset({"allocation", "reservedFor", "devices"})
