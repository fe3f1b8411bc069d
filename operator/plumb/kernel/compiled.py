"""The compiled kernel: ``reference.run``'s contract and results, bit for bit, in numba.

``run`` unpacks the contract's dataclasses into plain arrays and calls ``_run``: one ``nogil``
function that decides the pods of the batch in turn, each over a working copy of the cluster
updated by the placements before it. The semantics are the reference's (read that one first);
this module arranges the same arithmetic to be fast:

- Dense passes. Every pass runs over all nodes, over contiguous per-node rows, with
  branch-light bodies, so that LLVM vectorises it; infeasible nodes are scored too and then
  dropped (a gather over the feasible ones would not vectorise). The (N, R) input tables are
  turned into per-resource rows once per batch.
- Filters in kube-scheduler's order, each pass leaving alone the nodes that already failed,
  so that a node's code is its first failure.
- No integer division in a pass (3 ns a node here, and it does not vectorise): ``x // d`` by
  a positive ``d`` known per node or per pod is a multiplication by ``1 / d`` and one exact
  correction. Negative maxima (raw scores the framework never sends) take a general path.
- The resource scores depend on the node and on the pod's cpu and memory requests alone:
  replicas reuse them, updated at the node just placed on.
- Scratch arrays live in a per-thread workspace: allocating them for every call cost more than
  the kernel.

Exactness: integers stay int64 and ``//`` floors like Python's (exact while 100 times an
allocatable fits in an int64); the tie-break hash is uint64 throughout (a uint64 mixed with a
signed integer becomes a float in numba); floats follow the reference's operation order (no
fastmath, no fused multiply-add), and numba's ``math.log`` is the C library's, as CPython's is.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from plumb.kernel import contract as c
from plumb.kernel import numbacache, reference

# numba reads NUMBA_CACHE_DIR when it is imported and when each cache=True function is decorated.
numbacache.configure()

import numba  # noqa: E402  (after numbacache.configure(), see above)
from numba.misc.special import literally  # noqa: E402

_F = TypeVar("_F", bound=Callable[..., Any])


def _jit(function: _F) -> _F:
    """``numba.njit(nogil=True, cache=True)``, typed for mypy (numba itself is untyped).

    ``error_model="numpy"``: a division by zero gives inf/nan instead of raising, which lets
    the dense loops vectorise; every result that could involve one is selected away.
    """
    return cast(_F, numba.njit(nogil=True, cache=True, error_model="numpy")(function))


def _inline(function: _F) -> _F:
    """``_jit``, inlined into its callers (a call per node would cost more than its body)."""
    jitted = numba.njit(nogil=True, cache=True, error_model="numpy", inline="always")
    return cast(_F, jitted(function))


_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_MAX = c.MAX_NODE_SCORE
_PLUGINS = len(c.SCORE_PLUGINS)
_LOWEST = np.iinfo(np.int64).min
_HIGHEST = np.iinfo(np.int64).max
_BLOCK = 32  # nodes screened at once when picking the best
# cpu and memory quantities up to 2**50 (a million cores in millicores, a PiB of memory) keep
# 100 times a sum of two in int64 and every one exact in float64, as the reference's Python
# integers are. Beyond (a clamped absurd quantity), the kernel hands over to the reference.
_EXACT = 1 << 50
_DECIDED, _INEXACT, _INVALID = 0, 1, 2
_PASS, _STATIC, _RESOURCES = c.PASS, c.STATIC, c.RESOURCES
_SPREAD_LABEL, _SPREAD_SKEW = c.SPREAD_LABEL, c.SPREAD_SKEW
_AFFINITY, _ANTI, _EXISTING = c.AFFINITY, c.ANTI_AFFINITY, c.EXISTING_ANTI_AFFINITY


@_jit
def _run(
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
    """Decide the batch into the outputs: _DECIDED; or, deciding nothing, _INVALID (shapes or
    indices out of range: see ``check``) or _INEXACT (a cpu or memory quantity negative or
    beyond ``_EXACT``, where int64 and float64 stop being exact)."""
    if not _valid(
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
        return _INVALID
    nodes, resources = allocatable.shape
    # The workspace (see _Workspace). Working copies kept up to date as pods are placed: what
    # is free per resource, and the score inputs (cpu, memory) as contiguous rows so that the
    # passes below vectorise. Then per-node and per-domain scratch.
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
    if lowest < 0 or highest > _EXACT:
        return _INEXACT
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
        _fit_filter(static_code[b], free, requests[b], pods_column, code_row, detail[b])
        _spread_filter(
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
        _affinity_filter(
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
            _conflict_filter(
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
        taint_high = _feasible_max(code_row, taint_row)
        affinity_high = _feasible_max(code_row, affinity_raw)
        spread_on, spread_low, spread_high = _spread_raw(
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
        _inter_pod_scores(
            code_row,
            domains,
            domain_counts,
            counts,
            p_start,
            p_end,
            preferred_row,
            preferred_key,
            preferred_weight,
            ranked,  # scratch for the raw sums until _totals fills it
            per_domain,
            inter,
        )
        pod = (
            balanced_skip[b],
            taint_high,
            _inverse(taint_high),
            affinity_high,
            _inverse(affinity_high),
            spread_on,
            spread_low,
            spread_high,
            _inverse(spread_high),
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
            _resource_scores(columns, inverse, shape, fit, balanced, 0, nodes)
        inputs = (fit, balanced, taint_row, affinity_raw, scored, spread_raw, inter)

        # Every node's weighted total (dense: the infeasible ones are computed and dropped,
        # which vectorises), the best TOP by (total, tie-break), and the placement.
        if general:
            _totals(inputs, pod, weights, True, code_row, total[b], ranked)
        else:
            _totals(inputs, pod, weights, False, code_row, total[b], ranked)
        kept = _best(ranked, name_hashes, pod_hashes[b], best)
        for rank in range(kept):
            n = best[rank]
            top[b, rank] = n
            values = _scores_of(n, inputs, pod, general)
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
        _resource_scores(columns, inverse, shape, fit, balanced, node, node + 1)
        for t in range(counts.shape[0]):
            counts[t, node] += member[b, t]
    return _DECIDED


@_jit
def _valid(
    allocatable: c.I64,
    requested: c.I64,
    nonzero: c.I64,
    name_hashes: c.U64,
    domains: c.I32,
    domain_counts: c.I32,
    counts: c.I32,
    columns: Any,
    per_pod: Any,
    per_pod_tables: Any,
    spread: Any,
    spread_flags: Any,
    affinity: Any,
    symmetric: Any,
    preferred: Any,
    weights: c.I64,
) -> bool:
    """What ``check`` checks, fast: shapes, and every index the kernel follows in range."""
    nodes, resources = allocatable.shape
    keys, rows, pods = domains.shape[0], counts.shape[0], per_pod[0].shape[0]
    ok = requested.shape == (nodes, resources) and nonzero.shape == (nodes, 2)
    ok = ok and name_hashes.shape[0] == nodes and domains.shape[1] == nodes
    ok = ok and domain_counts.shape[0] == keys and counts.shape[1] == nodes
    ok = ok and weights.shape[0] == _PLUGINS
    for column in columns:
        ok = ok and 0 <= column < resources
    ok = ok and per_pod[1].shape[0] == pods and per_pod[2].shape[0] == pods
    ok = ok and per_pod[3].shape[0] == pods
    requests, pod_nonzero, static_code, taint_raw, node_affinity_raw, member = per_pod_tables
    ok = ok and requests.shape == (pods, resources) and pod_nonzero.shape == (pods, 2)
    ok = ok and static_code.shape == (pods, nodes) and taint_raw.shape == (pods, nodes)
    ok = ok and node_affinity_raw.shape == (pods, nodes) and member.shape == (pods, rows)
    if not ok:
        return False
    for k in range(keys):
        for n in range(nodes):
            ok = ok and -1 <= domains[k, n] < domain_counts[k]
    size = spread[0].shape[0]
    for values in spread:
        ok = ok and values.shape[0] == size
    for values in spread_flags[:3]:
        ok = ok and values.shape[0] == size
    ok = ok and spread_flags[3].shape == (size, nodes)
    ok = ok and _table_valid(spread[0], spread[1], spread[2], pods, rows, keys)
    size = affinity[0].shape[0]
    ok = ok and affinity[3].shape[0] == size
    ok = ok and _table_valid(affinity[0], affinity[1], affinity[2], pods, rows, keys)
    ok = ok and _table_valid(symmetric[0], symmetric[1], symmetric[2], pods, rows, keys)
    size = preferred[0].shape[0]
    ok = ok and preferred[3].shape[0] == size
    return bool(ok and _table_valid(preferred[0], preferred[1], preferred[2], pods, rows, keys))


@_jit
def _table_valid(pod: c.I32, row: c.I32, key: c.I32, pods: int, rows: int, keys: int) -> bool:
    """A constraint table: one row and one key per entry, sorted by pod, all in range."""
    size = pod.shape[0]
    ok = row.shape[0] == size and key.shape[0] == size
    if not ok:
        return False
    for i in range(size):
        ok = ok and 0 <= pod[i] < pods and 0 <= row[i] < rows and 0 <= key[i] < keys
        ok = ok and (i == 0 or pod[i - 1] <= pod[i])
    return bool(ok)


@_jit
def _rows(table: c.I32, start: int, pod: int) -> tuple[int, int]:
    """``pod``'s rows (start, end) of a table sorted by pod, searching from ``start`` on."""
    while start < table.shape[0] and table[start] < pod:
        start += 1
    end = start
    while end < table.shape[0] and table[end] == pod:
        end += 1
    return start, end


