"""The compiled kernel's score passes: raw scores, their normalisation to 0-100, weighted totals.

Dense: every node is scored, the infeasible ones too, and dropped afterwards (a gather over the
feasible ones would not vectorise). No integer division in a pass: see ``_floor_div``. The
semantics are ``reference``'s.
"""

from __future__ import annotations

import math
from typing import Any

from plumb.kernel import compiled_jit
from plumb.kernel import contract as c

_MAX, _LOWEST, _HIGHEST = compiled_jit.MAX, compiled_jit.LOWEST, compiled_jit.HIGHEST
_PASS = c.PASS


@compiled_jit.jit
def feasible_max(code_row: Any, raw: c.I64) -> int:
    """The highest raw score of a feasible node (there is one)."""
    high = _LOWEST
    for n in range(raw.shape[0]):
        high = max(high, raw[n] if code_row[n] == _PASS else _LOWEST)
    return high


@compiled_jit.inline
def reciprocal(high: int) -> float:
    """The reciprocal ``_floor_div`` wants (0 where it is not used: a maximum <= 0)."""
    return 1.0 / high if high > 0 else 0.0


@compiled_jit.inline
def _floor_div(x: int, divisor: int, inverse: float) -> int:
    """``x // divisor`` for ``divisor > 0`` and ``inverse == 1 / divisor``, by a multiplication:
    exact, and unlike an integer division (3 ns a node here) it vectorises. The float quotient
    is within one of the true one while it is far below 2**50 (here it is at most a few
    hundred), so one correction step suffices.
    """
    q = math.floor(x * inverse)  # an int64 in numba
    rest = x - q * divisor
    q = q - 1 if rest < 0 else q
    return q + 1 if rest >= divisor else q


@compiled_jit.inline
def _node_resource_scores(
    cpu: int,
    memory: int,
    cpu_inverse: float,
    memory_inverse: float,
    cpu_nonzero: int,
    memory_nonzero: int,
    cpu_requested: int,
    memory_requested: int,
) -> tuple[int, int]:
    """NodeResourcesFit (LeastAllocated over the non-zero requests, cpu and memory weighing 1)
    and NodeResourcesBalancedAllocation of one node, from scalars only (an inlined function
    taking arrays costs reference counting on every call): its allocatable (and reciprocals),
    then what is placed there with the pod's non-zero requests, and with its requests."""
    free = cpu - cpu_nonzero
    cpu_score = 0 if free < 0 else _floor_div(free * _MAX, cpu, cpu_inverse)
    free = memory - memory_nonzero
    memory_score = 0 if free < 0 else _floor_div(free * _MAX, memory, memory_inverse)
    if cpu != 0 and memory != 0:
        fit = (cpu_score + memory_score) >> 1  # both >= 0: the floor of half
    else:
        fit = cpu_score if cpu != 0 else (memory_score if memory != 0 else 0)
    # 100 * (1 - |cpu fraction - memory fraction| / 2); one fraction (or none): deviation 0.
    cpu_fraction = min(1.0, cpu_requested / cpu)
    memory_fraction = min(1.0, memory_requested / memory)
    balanced = int((1 - abs(cpu_fraction - memory_fraction) / 2) * _MAX)
    return fit, balanced if cpu != 0 and memory != 0 else _MAX


@compiled_jit.jit
def resource_scores(
    columns: c.I64, inverse: c.F64, shape: Any, fit: c.I64, balanced: c.I64, start: int, end: int
) -> None:
    """``_node_resource_scores`` of nodes ``start:end`` for a pod of ``shape``: its non-zero
    cpu and memory requests, then its own. ``columns``/``inverse``: see
    ``compiled_batch.decide``."""
    cpu, memory, cpu_inverse, memory_inverse = columns[0], columns[1], inverse[0], inverse[1]
    cpu_nonzero, memory_nonzero, cpu_requested, memory_requested = (
        columns[2],
        columns[3],
        columns[4],
        columns[5],
    )
    for n in range(start, end):
        fit[n], balanced[n] = _node_resource_scores(
            cpu[n],
            memory[n],
            cpu_inverse[n],
            memory_inverse[n],
            cpu_nonzero[n] + shape[0],
            memory_nonzero[n] + shape[1],
            cpu_requested[n] + shape[2],
            memory_requested[n] + shape[3],
        )


