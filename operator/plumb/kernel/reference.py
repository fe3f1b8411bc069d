"""The reference kernel in numpy: the contract the compiled kernel must meet, result for result.

Inputs are a snapshot's arrays (nodes x resources, nodes in name order) and one pod's request
row; column ``pods_column`` counts pods, and the pod always adds one there. Outputs:

- ``insufficient``: per node, bit r set when resource r does not fit (0 = feasible);
- ``scores``: per node, the LeastAllocated score over cpu and memory, 0-100 (0 where infeasible);
- ``chosen``: the feasible node with the highest score, ties broken by a stable mix of the
  node-name hash and the pod hash; -1 when no node is feasible.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

MAX_NODE_SCORE = 100
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Result:
    insufficient: npt.NDArray[np.int64]
    scores: npt.NDArray[np.int64]
    chosen: int


def mix(name_hashes: npt.NDArray[np.uint64], pod_hash: np.uint64) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser over (node hash xor pod hash): a stable per-(pod, node) tie-break."""
    z = name_hashes ^ pod_hash
    z = (z ^ (z >> np.uint64(30))) * _MIX_1
    z = (z ^ (z >> np.uint64(27))) * _MIX_2
    return z ^ (z >> np.uint64(31))


def filter_and_score(
    *,
    allocatable: npt.NDArray[np.int64],
    requested: npt.NDArray[np.int64],
    request: npt.NDArray[np.int64],
    pods_column: int,
    score_columns: tuple[int, ...],
    name_hashes: npt.NDArray[np.uint64],
    pod_hash: np.uint64,
) -> Result:
    nodes = allocatable.shape[0]
    need = request.copy()
    need[pods_column] = 1
    free = allocatable - requested
    checked = need > 0
    checked[pods_column] = True
    bits = (np.int64(1) << np.arange(len(need), dtype=np.int64)) * checked
    insufficient = ((need[np.newaxis, :] > free) * bits[np.newaxis, :]).sum(axis=1)
    insufficient = insufficient.astype(np.int64)

    scores = np.zeros(nodes, dtype=np.int64)
    for column in score_columns:
        capacity = allocatable[:, column]
        used = requested[:, column] + request[column]
        fits = (capacity > 0) & (used <= capacity)
        safe = np.where(capacity > 0, capacity, 1)
        scores += np.where(fits, (capacity - used) * MAX_NODE_SCORE // safe, 0)
    if score_columns:
        scores //= len(score_columns)
    feasible = insufficient == 0
    scores = np.where(feasible, scores, 0)
    if not feasible.any():
        return Result(insufficient=insufficient, scores=scores, chosen=-1)
    best = scores[feasible].max()
    candidates = np.flatnonzero(feasible & (scores == best))
    ties = mix(name_hashes[candidates], pod_hash)
    chosen = int(candidates[int(np.argmax(ties))])
    return Result(insufficient=insufficient, scores=scores, chosen=chosen)
