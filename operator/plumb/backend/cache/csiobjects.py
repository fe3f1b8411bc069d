"""CSIDrivers and CSIStorageCapacities (storage.k8s.io/v1) as compact records: what VolumeBinding's
storage-capacity check and score and NodeVolumeLimits' driver check read, nothing else.

Parsing never raises: a quantity plumb cannot read is no capacity (kube-scheduler would not
have decoded the object either), a nodeTopology it cannot turn into a selector matches no node
(kube-scheduler's nodeHasAccess logs the error and answers false).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from plumb.backend.records import specs
from plumb.k8s import quantities


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class CSIDriver:
    """``storage_capacity``: spec.storageCapacity (the driver publishes CSIStorageCapacity
    objects and wants them checked); ``prevent_if_missing``: spec.preventPodSchedulingIfMissing
    (v1.36+: a node without the driver is refused, under VolumeLimitScaling)."""

    name: str
    storage_capacity: bool = False
    prevent_if_missing: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class StorageCapacity:
    """One CSIStorageCapacity: the capacity a StorageClass has in the nodes its
    ``node_topology`` selects (None: nodeTopology unset, available to no node).
    ``capacity`` and ``maximum_volume_size`` are bytes, None when unset."""

    namespace: str
    name: str
    storage_class: str
    capacity: int | None = None
    maximum_volume_size: int | None = None
    node_topology: specs.LabelSelector | None = None
    # A nodeTopology LabelSelectorAsSelector refuses: it matches no node.
    topology_problem: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def limit(self) -> int | None:
        """volumeLimit: the largest volume it can hold, maximumVolumeSize if set (more precise)."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity

    def holds(self, size: int) -> bool:
        """capacitySufficient: a volume of ``size`` bytes fits."""
        limit = self.limit
        return limit is not None and limit >= size

    def reaches(self, labels: Mapping[str, str]) -> bool:
        """nodeHasAccess: the node's labels match the nodeTopology."""
        if self.node_topology is None or self.topology_problem is not None:
            return False
        return self.node_topology.matches(labels)


def _quantity(raw: Any) -> int | None:
    if raw is None:
        return None
    try:
        return quantities.clamp_int64(quantities.value(raw))
    except quantities.QuantityError:
        return None


def parse_csidriver(body: Mapping[str, Any]) -> CSIDriver:
    spec = body.get("spec") or {}
    return CSIDriver(
        name=str((body.get("metadata") or {}).get("name") or ""),
        storage_capacity=spec.get("storageCapacity") is True,
        prevent_if_missing=spec.get("preventPodSchedulingIfMissing") is True,
    )


def parse_storage_capacity(body: Mapping[str, Any]) -> StorageCapacity:
    metadata = body.get("metadata") or {}
    selector, problem = None, None
    raw = body.get("nodeTopology")
    if raw is not None:
        try:
            selector = specs.label_selector(raw, "nodeTopology")
        except specs.SpecError as error:
            problem = str(error)
        for requirement in selector.requirements if selector is not None else ():
            if (requirement.operator in ("In", "NotIn")) != bool(requirement.values):
                problem = f"nodeTopology: {requirement.operator} on {requirement.key!r}: bad values"
    return StorageCapacity(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        storage_class=str(body.get("storageClassName") or ""),
        capacity=_quantity(body.get("capacity")),
        maximum_volume_size=_quantity(body.get("maximumVolumeSize")),
        node_topology=selector,
        topology_problem=problem,
    )
