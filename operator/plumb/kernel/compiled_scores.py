"""The compiled kernel's scores: raw scores and their normalisation to 0-100, over the feasible
nodes only (``compiled_filters.combine`` lists them), slot j for the j-th feasible node;
``compiled_selection`` weighs and sums them.

The semantics are ``reference``'s; the arrangement is for speed. What a node's scores read
is first gathered into contiguous arrays by slot (a pass per input, indices unsigned: no
check for negative ones), and the arithmetic then runs over those arrays, where it vectorises
(a loop that gathers does not). No integer division per node where it can be avoided (3 ns
here): see ``_floor_div``. The resource scores depend on the node and on the pod's cpu and
memory requests alone (and ZoneHealth's on the node alone), so they are computed for every
node when those change (one vectorised pass) and kept, updated at the node each pod is
placed on.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from plumb.kernel import compiled_jit
from plumb.kernel import contract as c

_MAX, _LOWEST, _HIGHEST = compiled_jit.MAX, compiled_jit.LOWEST, compiled_jit.HIGHEST
_PASS = c.PASS


@compiled_jit.inline
def reciprocal(high: int) -> float:
    """The reciprocal ``_floor_div`` wants (0 where it is not used: a maximum <= 0)."""
    return 1.0 / high if high > 0 else 0.0


@compiled_jit.inline
def _floor_div(x: int, divisor: int, inverse: float) -> int:
    """``x // divisor`` for ``divisor > 0`` and ``inverse == 1 / divisor``, by a multiplication:
    exact, and faster than an integer division. The float quotient is within one of the true
    one while it is far below 2**50 (here it is at most a few hundred), so one correction step
    suffices.
    """
    q = int(np.floor(x * inverse))
    rest = x - q * divisor
    q = q - 1 if rest < 0 else q
    return q + 1 if rest >= divisor else q


@compiled_jit.jit
def resource_scores(
    columns: c.I64,
    shape: Any,
    weights: c.I64,
    strategy: int,
    zone_score: c.I64,
    fit: c.I64,
    balanced: c.I64,
    weighted: c.I64,
    start: int,
    end: int,
) -> None:
    """NodeResourcesFit (by ``strategy``: Least or MostAllocated over the non-zero requests,
    cpu and memory weighing 1, or BalancedAllocation's score) and
    NodeResourcesBalancedAllocation of nodes ``start:end`` for a pod of ``shape``: its
    non-zero cpu and memory requests, its cpu and memory requests, and whether
    BalancedAllocation skips it. ``weighted``: the two and ZoneHealth's per-node score,
    weighted and summed (none of them is normalised over the feasible nodes). ``columns``: see
    ``compiled_batch.decide``. Branch-free, so that it vectorises (cpu or memory 0 computes a
    division by 0 that is selected away)."""
    nz_cpu, nz_memory, cpu_request, memory_request, skip = shape
    w0, w1, w6 = weights[0], 0 if skip else weights[1], weights[c.ZONE_HEALTH]
    least = strategy == c.LEAST_ALLOCATED
    balanced_fit = strategy == c.BALANCED_ALLOCATION
    cpu_all, memory_all = columns[0], columns[1]
    cpu_placed, memory_placed = columns[2], columns[3]
    cpu_requested, memory_requested = columns[4], columns[5]
    for n in range(start, end):
        cpu, memory = cpu_all[n], memory_all[n]
        # LeastAllocated scores what is left free (0 when over), MostAllocated what is in use
        # (at most all of it); the non-zero requests are never negative (decide checks).
        used = cpu_placed[n] + nz_cpu
        share = cpu - used if least else min(used, cpu)
        cpu_score = _floor_div(share * _MAX, cpu, 1.0 / cpu)
        cpu_score = 0 if share < 0 or cpu == 0 else cpu_score
        used = memory_placed[n] + nz_memory
        share = memory - used if least else min(used, memory)
        memory_score = _floor_div(share * _MAX, memory, 1.0 / memory)
        memory_score = 0 if share < 0 or memory == 0 else memory_score
        both = cpu != 0 and memory != 0
        if both:
            score = (cpu_score + memory_score) >> 1  # both >= 0: the floor of half
        else:
            score = cpu_score if cpu != 0 else (memory_score if memory != 0 else 0)
        # 100 * (1 - |cpu fraction - memory fraction| / 2); one fraction (or none): no deviation
        cpu_fraction = min(1.0, (cpu_requested[n] + cpu_request) / cpu)
        memory_fraction = min(1.0, (memory_requested[n] + memory_request) / memory)
        balance = int((1 - abs(cpu_fraction - memory_fraction) / 2) * _MAX) if both else _MAX
        score = (0 if skip else balance) if balanced_fit else score
        fit[n], balanced[n] = score, balance
        weighted[n] = w0 * score + w1 * balance + w6 * zone_score[n]


@compiled_jit.jit
def gather(
    feasible: c.I32,
    count: int,
    weighted: c.I64,
    taint_raw: c.I64,
    affinity_raw: c.I64,
    slots: c.I64,
) -> tuple[int, int, int, int]:
    """Each feasible node's weighted resource and zone health scores (``resource_scores``'s
    ``weighted``), taint and node-affinity raw scores into ``slots[0]``, ``slots[1]``,
    ``slots[2]`` by slot. Returns the lowest and highest taint, then node-affinity, raw
    score."""
    slot_weighted, slot_taint, slot_affinity = slots[0], slots[1], slots[2]
    for j in range(count):
        n = np.uint64(feasible[j])
        slot_weighted[j] = weighted[n]
        slot_taint[j] = taint_raw[n]
        slot_affinity[j] = affinity_raw[n]
    taint_low, taint_high = _HIGHEST, _LOWEST
    affinity_low, affinity_high = _HIGHEST, _LOWEST
    for j in range(count):
        taint, affinity = slot_taint[j], slot_affinity[j]
        taint_low, taint_high = min(taint_low, taint), max(taint_high, taint)
        affinity_low, affinity_high = min(affinity_low, affinity), max(affinity_high, affinity)
    return taint_low, taint_high, affinity_low, affinity_high


@compiled_jit.jit
def _gather_counts(
    feasible: c.I32,
    count: int,
    key_domains: c.I32,
    values: Any,
    by_node: bool,
    gathered: c.I64,
    has_key: c.B1,
) -> None:
    """Each feasible node's count: ``values`` by node, or by the node's domain of the key (0,
    and ``has_key`` False, where it lacks the key)."""
    for j in range(count):
        n = np.uint64(feasible[j])
        d = key_domains[n]
        has_key[j] = d >= 0
        if by_node:
            gathered[j] = values[n]
        else:
            gathered[j] = values[np.uint64(d)] if d >= 0 else 0


@compiled_jit.jit
def spread_raws(
    feasible: c.I32,
    count: int,
    domains: c.I32,
    domain_counts: c.I32,
    everywhere: c.B1,
    counts: c.I32,
    spread: Any,
    require_all: bool,
    aggregates: Any,
    scored: c.B1,
    accumulated: c.F64,
    raw: c.I64,
    gathered: c.I64,
    has_key: c.B1,
    seen: c.B1,
) -> tuple[int, int, int]:
    """PodTopologySpread's soft constraints, PreScore and Score: the raw score of each feasible
    node (``raw[j]`` for slot j). Returns (1 if there are any, else 0; the lowest and the
    highest raw score of the nodes scored). ``scored[j]`` is False for the nodes PreScore
    ignores (a soft key missing, when all keys are required): they score 0.

    ``spread``: (start, end, row, key, max_skew, hard, hostname, aggregate) of the pod's rows;
    ``everywhere[k]``: every node carries key k. Per constraint, its counts are gathered, then
    each node's sum is added to in the reference's order.
    """
    start, end, spread_row, spread_key, spread_max_skew, spread_hard, hostname, spread_agg = spread
    offset, totals = aggregates[3], aggregates[6]
    last = -1
    for i in range(start, end):
        last = i if not spread_hard[i] else last
    if last < 0:
        return 0, 0, 0
    # PreScore: with all keys required, the nodes lacking one are not scored.
    scored[:count] = True
    n_scored = count
    if require_all:
        checked = False
        for i in range(start, end):
            if not spread_hard[i] and not everywhere[spread_key[i]]:
                checked = True
                key_domains = domains[spread_key[i]]
                for j in range(count):
                    scored[j] &= key_domains[np.uint64(feasible[j])] >= 0
        if checked:
            n_scored = 0
            for j in range(count):
                n_scored += scored[j]
    low, high = _HIGHEST, _LOWEST
    first = True  # the first soft constraint sets ``accumulated``, the others add to it
    for i in range(start, end):
        if spread_hard[i]:
            continue
        key_domains = domains[spread_key[i]]
        shift = float(spread_max_skew[i] - 1)
        # kube-scheduler's Score skips a constraint on a node without its key (the node may
        # still be scored, under the system defaults, for the keys it has).
        if hostname[i]:
            # Weighted by log(2 + the nodes scored); a node's own count.
            weight = math.log(n_scored + 2)
            row = counts[spread_row[i]]
            _gather_counts(feasible, count, key_domains, row, True, gathered, has_key)
        else:
            # Weighted by log(2 + its domains among the nodes scored, "" for those without
            # the key); the pods per domain over the eligible nodes with every soft key (the
            # aggregate: the reference sums only the domains of scored nodes, the only ones
            # read).
            missing = domain_counts[spread_key[i]]
            seen[: missing + 1] = False
            size = 0
            for j in range(count):
                if scored[j]:
                    d = key_domains[np.uint64(feasible[j])]
                    d = missing if d < 0 else d
                    size += not seen[d]
                    seen[d] = True
            weight = math.log(size + 2)
            per_domain = totals[offset[spread_agg[i]] :]
            _gather_counts(feasible, count, key_domains, per_domain, False, gathered, has_key)
        if first:  # over contiguous slots: these passes vectorise
            for j in range(count):
                term = float(gathered[j]) * weight + shift
                accumulated[j] = term if has_key[j] else 0.0
        else:
            for j in range(count):
                term = float(gathered[j]) * weight + shift
                accumulated[j] += term if has_key[j] else 0.0
        first = False
    low, high = _HIGHEST, _LOWEST
    for j in range(count):
        value = int(np.floor(accumulated[j] + 0.5))
        raw[j] = value
        low = min(low, value if scored[j] else _HIGHEST)
        high = max(high, value if scored[j] else _LOWEST)
    return 1, low, high


@compiled_jit.jit
def inter_pod_raws(
    feasible: c.I32,
    count: int,
    domains: c.I32,
    counts: c.I32,
    preferred: Any,
    aggregates: Any,
    raw: c.I64,
    gathered: c.I64,
    has_key: c.B1,
) -> tuple[int, int, int]:
    """InterPodAffinity's preferred terms: the weighted matching pods in each feasible node's
    domains (``raw[j]`` for slot j). Returns (1 if there are any terms, else 0; the lowest and
    the highest of them)."""
    start, end, preferred_key, preferred_weight, preferred_agg = preferred
    rows, offset, totals, by_node = aggregates[0], aggregates[3], aggregates[6], aggregates[12]
    low, high = _HIGHEST, _LOWEST
    if end == start:
        return 0, 0, 0
    for p in range(start, end):
        agg = preferred_agg[p]
        key_domains = domains[preferred_key[p]]
        if by_node[agg]:
            row = counts[rows[agg]]
            _gather_counts(feasible, count, key_domains, row, True, gathered, has_key)
        else:
            per_domain = totals[offset[agg] :]
            _gather_counts(feasible, count, key_domains, per_domain, False, gathered, has_key)
        weight = preferred_weight[p]
        if p == start:  # over contiguous slots: these passes vectorise
            for j in range(count):
                raw[j] = weight * gathered[j] if has_key[j] else 0
        else:
            for j in range(count):
                raw[j] += weight * gathered[j] if has_key[j] else 0
    for j in range(count):
        low, high = min(low, raw[j]), max(high, raw[j])
    return 1, low, high


@compiled_jit.inline
def _scaled(x: int, high: int, inverse: float, general: bool) -> int:
    """``x // high``: by ``_floor_div`` for ``high > 0`` unless ``general``."""
    return x // high if general else _floor_div(x, high, inverse)