@_jit
def _domain_totals(row: c.I32, key_domains: c.I32, domains_of_key: int, totals: c.I64) -> None:
    """Sum a count row per domain of a key; nodes without the key add nothing."""
    totals[:domains_of_key] = 0
    for n in range(key_domains.shape[0]):
        d = key_domains[n]
        if d >= 0:
            totals[d] += row[n]


# Filters ------------------------------------------------------------------------------------


@_jit
def _fit_filter(
    static: c.I32, free: c.I64, request: c.I64, pods_column: int, code_row: Any, detail_row: c.I64
) -> None:
    """The framework's static filters, then NodeResourcesFit: one bit per short resource."""
    # Branch-free bodies and unconditional stores: they vectorise, and a masked store read
    # back at once stalls (no store-to-load forwarding).
    for r in range(request.shape[0]):
        if r == pods_column or request[r] > 0:
            need = 1 if r == pods_column else request[r]
            bit = np.int64(1) << r
            available = free[r]
            for n in range(static.shape[0]):
                detail_row[n] |= bit if need > available[n] else 0
    for n in range(static.shape[0]):
        reason, bits = static[n], detail_row[n]
        code_row[n] = _STATIC if reason != 0 else (_RESOURCES if bits != 0 else _PASS)
        detail_row[n] = reason if reason != 0 else bits


