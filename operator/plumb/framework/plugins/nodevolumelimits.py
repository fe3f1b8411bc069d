"""NodeVolumeLimits: a node whose CSINode reports how many volumes a CSI driver can attach takes no
pod that would attach more of that driver's volumes than that (filter); with VolumeLimitScaling
(alpha in v1.35, on by default in v1.37), a node without a CSI driver the pod's new volumes
need is refused first, "<driver> CSI driver is not installed on the node".

As kube-scheduler's CSILimits (nodevolumelimits/csi.go): a claim counts as the volume
``<driver>/<volumeHandle>`` of its bound CSI PV, or, unbound (or its PV unknown), as a volume of
its StorageClass's provisioner unique to the claim. Volumes the pods on the node already use
are not counted twice. The driver check (checkCSIDriverOnNode) looks at every driver of the
pod's volumes, attached elsewhere on the node or not, and only at drivers with a CSIDriver
object: in v1.35 any such driver is required on the node (in its CSINode's drivers; a node
without a CSINode has none), from v1.36 only one whose CSIDriver sets
``preventPodSchedulingIfMissing`` (``DRIVERS_ANY``, ``DRIVERS_OPT_IN``). kube-scheduler names
the first missing driver its map iteration meets; plumb the first by name. Not evaluated:
in-tree volumes migrated to CSI (their translation needs the CSI translation library's tables)
and VolumeAttachments of volumes no pod on the node uses.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from plumb.backend.cache import snapshot, volumes
from plumb.backend.records import objects

NAME = "NodeVolumeLimits"
# kube-scheduler's ErrReasonMaxVolumeCountExceeded (nodevolumelimits/csi.go).
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
# checkCSIDriverOnNode's refusal (csi.go Filter), with the driver's name.
DRIVER_NOT_INSTALLED = "{driver} CSI driver is not installed on the node"
# Evicting pods detaches their volumes: preemption can help. The missing driver is reported
# Unschedulable too, so preemption looks (and finds no victims).
UNRESOLVABLE = False
GATE = "VolumeLimitScaling"
# The driver check per release (Emulation.csi_driver_opt_in, the gate): not run; every
# driver with a CSIDriver object (v1.35); only those that set preventPodSchedulingIfMissing.
DRIVERS_UNCHECKED, DRIVERS_ANY, DRIVERS_OPT_IN = 0, 1, 2
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


def driver_check(gate: bool, opt_in: bool) -> int:
    """The driver check in force: none with VolumeLimitScaling off, else by the release."""
    if not gate:
        return DRIVERS_UNCHECKED
    return DRIVERS_OPT_IN if opt_in else DRIVERS_ANY


def filter(
    pod: objects.PodInfo,
    statics: snapshot.NodeStatics,
    store: volumes.Volumes,
    in_use: volumes.ClaimUse,
    drivers: int = DRIVERS_UNCHECKED,
) -> dict[str, snapshot.BoolArray]:
    """Per reason, where the node fails: a driver missing (checked first), then the attach
    limit (nodes missing a driver left out). Only reasons some node fails are present."""
    new = _volumes_of(pod.namespace, (c.name for c in pod.claims), store)
    if not new:
        return {}
    found: dict[str, snapshot.BoolArray] = {}
    missing = _missing_drivers(sorted(set(new.values())), statics, store, drivers)
    taken = np.zeros(len(statics), dtype=np.bool_)
    for driver, fails in missing:
        fails = fails & ~taken
        if fails.any():
            found[DRIVER_NOT_INSTALLED.format(driver=driver)] = fails
            taken |= fails
    limited = _over_limit(new, statics, store, in_use) & ~taken
    if limited.any():
        found[MAX_VOLUME_COUNT] = limited
    return found


def _missing_drivers(
    needed: list[str], statics: snapshot.NodeStatics, store: volumes.Volumes, drivers: int
) -> list[tuple[str, snapshot.BoolArray]]:
    """checkCSIDriverOnNode for each driver (by name): where it is required and missing."""
    if drivers == DRIVERS_UNCHECKED:
        return []
    out = []
    for driver in needed:
        record = store.csidriver(driver)
        if record is None:
            continue  # perhaps no CSI driver at all: not required
        if drivers == DRIVERS_OPT_IN and not record.prevent_if_missing:
            continue
        installed = np.zeros(len(statics), dtype=np.bool_)
        for i, node in enumerate(statics.names):
            csinode = store.csinode(node)
            installed[i] = csinode is not None and driver in csinode.drivers
        out.append((driver, ~installed))
    return out


def _over_limit(
    new: dict[str, str],
    statics: snapshot.NodeStatics,
    store: volumes.Volumes,
    in_use: volumes.ClaimUse,
) -> snapshot.BoolArray:
    """True where the pod's new volumes would exceed a driver's attach limit on the node."""
    fails = np.zeros(len(statics), dtype=np.bool_)
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
