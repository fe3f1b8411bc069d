"""The compiled kernel's main loop: the pods of a batch in turn, each placed before the next.

``decide`` runs the passes of ``compiled_filters``, ``compiled_scores`` and
``compiled_selection`` for each pod over a working copy of the cluster, updated by the
placements before it. ``compiled.run`` prepares its arguments and reads its outcome.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plumb.kernel import (
    compiled_checks,
    compiled_filters,
    compiled_jit,
    compiled_scores,
    compiled_selection,
)
from plumb.kernel import contract as c

_PLUGINS, _LOWEST = compiled_jit.PLUGINS, compiled_jit.LOWEST
_PASS, _EXISTING = c.PASS, c.EXISTING_ANTI_AFFINITY
# cpu and memory quantities up to 2**50 (a million cores in millicores, a PiB of memory) keep
# 100 times a sum of two in int64 and every one exact in float64, as the reference's Python
# integers are. Beyond (a clamped absurd quantity), the kernel hands over to the reference.
EXACT = 1 << 50
DECIDED, INEXACT, INVALID = 0, 1, 2  # decide's outcomes


@compiled_jit.jit
def decide(
    allocatable: c.I64,
    requested: c.I64,
    nonzero: c.I64,
    name_hashes: c.U64,
    domains: c.I32,
    domain_counts: c.I32,
    counts: c.I32,
    pods_column: int,
    cpu_column: int,
    memory_column: int,
    pod_hashes: c.U64,
    requests: c.I64,
    pod_nonzero: c.I64,
    static_code: c.I32,
    taint_raw: c.I64,
    node_affinity_raw: c.I64,
    member: c.I32,
    spread_pod: c.I32,
    spread_row: c.I32,
    spread_key: c.I32,
    spread_max_skew: c.I32,
    spread_min_domains: c.I32,
    spread_hard: c.B1,
    spread_self: c.B1,
    spread_hostname: c.B1,
    spread_eligible: c.B1,
    spread_require_all: c.B1,
    affinity_pod: c.I32,
    affinity_row: c.I32,
    affinity_key: c.I32,
    affinity_anti: c.B1,
    affinity_self: c.B1,
    symmetric_pod: c.I32,
    symmetric_row: c.I32,
    symmetric_key: c.I32,
    preferred_pod: c.I32,
    preferred_row: c.I32,
    preferred_key: c.I32,
    preferred_weight: c.I64,
    weights: c.I64,
    balanced_skip: c.B1,
    chosen: c.I32,
    code: Any,
    detail: c.I64,
    total: c.I64,
    feasible_count: c.I32,
    top: c.I32,
    top_scores: c.I64,
    integers: c.I64,
    floats: c.F64,
    booleans: c.B1,
    per_domain: c.I64,
    present: c.B1,
) -> int:
    """Decide the batch into the outputs: DECIDED; or, deciding nothing, INVALID (shapes or
    indices out of range: see ``compiled_checks.check``) or INEXACT (a cpu or memory quantity
    negative or beyond ``EXACT``, where int64 and float64 stop being exact)."""
    if not compiled_checks.valid(
        allocatable,
        requested,
        nonzero,
        name_hashes,
        domains,
        domain_counts,
        counts,
        (pods_column, cpu_column, memory_column),
        (pod_hashes, spread_require_all, affinity_self, balanced_skip),
        (requests, pod_nonzero, static_code, taint_raw, node_affinity_raw, member),
        (spread_pod, spread_row, spread_key, spread_max_skew, spread_min_domains),
        (spread_hard, spread_self, spread_hostname, spread_eligible),
        (affinity_pod, affinity_row, affinity_key, affinity_anti),
        (symmetric_pod, symmetric_row, symmetric_key),
        (preferred_pod, preferred_row, preferred_key, preferred_weight),
        weights,
    ):
        return INVALID
    nodes, resources = allocatable.shape
    # The workspace (see compiled._Workspace). Working copies kept up to date as pods are
    # placed: what is free per resource, and the score inputs (cpu, memory) as contiguous rows
    # so that the passes below vectorise. Then per-node and per-domain scratch.
    free, columns = integers[:resources], integers[resources : resources + 6]
    spread_raw, inter = integers[resources + 6], integers[resources + 7]
    ranked, fit, balanced = (
        integers[resources + 8],
        integers[resources + 9],
        integers[resources + 10],
    )
    inverse, accumulated = floats[:2], floats[2]
    flags, scored = booleans[0], booleans[1]
    for r in range(resources):
        checked = r == pods_column
        for b in range(requests.shape[0]):
            checked = checked or requests[b, r] > 0
        if checked:  # columns no pod of the batch asks for are never read (strided: slow)
            for n in range(nodes):
                free[r, n] = allocatable[n, r] - requested[n, r]
    lowest, highest = np.int64(0), np.int64(0)
    for n in range(nodes):
        columns[0, n] = allocatable[n, cpu_column]
        columns[1, n] = allocatable[n, memory_column]
        columns[2, n] = nonzero[n, 0]
        columns[3, n] = nonzero[n, 1]
        columns[4, n] = requested[n, cpu_column]
        columns[5, n] = requested[n, memory_column]
        for k in range(6):
            lowest, highest = min(lowest, columns[k, n]), max(highest, columns[k, n])
    for b in range(requests.shape[0]):
        for value in (requests[b, cpu_column], requests[b, memory_column]):
            lowest, highest = min(lowest, value), max(highest, value)
        for value in (pod_nonzero[b, 0], pod_nonzero[b, 1]):
            lowest, highest = min(lowest, value), max(highest, value)
    if lowest < 0 or highest > EXACT:
        return INEXACT
    for k in range(2):
        for n in range(nodes):
            inverse[k, n] = 1.0 / columns[k, n] if columns[k, n] != 0 else 0.0
    best = np.empty(c.TOP, dtype=np.int64)
    s_start = a_start = y_start = p_start = 0
    # The resource scores depend on the node and on the pod's cpu and memory requests alone:
    # for the next pod of the same shape (replicas, mostly) only the node just placed on
    # changes, so they are computed once per shape and then updated there.
    shape = (np.int64(-1), np.int64(-1), np.int64(-1), np.int64(-1))

    for b in range(pod_hashes.shape[0]):
        s_start, s_end = _rows(spread_pod, s_start, b)
        a_start, a_end = _rows(affinity_pod, a_start, b)
        y_start, y_end = _rows(symmetric_pod, y_start, b)
        p_start, p_end = _rows(preferred_pod, p_start, b)
        code_row = code[b]

        # Filters, in kube-scheduler's order: each pass leaves alone the nodes that already
        # failed, so a node's code is its first failure.
        compiled_filters.fit_filter(
            static_code[b], free, requests[b], pods_column, code_row, detail[b]
        )
        compiled_filters.spread_filter(
            code_row,
            domains,
            domain_counts,
            counts,
            s_start,
            s_end,
            spread_row,
            spread_key,
            spread_max_skew,
            spread_min_domains,
            spread_hard,
            spread_self,
            spread_eligible,
            flags,
            per_domain,
            present,
        )
        compiled_filters.affinity_filter(
            code_row,
            domains,
            domain_counts,
            counts,
            a_start,
            a_end,
            affinity_row,
            affinity_key,
            affinity_anti,
            affinity_self[b],
            flags,
            per_domain,
        )
        for y in range(y_start, y_end):
            compiled_filters.conflict_filter(
                code_row,
                domains[symmetric_key[y]],
                domain_counts[symmetric_key[y]],
                counts[symmetric_row[y]],
                per_domain,
                _EXISTING,
            )
        n_feasible = 0
        for n in range(nodes):
            n_feasible += code_row[n] == _PASS
        feasible_count[b] = n_feasible
        if n_feasible == 0:
            total[b, :] = 0
            continue

        # What the scores normalised over the feasible nodes need first.
        taint_row, affinity_raw = taint_raw[b], node_affinity_raw[b]
        taint_high = compiled_scores.feasible_max(code_row, taint_row)
        affinity_high = compiled_scores.feasible_max(code_row, affinity_raw)
        spread_on, spread_low, spread_high = compiled_scores.spread_scores(
            code_row,
            domains,
            domain_counts,
            counts,
            s_start,
            s_end,
            spread_row,
            spread_key,
            spread_max_skew,
            spread_hard,
            spread_hostname,
            spread_eligible,
            spread_require_all[b],
            flags,
            scored,
            accumulated,
            spread_raw,
            per_domain,
            present,
        )
        compiled_scores.inter_pod_scores(
            code_row,
            domains,
            domain_counts,
            counts,
            p_start,
            p_end,
            preferred_row,
            preferred_key,
            preferred_weight,
            ranked,  # scratch for the raw sums until compiled_scores.weighted_totals fills it
            per_domain,
            inter,
        )
        pod = (
            balanced_skip[b],
            taint_high,
            compiled_scores.reciprocal(taint_high),
            affinity_high,
            compiled_scores.reciprocal(affinity_high),
            spread_on,
            spread_low,
            spread_high,
            compiled_scores.reciprocal(spread_high),
        )
        # Negative maxima need Python's floor division on negative divisors: never from the
        # framework (raw scores are counts and weights), but defined, on a slower path.
        general = taint_high < 0 or affinity_high < 0 or _LOWEST < spread_high < 0
        pod_shape = (
            pod_nonzero[b, 0],
            pod_nonzero[b, 1],
            requests[b, cpu_column],
            requests[b, memory_column],
        )
        if pod_shape != shape:
            shape = pod_shape
            compiled_scores.resource_scores(columns, inverse, shape, fit, balanced, 0, nodes)
        inputs = (fit, balanced, taint_row, affinity_raw, scored, spread_raw, inter)

        # Every node's weighted total (dense: the infeasible ones are computed and dropped,
        # which vectorises), the best TOP by (total, tie-break), and the placement.
        if general:
            compiled_scores.weighted_totals(inputs, pod, weights, True, code_row, total[b], ranked)
        else:
            compiled_scores.weighted_totals(inputs, pod, weights, False, code_row, total[b], ranked)
        kept = compiled_selection.best_nodes(ranked, name_hashes, pod_hashes[b], best)
        for rank in range(kept):
            n = best[rank]
            top[b, rank] = n
            values = compiled_scores.scores_of(n, inputs, pod, general)
            for p in range(_PLUGINS):
                top_scores[b, rank, p] = values[p]
        node = best[0]
        chosen[b] = node
        for r in range(resources):
            free[r, node] -= requests[b, r]
        columns[2, node] += pod_nonzero[b, 0]
        columns[3, node] += pod_nonzero[b, 1]
        columns[4, node] += requests[b, cpu_column]
        columns[5, node] += requests[b, memory_column]
        compiled_scores.resource_scores(columns, inverse, shape, fit, balanced, node, node + 1)
        for t in range(counts.shape[0]):
            counts[t, node] += member[b, t]
    return DECIDED


@compiled_jit.jit
def _rows(table: c.I32, start: int, pod: int) -> tuple[int, int]:
    """``pod``'s rows (start, end) of a table sorted by pod, searching from ``start`` on."""
    while start < table.shape[0] and table[start] < pod:
        start += 1
    end = start
    while end < table.shape[0] and table[end] == pod:
        end += 1
    return start, end