@_jit
def _spread_filter(
    code_row: Any,
    domains: c.I32,
    domain_counts: c.I32,
    counts: c.I32,
    start: int,
    end: int,
    spread_row: c.I32,
    spread_key: c.I32,
    spread_max_skew: c.I32,
    spread_min_domains: c.I32,
    spread_hard: c.B1,
    spread_self: c.B1,
    spread_eligible: c.B1,
    all_keys: c.B1,
    totals: c.I64,
    present: c.B1,
) -> None:
    """PodTopologySpread's hard constraints, one after the other."""
    any_hard = False
    for i in range(start, end):
        any_hard = any_hard or spread_hard[i]
    if not any_hard:
        return
    # PreFilter counts only the nodes that carry every hard constraint's key.
    all_keys[:] = True
    for i in range(start, end):
        if spread_hard[i]:
            key_domains = domains[spread_key[i]]
            for n in range(all_keys.shape[0]):
                all_keys[n] &= key_domains[n] >= 0
    for i in range(start, end):
        if not spread_hard[i]:
            continue
        key_domains, row = domains[spread_key[i]], counts[spread_row[i]]
        eligible, domains_of_key = spread_eligible[i], domain_counts[spread_key[i]]
        totals[:domains_of_key] = 0
        present[:domains_of_key] = False
        for n in range(key_domains.shape[0]):
            d = key_domains[n]
            if d >= 0 and all_keys[n] and eligible[n]:
                totals[d] += row[n]
                present[d] = True
        domains_present = 0
        minimum = np.int64(0)
        for d in range(domains_of_key):
            if present[d]:
                minimum = totals[d] if domains_present == 0 else min(minimum, totals[d])
                domains_present += 1
        # Fewer domains than minDomains: the global minimum counts as 0. (So it does with no
        # domain at all; the reference needs minDomains >= 1 there, as kube defaults it.)
        if domains_present < spread_min_domains[i]:
            minimum = np.int64(0)
        limit = spread_max_skew[i] + minimum - np.int64(spread_self[i])
        for n in range(key_domains.shape[0]):
            d = key_domains[n]
            if code_row[n] == _PASS:
                if d < 0:
                    code_row[n] = _SPREAD_LABEL
                elif totals[d] > limit:
                    code_row[n] = _SPREAD_SKEW


