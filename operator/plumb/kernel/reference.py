"""The reference kernel in plain Python: the contract (kernel/contract.py) written for reading.

It follows kube-scheduler v1.34's filter and score plugins step by step, one node at a time, and
is what the compiled kernel is checked against. It is slow by design; nothing on the hot path
calls it.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from plumb.kernel import contract as c

_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def mix(name_hashes: npt.NDArray[np.uint64], pod_hash: np.uint64) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser over (node hash xor pod hash): a stable per-(pod, node) tie-break."""
    z = name_hashes ^ pod_hash
    z = (z ^ (z >> np.uint64(30))) * _MIX_1
    z = (z ^ (z >> np.uint64(27))) * _MIX_2
    return z ^ (z >> np.uint64(31))


def _rows(table: c.I32, pod: int) -> range:
    """The rows of a table sorted by pod index that belong to ``pod``."""
    start = int(np.searchsorted(table, pod, side="left"))
    end = int(np.searchsorted(table, pod, side="right"))
    return range(start, end)


def _domain_totals(row: c.I32, dom: c.I32, ndom: int, mask: c.B1 | None = None) -> list[int]:
    """Sum a count row per domain (nodes without the key, or outside ``mask``, add nothing)."""
    totals = [0] * ndom
    for n in range(row.shape[0]):
        if dom[n] >= 0 and (mask is None or mask[n]):
            totals[dom[n]] += int(row[n])
    return totals


class _State:
    """The kernel's working copy of the cluster, updated after each placement."""

    def __init__(self, cluster: c.Cluster) -> None:
        self.cluster = cluster
        self.requested = cluster.requested.copy()
        self.nonzero = cluster.nonzero_requested.copy()
        self.counts = cluster.counts.copy()


def _filter(state: _State, batch: c.Batch, b: int, code: np.ndarray, detail: c.I64) -> None:
    cl = state.cluster
    nodes = cl.name_hashes.shape[0]
    request = batch.requests[b]
    # PodTopologySpread's PreFilter: per hard constraint, the counts per domain and the minimum.
    spread = [i for i in _rows(batch.spread_pod, b) if batch.spread_hard[i]]
    all_keys = np.ones(nodes, dtype=np.bool_)
    for i in spread:
        all_keys &= cl.domains[batch.spread_key[i]] >= 0
    spread_state = []
    for i in spread:
        key = batch.spread_key[i]
        counted = batch.spread_eligible[i] & all_keys
        totals = _domain_totals(
            state.counts[batch.spread_row[i]], cl.domains[key], int(cl.domain_counts[key]), counted
        )
        present = {int(cl.domains[key][n]) for n in range(nodes) if counted[n]}
        if len(present) < batch.spread_min_domains[i]:
            minimum = 0
        else:
            minimum = min(totals[d] for d in present)
        spread_state.append((i, key, totals, present, minimum))
    affinity = [a for a in _rows(batch.affinity_pod, b) if not batch.affinity_anti[a]]
    anti = [a for a in _rows(batch.affinity_pod, b) if batch.affinity_anti[a]]
    affinity_totals = [
        _domain_totals(
            state.counts[batch.affinity_row[a]],
            cl.domains[batch.affinity_key[a]],
            int(cl.domain_counts[batch.affinity_key[a]]),
        )
        for a in affinity
    ]
    no_affinity_match = all(sum(t) == 0 for t in affinity_totals)
    anti_totals = [
        _domain_totals(
            state.counts[batch.affinity_row[a]],
            cl.domains[batch.affinity_key[a]],
            int(cl.domain_counts[batch.affinity_key[a]]),
        )
        for a in anti
    ]
    symmetric = list(_rows(batch.symmetric_pod, b))
    symmetric_totals = [
        _domain_totals(
            state.counts[batch.symmetric_row[s]],
            cl.domains[batch.symmetric_key[s]],
            int(cl.domain_counts[batch.symmetric_key[s]]),
        )
        for s in symmetric
    ]

    static = batch.static_code[batch.static_row[b]]
    for n in range(nodes):
        if static[n] > 0:
            code[n], detail[n] = c.STATIC, static[n]
            continue
        bits = 0
        for r in range(request.shape[0] if batch.fit_filter else 0):
            need = 1 if r == cl.pods_column else request[r]
            if (need > 0 or r == cl.pods_column) and need > cl.allocatable[r, n] - state.requested[
                r, n
            ]:
                bits |= 1 << r
        if bits:
            code[n], detail[n] = c.RESOURCES, bits
            continue
        failed = c.PASS
        for i, key, totals, present, minimum in spread_state:
            d = int(cl.domains[key][n])
            if d < 0:
                failed = c.SPREAD_LABEL
                break
            count = totals[d] if d in present else 0
            if count + int(batch.spread_self[i]) - minimum > batch.spread_max_skew[i]:
                failed = c.SPREAD_SKEW
                break
        if failed == c.PASS and affinity:
            exists = True
            for a, totals in zip(affinity, affinity_totals, strict=True):
                d = int(cl.domains[batch.affinity_key[a]][n])
                if d < 0:
                    failed = c.AFFINITY
                    break
                if totals[d] <= 0:
                    exists = False
            if (
                failed == c.PASS
                and not exists
                and not (no_affinity_match and batch.affinity_self[b])
            ):
                failed = c.AFFINITY
        if failed == c.PASS:
            for a, totals in zip(anti, anti_totals, strict=True):
                d = int(cl.domains[batch.affinity_key[a]][n])
                if d >= 0 and totals[d] > 0:
                    failed = c.ANTI_AFFINITY
                    break
        if failed == c.PASS:
            for s, totals in zip(symmetric, symmetric_totals, strict=True):
                d = int(cl.domains[batch.symmetric_key[s]][n])
                if d >= 0 and totals[d] > 0:
                    failed = c.EXISTING_ANTI_AFFINITY
                    break
        if failed == c.PASS and static[n] < 0:
            # A static reason checked after every other filter (see contract.Batch).
            code[n], detail[n] = c.STATIC, -static[n]
            continue
        code[n] = failed


