"""The compiled kernel's main loop: the pods of a batch in turn, each placed before the next.

``decide`` sets up what the whole batch shares (working copies, ``compiled_aggregates``), then
runs the passes of ``compiled_filters`` and ``compiled_scores`` for each pod over the working
copy of the cluster, updated by the placements before it. ``compiled.run`` prepares its
arguments and reads its outcome.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plumb.kernel import (
    compiled_aggregates,
    compiled_checks,
    compiled_filters,
    compiled_jit,
    compiled_scores,
    compiled_selection,
)
from plumb.kernel import contract as c

_PLUGINS, _LOWEST = compiled_jit.PLUGINS, compiled_jit.LOWEST
# Quantities a resource score reads (cpu, memory, and the profile's other resources) up to 2**50
# (a million cores in millicores, a PiB of memory) keep 100 times a sum of two in int64 and
# every one exact in float64, as the reference's Python integers are. Beyond (a clamped absurd
# quantity), the kernel hands over to the reference.
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
    static_row: c.I32,
    static_code: c.I32,
    taint_raw: c.I64,
    node_affinity_raw: c.I64,
    image_score: c.I64,
    volume_score: c.I64,
    dra_raw: c.I64,
    extension: Any,
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
    continues: c.B1,
    fit_strategy: int,
    zone_score: c.I64,
    fit_filter: bool,
    fit_spec: Any,
    balanced_spec: Any,
    chosen: c.I32,
    code: Any,
    detail: c.I64,
    total: c.I64,
    feasible_count: c.I32,
    top: c.I32,
    top_scores: c.I64,
    hinted: c.B1,
    dirty: c.B1,
    integers: c.I64,
    narrow: c.I32,
    floats: c.F64,
    booleans: c.B1,
    seen: c.B1,
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
        (pod_hashes, spread_require_all, affinity_self, balanced_skip, static_row, continues),
        (requests, pod_nonzero, static_code, taint_raw, node_affinity_raw, image_score, member),
        (volume_score, dra_raw, extension[0]),
        (spread_pod, spread_row, spread_key, spread_max_skew, spread_min_domains),
        (spread_hard, spread_self, spread_hostname, spread_eligible),
        (affinity_pod, affinity_row, affinity_key, affinity_anti),
        (symmetric_pod, symmetric_row, symmetric_key),
        (preferred_pod, preferred_row, preferred_key, preferred_weight),
        weights,
        fit_strategy,
        zone_score,
        fit_spec,
        balanced_spec,
    ):
        return INVALID
    resources, nodes = allocatable.shape
    # The workspace (see compiled._Workspace). Working copies kept up to date as pods are
    # placed: what is free per resource, the resource bits and scores of the current request
    # shape, and the non-zero cpu and memory requests. Then per-node scratch, and per-slot
    # arrays for the feasible nodes (slot j: the j-th, see compiled_scores).
    free = integers[:resources]
    bits, fit, balanced = integers[resources], integers[resources + 1], integers[resources + 2]
    weighted = integers[resources + 3]  # the resource scores weighted and summed
    gathered = integers[resources + 4]  # a count per slot (compiled_scores)
    spread_raw, inter_raw = integers[resources + 5], integers[resources + 6]  # per slot
    placed_nonzero = integers[resources + 7 : resources + 9]  # cpu, memory
    sums = integers[resources + 9 : resources + 12]  # compiled_scores.resource_scores's
    compact = integers[resources + 13]  # the totals per slot
    slots = integers[resources + 14 : resources + 17]  # compiled_scores.gather's
    feasible = narrow[0]  # the feasible nodes, in node order
    verdict = narrow[1]  # compiled_filters.dynamic_filter's
    accumulated = floats[0]  # the soft spread's sums, per slot
    fractions = floats[1:5]  # compiled_scores.resource_scores's
    scored, has_key = booleans[0], booleans[1]
    # Each node's static or resource failure code (PASS: neither; compiled_filters._LAST: a
    # static reason checked last) for the static row ``early_row`` and the current resource
    # bits; kept, updated at each placement.
    early, early_row = booleans[2].view(np.int8), -1
    fit_columns, balanced_columns = fit_spec[0], balanced_spec[0]
    scoring = np.zeros(resources, dtype=np.bool_)  # columns a resource score reads
    for f in range(fit_columns.shape[0]):
        scoring[fit_columns[f]] = True
    for g in range(balanced_columns.shape[0]):
        scoring[balanced_columns[g]] = True
    for r in range(resources):
        checked = r == pods_column or scoring[r]
        for b in range(requests.shape[0]):
            checked = checked or requests[b, r] > 0
        if checked:  # columns no pod of the batch asks for, and no score reads, are never read
            allocatable_r, requested_r, free_r = allocatable[r], requested[r], free[r]
            for n in range(nodes):
                free_r[n] = allocatable_r[n] - requested_r[n]
    placed_nonzero[0] = nonzero[0]
    placed_nonzero[1] = nonzero[1]
    lowest, highest = np.int64(0), np.int64(0)
    for k in range(2):
        column = nonzero[k]
        for n in range(nodes):  # no early exit: the pass vectorises
            lowest, highest = min(lowest, column[n]), max(highest, column[n])
    for r in range(resources):
        if scoring[r]:
            for column in (allocatable[r], requested[r]):
                for n in range(nodes):  # no early exit: the pass vectorises
                    lowest, highest = min(lowest, column[n]), max(highest, column[n])
    for b in range(requests.shape[0]):
        for r in range(resources):
            if scoring[r]:
                lowest, highest = min(lowest, requests[b, r]), max(highest, requests[b, r])
        for value in (pod_nonzero[b, 0], pod_nonzero[b, 1]):
            lowest, highest = min(lowest, value), max(highest, value)
    if lowest < 0 or highest > EXACT:
        return INEXACT
    # Keys every node carries (PreScore checks no node for them), and keys whose domain d is
    # node d (the hostname, usually: their checks need no lookup).
    everywhere = np.empty(domains.shape[0], dtype=np.bool_)
    identity = np.empty(domains.shape[0], dtype=np.bool_)
    for k in range(domains.shape[0]):
        key_domains = domains[k]
        lowest_id, elsewhere = np.int32(0), 0
        for n in range(nodes):  # no early exit: the pass vectorises
            lowest_id = min(lowest_id, key_domains[n])
            elsewhere += key_domains[n] != n
        everywhere[k] = lowest_id >= 0
        identity[k] = domain_counts[k] == nodes and elsewhere == 0
    # Per-domain totals of every (row, key, mask) the batch's constraints ask for, kept current
    # as pods are placed (see compiled_aggregates).
    aggregates = compiled_aggregates.build(
        domains,
        domain_counts,
        identity,
        counts,
        pod_hashes.shape[0],
        (spread_pod, spread_row, spread_key, spread_hard, spread_hostname),
        spread_eligible,
        spread_require_all,
        (
            (affinity_pod, affinity_row, affinity_key),
            (symmetric_pod, symmetric_row, symmetric_key),
            (preferred_pod, preferred_row, preferred_key),
        ),
    )
    spread_agg, affinity_agg, symmetric_agg, preferred_agg = aggregates[8:12]
    tables = np.empty(np.sum(domain_counts) + domain_counts.shape[0], dtype=np.int32)
    keys_used = np.empty(domain_counts.shape[0], dtype=np.bool_)
    best = np.empty(c.TOP, dtype=np.int64)
    s_start = a_start = y_start = p_start = 0
    # What the resource bits and scores were computed for: the pod's requests (bits), and its
    # requests, non-zero cpu and memory requests and BalancedAllocation skip (scores). Replicas
    # reuse both, updated at the node each pod is placed on.
    bits_for = np.full(resources, -1, dtype=np.int64)
    scores_for = np.full(resources + 3, -1, dtype=np.int64)  # requests, non-zero, skip
    classic = (
        _classic(fit_spec, balanced_spec, fit_strategy, cpu_column, memory_column),
        cpu_column,
        memory_column,
    )
    if not fit_filter:
        bits[:] = 0  # NodeResourcesFit is not a filter: no node is short of anything
    # OpportunisticBatching's ranking (contract.Batch.continues): its nodes, their totals, and
    # the hash that broke its ties.
    listed = np.zeros(nodes, dtype=np.bool_)
    ranked_total = np.zeros(nodes, dtype=np.int64)
    ranked_hash = np.uint64(0)

    for b in range(pod_hashes.shape[0]):
        s_start, s_end = _rows(spread_pod, s_start, b)
        a_start, a_end = _rows(affinity_pod, a_start, b)
        y_start, y_end = _rows(symmetric_pod, y_start, b)
        p_start, p_end = _rows(preferred_pod, p_start, b)
        code_row, detail_row, total_row = code[b], detail[b], total[b]

        # Filters, in kube-scheduler's order: a node's code is its first failure.
        if fit_filter and not _same(bits_for, requests[b]):
            bits_for[:] = requests[b]
            compiled_filters.resource_bits(free, requests[b], pods_column, bits, 0, nodes)
            early_row = -1
        dynamic = compiled_filters.dynamic_filter(
            domains,
            domain_counts,
            counts,
            identity,
            (
                s_start,
                s_end,
                spread_key,
                spread_max_skew,
                spread_min_domains,
                spread_hard,
                spread_self,
                spread_agg,
            ),
            (a_start, a_end, affinity_key, affinity_anti, affinity_agg, affinity_self[b]),
            (y_start, y_end, symmetric_key, symmetric_agg),
            aggregates,
            verdict,
            tables,
            keys_used,
        )
        u = static_row[b]
        if u != early_row:
            compiled_filters.early_codes(static_code[u], bits, early, 0, nodes)
            early_row = u
        count = compiled_filters.combine(early, verdict, dynamic, code_row, feasible)
        feasible_count[b] = count
        # The details of why nodes failed are for a pod no node fits, and zeros otherwise: a
        # row the output set's earlier use filled (``dirty``) is cleared, a clean one left be.
        if count == 0:
            compiled_filters.details(static_code[u], bits, code_row, detail_row)
            dirty[b] = True
            total_row[:] = 0
            continue
        if dirty[b]:
            detail_row[:] = 0
            dirty[b] = False
        hint = -1
        if b > 0 and continues[b]:
            hint = compiled_selection.hint(
                chosen[b - 1], code_row, listed, ranked_total, name_hashes, ranked_hash
            )
        pod_shape = (requests[b], pod_nonzero[b], balanced_skip[b])
        if _shape_changed(scores_for, requests[b], pod_nonzero[b], balanced_skip[b]):
            compiled_scores.resource_scores(
                allocatable,
                free,
                placed_nonzero,
                pod_shape,
                weights,
                fit_strategy,
                zone_score,
                fit_spec,
                balanced_spec,
                (fit, balanced, weighted),
                sums,
                fractions,
                classic,
                0,
                nodes,
            )
        taint_row, affinity_raw, image_row = taint_raw[u], node_affinity_raw[u], image_score[u]
        volume_row, dra_row = volume_score[u], dra_raw[u]
        extension_scored, extension_row = extension[1], extension[0][u]
        taint_low, taint_high, affinity_low, affinity_high, dra_high = compiled_scores.gather(
            feasible,
            count,
            weighted,
            taint_row,
            affinity_raw,
            (weights[c.IMAGE_LOCALITY], image_row, weights[c.VOLUME_BINDING], volume_row),
            (weights[c.DYNAMIC_RESOURCES], dra_row),
            (extension_scored, extension_row),
            slots,
        )

        # Scores over the feasible nodes: what normalising them needs first.
        spread_on, spread_low, spread_high = compiled_scores.spread_raws(
            feasible,
            count,
            domains,
            domain_counts,
            everywhere,
            counts,
            (
                s_start,
                s_end,
                spread_row,
                spread_key,
                spread_max_skew,
                spread_hard,
                spread_hostname,
                spread_agg,
            ),
            spread_require_all[b],
            aggregates,
            scored,
            accumulated,
            spread_raw,
            gathered,
            has_key,
            seen,
        )
        inter_on, inter_low, inter_high = compiled_scores.inter_pod_raws(
            feasible,
            count,
            domains,
            counts,
            (p_start, p_end, preferred_key, preferred_weight, preferred_agg),
            aggregates,
            inter_raw,
            gathered,
            has_key,
        )
        pod = (
            balanced_skip[b],
            taint_low,
            taint_high,
            compiled_scores.reciprocal(taint_high),
            affinity_low,
            affinity_high,
            compiled_scores.reciprocal(affinity_high),
            spread_on,
            spread_low,
            spread_high,
            compiled_scores.reciprocal(spread_high),
            inter_on,
            inter_low,
            inter_high,
        )
        # Negative maxima need Python's floor division on negative divisors: never from the
        # framework (raw scores are counts and weights), but defined, on a slower path.
        general = taint_high < 0 or affinity_high < 0 or _LOWEST < spread_high < 0
        inputs = (
            fit,
            balanced,
            taint_row,
            affinity_raw,
            scored,
            spread_raw,
            inter_raw,
            zone_score,
            image_row,
            volume_row,
            dra_row,
            dra_high,
        )
        if general:
            kept = compiled_selection.totals_and_best(
                feasible,
                count,
                slots,
                scored,
                spread_raw,
                inter_raw,
                pod,
                weights,
                True,
                total_row,
                compact,
                name_hashes,
                pod_hashes[b],
                best,
            )
        else:
            kept = compiled_selection.totals_and_best(
                feasible,
                count,
                slots,
                scored,
                spread_raw,
                inter_raw,
                pod,
                weights,
                False,
                total_row,
                compact,
                name_hashes,
                pod_hashes[b],
                best,
            )
        for rank in range(kept):
            top[b, rank] = feasible[best[rank]]
            values = compiled_scores.scores_of(best[rank], feasible, inputs, pod, general)
            for p in range(_PLUGINS):
                top_scores[b, rank, p] = values[p]

        # The placement: what is free, the resource bits and scores there, the count rows.
        node = feasible[best[0]] if hint < 0 else hint
        chosen[b], hinted[b] = node, hint >= 0
        if hint < 0 and b + 1 < pod_hashes.shape[0] and continues[b + 1]:
            compiled_selection.keep(feasible, count, total_row, node, listed, ranked_total)
            ranked_hash = pod_hashes[b]
        for r in range(resources):
            free[r, node] -= requests[b, r]
        if fit_filter:
            compiled_filters.resource_bits(free, bits_for, pods_column, bits, node, node + 1)
            compiled_filters.early_codes(static_code[u], bits, early, node, node + 1)
        placed_nonzero[0, node] += pod_nonzero[b, 0]
        placed_nonzero[1, node] += pod_nonzero[b, 1]
        compiled_scores.resource_scores(
            allocatable,
            free,
            placed_nonzero,
            pod_shape,
            weights,
            fit_strategy,
            zone_score,
            fit_spec,
            balanced_spec,
            (fit, balanced, weighted),
            sums,
            fractions,
            classic,
            node,
            node + 1,
        )
        for t in range(counts.shape[0]):
            counts[t, node] += member[b, t]
        compiled_aggregates.place(aggregates, domains, member[b], node)
    return DECIDED


@compiled_jit.inline
def _same(kept: c.I64, wanted: c.I64) -> bool:
    differ = False
    for r in range(kept.shape[0]):
        differ = differ or kept[r] != wanted[r]
    return not differ


@compiled_jit.jit
def _classic(
    fit_spec: Any, balanced_spec: Any, strategy: int, cpu_column: int, memory_column: int
) -> bool:
    """Whether the resource plugins score as kube-scheduler's defaults do (cpu and memory
    weighing alike, by the non-zero requests for NodeResourcesFit; cpu and memory for
    BalancedAllocation) with a strategy other than RequestedToCapacityRatio: the fast path of
    ``compiled_scores.resource_scores``."""
    fit_columns, fit_weights, fit_nonzero, fit_optional = fit_spec[:4]
    balanced_columns, balanced_optional = balanced_spec[0], balanced_spec[1]
    ok = strategy != c.REQUESTED_TO_CAPACITY_RATIO
    ok = ok and fit_columns.shape[0] == 2 and balanced_columns.shape[0] == 2
    if not ok:
        return False
    ok = fit_columns[0] == cpu_column and fit_columns[1] == memory_column
    ok = ok and fit_nonzero[0] == 0 and fit_nonzero[1] == 1
    ok = ok and fit_weights[0] == fit_weights[1] and fit_weights[0] > 0
    ok = ok and not fit_optional[0] and not fit_optional[1]
    ok = ok and balanced_columns[0] == cpu_column and balanced_columns[1] == memory_column
    return bool(ok and not balanced_optional[0] and not balanced_optional[1])


@compiled_jit.inline
def _shape_changed(kept: c.I64, request: c.I64, pod_nonzero: c.I64, skip: bool) -> bool:
    """Whether a pod's requests, non-zero requests and BalancedAllocation skip differ from
    what the resource scores were computed for (``kept``, updated to them if so)."""
    resources = request.shape[0]
    differ = kept[resources] != pod_nonzero[0] or kept[resources + 1] != pod_nonzero[1]
    differ = differ or kept[resources + 2] != np.int64(skip)
    for r in range(resources):
        differ = differ or kept[r] != request[r]
    if differ:
        kept[:resources] = request
        kept[resources] = pod_nonzero[0]
        kept[resources + 1] = pod_nonzero[1]
        kept[resources + 2] = np.int64(skip)
    return bool(differ)


@compiled_jit.jit
def _rows(table: c.I32, start: int, pod: int) -> tuple[int, int]:
    """``pod``'s rows (start, end) of a table sorted by pod, searching from ``start`` on."""
    while start < table.shape[0] and table[start] < pod:
        start += 1
    end = start
    while end < table.shape[0] and table[end] == pod:
        end += 1
    return start, end
