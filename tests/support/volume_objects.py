"""Volume objects for tests: PersistentVolume, claim, StorageClass, CSIDriver and CSIStorageCapacity
bodies, a pod's body with claim volumes, the five nodes the volume tests place on, and plumb's
volume store filled from bodies (shared by the unit tests of the store, the volume plugins and
PreBind, and by tests/integration/test_volume_prebind.py and test_volume_placement.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plumb.backend.cache import volumes
from plumb.framework.plugins import volumezone
from plumb_dev.testing.builders import make_node
from tests.support.small_clusters import statics

JSON = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
LOCAL = "local-wffc"
NS = "default"


def pv_body(
    name: str,
    *,
    size: str = "10Gi",
    storage_class: str = LOCAL,
    node: str | None = None,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    claim: tuple[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    csi: tuple[str, str] | None = None,
    phase: str | None = "Available",
) -> JSON:
    """A PV; ``node`` pins it there (a local volume), ``claim`` pre-binds it (namespace, name)."""
    spec: JSON = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": storage_class,
        "persistentVolumeReclaimPolicy": "Retain",
    }
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    else:
        spec["local"] = {"path": f"/mnt/{name}"}
    if node is not None:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                ]
            }
        }
    elif csi is None:
        # A local volume must name its node; any node will do for a test of something else.
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "Exists"}]}
                ]
            }
        }
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    body: JSON = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }
    if phase is not None:
        body["status"] = {"phase": phase}
    return body


def pvc_body(
    name: str,
    namespace: str = NS,
    *,
    size: str = "1Gi",
    storage_class: str | None = LOCAL,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    volume: str = "",
    bound: bool = False,
    uid: str = "",
    owner_uid: str = "",
    annotations: Mapping[str, str] | None = None,
) -> JSON:
    """A claim; ``bound`` makes it fully bound to ``volume`` as the PV controller leaves it."""
    spec: JSON = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume:
        spec["volumeName"] = volume
    metadata: JSON = {"name": name, "namespace": namespace, "annotations": dict(annotations or {})}
    if uid:
        metadata["uid"] = uid
    if bound:
        metadata["annotations"][volumes.BIND_COMPLETED] = "yes"
    if owner_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": owner_uid, "controller": True}
        ]
    body: JSON = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata,
        "spec": spec,
    }
    if bound:
        body["status"] = {"phase": "Bound"}
    return body


def storage_class_body(
    name: str = LOCAL,
    *,
    provisioner: str = volumes.NO_PROVISIONER,
    mode: str = volumes.WAIT_FOR_FIRST_CONSUMER,
    zones: tuple[str, ...] = (),
) -> JSON:
    body: JSON = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        "reclaimPolicy": "Retain",
    }
    if zones:
        body["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": volumezone.ZONE, "values": list(zones)}]}
        ]
    return body


def csinode_body(name: str, *drivers: str, limits: Mapping[str, int] | None = None) -> JSON:
    """A node's CSINode with these drivers registered (``limits``: their attach counts)."""
    registered = []
    for driver in drivers:
        entry: JSON = {"name": driver, "nodeID": name}
        if limits and driver in limits:
            entry["allocatable"] = {"count": limits[driver]}
        registered.append(entry)
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": registered},
    }


def csidriver_body(
    name: str, *, storage_capacity: bool = False, prevent_if_missing: bool | None = None
) -> JSON:
    """A CSIDriver: ``storage_capacity`` has its CSIStorageCapacities checked;
    ``prevent_if_missing`` sets preventPodSchedulingIfMissing (None: unset)."""
    spec: JSON = {"attachRequired": False, "storageCapacity": storage_capacity}
    if prevent_if_missing is not None:
        spec["preventPodSchedulingIfMissing"] = prevent_if_missing
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": spec,
    }


def storage_capacity_body(
    name: str,
    storage_class: str,
    *,
    capacity: str | None = None,
    maximum: str | None = None,
    node: str | None = None,
    match_labels: Mapping[str, str] | None = None,
    namespace: str = NS,
) -> JSON:
    """A CSIStorageCapacity of ``storage_class``: ``node`` (its hostname label) or
    ``match_labels`` as its nodeTopology (neither: none, available nowhere)."""
    body: JSON = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": namespace},
        "storageClassName": storage_class,
    }
    if node is not None:
        body["nodeTopology"] = {"matchLabels": {HOSTNAME: node}}
    elif match_labels is not None:
        body["nodeTopology"] = {"matchLabels": dict(match_labels)}
    if capacity is not None:
        body["capacity"] = capacity
    if maximum is not None:
        body["maximumVolumeSize"] = maximum
    return body


FIVE = statics(*(make_node(f"node-{c}") for c in "abcde"))


def store_of(
    *,
    pvs: tuple[JSON, ...] = (),
    claims: tuple[JSON, ...] = (),
    classes: tuple[JSON, ...] = (storage_class_body(),),
    csinodes: tuple[JSON, ...] = (),
    csidrivers: tuple[JSON, ...] = (),
    capacities: tuple[JSON, ...] = (),
) -> volumes.Volumes:
    store = volumes.Volumes()
    store.resync_pvs(pvs)
    store.resync_pvcs(claims)
    store.resync_storage_classes(classes)
    store.resync_csinodes(csinodes)
    store.resync_csidrivers(csidrivers)
    store.resync_storage_capacities(capacities)
    return store
