"""VolumeRestrictions: the claims a pod names must exist (PreFilter), and a ReadWriteOncePod claim
already used by a pod on a node makes every node fail (filter).

As kube-scheduler v1.34: only ``persistentVolumeClaim`` volumes count (not generic ephemeral
ones), a claim is "in use" when any pod on a node (bound or assumed) names it, and the conflict
is Unschedulable, not unresolvable, since preempting the pod that holds the claim frees it. The
in-tree disk conflicts (GCE PD, AWS EBS, iSCSI, RBD volumes inline in pod specs) are not
evaluated: plumb does not keep pods' inline volumes.
"""

from __future__ import annotations

import numpy as np

from plumb.backend.cache import snapshot, volumes
from plumb.backend.records import objects

NAME = "VolumeRestrictions"
# kube-scheduler's ErrReasonReadWriteOncePodConflict (volume_restrictions.go).
RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)
# ErrReasonDiskConflict, for in-tree inline volumes (not evaluated by plumb).
DISK_CONFLICT = "node(s) had no available disk"
# Evicting the pod that uses the claim frees it: preemption can help.
UNRESOLVABLE = False
# A missing claim (PreFilter) is UnschedulableAndUnresolvable.
PREFILTER_CODE = volumes.UNSCHEDULABLE_AND_UNRESOLVABLE


def not_found(name: str) -> str:
    """The lister's NotFound error, as kube-scheduler quotes it."""
    return f'persistentvolumeclaim "{name}" not found'


def prefilter(pod: objects.PodInfo, store: volumes.Volumes) -> tuple[str, str] | None:
    """(code, message) when a claim the pod names does not exist, else None."""
    for claim in pod.claims:
        if not claim.ephemeral and store.claim(pod.namespace, claim.name) is None:
            return PREFILTER_CODE, not_found(claim.name)
    return None


def filter(
    pod: objects.PodInfo,
    statics: snapshot.NodeStatics,
    store: volumes.Volumes,
    in_use: volumes.ClaimUse,
) -> snapshot.BoolArray:
    """True on every node when a ReadWriteOncePod claim of the pod is used by a placed pod."""
    n = len(statics)
    for claim in pod.claims:
        if claim.ephemeral:
            continue
        record = store.claim(pod.namespace, claim.name)
        if record is None or volumes.READ_WRITE_ONCE_POD not in record.access_modes:
            continue
        if in_use.named_by_a_placed_pod(record.key):
            return np.ones(n, dtype=np.bool_)
    return np.zeros(n, dtype=np.bool_)
