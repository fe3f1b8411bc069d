"""The compiled kernel's selection: each feasible node's weighted total, and the best nodes by
(total, tie-break hash)."""

from __future__ import annotations

from typing import Any

import numpy as np

from plumb.kernel import compiled_jit, compiled_scores
from plumb.kernel import contract as c

_LOWEST, _PASS = compiled_jit.LOWEST, c.PASS
_taint, _node_affinity = compiled_scores.taint_score, compiled_scores.affinity_score
_spread, _inter_pod = compiled_scores.spread_score, compiled_scores.inter_pod_score

_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


@compiled_jit.inline
def tie_break(name_hash: np.uint64, pod_hash: np.uint64) -> np.uint64:
    """reference.mix for one node: splitmix64's finaliser, wrapping uint64 arithmetic."""
    z = name_hash ^ pod_hash
    z = (z ^ (z >> _S30)) * _MIX_1
    z = (z ^ (z >> _S27)) * _MIX_2
    return z ^ (z >> _S31)


@compiled_jit.inline
def insert(
    best_total: c.I64,
    best_tie: c.U64,
    best: c.I64,
    kept: int,
    score: int,
    tie: np.uint64,
    item: int,
) -> int:
    """Put ``item`` among the TOP best so far (``kept`` of them, by (total, tie) descending)
    if it belongs there; returns how many are kept now. Candidates come in node order and go
    after every kept one at least as good, as a stable sort puts them."""
    slot = kept
    while slot > 0 and (
        score > best_total[slot - 1] or (score == best_total[slot - 1] and tie > best_tie[slot - 1])
    ):
        slot -= 1
    if slot == c.TOP:
        return kept
    for s in range(min(kept, c.TOP - 1), slot, -1):
        best_total[s] = best_total[s - 1]
        best_tie[s] = best_tie[s - 1]
        best[s] = best[s - 1]
    best_total[slot] = score
    best_tie[slot] = tie
    best[slot] = item
    return min(kept + 1, c.TOP)


@compiled_jit.jit
def totals_and_best(
    feasible: c.I32,
    count: int,
    slots: c.I64,
    scored: c.B1,
    spread_raw: c.I64,
    inter_raw: c.I64,
    pod: Any,
    weights: c.I64,
    general: bool,
    total_row: c.I64,
    compact: c.I64,
    name_hashes: c.U64,
    pod_hash: np.uint64,
    best: c.I64,
) -> int:
    """Every feasible node's weighted total into ``total_row`` (0 elsewhere), and the TOP best
    feasible nodes by (total, tie-break) as slots into ``best``, in order, as a stable sort
    puts them. Returns how many there are.

    ``slots``: ``compiled_scores.gather``'s; ``pod``: see ``compiled_scores.scores_of``;
    ``compact``: scratch for the totals by slot. ``general`` is a literal at each call site:
    the usual variant divides by multiplying (``compiled_scores._floor_div``) and vectorises,
    the general one by Python's floor division.
    """
    compiled_jit.literally(general)
    slot_weighted, slot_taint, slot_affinity = slots[0], slots[1], slots[2]
    taint_high, taint_inverse, _, affinity_high, affinity_inverse = pod[2:7]
    spread_on, spread_low, spread_high, spread_inverse, inter_on, inter_low, inter_high = pod[7:]
    w2, w3 = weights[2], weights[3]
    w4 = weights[4] if spread_on != 0 else 0
    w5 = weights[5] if inter_on != 0 else 0
    highest = _LOWEST
    for j in range(count):  # over contiguous slots: vectorises
        taint = _taint(slot_taint[j], taint_high, taint_inverse, general)
        affinity = _node_affinity(slot_affinity[j], affinity_high, affinity_inverse, general)
        spread = _spread(spread_raw[j], spread_low, spread_high, spread_inverse, general)
        spread = spread if spread_on != 0 and scored[j] else 0
        inter = _inter_pod(inter_raw[j], inter_low, inter_high) if inter_on != 0 else 0
        score = slot_weighted[j] + w2 * taint + w3 * affinity + w4 * spread + w5 * inter
        compact[j] = score
        highest = max(highest, score)
    # Every node's total: zeros (a vectorised fill), then the feasible ones' by slot. (One
    # pass reading the totals at a running count does not vectorise, and at 15,000 nodes this
    # write was the kernel's largest cost: docs/performance.md#the-kernel-at-15000-nodes.)
    total_row[:] = 0
    for j in range(count):
        total_row[np.uint64(feasible[j])] = compact[j]
    # (The slot arrays are read: their rows are the tie-break's scratch now.)
    return _best(compact, count, highest, feasible, name_hashes, pod_hash, best, slots[1:])