@compiled_jit.inline
def _node_scores(
    fit: int,
    balanced: int,
    taint: int,
    affinity: int,
    spread_scored: bool,
    spread_raw: int,
    inter_pod: int,
    pod: Any,
    general: bool,
) -> tuple[int, int, int, int, int, int]:
    """The six normalised plugin scores of one node, from scalars only: its resource scores,
    raw scores and InterPodAffinity score. ``pod``: BalancedAllocation skipped, then the
    feasible maxima of the taint and node affinity raw scores, and the soft spread's
    (constraints?, lowest, highest), each maximum followed by its reciprocal."""
    skip, taint_high, taint_inverse, affinity_high, affinity_inverse = pod[:5]
    spread_on, spread_low, spread_high, spread_inverse = pod[5:]
    balanced = 0 if skip else balanced
    # TaintToleration and NodeAffinity: DefaultNormalizeScore, reversed for taints.
    scaled = _MAX - _scaled(_MAX * taint, taint_high, taint_inverse, general)
    taint = scaled if taint_high != 0 else _MAX
    scaled = _scaled(_MAX * affinity, affinity_high, affinity_inverse, general)
    node_affinity = scaled if affinity_high != 0 else affinity
    # PodTopologySpread: fewer matching pods is better; the nodes it ignores score 0.
    scaled = _MAX * (spread_high + spread_low - spread_raw)
    spread = _scaled(scaled, spread_high, spread_inverse, general)
    spread = spread if spread_high != 0 else _MAX
    spread = spread if spread_on != 0 and spread_scored else 0
    return fit, balanced, taint, node_affinity, spread, inter_pod


@compiled_jit.inline
def _scaled(x: int, high: int, inverse: float, general: bool) -> int:
    """``x // high``: by ``_floor_div`` for ``high > 0`` unless ``general``."""
    return x // high if general else _floor_div(x, high, inverse)


@compiled_jit.inline
def scores_of(n: int, inputs: Any, pod: Any, general: bool) -> tuple[int, int, int, int, int, int]:
    """``_node_scores`` of node ``n``, from the per-node ``inputs`` that
    ``compiled_batch.decide`` gathers."""
    fit, balanced, taint_row, affinity_row, scored, spread_raw, inter = inputs
    return _node_scores(
        fit[n],
        balanced[n],
        taint_row[n],
        affinity_row[n],
        scored[n],
        spread_raw[n],
        inter[n],
        pod,
        general,
    )


@compiled_jit.jit
def weighted_totals(
    inputs: Any,
    pod: Any,
    weights: c.I64,
    general: bool,
    code_row: Any,
    total_row: c.I64,
    ranked: c.I64,
) -> None:
    """Every node's weighted total; ``ranked`` is the total where feasible, else the lowest.

    ``general`` is a literal at each call site, so each variant compiles without the other's
    branch (the usual one vectorises).
    """
    compiled_jit.literally(general)
    w0, w1, w2, w3, w4, w5 = weights[0], weights[1], weights[2], weights[3], weights[4], weights[5]
    for n in range(code_row.shape[0]):
        values = scores_of(n, inputs, pod, general)
        score = (
            w0 * values[0]
            + w1 * values[1]
            + w2 * values[2]
            + w3 * values[3]
            + w4 * values[4]
            + w5 * values[5]
        )
        feasible = code_row[n] == _PASS
        total_row[n] = score if feasible else 0
        ranked[n] = score if feasible else _LOWEST


