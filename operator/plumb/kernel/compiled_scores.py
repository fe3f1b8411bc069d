"""The compiled kernel's scores: raw scores and their normalisation to 0-100, over the feasible
nodes only (``compiled_filters.combine`` lists them), slot j for the j-th feasible node;
``compiled_selection`` weighs and sums them.

The semantics are ``reference``'s; the arrangement is for speed. What a node's scores read
is first gathered into contiguous arrays by slot (a pass per input, indices unsigned: no
check for negative ones), and the arithmetic then runs over those arrays, where it vectorises
(a loop that gathers does not). No integer division per node where it can be avoided: see
``_floor_div``. The resource scores depend on the node and on the pod's cpu and memory requests
alone (and ZoneHealth's on the node alone), so they are computed for every node when those
change (one vectorised pass) and kept, updated at the node each pod is placed on.
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


@compiled_jit.inline
def _broken_linear(points: c.I64, scores: c.I64, utilization: int) -> int:
    """RequestedToCapacityRatio's shape at ``utilization`` (``reference._broken_linear``: Go's
    division truncates towards zero)."""
    for i in range(points.shape[0]):
        if utilization <= points[i]:
            if i == 0:
                return int(scores[0])
            rise = (scores[i] - scores[i - 1]) * (utilization - points[i - 1])
            step = abs(rise) // (points[i] - points[i - 1])
            return int(scores[i - 1] + (step if rise >= 0 else -step))
    return int(scores[points.shape[0] - 1]) if points.shape[0] > 0 else 0


@compiled_jit.inline
def _round_half_away(x: float) -> int:
    """Go's math.Round for x >= 0 (``reference.round_half_away``)."""
    whole = np.floor(x)
    return int(whole + 1.0) if x - whole >= 0.5 else int(whole)


@compiled_jit.jit
def resource_scores(
    allocatable: c.I64,
    free: c.I64,
    placed_nonzero: c.I64,
    pod: Any,
    weights: c.I64,
    strategy: int,
    zone_score: c.I64,
    fit_spec: Any,
    balanced_spec: Any,
    outputs: Any,
    sums: c.I64,
    fractions: c.F64,
    classic: Any,
    start: int,
    end: int,
) -> None:
    """NodeResourcesFit (by ``strategy``, see contract.FIT_STRATEGIES) and
    NodeResourcesBalancedAllocation of nodes ``start:end`` for a pod of ``pod``: (its request
    row, its non-zero cpu and memory requests, whether BalancedAllocation skips it).
    ``outputs``: (fit, balanced, weighted): the two scores, and the two and ZoneHealth's
    per-node score weighted and summed (none of them is normalised over the feasible nodes).
    ``balanced_spec``: BalancedAllocation's (columns, optional, whether it scores the change
    in balance: ``Batch.balanced_change``).

    What a node has requested is ``allocatable - free`` (plain requests) or
    ``placed_nonzero`` (non-zero cpu and memory), both kept current by ``decide``. A pass per
    resource over the nodes, branch-free where it can be so that it vectorises (a resource
    the node has none of computes a division by 0 that is selected away); ``sums`` (3 rows)
    and ``fractions`` (4 rows) are scratch. ``classic``: (whether the resources are
    kube-scheduler's defaults, the cpu column, the memory column): then ``_classic_scores``,
    one fused pass, does it.
    """
    request, pod_nonzero, skip = pod
    change = balanced_spec[2]
    if classic[0]:
        _classic_scores(
            allocatable,
            free,
            placed_nonzero,
            pod,
            weights,
            strategy,
            zone_score,
            outputs,
            classic[1],
            classic[2],
            change,
            start,
            end,
        )
        return
    fit_columns, fit_weights, fit_nonzero, fit_optional, points, shape_scores = fit_spec
    fit, balanced, weighted = outputs
    w0, w1, w6 = weights[0], 0 if skip else weights[1], weights[c.ZONE_HEALTH]
    least = strategy == c.LEAST_ALLOCATED
    ratio = strategy == c.REQUESTED_TO_CAPACITY_RATIO
    fit_sum, fit_weight = sums[0], sums[1]
    for n in range(start, end):
        fit_sum[n], fit_weight[n] = 0, 0
    for f in range(fit_columns.shape[0] if strategy != c.BALANCED_ALLOCATION else 0):
        column = fit_columns[f]
        if fit_optional[f] and request[column] == 0:
            continue
        weight, row = fit_weights[f], fit_nonzero[f]
        by_nonzero = row != c.NO_NONZERO
        placed = placed_nonzero[row if by_nonzero else 0]
        added = pod_nonzero[row] if by_nonzero else request[column]
        capacity_row, free_row = allocatable[column], free[column]
        for n in range(start, end):
            capacity = capacity_row[n]
            used = (placed[n] if by_nonzero else capacity - free_row[n]) + added
            inverse = 1.0 / capacity
            if ratio:
                over = used > capacity
                utilization = _floor_div(used * _MAX, capacity, inverse)
                score = _broken_linear(points, shape_scores, _MAX if over else utilization)
                ok = capacity != 0 and score > 0
            else:
                # LeastAllocated scores what is left free (0 when over), MostAllocated what
                # is in use (at most all of it: never negative).
                share = capacity - used if least else min(used, capacity)
                score = _floor_div(share * _MAX, capacity, inverse)
                ok = capacity != 0
                score = 0 if share < 0 else score
            fit_sum[n] += score * weight if ok else 0
            fit_weight[n] += weight if ok else 0
    # From v1.36 the balance without the pod first (into ``balanced``), which the balance with
    # it then turns into the change.
    if change:
        _balances(
            allocatable,
            free,
            request,
            balanced_spec,
            False,
            sums[2],
            fractions,
            balanced,
            start,
            end,
        )
    _balances(
        allocatable, free, request, balanced_spec, True, sums[2], fractions, balanced, start, end
    )
    for n in range(start, end):
        weight_sum = fit_weight[n]
        if ratio:
            score = _round_half_away(fit_sum[n] / weight_sum) if weight_sum > 0 else 0
        else:
            score = _floor_div(fit_sum[n], weight_sum, 1.0 / weight_sum)
            score = score if weight_sum > 0 else 0
        balance = balanced[n]
        if strategy == c.BALANCED_ALLOCATION:
            score = 0 if skip else balance
        fit[n] = score
        weighted[n] = w0 * score + w1 * balance + w6 * zone_score[n]