_BLOCK = 32  # candidates screened at once when picking the best


@compiled_jit.jit
def _best(
    compact: c.I64,
    count: int,
    highest: int,
    feasible: c.I32,
    name_hashes: c.U64,
    pod_hash: np.uint64,
    best: c.I64,
    scratch: c.I64,
) -> int:
    """The TOP best of the totals in ``compact`` by (total, tie-break), as slots, in order.

    Usually several nodes share the highest total (nodes alike score alike): then only they
    are candidates, listed first (``scratch[0]``), their tie-break hashes then computed in a
    pass of their own (``scratch[1]``, which vectorises) and inserted in slot order (rarely
    more than a few insertions). Otherwise candidates are screened a block at a time (a
    vectorised "any at least the current TOP-th?") before the scalar insertion."""
    best_total = np.full(c.TOP, _LOWEST, dtype=np.int64)
    best_tie = np.zeros(c.TOP, dtype=np.uint64)
    kept = 0
    at_highest = 0
    for j in range(count):
        at_highest += compact[j] == highest
    if at_highest >= c.TOP:
        candidates, ties = scratch[0], scratch[1].view(np.uint64)
        listed = 0
        for j in range(count):  # branch-free: the store at a running count
            candidates[listed] = j
            listed += compact[j] == highest
        for i in range(listed):
            ties[i] = name_hashes[np.uint64(feasible[np.uint64(candidates[i])])]
        for i in range(listed):
            ties[i] = tie_break(ties[i], pod_hash)
        for i in range(listed):
            tie = ties[i]
            if kept < c.TOP or tie > best_tie[c.TOP - 1]:
                kept = insert(best_total, best_tie, best, kept, highest, tie, candidates[i])
        return kept
    for start in range(0, count, _BLOCK):
        end = min(start + _BLOCK, count)
        bar = best_total[c.TOP - 1]
        candidates = 0
        for j in range(start, end):
            candidates += compact[j] >= bar
        if kept == c.TOP and candidates == 0:
            continue
        for j in range(start, end):
            score = compact[j]
            if kept == c.TOP and score < best_total[c.TOP - 1]:
                continue
            tie = tie_break(name_hashes[np.uint64(feasible[j])], pod_hash)
            kept = insert(best_total, best_tie, best, kept, score, tie, j)
    return kept


@compiled_jit.jit
def hint(
    last: int,
    code_row: Any,
    listed: c.B1,
    ranked_total: c.I64,
    name_hashes: c.U64,
    ranked_hash: np.uint64,
) -> int:
    """OpportunisticBatching's hint (contract.Batch.continues): when the previous pod's node
    ``last`` now fails the pod, the best node left of the kept ranking by (total, tie-break),
    taken off it; returned if it passes the pod's filters, else -1 (scored in full)."""
    if last < 0 or code_row[last] == _PASS:
        return -1
    head, head_total, head_tie = -1, _LOWEST, np.uint64(0)
    for n in range(listed.shape[0]):
        if listed[n]:
            tie = tie_break(name_hashes[n], ranked_hash)
            total = ranked_total[n]
            if head < 0 or total > head_total or (total == head_total and tie > head_tie):
                head, head_total, head_tie = n, total, tie
    if head < 0:
        return -1
    listed[head] = False
    return head if code_row[head] == _PASS else -1


@compiled_jit.jit
def keep(
    feasible: c.I32, count: int, total_row: c.I64, node: int, listed: c.B1, ranked_total: c.I64
) -> None:
    """A pod scored in full and placed on ``node``: its other feasible nodes and their totals
    become the ranking the next pod may continue."""
    listed[:] = False
    for j in range(count):
        listed[feasible[j]] = True
        ranked_total[feasible[j]] = total_row[feasible[j]]
    listed[node] = False
