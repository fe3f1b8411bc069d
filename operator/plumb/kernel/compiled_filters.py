"""The compiled kernel's filter passes, in kube-scheduler's order, over every node at once.

``compiled_batch.decide`` runs them per pod in turn; each pass leaves alone the nodes that
already failed, so that a node's code is its first failure. The semantics are ``reference``'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plumb.kernel import compiled_jit
from plumb.kernel import contract as c

_PASS, _STATIC, _RESOURCES = c.PASS, c.STATIC, c.RESOURCES
_SPREAD_LABEL, _SPREAD_SKEW = c.SPREAD_LABEL, c.SPREAD_SKEW
_AFFINITY, _ANTI = c.AFFINITY, c.ANTI_AFFINITY


@compiled_jit.jit
def fit_filter(
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


@compiled_jit.jit
def spread_filter(
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


@compiled_jit.jit
def affinity_filter(
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
        compiled_jit.domain_totals(counts[affinity_row[a]], key_domains, domain_counts[key], totals)
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
            conflict_filter(
                code_row, domains[key], domain_counts[key], counts[affinity_row[a]], totals, _ANTI
            )


@compiled_jit.jit
def conflict_filter(
    code_row: Any,
    key_domains: c.I32,
    domains_of_key: int,
    row: c.I32,
    totals: c.I64,
    failure: int,
) -> None:
    """Anti-affinity, either way: a node fails when its domain holds a counted pod."""
    compiled_jit.domain_totals(row, key_domains, domains_of_key, totals)
    for n in range(key_domains.shape[0]):
        d = key_domains[n]
        if d >= 0 and code_row[n] == _PASS and totals[d] > 0:
            code_row[n] = failure