@compiled_jit.jit
def _balances(
    allocatable: c.I64,
    free: c.I64,
    request: c.I64,
    balanced_spec: Any,
    with_pod: bool,
    counted: c.I64,
    fractions: c.F64,
    out: c.I64,
    start: int,
    end: int,
) -> None:
    """NodeResourcesBalancedAllocation's balance of nodes ``start:end`` with the pod's
    ``request`` (``with_pod``) or without it, over the resources the pod's score reads (those
    it skips are skipped either way), into ``out``. With the pod and ``balanced_spec``'s
    change switch on, ``out`` holds the balance without it and gets the change:
    50 + (50 + with - without) / 2 (both are 50 to 100: the division floors). ``counted`` and
    ``fractions`` (4 rows) are scratch."""
    balanced_columns, balanced_optional, change = balanced_spec
    total, first, second, squares = fractions[0], fractions[1], fractions[2], fractions[3]
    for n in range(start, end):
        counted[n], total[n] = 0, 0.0
    for g in range(balanced_columns.shape[0]):
        column = balanced_columns[g]
        added = request[column]
        if balanced_optional[g] and added == 0:
            continue
        added = added if with_pod else 0
        capacity_row, free_row = allocatable[column], free[column]
        for n in range(start, end):
            capacity = capacity_row[n]
            fraction = min(1.0, (capacity - free_row[n] + added) / capacity)
            ok = capacity != 0
            first[n] = fraction if ok and counted[n] == 0 else first[n]
            second[n] = fraction if ok and counted[n] == 1 else second[n]
            total[n] += fraction if ok else 0.0
            counted[n] += 1 if ok else 0
    more = False
    for n in range(start, end):
        more = more or counted[n] > 2
    if more:  # more than two fractions: the standard deviation over them all
        for n in range(start, end):
            total[n] = total[n] / counted[n] if counted[n] > 2 else 0.0  # the mean
            squares[n] = 0.0
        for g in range(balanced_columns.shape[0]):
            column = balanced_columns[g]
            added = request[column]
            if balanced_optional[g] and added == 0:
                continue
            added = added if with_pod else 0
            capacity_row, free_row = allocatable[column], free[column]
            for n in range(start, end):
                capacity = capacity_row[n]
                fraction = min(1.0, (capacity - free_row[n] + added) / capacity)
                deviation = fraction - total[n]
                squares[n] = squares[n] + (deviation * deviation if capacity != 0 else 0.0)
    for n in range(start, end):
        count = counted[n]
        std = 0.0
        if count == 2:
            std = abs((first[n] - second[n]) / 2)
        elif count > 2:
            std = np.sqrt(squares[n] / count)
        balance = int((1 - std) * _MAX)
        out[n] = _changed(balance, out[n]) if with_pod and change else balance


@compiled_jit.inline
def _changed(with_pod: int, without: int) -> int:
    """BalancedAllocation's score from v1.36: 50 + (50 + with - without) / 2, Go's division
    (towards zero; ``reference.go_div``)."""
    x = _MAX // 2 + with_pod - without
    half = abs(x) >> 1
    return _MAX // 2 + (half if x >= 0 else -half)