@compiled_jit.jit
def spread_scores(
    code_row: Any,
    domains: c.I32,
    domain_counts: c.I32,
    counts: c.I32,
    start: int,
    end: int,
    spread_row: c.I32,
    spread_key: c.I32,
    spread_max_skew: c.I32,
    spread_hard: c.B1,
    spread_hostname: c.B1,
    spread_eligible: c.B1,
    require_all: bool,
    has_keys: c.B1,
    scored: c.B1,
    accumulated: c.F64,
    raw: c.I64,
    per_domain: c.I64,
    seen: c.B1,
) -> tuple[int, int, int]:
    """PodTopologySpread's soft constraints, PreScore and Score: raw scores of every node.

    Returns (1 if there are any, else 0; lowest; highest raw score of the nodes scored).
    ``scored`` is False for the infeasible nodes and those PreScore ignores (a soft key
    missing, when all keys are required); they score 0.
    """
    nodes = code_row.shape[0]
    soft = 0
    for i in range(start, end):
        soft += not spread_hard[i]
    if soft == 0:
        return 0, 0, 0
    has_keys[:] = True
    if require_all:
        for i in range(start, end):
            if not spread_hard[i]:
                key_domains = domains[spread_key[i]]
                for n in range(nodes):
                    has_keys[n] &= key_domains[n] >= 0
    n_scored = 0
    for n in range(nodes):
        scored[n] = has_keys[n] and code_row[n] == _PASS
        n_scored += scored[n]
    accumulated[:] = 0.0
    for i in range(start, end):
        if spread_hard[i]:
            continue
        key_domains, row = domains[spread_key[i]], counts[spread_row[i]]
        offset = float(spread_max_skew[i] - 1)
        # kube-scheduler's Score skips a constraint on a node without its key (the node may
        # still be scored, under the system defaults, for the keys it has).
        if spread_hostname[i]:
            weight = math.log(n_scored + 2)
            for n in range(nodes):
                if key_domains[n] >= 0:
                    accumulated[n] += float(row[n]) * weight + offset
            continue
        missing = domain_counts[spread_key[i]]  # the "" domain of nodes without the label
        seen[: missing + 1] = False
        size = 0
        for n in range(nodes):
            if scored[n]:
                d = key_domains[n]
                d = missing if d < 0 else d
                size += not seen[d]
                seen[d] = True
        weight = math.log(size + 2)
        per_domain[: missing + 1] = 0
        eligible = spread_eligible[i]
        for n in range(nodes):
            if has_keys[n] and eligible[n]:
                d = key_domains[n]
                d = missing if d < 0 else d
                if seen[d]:
                    per_domain[d] += row[n]
        for n in range(nodes):
            d = key_domains[n]
            if d >= 0:
                accumulated[n] += float(per_domain[d]) * weight + offset
    low, high = _HIGHEST, _LOWEST
    for n in range(nodes):
        raw[n] = math.floor(accumulated[n] + 0.5)
        low = min(low, raw[n] if scored[n] else _HIGHEST)
        high = max(high, raw[n] if scored[n] else _LOWEST)
    return 1, low, high


@compiled_jit.jit
def inter_pod_scores(
    code_row: Any,
    domains: c.I32,
    domain_counts: c.I32,
    counts: c.I32,
    start: int,
    end: int,
    preferred_row: c.I32,
    preferred_key: c.I32,
    preferred_weight: c.I64,
    raw: c.I64,
    totals: c.I64,
    out: c.I64,
) -> None:
    """InterPodAffinity's preferred terms: weighted matching pods per domain, scaled between
    the lowest and the highest sum of the feasible nodes (all 0 when those are equal)."""
    out[:] = 0
    if end == start:
        return
    raw[:] = 0
    for p in range(start, end):
        key = preferred_key[p]
        key_domains = domains[key]
        compiled_jit.domain_totals(
            counts[preferred_row[p]], key_domains, domain_counts[key], totals
        )
        weight = preferred_weight[p]
        for n in range(raw.shape[0]):
            d = key_domains[n]
            if d >= 0:
                raw[n] += weight * totals[d]
    low, high = _HIGHEST, _LOWEST
    for n in range(raw.shape[0]):
        feasible = code_row[n] == _PASS
        low = min(low, raw[n] if feasible else _HIGHEST)
        high = max(high, raw[n] if feasible else _LOWEST)
    if high - low > 0:
        for n in range(raw.shape[0]):
            out[n] = int(_MAX * ((raw[n] - low) / (high - low)))