def _used(state: _State, batch: c.Batch, b: int, n: int, column: int, nonzero: int) -> int:
    """What node ``n`` has requested of a resource with pod ``b``'s request added: the non-zero
    requests' row ``nonzero`` (cpu, memory for NodeResourcesFit), else the plain requests."""
    if nonzero != c.NO_NONZERO:
        return int(state.nonzero[nonzero, n]) + int(batch.nonzero[b, nonzero])
    return int(state.requested[column, n]) + int(batch.requests[b, column])


def _broken_linear(batch: c.Batch, utilization: int) -> int:
    """RequestedToCapacityRatio's shape at ``utilization`` (kube-scheduler's helper
    BuildBrokenLinearFunction: Go's integer division truncates towards zero)."""
    points, scores = batch.fit_shape_utilization, batch.fit_shape_score
    for i in range(points.shape[0]):
        if utilization <= points[i]:
            if i == 0:
                return int(scores[0])
            rise = int(scores[i] - scores[i - 1]) * (utilization - int(points[i - 1]))
            run = int(points[i] - points[i - 1])
            step = abs(rise) // run
            return int(scores[i - 1]) + (step if rise >= 0 else -step)
    return int(scores[-1]) if scores.shape[0] else 0


def round_half_away(x: float) -> int:
    """Go's math.Round for x >= 0: the nearest integer, halves away from zero."""
    whole = math.floor(x)
    return whole + 1 if x - whole >= 0.5 else whole