@compiled_jit.jit
def _classic_scores(
    allocatable: c.I64,
    free: c.I64,
    placed_nonzero: c.I64,
    pod: Any,
    weights: c.I64,
    strategy: int,
    zone_score: c.I64,
    outputs: Any,
    cpu_column: int,
    memory_column: int,
    change: bool,
    start: int,
    end: int,
) -> None:
    """``resource_scores`` for kube-scheduler's default resources (cpu and memory weighing
    alike for NodeResourcesFit, by their non-zero requests; cpu and memory for
    BalancedAllocation) and Least or MostAllocated or BalancedAllocation: one branch-free
    pass that vectorises (cpu or memory 0 computes a division by 0 that is selected away)."""
    request, pod_nonzero, skip = pod
    fit, balanced, weighted = outputs
    nz_cpu, nz_memory = pod_nonzero[0], pod_nonzero[1]
    cpu_request, memory_request = request[cpu_column], request[memory_column]
    w0, w1, w6 = weights[0], 0 if skip else weights[1], weights[c.ZONE_HEALTH]
    least = strategy == c.LEAST_ALLOCATED
    balanced_fit = strategy == c.BALANCED_ALLOCATION
    cpu_all, memory_all = allocatable[cpu_column], allocatable[memory_column]
    cpu_free, memory_free = free[cpu_column], free[memory_column]
    cpu_placed, memory_placed = placed_nonzero[0], placed_nonzero[1]
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
        cpu_fraction = min(1.0, (cpu - cpu_free[n] + cpu_request) / cpu)
        memory_fraction = min(1.0, (memory - memory_free[n] + memory_request) / memory)
        balance = int((1 - abs((cpu_fraction - memory_fraction) / 2)) * _MAX) if both else _MAX
        if change:  # from v1.36: the change from the balance without the pod
            cpu_fraction = min(1.0, (cpu - cpu_free[n]) / cpu)
            memory_fraction = min(1.0, (memory - memory_free[n]) / memory)
            before = int((1 - abs((cpu_fraction - memory_fraction) / 2)) * _MAX) if both else _MAX
            balance = _changed(balance, before)
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
    image: Any,
    dra: Any,
    extension: Any,
    slots: c.I64,
) -> tuple[int, int, int, int, int]:
    """Each feasible node's weighted resource, zone health, image locality and volume scores
    (``resource_scores``'s ``weighted``, plus ``image``: (ImageLocality's weight, the pod's
    score row, VolumeBinding's weight, the pod's score row)), taint
    and node-affinity raw scores into ``slots[0]``, ``slots[1]``, ``slots[2]`` by slot;
    DynamicResources' (``dra``: its weight, the pod's raw row), normalised by the highest
    raw score over the feasible nodes (DefaultNormalizeScore), weighted into ``slots[0]`` too;
    and the Python score plugins' (``extension``: whether the batch has any, the pod's row),
    added as they are (a pass of its own, run only when there are any). Returns the lowest and
    highest taint, then node-affinity, raw score, and DynamicResources' highest."""
    slot_weighted, slot_taint, slot_affinity = slots[0], slots[1], slots[2]
    image_weight, image_row, volume_weight, volume_row = image
    for j in range(count):
        n = np.uint64(feasible[j])
        slot_weighted[j] = weighted[n] + image_weight * image_row[n] + volume_weight * volume_row[n]
        slot_taint[j] = taint_raw[n]
        slot_affinity[j] = affinity_raw[n]
    taint_low, taint_high = _HIGHEST, _LOWEST
    affinity_low, affinity_high = _HIGHEST, _LOWEST
    for j in range(count):
        taint, affinity = slot_taint[j], slot_affinity[j]
        taint_low, taint_high = min(taint_low, taint), max(taint_high, taint)
        affinity_low, affinity_high = min(affinity_low, affinity), max(affinity_high, affinity)
    dra_weight, dra_row = dra
    dra_high = 0
    for j in range(count):
        dra_high = max(dra_high, dra_row[np.uint64(feasible[j])])
    if dra_high > 0 and dra_weight != 0:  # raw scores are >= 0: floor is Go's truncation
        for j in range(count):
            n = np.uint64(feasible[j])
            slot_weighted[j] += dra_weight * (c.MAX_NODE_SCORE * dra_row[n] // dra_high)
    extension_scored, extension_row = extension
    if extension_scored:
        for j in range(count):
            slot_weighted[j] += extension_row[np.uint64(feasible[j])]
    return taint_low, taint_high, affinity_low, affinity_high, dra_high


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
        if hostname[i] and everywhere[spread_key[i]]:
            # Weighted by log(2 + the nodes scored); a node's own count, every node with the
            # key (no domain to look up).
            weight = math.log(n_scored + 2)
            row = counts[spread_row[i]]
            for j in range(count):
                gathered[j] = row[np.uint64(feasible[j])]
            has_key[:count] = True
        elif hostname[i]:
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
) -> tuple[int, int, int, int, int, int, int, int, int, int]:
    """The ten plugin scores of the j-th feasible node (resource scores cached).

    ``pod``: BalancedAllocation skipped; the taint and node-affinity raw scores' feasible
    (lowest, highest, reciprocal of the highest); the soft spread's (constraints?, lowest,
    highest, reciprocal of the highest); InterPodAffinity's (terms?, lowest, highest)."""
    fit, balanced, taint_row, affinity_row, scored, spread_raw, inter_raw, zone_score = inputs[:8]
    image_row, volume_row, dra_row, dra_high = inputs[8], inputs[9], inputs[10], inputs[11]
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
        image_row[n],
        volume_row[n],
        c.MAX_NODE_SCORE * dra_row[n] // dra_high if dra_high > 0 else 0,
    )
