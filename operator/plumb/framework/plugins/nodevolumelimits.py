"""NodeVolumeLimits: a node whose CSINode reports how many volumes a CSI driver can attach takes no
pod that would attach more of that driver's volumes than that (filter).

As kube-scheduler v1.34's CSILimits: a claim counts as the volume ``<driver>/<volumeHandle>`` of
its bound CSI PV, or, unbound (or its PV unknown), as a volume of its StorageClass's provisioner
unique to the claim. Volumes the pods on the node already use are not counted twice. Not
evaluated: in-tree volumes migrated to CSI (their translation needs the CSI translation
library's tables) and VolumeAttachments of volumes no pod on the node uses.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from plumb.backend.cache import snapshot, volumes
from plumb.backend.records import objects

NAME = "NodeVolumeLimits"
# kube-scheduler's ErrReasonMaxVolumeCountExceeded (nodevolumelimits/csi.go).
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
# Evicting pods detaches their volumes: preemption can help.
UNRESOLVABLE = False
# In-tree provisioners kube-scheduler would translate to a CSI driver (when migrated on the
# node); plumb does not count them.
_IN_TREE = frozenset(
    {
        "kubernetes.io/aws-ebs",
        "kubernetes.io/gce-pd",
        "kubernetes.io/azure-disk",
        "kubernetes.io/cinder",
        "kubernetes.io/portworx-volume",
    }
)


def unique_volume(claim: volumes.Claim, store: volumes.Volumes) -> tuple[str, str] | None:
    """(unique volume name, driver) the claim attaches, None if it counts against no driver."""
    pv = store.pv(claim.volume_name) if claim.volume_name else None
    if pv is not None:
        if not pv.csi_driver or not pv.csi_handle:
            return None  # an in-tree PV (migration not evaluated) or no CSI source
        return f"{pv.csi_driver}/{pv.csi_handle}", pv.csi_driver
    storage_class = store.storage_class(claim.class_name) if claim.class_name else None
    if storage_class is None or storage_class.provisioner in _IN_TREE:
        return None
    # kube-scheduler's handle is "<random prefix>-<namespace>/<name>": unique per claim.
    driver = storage_class.provisioner
    return f"{driver}/~{claim.key}", driver


def _volumes_of(namespace: str, names: Iterable[str], store: volumes.Volumes) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in names:
        claim = store.claim(namespace, name)
        if claim is None:
            continue
        unique = unique_volume(claim, store)
        if unique is not None:
            found[unique[0]] = unique[1]
    return found


def filter(
    pod: objects.PodInfo,
    statics: snapshot.NodeStatics,
    store: volumes.Volumes,
    in_use: volumes.ClaimUse,
) -> snapshot.BoolArray:
    """True where the pod's new volumes would exceed a driver's attach limit on the node."""
    fails = np.zeros(len(statics), dtype=np.bool_)
    new = _volumes_of(pod.namespace, (c.name for c in pod.claims), store)
    if not new:
        return fails
    for i, node in enumerate(statics.names):
        csinode = store.csinode(node)
        if csinode is None or not csinode.limits:
            continue
        attached: dict[str, str] = {}
        for key in in_use.claims_on(node):
            namespace, _, name = key.partition("/")
            attached.update(_volumes_of(namespace, (name,), store))
        counts: dict[str, int] = {}
        for driver in attached.values():
            counts[driver] = counts.get(driver, 0) + 1
        adding: dict[str, int] = {}
        for unique, driver in new.items():
            if unique not in attached:
                adding[driver] = adding.get(driver, 0) + 1
        fails[i] = any(
            driver in csinode.limits and counts.get(driver, 0) + count > csinode.limits[driver]
            for driver, count in adding.items()
        )
    return fails
