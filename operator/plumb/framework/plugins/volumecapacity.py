"""VolumeBinding's storage capacity: whether a volume to provision fits the capacity a CSI
driver reports for a node (the filter's "did not have enough free storage"), and the score of
a node by how full the pod's volumes would leave the storage they land on (StorageCapacityScoring).

As kube-scheduler's volume binder (volumebinding/binder.go hasEnoughCapacity) and scorer
(volumebinding/scorer.go), the same from v1.34 to v1.37; only the gate's default changes (on
in v1.37):

- Capacity is checked for a claim with a storage request whose StorageClass's provisioner is a
  CSIDriver with ``storageCapacity: true``: some CSIStorageCapacity of that class must reach the
  node (its nodeTopology matches the node's labels) and hold the request (its
  maximumVolumeSize, else its capacity). kube-scheduler takes the first such object its lister
  returns, in no defined order; plumb the first by namespace/name.
- The score, per StorageClass the pod's volumes use on the node: utilization = requested * 100
  // capacity (100 when the capacity is 0 or smaller than the request), through the shape's
  broken-linear function; the node's score is the mean over the classes, rounded half up. With
  static bindings (PVs chosen for claims) only they count, per the PV's class: the claims'
  requests against the PVs' capacities, summed. Without, the volumes to provision whose
  capacity was checked count: their requests summed against the capacity of the
  CSIStorageCapacity found (not summed: two claims of one class share it). None: 0.

``Shape`` is VolumeBindingArgs.shape: (utilization 0-100, score 0-10) points, utilization
increasing; ``DEFAULT_SHAPE`` is kube-scheduler's default with the gate on (v1/defaults.go
SetDefaults_VolumeBindingArgs): an empty node scores 100, a full one 0, so nodes with more free
capacity win.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import numpy as np

from plumb.backend.cache import csiobjects, snapshot, volumes
from plumb.framework.plugins import nodeaffinity

Shape = tuple[tuple[int, int], ...]
"""VolumeBindingArgs.shape: (utilization 0-100, score 0-10) points, utilization increasing."""

MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_NODE_SCORE = 100
DEFAULT_SHAPE: Shape = ((0, MAX_CUSTOM_PRIORITY_SCORE), (MAX_UTILIZATION, 0))
"""kube-scheduler's default shape when StorageCapacityScoring is on: the emptier the better."""

GATE = "StorageCapacityScoring"


def _go_div(numerator: int, denominator: int) -> int:
    """Go's integer division: truncated toward zero."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator > 0) else -quotient


def broken_linear(shape: Shape, utilization: int) -> int:
    """helper.BuildBrokenLinearFunction over the shape scaled to node scores (score * 10)."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    points = [(u, s * scale) for u, s in shape]
    for i, (u, s) in enumerate(points):
        if utilization <= u:
            if i == 0:
                return s
            u0, s0 = points[i - 1]
            return s0 + _go_div((s - s0) * (utilization - u0), u - u0)
    return points[-1][1]


def class_score(requested: int, capacity: int, shape: Shape) -> int:
    """One StorageClass's score: the shape at the utilization ``requested`` of ``capacity``
    bytes makes (full when there is no capacity or too little)."""
    if capacity == 0 or requested > capacity:
        return broken_linear(shape, MAX_UTILIZATION)
    return broken_linear(shape, requested * MAX_UTILIZATION // capacity)


@dataclasses.dataclass(frozen=True, slots=True)
class ClassUse:
    """What the pod's volumes ask of one StorageClass on a node, in bytes."""

    requested: int
    capacity: int


def node_score(uses: Iterable[ClassUse], shape: Shape) -> int:
    """The node's score: the mean of its classes' scores, rounded half away from zero (Go's
    math.Round; scores are never negative); 0 without any class."""
    scores = [class_score(use.requested, use.capacity, shape) for use in uses]
    if not scores:
        return 0
    return (2 * sum(scores) + len(scores)) // (2 * len(scores))


# The capacity check ----------------------------------------------------------------------------


def tracked(
    claim: volumes.Claim, storage_class: volumes.StorageClass, store: volumes.Volumes
) -> bool:
    """Whether the claim's capacity is checked: a storage request, and a provisioner that is a
    CSIDriver with storageCapacity (else hasEnoughCapacity says yes without looking)."""
    if claim.request is None:
        return False
    driver = store.csidriver(storage_class.provisioner)
    return driver is not None and driver.storage_capacity


def capacity_for(
    claim: volumes.Claim,
    storage_class: volumes.StorageClass,
    store: volumes.Volumes,
    labels: Mapping[str, str],
) -> tuple[bool, csiobjects.StorageCapacity | None]:
    """hasEnoughCapacity for one node (by its labels): (enough, the CSIStorageCapacity that
    holds the claim, None when capacity is not tracked for it)."""
    if not tracked(claim, storage_class, store):
        return True, None
    size = claim.request or 0
    for capacity in store.capacities_of_class(storage_class.name):
        if capacity.holds(size) and capacity.reaches(labels):
            return True, capacity
    return False, None


def capacity_index(
    claim: volumes.Claim,
    storage_class: volumes.StorageClass,
    store: volumes.Volumes,
    statics: snapshot.NodeStatics,
) -> tuple[snapshot.BoolArray, list[csiobjects.StorageCapacity], np.ndarray]:
    """hasEnoughCapacity over every node at once: (where there is enough, the capacities
    considered, per node the index of the one found in them or -1). A claim whose capacity is
    not tracked has enough everywhere and no capacity."""
    n = len(statics)
    found = np.full(n, -1, dtype=np.int64)
    if not tracked(claim, storage_class, store):
        return np.ones(n, dtype=np.bool_), [], found
    size = claim.request or 0
    considered = [c for c in store.capacities_of_class(storage_class.name) if c.holds(size)]
    for i, capacity in enumerate(considered):
        reach = _reach(capacity, statics)
        found[(found < 0) & reach] = i
    return found >= 0, considered, found


def _reach(capacity: csiobjects.StorageCapacity, statics: snapshot.NodeStatics) -> np.ndarray:
    """nodeHasAccess over every node: the nodeTopology's requirements, ANDed."""
    n = len(statics)
    if capacity.node_topology is None or capacity.topology_problem is not None:
        return np.zeros(n, dtype=np.bool_)
    reach = np.ones(n, dtype=np.bool_)
    for requirement in capacity.node_topology.requirements:
        match = nodeaffinity.label_requirement(requirement, statics)
        if match is None:
            return np.zeros(n, dtype=np.bool_)
        reach &= match
    return reach