def _fit(state: _State, batch: c.Batch, b: int, n: int) -> int:
    """NodeResourcesFit's score with the batch's strategy (see contract.FIT_STRATEGIES)."""
    strategy = batch.fit_strategy
    if strategy == c.BALANCED_ALLOCATION:
        return 0 if batch.balanced_skip[b] else _balanced(state, batch, b, n)
    if strategy not in c.FIT_STRATEGIES:
        raise ValueError(f"fit_strategy {strategy} is not one of {c.FIT_STRATEGIES}")
    cl = state.cluster
    score = weights = 0
    for f in range(batch.fit_columns.shape[0]):
        column = int(batch.fit_columns[f])
        if batch.fit_optional[f] and batch.requests[b, column] == 0:
            continue
        capacity = int(cl.allocatable[column, n])
        if capacity == 0:
            continue
        used = _used(state, batch, b, n, column, int(batch.fit_nonzero[f]))
        weight = int(batch.fit_weights[f])
        if strategy == c.LEAST_ALLOCATED:
            resource = 0 if used > capacity else (capacity - used) * c.MAX_NODE_SCORE // capacity
        elif strategy == c.MOST_ALLOCATED:
            resource = min(used, capacity) * c.MAX_NODE_SCORE // capacity
        else:
            utilization = 100 if used > capacity else used * 100 // capacity
            resource = _broken_linear(batch, utilization)
            if resource <= 0:
                continue
        score += resource * weight
        weights += weight
    if weights == 0:
        return 0
    if strategy == c.REQUESTED_TO_CAPACITY_RATIO:
        return round_half_away(float(score) / float(weights))
    return score // weights


def _balanced(state: _State, batch: c.Batch, b: int, n: int) -> int:
    """NodeResourcesBalancedAllocation: 100 * (1 - the standard deviation of the requested
    fractions (at most 1) of its resources), by the plain requests with the pod's; from v1.36
    (``batch.balanced_change``) the change that brings: 50 + (50 + with - without) / 2, the
    balance without the pod taken over the same resources."""
    cl = state.cluster
    with_pod: list[float] = []
    without: list[float] = []
    for g in range(batch.balanced_columns.shape[0]):
        column = int(batch.balanced_columns[g])
        if batch.balanced_optional[g] and batch.requests[b, column] == 0:
            continue
        capacity = int(cl.allocatable[column, n])
        if capacity == 0:
            continue
        placed = int(state.requested[column, n])
        used = placed + int(batch.requests[b, column])
        with_pod.append(min(1.0, float(used) / float(capacity)))
        without.append(min(1.0, float(placed) / float(capacity)))
    score = _balance(with_pod)
    if not batch.balanced_change:
        return score
    return c.MAX_NODE_SCORE // 2 + go_div(c.MAX_NODE_SCORE // 2 + score - _balance(without), 2)


def _balance(fractions: list[float]) -> int:
    """kube-scheduler's balancedResourceScore: 100 * (1 - the standard deviation)."""
    total = 0.0
    for fraction in fractions:
        total += fraction
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        squares = 0.0
        for fraction in fractions:
            squares = squares + (fraction - mean) * (fraction - mean)
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * c.MAX_NODE_SCORE)


def go_div(x: int, d: int) -> int:
    """Go's integer division for d > 0: the quotient truncated towards zero."""
    q = abs(x) // d
    return q if x >= 0 else -q