@compiled_jit.inline
def taint_score(raw: int, high: int, inverse: float, general: bool) -> int:
    """TaintToleration: DefaultNormalizeScore, reversed, over the feasible maximum."""
    return _MAX - _scaled(_MAX * raw, high, inverse, general) if high != 0 else _MAX


@compiled_jit.inline
def affinity_score(raw: int, high: int, inverse: float, general: bool) -> int:
    """NodeAffinity: DefaultNormalizeScore over the feasible maximum."""
    return _scaled(_MAX * raw, high, inverse, general) if high != 0 else raw


@compiled_jit.inline
def spread_score(raw: int, low: int, high: int, inverse: float, general: bool) -> int:
    """PodTopologySpread of a node scored: fewer matching pods is better."""
    return _scaled(_MAX * (high + low - raw), high, inverse, general) if high != 0 else _MAX


@compiled_jit.inline
def inter_pod_score(raw: int, low: int, high: int) -> int:
    """InterPodAffinity: scaled between the lowest and the highest (0 when they are equal)."""
    return int(_MAX * ((raw - low) / (high - low))) if high - low > 0 else 0


@compiled_jit.inline
def scores_of(
    j: int, feasible: c.I32, inputs: Any, pod: Any, general: bool
) -> tuple[int, int, int, int, int, int, int]:
    """The seven plugin scores of the j-th feasible node (resource scores cached).

    ``pod``: BalancedAllocation skipped; the taint and node-affinity raw scores' feasible
    (lowest, highest, reciprocal of the highest); the soft spread's (constraints?, lowest,
    highest, reciprocal of the highest); InterPodAffinity's (terms?, lowest, highest)."""
    fit, balanced, taint_row, affinity_row, scored, spread_raw, inter_raw, zone_score = inputs
    skip, _, taint_high, taint_inverse, _, affinity_high, affinity_inverse = pod[:7]
    spread_on, spread_low, spread_high, spread_inverse, inter_on, inter_low, inter_high = pod[7:]
    n = feasible[j]
    spread = 0
    if spread_on != 0 and scored[j]:
        spread = spread_score(spread_raw[j], spread_low, spread_high, spread_inverse, general)
    return (
        fit[n],
        0 if skip else balanced[n],
        taint_score(taint_row[n], taint_high, taint_inverse, general),
        affinity_score(affinity_row[n], affinity_high, affinity_inverse, general),
        spread,
        inter_pod_score(inter_raw[j], inter_low, inter_high) if inter_on != 0 else 0,
        zone_score[n],
    )
