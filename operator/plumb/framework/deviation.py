"""Deviation on a SchedulingPolicy's budget: when no node meets a policy's DoNotSchedule spread
rules, the node, among those every other filter passes, that raises the skew least.

The caller decides the pod once more without the policy's rules (``compiled`` and ``result``
of that run, one pod) and hands the rules here. For each rule, each node's domain is given one
more pod and the skew (most pods in a domain minus fewest, the fewest counted as 0 below
minDomains, as PodTopologySpread counts) is compared with maxSkew; a node's cost is the sum of
the excesses over all rules. The cheapest node wins; then the higher score of that run; then
the kernel's own tie-break (the stable hash of pod and node). Nodes without a rule's key never
qualify: no placement there can meet or approach the rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import snapshot
from plumb.backend.records import objects, specs
from plumb.framework import compiling
from plumb.framework.plugins import podtopologyspread
from plumb.kernel import contract, reference


@dataclasses.dataclass(frozen=True, slots=True)
class Deviation:
    """Where the pod goes, and the skew per topology key once it is there."""

    node: str
    skews: tuple[tuple[str, int, int], ...]  # (topology key, skew after, maxSkew)

    def describe(self) -> str:
        return ", ".join(f"{key} skew {skew} > maxSkew {limit}" for key, skew, limit in self.skews)


def least_skew(
    pod: objects.PodInfo,
    rules: Sequence[specs.SpreadConstraint],
    snap: snapshot.Snapshot,
    compiled: compiling.Compiled,
    result: contract.Result,
    cache: cache_module.Cache,
) -> Deviation | None:
    """The node ``pod`` deviates to, or None when no node passes the other filters."""
    statics = snap.statics
    feasible = result.code[0] == contract.PASS
    cost = np.zeros(len(statics), dtype=np.int64)
    after: list[npt.NDArray[np.int64]] = []
    rows = cache.count_rows([podtopologyspread.selection(rule, pod) for rule in rules])
    for rule, counts in zip(rules, rows, strict=True):
        ids = statics.label_ids(rule.topology_key)
        present = ids >= 0
        feasible &= present
        skew = _skew_after(ids, counts, statics.domain_count(rule.topology_key), rule)
        after.append(skew)
        cost += np.maximum(0, skew - rule.max_skew)
    candidates = np.flatnonzero(feasible)
    if candidates.size == 0:
        return None
    ties = reference.mix(snap.name_hashes, np.uint64(compiled.batch.pod_hashes[0]))
    best = min(
        candidates.tolist(),
        key=lambda n: (int(cost[n]), -int(result.total[0, n]), -int(ties[n])),
    )
    skews = tuple(
        (rule.topology_key, int(skew[best]), rule.max_skew)
        for rule, skew in zip(rules, after, strict=True)
    )
    return Deviation(node=statics.names[best], skews=skews)


def _skew_after(
    ids: npt.NDArray[np.int32],
    counts: npt.NDArray[np.int32],
    domains: int,
    rule: specs.SpreadConstraint,
) -> npt.NDArray[np.int64]:
    """Per node: the rule's skew if one more pod went to that node's domain (0 off-domain)."""
    present = ids >= 0
    per_domain = np.bincount(ids[present], weights=counts[present], minlength=domains)
    per_domain = per_domain.astype(np.int64)
    if domains == 0:
        return np.zeros(ids.shape[0], dtype=np.int64)
    order = np.sort(per_domain)
    lowest, lowest_count = order[0], int(np.count_nonzero(per_domain == order[0]))
    second = order[order > lowest][0] if np.any(order > lowest) else None
    highest = order[-1]
    plus = per_domain + 1
    new_max = np.maximum(highest, plus)
    if domains == 1:
        new_min = plus
    else:
        alone_lowest = (per_domain == lowest) & (lowest_count == 1)
        replacement = plus if second is None else np.minimum(second, plus)
        new_min = np.where(alone_lowest, replacement, lowest)
    if domains < rule.min_domains:
        new_min = np.zeros_like(new_min)
    skew_by_domain = new_max - new_min
    return np.where(present, skew_by_domain[np.maximum(ids, 0)], 0).astype(np.int64)