def _spread_scores(state: _State, batch: c.Batch, b: int, feasible: list[int]) -> dict[int, int]:
    cl = state.cluster
    soft = [i for i in _rows(batch.spread_pod, b) if not batch.spread_hard[i]]
    if not soft:
        return dict.fromkeys(feasible, 0)
    require_all = bool(batch.spread_require_all[b])
    nodes = cl.name_hashes.shape[0]

    def has_all(n: int) -> bool:
        return all(cl.domains[batch.spread_key[i]][n] >= 0 for i in soft)

    def domain(i: int, n: int) -> int:
        # Without require_all a node lacking the key is in the domain "" (one more bucket).
        d = int(cl.domains[batch.spread_key[i]][n])
        return d if d >= 0 else int(cl.domain_counts[batch.spread_key[i]])

    ignored = {n for n in feasible if require_all and not has_all(n)}
    scored = [n for n in feasible if n not in ignored]
    weights: list[float] = []
    totals: list[list[int] | None] = []
    for i in soft:
        if batch.spread_hostname[i]:
            size = len(scored)
            totals.append(None)
        else:
            domains = {domain(i, n) for n in scored}
            size = len(domains)
            counted = [0] * (int(cl.domain_counts[batch.spread_key[i]]) + 1)
            for m in range(nodes):
                if require_all and not has_all(m):
                    continue
                if not batch.spread_eligible[i][m] or domain(i, m) not in domains:
                    continue
                counted[domain(i, m)] += int(state.counts[batch.spread_row[i]][m])
            totals.append(counted)
        weights.append(math.log(size + 2))
    raw: dict[int, int] = {}
    for n in scored:
        score = 0.0
        for i, weight, per_domain in zip(soft, weights, totals, strict=True):
            if cl.domains[batch.spread_key[i]][n] < 0:
                continue  # Score skips a constraint whose key the node lacks
            if per_domain is None:
                count = int(state.counts[batch.spread_row[i]][n])
            else:
                count = per_domain[domain(i, n)]
            score += float(count) * weight + float(batch.spread_max_skew[i] - 1)
        raw[n] = math.floor(score + 0.5)
    out = dict.fromkeys(feasible, 0)
    if not raw:
        return out
    low, high = min(raw.values()), max(raw.values())
    for n, score in raw.items():
        out[n] = c.MAX_NODE_SCORE if high == 0 else c.MAX_NODE_SCORE * (high + low - score) // high
    return out


def _inter_pod_scores(state: _State, batch: c.Batch, b: int, feasible: list[int]) -> dict[int, int]:
    cl = state.cluster
    entries = list(_rows(batch.preferred_pod, b))
    raw = dict.fromkeys(feasible, 0)
    if not entries:
        return raw
    for p in entries:
        key = batch.preferred_key[p]
        totals = _domain_totals(
            state.counts[batch.preferred_row[p]], cl.domains[key], int(cl.domain_counts[key])
        )
        for n in feasible:
            d = int(cl.domains[key][n])
            if d >= 0:
                raw[n] += int(batch.preferred_weight[p]) * totals[d]
    low, high = min(raw.values()), max(raw.values())
    if high - low <= 0:
        return dict.fromkeys(feasible, 0)
    return {n: int(c.MAX_NODE_SCORE * ((s - low) / (high - low))) for n, s in raw.items()}


def _normalised(raw: c.I64, feasible: list[int], *, reverse: bool) -> dict[int, int]:
    """kube-scheduler's DefaultNormalizeScore over the feasible nodes."""
    high = max(int(raw[n]) for n in feasible)
    if high == 0:
        return {n: c.MAX_NODE_SCORE if reverse else int(raw[n]) for n in feasible}
    out = {}
    for n in feasible:
        score = c.MAX_NODE_SCORE * int(raw[n]) // high
        out[n] = c.MAX_NODE_SCORE - score if reverse else score
    return out


class _Ranking:
    """kube-scheduler's OpportunisticBatching state (contract.Batch.continues): the ranking of
    the last pod scored in full, less the nodes taken off it."""

    def __init__(self, nodes: int) -> None:
        self.listed = np.zeros(nodes, dtype=np.bool_)
        self.total = np.zeros(nodes, dtype=np.int64)
        self.pod_hash = np.uint64(0)

    def hint(self, cluster: c.Cluster, last: int, code: np.ndarray) -> int:
        """The node pod b takes from the ranking, -1 for none (it is scored in full): only
        when pod b-1 was placed and its node now fails pod b (batch.go: else v1.35 and v1.36
        score in full; v1.37 rescores that node with the ranking, which over the same nodes
        is the full score). The best node left is taken off, and chosen if it passes."""
        if last < 0 or code[last] == c.PASS or not self.listed.any():
            return -1
        ties = mix(cluster.name_hashes, self.pod_hash)
        head = max(np.flatnonzero(self.listed), key=lambda n: (int(self.total[n]), int(ties[n])))
        self.listed[head] = False
        return int(head) if code[head] == c.PASS else -1

    def keep(self, feasible: list[int], total: c.I64, node: int, pod_hash: np.uint64) -> None:
        """A pod scored in full placed on ``node``: its other feasible nodes are the ranking."""
        self.listed[:] = False
        self.listed[feasible] = True
        self.listed[node] = False
        self.total[:] = total
        self.pod_hash = pod_hash


