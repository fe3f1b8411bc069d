"""One scheduling decision: compile the pod against a snapshot, run the kernel, explain a miss."""

from __future__ import annotations

import dataclasses

import numpy as np

from plumb.backend import hashing, objects, snapshot
from plumb.framework import status
from plumb.framework.plugins import noderesourcesfit
from plumb.kernel import reference

# Bits in the kernel's int64 insufficient-resources mask: pods, cpu, memory and 61 others.
_MAX_COLUMNS = 64


@dataclasses.dataclass(frozen=True, kw_only=True)
class Decision:
    """Where the pod goes, or why it cannot go anywhere."""

    node: str | None
    feasible: int
    total: int
    message: str = ""
    unresolvable: bool = False


def schedule(pod: objects.PodInfo, snap: snapshot.Snapshot) -> Decision:
    """Filter and score every node of the snapshot for one pod and pick one."""
    total = len(snap)
    if pod.problem is not None:
        return Decision(node=None, feasible=0, total=total, message=pod.problem, unresolvable=True)
    if total == 0:
        return Decision(node=None, feasible=0, total=0, message=status.NO_NODES_AVAILABLE)
    resources = list(snap.resources)
    allocatable, requested = snap.allocatable, snap.requested
    unknown = [name for name in pod.requests if name not in snap.resources]
    if unknown:
        # No node has ever reported these resources: they are columns of zeros.
        resources.extend(unknown)
        pad = np.zeros((total, len(unknown)), dtype=np.int64)
        allocatable = np.hstack([allocatable, pad])
        requested = np.hstack([requested, pad])
    # The kernel reports one bit per column in an int64, while the table keeps a column for every
    # resource it has seen: pass only the columns this pod is checked or scored on.
    wanted = {objects.PODS, *noderesourcesfit.SCORED_RESOURCES, *pod.requests}
    if len(wanted) > _MAX_COLUMNS:
        message = (
            f"the pod requests {len(wanted) - 3} resources besides cpu and memory; plumb checks"
            f" at most {_MAX_COLUMNS - 3}"
        )
        return Decision(node=None, feasible=0, total=total, message=message, unresolvable=True)
    kept = [i for i, name in enumerate(resources) if name in wanted]
    resources = [resources[i] for i in kept]
    allocatable, requested = allocatable[:, kept], requested[:, kept]
    column = {name: i for i, name in enumerate(resources)}
    request = np.zeros(len(resources), dtype=np.int64)
    for name, amount in pod.requests.items():
        request[column[name]] = amount
    result = reference.filter_and_score(
        allocatable=allocatable,
        requested=requested,
        request=request,
        pods_column=column[objects.PODS],
        score_columns=tuple(column[name] for name in noderesourcesfit.SCORED_RESOURCES),
        name_hashes=snap.name_hashes,
        pod_hash=hashing.stable_hash_u64(pod.uid),
    )
    feasible = int(np.count_nonzero(result.insufficient == 0))
    if result.chosen >= 0:
        return Decision(node=snap.names[result.chosen], feasible=feasible, total=total)
    diagnosis = status.Diagnosis.count(
        total,
        (noderesourcesfit.reasons(int(bits), resources) for bits in result.insufficient),
    )
    return Decision(node=None, feasible=0, total=total, message=diagnosis.message())
