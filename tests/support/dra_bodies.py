"""ResourceSlice and ResourceClaim bodies as the API serves them, for the DRA store's tests
(small functions; the scenarios' builders live in plumb_dev.testing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DRIVER = "gpu.example.com"


def device(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, **extra}


def slice_body(
    name: str,
    *devices: Mapping[str, Any],
    pool: str = "pool-a",
    generation: int = 1,
    count: int = 1,
    **where: Any,
) -> dict[str, Any]:
    if not where:
        where = {"nodeName": "node-a"}
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            **where,
            "devices": list(devices),
        },
    }


def selector(key: str, *values: str) -> dict[str, Any]:
    expression = {"key": key, "operator": "In", "values": list(values)}
    return {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}


def claim_body(
    name: str,
    *,
    namespace: str = "ml",
    results: tuple[Mapping[str, Any], ...] | None = None,
    reserved: tuple[str, ...] = (),
    owner: str = "",
    version: str = "1",
    deleting: bool = False,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": version,
    }
    if owner:
        metadata["ownerReferences"] = [
            {"kind": "Pod", "name": "p", "uid": owner, "controller": True, "apiVersion": "v1"}
        ]
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if results is not None:
        status["allocation"] = {"devices": {"results": list(results)}}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": u, "uid": u} for u in reserved]
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}
    return {"metadata": metadata, "spec": spec, "status": status}


def result(device_name: str, pool: str = "pool-a", **extra: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device_name, **extra}