@_jit
def _affinity_filter(
    code_row: Any,
    domains: c.I32,
    domain_counts: c.I32,
    counts: c.I32,
    start: int,
    end: int,
    affinity_row: c.I32,
    affinity_key: c.I32,
    affinity_anti: c.B1,
    matches_itself: bool,
    unmatched: c.B1,
    totals: c.I64,
) -> None:
    """InterPodAffinity's required affinity (first-pod rule included), then anti-affinity."""
    terms = 0
    no_match = True
    unmatched[:] = False
    for a in range(start, end):
        if affinity_anti[a]:
            continue
        terms += 1
        key = affinity_key[a]
        key_domains = domains[key]
        _domain_totals(counts[affinity_row[a]], key_domains, domain_counts[key], totals)
        if totals[: domain_counts[key]].sum() != 0:
            no_match = False
        for n in range(key_domains.shape[0]):
            d = key_domains[n]
            if code_row[n] == _PASS:
                if d < 0:
                    code_row[n] = _AFFINITY  # every term's key must be on the node
                elif totals[d] <= 0:
                    unmatched[n] = True
    if terms > 0 and not (no_match and matches_itself):
        for n in range(unmatched.shape[0]):
            if unmatched[n] and code_row[n] == _PASS:
                code_row[n] = _AFFINITY
    for a in range(start, end):
        if affinity_anti[a]:
            key = affinity_key[a]
            _conflict_filter(
                code_row, domains[key], domain_counts[key], counts[affinity_row[a]], totals, _ANTI
            )


@_jit
def _conflict_filter(
    code_row: Any,
    key_domains: c.I32,
    domains_of_key: int,
    row: c.I32,
    totals: c.I64,
    failure: int,
) -> None:
    """Anti-affinity, either way: a node fails when its domain holds a counted pod."""
    _domain_totals(row, key_domains, domains_of_key, totals)
    for n in range(key_domains.shape[0]):
        d = key_domains[n]
        if d >= 0 and code_row[n] == _PASS and totals[d] > 0:
            code_row[n] = failure


# Scores -------------------------------------------------------------------------------------


@_jit
def _feasible_max(code_row: Any, raw: c.I64) -> int:
    """The highest raw score of a feasible node (there is one)."""
    high = _LOWEST
    for n in range(raw.shape[0]):
        high = max(high, raw[n] if code_row[n] == _PASS else _LOWEST)
    return high


@_inline
def _inverse(high: int) -> float:
    """The reciprocal ``_floor_div`` wants (0 where it is not used: a maximum <= 0)."""
    return 1.0 / high if high > 0 else 0.0


@_inline
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


@_inline
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


@_jit
def _resource_scores(
    columns: c.I64, inverse: c.F64, shape: Any, fit: c.I64, balanced: c.I64, start: int, end: int
) -> None:
    """``_node_resource_scores`` of nodes ``start:end`` for a pod of ``shape``: its non-zero
    cpu and memory requests, then its own. ``columns``/``inverse``: see ``_run``."""
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


@_inline
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


@_inline
def _scaled(x: int, high: int, inverse: float, general: bool) -> int:
    """``x // high``: by ``_floor_div`` for ``high > 0`` unless ``general``."""
    return x // high if general else _floor_div(x, high, inverse)


@_inline
def _scores_of(n: int, inputs: Any, pod: Any, general: bool) -> tuple[int, int, int, int, int, int]:
    """``_node_scores`` of node ``n``, from the per-node ``inputs`` that ``_run`` gathers."""
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


