"""Whether the kernel's input meets the contract: fast in numba before every batch, and in words.

The compiled code follows indices without bounds checks, so ``compiled_batch.decide`` runs
``valid`` first and decides nothing when it fails; ``check`` then names every problem.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plumb.kernel import compiled_jit
from plumb.kernel import contract as c

_PLUGINS = compiled_jit.PLUGINS
_FIRST_STRATEGY, _LAST_STRATEGY = min(c.FIT_STRATEGIES), max(c.FIT_STRATEGIES)


@compiled_jit.jit
def valid(
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
    scored_rows: Any,
    spread: Any,
    spread_flags: Any,
    affinity: Any,
    symmetric: Any,
    preferred: Any,
    weights: c.I64,
    fit_strategy: int,
    zone_score: c.I64,
    fit_spec: Any,
    balanced_spec: Any,
) -> bool:
    """What ``check`` checks, fast: shapes, and every index the kernel follows in range."""
    resources, nodes = allocatable.shape
    keys, rows, pods = domains.shape[0], counts.shape[0], per_pod[0].shape[0]
    ok = requested.shape == (resources, nodes) and nonzero.shape == (2, nodes)
    ok = ok and name_hashes.shape[0] == nodes and domains.shape[1] == nodes
    ok = ok and domain_counts.shape[0] == keys and counts.shape[1] == nodes
    ok = ok and weights.shape[0] == _PLUGINS and zone_score.shape[0] == nodes
    ok = ok and _FIRST_STRATEGY <= fit_strategy <= _LAST_STRATEGY
    for column in columns:
        ok = ok and 0 <= column < resources
    ok = ok and per_pod[1].shape[0] == pods and per_pod[2].shape[0] == pods
    ok = ok and per_pod[3].shape[0] == pods and per_pod[4].shape[0] == pods
    ok = ok and per_pod[5].shape[0] == pods
    requests, pod_nonzero, static_code, taint_raw, node_affinity_raw, image, member = per_pod_tables
    distinct = static_code.shape[0]
    ok = ok and requests.shape == (pods, resources) and pod_nonzero.shape == (pods, 2)
    ok = ok and static_code.shape[1] == nodes and taint_raw.shape == (distinct, nodes)
    ok = ok and node_affinity_raw.shape == (distinct, nodes) and member.shape == (pods, rows)
    volume, dra, extension = scored_rows
    ok = ok and image.shape == (distinct, nodes) and volume.shape == (distinct, nodes)
    ok = ok and dra.shape == (distinct, nodes) and extension.shape == (distinct, nodes)
    fit_columns, fit_weights, fit_nonzero, fit_optional, points, shape_scores = fit_spec
    size = fit_columns.shape[0]
    ok = ok and fit_weights.shape[0] == size and fit_nonzero.shape[0] == size
    ok = ok and fit_optional.shape[0] == size and shape_scores.shape[0] == points.shape[0]
    for f in range(size):
        ok = ok and 0 <= fit_columns[f] < resources and c.NO_NONZERO <= fit_nonzero[f] <= 1
    for i in range(1, points.shape[0]):
        ok = ok and points[i - 1] < points[i]  # the shape's divisions are by their steps
    balanced_columns, balanced_optional = balanced_spec[0], balanced_spec[1]
    ok = ok and balanced_optional.shape[0] == balanced_columns.shape[0]
    for g in range(balanced_columns.shape[0]):
        ok = ok and 0 <= balanced_columns[g] < resources
    if not ok:
        return False
    static_row = per_pod[4]
    for b in range(pods):
        ok = ok and 0 <= static_row[b] < distinct
    for k in range(keys):
        low, high = np.int32(0), np.int32(-1)
        for n in range(nodes):  # no early exit: the pass vectorises
            low, high = min(low, domains[k, n]), max(high, domains[k, n])
        ok = ok and bool(low >= -1 and high < domain_counts[k])
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


@compiled_jit.jit
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


def check(cluster: c.Cluster, batch: c.Batch) -> None:
    """Raise ValueError, naming every problem, unless the arrays have the contract's shapes and
    every index (domain, count row, key, pod, column) is in range."""
    resources, nodes = cluster.allocatable.shape
    keys, rows, pods = cluster.domains.shape[0], cluster.counts.shape[0], batch.size
    distinct = batch.static_code.shape[0]
    spreads, terms = batch.spread_pod.shape[0], batch.affinity_pod.shape[0]
    symmetric, preferred = batch.symmetric_pod.shape[0], batch.preferred_pod.shape[0]
    shapes: dict[str, tuple[Any, tuple[int, ...]]] = {
        "requested": (cluster.requested, (resources, nodes)),
        "nonzero_requested": (cluster.nonzero_requested, (2, nodes)),
        "name_hashes": (cluster.name_hashes, (nodes,)),
        "domains": (cluster.domains, (keys, nodes)),
        "domain_counts": (cluster.domain_counts, (keys,)),
        "counts": (cluster.counts, (rows, nodes)),
        "pod_hashes": (batch.pod_hashes, (pods,)),
        "requests": (batch.requests, (pods, resources)),
        "nonzero": (batch.nonzero, (pods, 2)),
        "static_row": (batch.static_row, (pods,)),
        "static_code": (batch.static_code, (distinct, nodes)),
        "taint_raw": (batch.taint_raw, (distinct, nodes)),
        "node_affinity_raw": (batch.node_affinity_raw, (distinct, nodes)),
        "image_score": (batch.image_score, (distinct, nodes)),
        "volume_score": (batch.volume_score, (distinct, nodes)),
        "dra_raw": (batch.dra_raw, (distinct, nodes)),
        "extension_score": (batch.extension_score, (distinct, nodes)),
        "member": (batch.member, (pods, rows)),
        "spread_eligible": (batch.spread_eligible, (spreads, nodes)),
        "spread_require_all": (batch.spread_require_all, (pods,)),
        "affinity_self": (batch.affinity_self, (pods,)),
        "weights": (batch.weights, (len(c.SCORE_PLUGINS),)),
        "balanced_skip": (batch.balanced_skip, (pods,)),
        "continues": (batch.continues, (pods,)),
        "zone_score": (batch.zone_score, (nodes,)),
        "fit_weights": (batch.fit_weights, batch.fit_columns.shape),
        "fit_nonzero": (batch.fit_nonzero, batch.fit_columns.shape),
        "fit_optional": (batch.fit_optional, batch.fit_columns.shape),
        "fit_shape_score": (batch.fit_shape_score, batch.fit_shape_utilization.shape),
        "balanced_optional": (batch.balanced_optional, batch.balanced_columns.shape),
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
    if batch.fit_strategy not in c.FIT_STRATEGIES:
        problems.append(f"fit_strategy {batch.fit_strategy} is not one of {c.FIT_STRATEGIES}")
    for label, scored in (("fit", batch.fit_columns), ("balanced", batch.balanced_columns)):
        if scored.size and (scored.min() < 0 or scored.max() >= resources):
            problems.append(f"{label}_columns holds values outside 0 .. {resources - 1}")
    if batch.fit_nonzero.size and (
        batch.fit_nonzero.min() < c.NO_NONZERO or batch.fit_nonzero.max() > 1
    ):
        problems.append(f"fit_nonzero holds values outside {c.NO_NONZERO} .. 1")
    points = batch.fit_shape_utilization
    if points.size > 1 and (points[1:] <= points[:-1]).any():
        problems.append("fit_shape_utilization is not increasing")
    if not problems:
        problems = _index_problems(cluster, batch, keys, rows, pods)
    if problems:
        raise ValueError("kernel input does not meet the contract: " + "; ".join(problems))


_SPREAD_COLUMNS = ("row", "key", "max_skew", "min_domains", "hard", "self", "hostname")


def _index_problems(
    cluster: c.Cluster, batch: c.Batch, keys: int, rows: int, pods: int
) -> list[str]:
    problems = []
    distinct = batch.static_code.shape[0]
    if batch.static_row.size and (batch.static_row.min() < 0 or batch.static_row.max() >= distinct):
        problems.append(f"static_row holds values outside 0 .. {distinct - 1}")
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