def run(cluster: c.Cluster, batch: c.Batch) -> c.Result:
    nodes, pods = cluster.name_hashes.shape[0], batch.size
    state = _State(cluster)
    chosen = np.full(pods, -1, dtype=np.int32)
    code = np.zeros((pods, nodes), dtype=np.int8)
    detail = np.zeros((pods, nodes), dtype=np.int64)
    total = np.zeros((pods, nodes), dtype=np.int64)
    feasible_count = np.zeros(pods, dtype=np.int32)
    top = np.full((pods, c.TOP), -1, dtype=np.int32)
    top_scores = np.zeros((pods, c.TOP, len(c.SCORE_PLUGINS)), dtype=np.int64)
    hinted = np.zeros(pods, dtype=np.bool_)
    ranking = _Ranking(nodes)
    for b in range(pods):
        _filter(state, batch, b, code[b], detail[b])
        feasible = [n for n in range(nodes) if code[b, n] == c.PASS]
        feasible_count[b] = len(feasible)
        if not feasible:
            continue
        detail[b] = 0  # the contract keeps details for the pods that fit nowhere
        hint = (
            ranking.hint(cluster, int(chosen[b - 1]), code[b]) if b and batch.continues[b] else -1
        )
        per_plugin = [
            {n: _fit(state, batch, b, n) for n in feasible},
            {n: 0 if batch.balanced_skip[b] else _balanced(state, batch, b, n) for n in feasible},
            _normalised(batch.taint_raw[batch.static_row[b]], feasible, reverse=True),
            _normalised(batch.node_affinity_raw[batch.static_row[b]], feasible, reverse=False),
            _spread_scores(state, batch, b, feasible),
            _inter_pod_scores(state, batch, b, feasible),
            {n: int(batch.zone_score[n]) for n in feasible},  # per node, not normalised
            {n: int(batch.image_score[batch.static_row[b]][n]) for n in feasible},  # the same
            {n: int(batch.volume_score[batch.static_row[b]][n]) for n in feasible},  # the same
            _normalised(batch.dra_raw[batch.static_row[b]], feasible, reverse=False),
        ]
        # The Python score plugins' sum, weighed and normalised already (no SCORE_PLUGINS slot).
        extension = batch.extension_score[batch.static_row[b]]
        for n in feasible:
            total[b, n] = sum(
                int(batch.weights[p]) * scores[n] for p, scores in enumerate(per_plugin)
            ) + (int(extension[n]) if batch.extension_scored else 0)
        ties = mix(cluster.name_hashes, batch.pod_hashes[b])
        ranked = sorted(feasible, key=lambda n: (int(total[b, n]), int(ties[n])), reverse=True)
        for rank, n in enumerate(ranked[: c.TOP]):
            top[b, rank] = n
            for p, scores in enumerate(per_plugin):
                top_scores[b, rank, p] = scores[n]
        # The pod's own scores are computed all the same: the trace shows them beside a hint.
        node = ranked[0] if hint < 0 else hint
        chosen[b], hinted[b] = node, hint >= 0
        if hint < 0:
            ranking.keep(feasible, total[b], node, batch.pod_hashes[b])
        state.requested[:, node] += batch.requests[b]
        state.nonzero[:, node] += batch.nonzero[b]
        state.counts[:, node] += batch.member[b]
    return c.Result(
        chosen=chosen,
        code=code,
        detail=detail,
        total=total,
        feasible=feasible_count,
        top=top,
        top_scores=top_scores,
        hinted=hinted,
    )
