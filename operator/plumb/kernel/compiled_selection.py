"""The compiled kernel's selection: the best feasible nodes by (total, tie-break hash)."""

from __future__ import annotations

import numpy as np

from plumb.kernel import compiled_jit
from plumb.kernel import contract as c

_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_LOWEST = compiled_jit.LOWEST
_BLOCK = 32  # nodes screened at once when picking the best


@compiled_jit.inline
def tie_break(name_hash: np.uint64, pod_hash: np.uint64) -> np.uint64:
    """reference.mix for one node: splitmix64's finaliser, wrapping uint64 arithmetic."""
    z = name_hash ^ pod_hash
    z = (z ^ (z >> _S30)) * _MIX_1
    z = (z ^ (z >> _S27)) * _MIX_2
    return z ^ (z >> _S31)


@compiled_jit.jit
def best_nodes(ranked: c.I64, name_hashes: c.U64, pod_hash: np.uint64, best: c.I64) -> int:
    """The TOP best feasible nodes by (total, tie-break), in order, as a stable sort puts them.

    ``ranked`` is the lowest int64 for infeasible nodes. Nodes are screened a block at a time
    (a vectorised "any at least the current TOP-th?") before the scalar insertion.
    """
    best_total = np.full(c.TOP, _LOWEST, dtype=np.int64)
    best_tie = np.zeros(c.TOP, dtype=np.uint64)
    kept = 0
    nodes = ranked.shape[0]
    for start in range(0, nodes, _BLOCK):
        end = min(start + _BLOCK, nodes)
        bar = best_total[c.TOP - 1]
        candidates = 0
        for n in range(start, end):
            candidates += ranked[n] >= bar
        if candidates == 0:
            continue
        for n in range(start, end):
            score = ranked[n]
            if score < best_total[c.TOP - 1] or score == _LOWEST:  # worse, or infeasible
                continue
            tie = tie_break(name_hashes[n], pod_hash)
            slot = kept  # after every kept candidate at least as good
            while slot > 0 and (
                score > best_total[slot - 1]
                or (score == best_total[slot - 1] and tie > best_tie[slot - 1])
            ):
                slot -= 1
            if slot == c.TOP:
                continue
            for s in range(min(kept, c.TOP - 1), slot, -1):
                best_total[s] = best_total[s - 1]
                best_tie[s] = best_tie[s - 1]
                best[s] = best[s - 1]
            best_total[slot] = score
            best_tie[slot] = tie
            best[slot] = n
            kept = min(kept + 1, c.TOP)
    return kept