@_jit
def _totals(
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
    literally(general)
    w0, w1, w2, w3, w4, w5 = weights[0], weights[1], weights[2], weights[3], weights[4], weights[5]
    for n in range(code_row.shape[0]):
        values = _scores_of(n, inputs, pod, general)
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


@_jit
def _spread_raw(
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


@_jit
def _inter_pod_scores(
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
        _domain_totals(counts[preferred_row[p]], key_domains, domain_counts[key], totals)
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


# Selection ----------------------------------------------------------------------------------


@_inline
def _tie(name_hash: np.uint64, pod_hash: np.uint64) -> np.uint64:
    """reference.mix for one node: splitmix64's finaliser, wrapping uint64 arithmetic."""
    z = name_hash ^ pod_hash
    z = (z ^ (z >> _S30)) * _MIX_1
    z = (z ^ (z >> _S27)) * _MIX_2
    return z ^ (z >> _S31)


@_jit
def _best(ranked: c.I64, name_hashes: c.U64, pod_hash: np.uint64, best: c.I64) -> int:
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
            tie = _tie(name_hashes[n], pod_hash)
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


def run(cluster: c.Cluster, batch: c.Batch) -> c.Result:
    """Decide a batch of pods: the same contract and results as ``reference.run``.

    Raises ValueError for arrays of the wrong shape or indices out of range: the compiled code
    follows them without bounds checks.
    """
    nodes, pods = int(cluster.name_hashes.shape[0]), batch.size
    chosen = np.full(pods, -1, dtype=np.int32)
    code = np.empty((pods, nodes), dtype=np.int8)  # the kernel writes every element
    detail = np.zeros((pods, nodes), dtype=np.int64)
    total = np.empty((pods, nodes), dtype=np.int64)
    feasible = np.zeros(pods, dtype=np.int32)
    top = np.full((pods, c.TOP), -1, dtype=np.int32)
    top_scores = np.zeros((pods, c.TOP, _PLUGINS), dtype=np.int64)
    outcome = _run(
        _array(cluster.allocatable, np.int64),
        _array(cluster.requested, np.int64),
        _array(cluster.nonzero_requested, np.int64),
        _array(cluster.name_hashes, np.uint64),
        _array(cluster.domains, np.int32),
        _array(cluster.domain_counts, np.int32),
        np.array(cluster.counts, dtype=np.int32, order="C"),  # a working copy
        int(cluster.pods_column),
        int(cluster.cpu_column),
        int(cluster.memory_column),
        _array(batch.pod_hashes, np.uint64),
        _array(batch.requests, np.int64),
        _array(batch.nonzero, np.int64),
        _array(batch.static_code, np.int32),
        _array(batch.taint_raw, np.int64),
        _array(batch.node_affinity_raw, np.int64),
        _array(batch.member, np.int32),
        _array(batch.spread_pod, np.int32),
        _array(batch.spread_row, np.int32),
        _array(batch.spread_key, np.int32),
        _array(batch.spread_max_skew, np.int32),
        _array(batch.spread_min_domains, np.int32),
        _array(batch.spread_hard, np.bool_),
        _array(batch.spread_self, np.bool_),
        _array(batch.spread_hostname, np.bool_),
        _array(batch.spread_eligible, np.bool_),
        _array(batch.spread_require_all, np.bool_),
        _array(batch.affinity_pod, np.int32),
        _array(batch.affinity_row, np.int32),
        _array(batch.affinity_key, np.int32),
        _array(batch.affinity_anti, np.bool_),
        _array(batch.affinity_self, np.bool_),
        _array(batch.symmetric_pod, np.int32),
        _array(batch.symmetric_row, np.int32),
        _array(batch.symmetric_key, np.int32),
        _array(batch.preferred_pod, np.int32),
        _array(batch.preferred_row, np.int32),
        _array(batch.preferred_key, np.int32),
        _array(batch.preferred_weight, np.int64),
        _array(batch.weights, np.int64),
        _array(batch.balanced_skip, np.bool_),
        chosen,
        code,
        detail,
        total,
        feasible,
        top,
        top_scores,
        *_WORKSPACE.arrays(nodes, cluster.allocatable.shape[1], cluster.domain_counts),
    )
    if outcome == _INVALID:
        check(cluster, batch)  # names the problem
        raise ValueError("kernel input does not meet the contract")
    if outcome == _INEXACT:
        return reference.run(cluster, batch)  # exact, slowly: see _EXACT
    return c.Result(
        chosen=chosen,
        code=code,
        detail=detail,
        total=total,
        feasible=feasible,
        top=top,
        top_scores=top_scores,
    )


def check(cluster: c.Cluster, batch: c.Batch) -> None:
    """Raise ValueError, naming every problem, unless the arrays have the contract's shapes and
    every index (domain, count row, key, pod, column) is in range."""
    nodes, resources = cluster.allocatable.shape
    keys, rows, pods = cluster.domains.shape[0], cluster.counts.shape[0], batch.size
    spreads, terms = batch.spread_pod.shape[0], batch.affinity_pod.shape[0]
    symmetric, preferred = batch.symmetric_pod.shape[0], batch.preferred_pod.shape[0]
    shapes: dict[str, tuple[Any, tuple[int, ...]]] = {
        "requested": (cluster.requested, (nodes, resources)),
        "nonzero_requested": (cluster.nonzero_requested, (nodes, 2)),
        "name_hashes": (cluster.name_hashes, (nodes,)),
        "domains": (cluster.domains, (keys, nodes)),
        "domain_counts": (cluster.domain_counts, (keys,)),
        "counts": (cluster.counts, (rows, nodes)),
        "pod_hashes": (batch.pod_hashes, (pods,)),
        "requests": (batch.requests, (pods, resources)),
        "nonzero": (batch.nonzero, (pods, 2)),
        "static_code": (batch.static_code, (pods, nodes)),
        "taint_raw": (batch.taint_raw, (pods, nodes)),
        "node_affinity_raw": (batch.node_affinity_raw, (pods, nodes)),
        "member": (batch.member, (pods, rows)),
        "spread_eligible": (batch.spread_eligible, (spreads, nodes)),
        "spread_require_all": (batch.spread_require_all, (pods,)),
        "affinity_self": (batch.affinity_self, (pods,)),
        "weights": (batch.weights, (len(c.SCORE_PLUGINS),)),
        "balanced_skip": (batch.balanced_skip, (pods,)),
    }
    for table, size, columns in (
        ("spread", spreads, _SPREAD_COLUMNS),
        ("affinity", terms, ("row", "key", "anti")),
        ("symmetric", symmetric, ("row", "key")),
        ("preferred", preferred, ("row", "key", "weight")),
    ):
        for column in columns:
            shapes[f"{table}_{column}"] = (getattr(batch, f"{table}_{column}"), (size,))
    problems = [
        f"{name} has shape {values.shape}, not {shape}"
        for name, (values, shape) in shapes.items()
        if values.shape != shape
    ]
    positions = {
        "pods_column": cluster.pods_column,
        "cpu_column": cluster.cpu_column,
        "memory_column": cluster.memory_column,
    }
    for label, position in positions.items():
        if not 0 <= position < resources:
            problems.append(f"{label} {position} is not one of the {resources} resource columns")
    if not problems:
        problems = _index_problems(cluster, batch, keys, rows, pods)
    if problems:
        raise ValueError("kernel input does not meet the contract: " + "; ".join(problems))


_SPREAD_COLUMNS = ("row", "key", "max_skew", "min_domains", "hard", "self", "hostname")


def _index_problems(
    cluster: c.Cluster, batch: c.Batch, keys: int, rows: int, pods: int
) -> list[str]:
    problems = []
    if cluster.domains.size:
        too_high = cluster.domains.max(axis=1) >= cluster.domain_counts
        if too_high.any() or cluster.domains.min() < -1:
            problems.append("domains holds ids outside -1 .. domain_counts[k] - 1")
    for table in ("spread", "affinity", "symmetric", "preferred"):
        for column, limit in (("pod", pods), ("row", rows), ("key", keys)):
            values = getattr(batch, f"{table}_{column}")
            if values.size and (values.min() < 0 or values.max() >= limit):
                problems.append(f"{table}_{column} holds values outside 0 .. {limit - 1}")
        order = getattr(batch, f"{table}_pod")
        if order.size > 1 and (order[1:] < order[:-1]).any():
            problems.append(f"{table}_pod is not sorted")
    return problems


class _Workspace(threading.local):
    """Scratch arrays kept between calls, per thread: allocating them afresh every call cost
    more than the kernel (page faults on memory the allocator had just given back)."""

    def __init__(self) -> None:
        self._key: tuple[int, int, int] | None = None
        self._arrays: tuple[Any, ...] = ()

    def arrays(self, nodes: int, resources: int, domain_counts: Any) -> tuple[Any, ...]:
        # Every key's domains, plus the "" domain of nodes without the label.
        width = int(np.max(domain_counts)) + 1 if domain_counts.size else 1
        key = (nodes, resources, width)
        if key != self._key:
            self._arrays = (
                np.empty((resources + 11, nodes), dtype=np.int64),
                np.empty((3, nodes), dtype=np.float64),
                np.empty((2, nodes), dtype=np.bool_),
                np.empty(width, dtype=np.int64),
                np.empty(width, dtype=np.bool_),
            )
            self._key = key
        return self._arrays


_WORKSPACE = _Workspace()


def _array(values: Any, dtype: Any) -> Any:
    """C-contiguous, writeable and of the dtype of the compiled signature: an array of another
    layout, dtype or read-only flag would compile another signature (seconds) on its first
    use. No copy when it is all that already, the usual case."""
    flags = values.flags
    if values.dtype == dtype and flags.c_contiguous and flags.writeable:
        return values
    return np.array(values, dtype=dtype, order="C")  # a copy: writeable


def warm_up() -> None:
    """Compile (or load from the cache) every variant of the kernel on a tiny input, so that
    no pod waits for it."""
    run(*tiny())


def tiny() -> tuple[c.Cluster, c.Batch]:
    """Two nodes in two zones and two pods with every kind of constraint between them, the
    second with negative raw taint scores (the general path), to exercise every variant."""
    i32, i64, b1 = np.int32, np.int64, np.bool_
    cluster = c.Cluster(
        allocatable=np.array([[4000, 8 << 30, 110], [4000, 8 << 30, 110]], dtype=i64),
        requested=np.zeros((2, 3), dtype=i64),
        nonzero_requested=np.zeros((2, 2), dtype=i64),
        name_hashes=np.array([1, 2], dtype=np.uint64),
        domains=np.array([[0, 1], [0, 1]], dtype=i32),
        domain_counts=np.array([2, 2], dtype=i32),
        counts=np.zeros((1, 2), dtype=i32),
        pods_column=2,
        cpu_column=0,
        memory_column=1,
    )
    first, both = np.zeros(1, dtype=i32), np.ones(2, dtype=b1)
    batch = c.Batch(
        pod_hashes=np.array([3, 4], dtype=np.uint64),
        requests=np.array([[100, 1 << 20, 1]] * 2, dtype=i64),
        nonzero=np.array([[100, 1 << 20]] * 2, dtype=i64),
        static_code=np.zeros((2, 2), dtype=i32),
        taint_raw=np.array([[0, 1], [-1, -2]], dtype=i64),
        node_affinity_raw=np.zeros((2, 2), dtype=i64),
        member=np.ones((2, 1), dtype=i32),
        spread_pod=np.zeros(2, dtype=i32),
        spread_row=np.zeros(2, dtype=i32),
        spread_key=np.array([0, 1], dtype=i32),
        spread_max_skew=np.ones(2, dtype=i32),
        spread_min_domains=np.ones(2, dtype=i32),
        spread_hard=np.array([True, False]),
        spread_self=np.ones(2, dtype=b1),
        spread_hostname=np.array([False, True]),
        spread_eligible=np.ones((2, 2), dtype=b1),
        spread_require_all=both,
        affinity_pod=np.zeros(2, dtype=i32),
        affinity_row=np.zeros(2, dtype=i32),
        affinity_key=np.zeros(2, dtype=i32),
        affinity_anti=np.array([False, True]),
        affinity_self=both,
        symmetric_pod=first,
        symmetric_row=first,
        symmetric_key=first,
        preferred_pod=first,
        preferred_row=first,
        preferred_key=first,
        preferred_weight=np.ones(1, dtype=i64),
        weights=np.array([1, 1, 3, 2, 2, 2], dtype=i64),
        balanced_skip=np.zeros(2, dtype=b1),
    )
    return cluster, batch
