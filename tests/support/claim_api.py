"""A ResourceClaim API that accepts every write, for unit tests of the cycle with claims: the
claims by namespace/name, JSON merge patches applied as the API server applies them (no
conflicts), and each claim as written, to feed back as the watch would."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from plumb.k8s import client as k8s_client

JSON = dict[str, Any]


class AcceptingClaims:
    """``claimreservations.ClaimApi`` over a dict of claim bodies; every write succeeds.
    ``echo``, when set, is handed each claim as written before the write returns: a watch
    event that comes back while the writer still awaits its answer."""

    def __init__(self, *claims: JSON) -> None:
        self.claims: dict[str, JSON] = {}
        self.version = 100
        self.echo: Callable[[JSON], None] | None = None
        for claim in claims:
            self.add(claim)

    def add(self, claim: JSON) -> None:
        metadata = claim["metadata"]
        self.claims[f"{metadata['namespace']}/{metadata['name']}"] = copy.deepcopy(claim)

    def _answer(self, key: str) -> k8s_client.ApiResponse:
        stored = self.claims.get(key)
        if stored is None:
            return k8s_client.ApiResponse(status=404, body={"message": f"{key} not found"})
        return k8s_client.ApiResponse(status=200, body=copy.deepcopy(stored))

    def _merge(self, key: str, patch: JSON) -> k8s_client.ApiResponse:
        stored = self.claims.get(key)
        if stored is None:
            return self._answer(key)
        _merge_into(stored, {k: v for k, v in patch.items() if k != "metadata"})
        finalizers = (patch.get("metadata") or {}).get("finalizers")
        if finalizers is not None:
            stored["metadata"]["finalizers"] = list(finalizers)
        self.version += 1
        stored["metadata"]["resourceVersion"] = str(self.version)
        return self._written(key)

    def _written(self, key: str) -> k8s_client.ApiResponse:
        if self.echo is not None:
            self.echo(copy.deepcopy(self.claims[key]))
        return self._answer(key)

    async def get_resource_claim(self, *, namespace: str, name: str) -> k8s_client.ApiResponse:
        return self._answer(f"{namespace}/{name}")

    async def patch_resource_claim(
        self, *, namespace: str, name: str, patch: JSON
    ) -> k8s_client.ApiResponse:
        return self._merge(f"{namespace}/{name}", patch)

    async def patch_resource_claim_status(
        self, *, namespace: str, name: str, patch: JSON, strategic: bool = False
    ) -> k8s_client.ApiResponse:
        key = f"{namespace}/{name}"
        if not strategic:
            return self._merge(key, patch)
        stored = self.claims[key]
        gone = {e["uid"] for e in patch["status"]["reservedFor"] if e.get("$patch") == "delete"}
        reserved = stored.setdefault("status", {}).get("reservedFor") or []
        stored["status"]["reservedFor"] = [e for e in reserved if e["uid"] not in gone]
        return self._written(key)

    async def create_resource_claim(self, *, namespace: str, body: JSON) -> k8s_client.ApiResponse:
        """An extended-resource claim: named from its generateName, as the API server does."""
        created = copy.deepcopy(body)
        metadata = created.setdefault("metadata", {})
        name = (
            metadata.get("name")
            or f"{metadata.get('generateName', 'claim-')}{len(self.claims):05d}"
        )
        metadata.update(name=name, namespace=namespace, resourceVersion="1")
        metadata.setdefault("uid", f"{namespace}-{name}-uid")
        self.claims[f"{namespace}/{name}"] = created
        return k8s_client.ApiResponse(status=201, body=copy.deepcopy(created))

    async def delete_resource_claim(
        self, *, namespace: str, name: str, uid: str
    ) -> k8s_client.ApiResponse:
        gone = self.claims.pop(f"{namespace}/{name}", None)
        return k8s_client.ApiResponse(status=404 if gone is None else 200, body=gone or {})

    async def patch_pod_status(
        self, *, namespace: str, name: str, patch: JSON
    ) -> k8s_client.ApiResponse:
        return k8s_client.ApiResponse(status=200, body={})


def _merge_into(target: JSON, patch: JSON) -> None:
    """RFC 7386: null deletes, an object merges, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
