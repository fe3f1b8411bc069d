"""VolumeZone: a pod whose bound PVs carry zone or region labels goes only to nodes in those zones
and regions (PreFilter, filter).

As kube-scheduler v1.34: only ``persistentVolumeClaim`` volumes count; a PV's
``topology.kubernetes.io/zone`` / ``region`` label (or the beta ``failure-domain.beta...``
ones) holds one value or several joined by ``__``; a node with none of the four labels passes,
and a beta key on the PV is also matched by the node's GA label. Unbound claims of a
WaitForFirstConsumer class are left to VolumeBinding; other unbound claims, and bound ones whose
PV is gone, fail the PreFilter with kube-scheduler's messages.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from plumb.backend.cache import snapshot, volumes
from plumb.backend.records import objects

NAME = "VolumeZone"
# kube-scheduler's ErrReasonConflict (volumezone/volume_zone.go).
CONFLICT = "node(s) had no available volume zone"
# A node's zone does not change by evicting pods.
UNRESOLVABLE = True
PREFILTER_CODE = volumes.UNSCHEDULABLE_AND_UNRESOLVABLE
NO_CLAIM_NAME = "PersistentVolumeClaim had no name"
NO_PV_NOR_CLASS = "PersistentVolumeClaim had no pv name and storageClass name"
NO_PV_NAME = "PersistentVolume had no name"

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
MULTI_ZONE_DELIMITER = "__"


@dataclasses.dataclass(frozen=True, slots=True)
class Topology:
    """One topology label of a bound PV: the node's value for ``key`` must be in ``values``."""

    pv: str
    key: str
    values: frozenset[str]


def topologies(pv: volumes.PersistentVolume) -> tuple[Topology, ...]:
    """The PV's topology labels; a value with an empty part ("a____b") is ignored."""
    found = []
    for key in TOPOLOGY_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        parts = [part.strip() for part in value.split(MULTI_ZONE_DELIMITER)]
        if any(not part for part in parts):
            continue
        found.append(Topology(pv.name, key, frozenset(parts)))
    return tuple(found)


def prefilter(
    pod: objects.PodInfo, store: volumes.Volumes
) -> tuple[tuple[str, str] | None, tuple[Topology, ...]]:
    """((code, message) of a failure or None, the topologies the pod's bound PVs require)."""
    found: list[Topology] = []
    for ref in pod.claims:
        if ref.ephemeral:
            continue
        if not ref.name:
            return (PREFILTER_CODE, NO_CLAIM_NAME), ()
        claim = store.claim(pod.namespace, ref.name)
        if claim is None:
            return (PREFILTER_CODE, f'persistentvolumeclaim "{ref.name}" not found'), ()
        if not claim.volume_name:
            if not claim.class_name:
                return (PREFILTER_CODE, NO_PV_NOR_CLASS), ()
            storage_class = store.storage_class(claim.class_name)
            if storage_class is None:
                message = f'storageclass.storage.k8s.io "{claim.class_name}" not found'
                return (PREFILTER_CODE, message), ()
            if storage_class.binding_mode is None:
                message = f'VolumeBindingMode not set for StorageClass "{claim.class_name}"'
                return (PREFILTER_CODE, message), ()
            if storage_class.delayed:
                continue
            return (PREFILTER_CODE, NO_PV_NAME), ()
        pv = store.pv(claim.volume_name)
        if pv is None:
            return (PREFILTER_CODE, f'persistentvolume "{claim.volume_name}" not found'), ()
        found.extend(topologies(pv))
    return None, tuple(found)


def filter(statics: snapshot.NodeStatics, required: tuple[Topology, ...]) -> snapshot.BoolArray:
    """True where a node with topology labels lacks one of the PVs' zones or regions."""
    n = len(statics)
    if not required:
        return np.zeros(n, dtype=np.bool_)
    labelled = np.zeros(n, dtype=np.bool_)
    for key in TOPOLOGY_LABELS:
        labelled |= statics.label_ids(key) != snapshot.ABSENT
    fits = np.ones(n, dtype=np.bool_)
    for topology in required:
        fits &= _matches(statics, topology.key, topology.values)
    fails: snapshot.BoolArray = labelled & ~fits
    return fails


def _matches(statics: snapshot.NodeStatics, key: str, values: frozenset[str]) -> snapshot.BoolArray:
    """The node's value for key (or, lacking it, for the GA form of a beta key) is in values."""
    ids = statics.label_ids(key)
    wanted = [statics.value_id(key, value) for value in values]
    hit: snapshot.BoolArray = np.isin(ids, [w for w in wanted if w >= 0])
    ga = _GA.get(key)
    if ga is not None:
        fallback = statics.label_ids(ga)
        other = [statics.value_id(ga, value) for value in values]
        hit = np.where(ids == snapshot.ABSENT, np.isin(fallback, [w for w in other if w >= 0]), hit)
    return hit
