"""The compiled kernel's filters: a node's code is its first failure in kube-scheduler's order.

``compiled_batch.decide`` runs them per pod in turn. The semantics are ``reference``'s; the
arrangement is for speed:

- NodeResourcesFit: the bits of the resources a node is short of depend on the node and on
  the pod's requests alone, so they are computed for every node when the requests change and
  then kept, updated at each node a pod is placed on (``resource_bits``).
- PodTopologySpread and InterPodAffinity: every check looks up the count of the node's domain
  of one key in an aggregate (``compiled_aggregates``), so whether a check fails depends on the
  domain alone. Per key, a table gives each domain (and "label missing") the first check that
  fails there, as ``rank * 8 + code`` with the checks ranked in kube-scheduler's order, and
  a pass per key gives each node the smallest (``dynamic_filter``). A key whose domains are
  the nodes themselves (the hostname) needs no table: its checks read the counts in node
  order.
- ``combine``: static reason and resources (``early_codes``, kept per batch and updated at
  each placement), then that verdict, in one pass; then the feasible nodes listed. Why each
  node failed in detail (``details``) only for a pod no node fits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plumb.kernel import compiled_jit
from plumb.kernel import contract as c

_PASS, _STATIC, _RESOURCES = c.PASS, c.STATIC, c.RESOURCES
# An early code no contract code has: nothing failed yet, but a static reason checked after
# every other filter does (a negative static code, see contract.Batch).
_LAST = np.int8(8)
_SPREAD_LABEL, _SPREAD_SKEW = c.SPREAD_LABEL, c.SPREAD_SKEW
_AFFINITY, _ANTI, _EXISTING = c.AFFINITY, c.ANTI_AFFINITY, c.EXISTING_ANTI_AFFINITY
_LOWEST, _HIGHEST = compiled_jit.LOWEST, compiled_jit.HIGHEST
CLEAR = np.int32(1 << 30)
"""A verdict no check gave: ``CLEAR & 7 == PASS`` and it is above every ``rank * 8 + code``
(int32: twice the lanes of int64 to a vector; a pod has far fewer than 2**27 checks)."""


@compiled_jit.jit
def resource_bits(
    free: c.I64, request: c.I64, pods_column: int, bits: c.I64, start: int, end: int
) -> None:
    """NodeResourcesFit of nodes ``start:end``: one bit per resource the node is short of (the
    pods column always checked, other columns only when the pod requests them)."""
    bits[start:end] = 0
    for r in range(request.shape[0]):
        if r == pods_column or request[r] > 0:
            need = 1 if r == pods_column else request[r]
            bit = np.int64(1) << r
            available = free[r]
            for n in range(start, end):
                bits[n] |= bit if need > available[n] else 0


@compiled_jit.jit
def dynamic_filter(
    domains: c.I32,
    domain_counts: c.I32,
    counts: c.I32,
    identity: c.B1,
    spread: Any,
    affinity: Any,
    symmetric: Any,
    aggregates: Any,
    verdict: c.I32,
    tables: c.I32,
    keys_used: c.B1,
) -> bool:
    """PodTopologySpread's hard constraints, then InterPodAffinity's required terms (the
    first-pod rule included), anti-affinity and the existing pods' anti-affinity: each node's
    first failure as ``rank * 8 + code`` in ``verdict`` (``CLEAR``: none). False, with
    ``verdict`` untouched, when the pod has none of these constraints.

    ``spread``: (start, end, key, max_skew, min_domains, hard, self, aggregate) of the pod's
    spread rows; ``affinity``: (start, end, key, anti, aggregate, matches itself);
    ``symmetric``: (start, end, key, aggregate). ``tables``: scratch of at least
    ``sum(domain_counts + 1)``; ``keys_used``: scratch of one flag per key.
    """
    s_start, s_end, spread_key, max_skew, min_domains, spread_hard, spread_self, spread_agg = spread
    a_start, a_end, affinity_key, affinity_anti, affinity_agg, matches_itself = affinity
    y_start, y_end, symmetric_key, symmetric_agg = symmetric
    rows, offset, sums = aggregates[0], aggregates[3], aggregates[4]
    totals, present = aggregates[6], aggregates[7]
    keys = domains.shape[0]
    any_check = y_end > y_start or a_end > a_start
    for i in range(s_start, s_end):
        any_check = any_check or spread_hard[i]
    if not any_check:
        return False

    keys_used[:] = False
    fresh = True  # nothing written to ``verdict`` yet: the first check writes, later ones min
    rank = 0
    # Hard spread constraints, in their order: rank 0, 1, ...
    for i in range(s_start, s_end):
        if not spread_hard[i]:
            continue
        k = spread_key[i]
        domains_of_key = domain_counts[k]
        start = offset[spread_agg[i]]
        counted = totals[start : start + domains_of_key]
        counted_present = present[start : start + domains_of_key]
        domains_present = 0
        minimum = np.int64(0)
        for d in range(domains_of_key):
            if counted_present[d]:
                minimum = counted[d] if domains_present == 0 else min(minimum, counted[d])
                domains_present += 1
        # Fewer domains than minDomains: the global minimum counts as 0. (So it does with no
        # domain at all; the reference needs minDomains >= 1 there, as kube defaults it.)
        if domains_present < min_domains[i]:
            minimum = np.int64(0)
        limit = max_skew[i] + minimum - np.int64(spread_self[i])
        skew = np.int32(rank * 8 + _SPREAD_SKEW)
        if identity[k]:
            _above(verdict, counted, limit, skew, fresh)
            fresh = False
        else:
            table = _table(tables, domain_counts, k, keys_used)
            for d in range(domains_of_key):
                table[d + 1] = min(table[d + 1], skew if counted[d] > limit else CLEAR)
            label = np.int32(rank * 8 + _SPREAD_LABEL)
            table[0] = min(table[0], label)
        rank += 1

    # Required affinity: every term's key present and every term matched somewhere in the
    # node's domain, unless no pod matches any term and the pod matches them all itself.
    no_match = True
    for a in range(a_start, a_end):
        if not affinity_anti[a] and sums[affinity_agg[a]] != 0:
            no_match = False
    excused = no_match and matches_itself
    failed = np.int32(rank * 8 + _AFFINITY)
    for a in range(a_start, a_end):
        if affinity_anti[a]:
            continue
        k = affinity_key[a]
        domains_of_key = domain_counts[k]
        start = offset[affinity_agg[a]]
        counted = totals[start : start + domains_of_key]
        if identity[k]:
            if not excused:  # (every node carries an identity key; its count row is the total)
                _at_most(verdict, counts[rows[affinity_agg[a]]], failed, fresh)
                fresh = False
        else:
            table = _table(tables, domain_counts, k, keys_used)
            if not excused:
                for d in range(domains_of_key):
                    table[d + 1] = min(table[d + 1], failed if counted[d] <= 0 else CLEAR)
            table[0] = min(table[0], failed)
    rank += 1

    # Anti-affinity of the pod, then of the pods already placed: a counted pod in the domain.
    for stage in range(2):
        failed = np.int32(rank * 8 + (_ANTI if stage == 0 else _EXISTING))
        first, last = (a_start, a_end) if stage == 0 else (y_start, y_end)
        for e in range(first, last):
            if stage == 0 and not affinity_anti[e]:
                continue
            k = affinity_key[e] if stage == 0 else symmetric_key[e]
            agg = affinity_agg[e] if stage == 0 else symmetric_agg[e]
            domains_of_key = domain_counts[k]
            counted = totals[offset[agg] : offset[agg] + domains_of_key]
            if identity[k]:
                # Every node carries an identity key, and its count row is the total.
                _above(verdict, counts[rows[agg]], np.int32(0), failed, fresh)
                fresh = False
            else:
                table = _table(tables, domain_counts, k, keys_used)
                for d in range(domains_of_key):
                    table[d + 1] = min(table[d + 1], failed if counted[d] > 0 else CLEAR)
        rank += 1

    # Each node's smallest verdict over the keys with a table.
    for k in range(keys):
        if keys_used[k]:
            _apply(verdict, domains[k], _table_of(tables, domain_counts, k), fresh)
            fresh = False
    if fresh:
        verdict[:] = CLEAR
    return True


@compiled_jit.inline
def _table_of(tables: c.I32, domain_counts: c.I32, k: int) -> c.I32:
    start = _start(domain_counts, k)
    return tables[start : start + domain_counts[k] + 1]


@compiled_jit.jit
def _apply(verdict: c.I32, key_domains: c.I32, table: c.I32, fresh: bool) -> None:
    """Each node's verdict, or the smaller of it and its domain's in ``table`` (whose slot 0
    is for "label missing", domain id -1).

    A lookup per node does not vectorise; with few domains failing (a zone key), a pass per
    failing domain does: a compare and a select per node."""
    failing = 0
    for slot in range(table.shape[0]):
        failing += table[slot] != CLEAR
    if failing <= _FEW:
        if fresh:
            verdict[:] = CLEAR
        for slot in range(table.shape[0]):
            value, domain = table[slot], np.int32(slot - 1)
            if value == CLEAR:
                continue
            for n in range(verdict.shape[0]):
                verdict[n] = min(verdict[n], value if key_domains[n] == domain else CLEAR)
    elif fresh:
        # (Slot d + 1 for domain d: no select per node, and an unsigned index needs no check
        # for negative ones.)
        for n in range(verdict.shape[0]):
            verdict[n] = table[np.uint64(key_domains[n] + 1)]
    else:
        for n in range(verdict.shape[0]):
            verdict[n] = min(verdict[n], table[np.uint64(key_domains[n] + 1)])


_FEW = 4  # failing domains below which a pass per domain beats a lookup per node


@compiled_jit.inline
def _start(domain_counts: c.I32, k: int) -> int:
    """Where key k's table starts among ``tables``."""
    start = 0
    for j in range(k):
        start += domain_counts[j] + 1
    return start


@compiled_jit.inline
def _table(tables: c.I32, domain_counts: c.I32, k: int, keys_used: c.B1) -> c.I32:
    """Key k's table, cleared on first use for this pod."""
    start = _start(domain_counts, k)
    table = tables[start : start + domain_counts[k] + 1]
    if not keys_used[k]:
        table[:] = CLEAR
        keys_used[k] = True
    return table


@compiled_jit.jit
def _above(verdict: c.I32, counted: Any, limit: Any, failed: np.int32, fresh: bool) -> None:
    """A check on a key whose domain d is node d: fails where the count is above ``limit``."""
    if fresh:
        for n in range(verdict.shape[0]):
            verdict[n] = failed if counted[n] > limit else CLEAR
    else:
        for n in range(verdict.shape[0]):
            verdict[n] = min(verdict[n], failed if counted[n] > limit else CLEAR)


@compiled_jit.jit
def _at_most(verdict: c.I32, counted: Any, failed: np.int32, fresh: bool) -> None:
    """A check on a key whose domain d is node d: fails where no pod is counted."""
    if fresh:
        for n in range(verdict.shape[0]):
            verdict[n] = failed if counted[n] <= 0 else CLEAR
    else:
        for n in range(verdict.shape[0]):
            verdict[n] = min(verdict[n], failed if counted[n] <= 0 else CLEAR)


@compiled_jit.jit
def early_codes(static: c.I32, bits: c.I64, early: Any, start: int, end: int) -> None:
    """The codes of nodes ``start:end`` before the dynamic filters: the static reason, then
    the resources the node is short of, then ``_LAST`` where the static reason checked last
    fails (``PASS``: none of these), one byte a node."""
    for n in range(start, end):
        s = static[n]
        early[n] = (
            _STATIC if s > 0 else (_RESOURCES if bits[n] != 0 else (_LAST if s < 0 else _PASS))
        )


@compiled_jit.jit
def combine(
    early: Any,
    verdict: c.I32,
    dynamic: bool,
    code_row: Any,
    feasible: c.I32,
) -> int:
    """Every node's code: its ``early_codes``, then ``verdict`` (when ``dynamic``), then the
    static reason checked last. Lists the feasible nodes in ``feasible`` and returns how many
    there are."""
    if dynamic:
        for n in range(early.shape[0]):
            e = early[n]
            late = np.int8(verdict[n] & 7)
            if e == _PASS:
                e = late
            elif e == _LAST:
                e = late if late != _PASS else _STATIC
            code_row[n] = e
    else:
        for n in range(early.shape[0]):
            e = early[n]
            code_row[n] = _STATIC if e == _LAST else e
    # Apart: the store at a running count does not vectorise, the pass above does.
    count = 0
    for n in range(early.shape[0]):
        feasible[count] = n
        count += code_row[n] == _PASS
    return count


@compiled_jit.jit
def details(static: c.I32, bits: c.I64, code_row: Any, detail_row: c.I64) -> None:
    """For a pod no node fits: the static reason code where a static filter failed (first or
    last), else the resources a node is short of (0 where a dynamic filter failed)."""
    for n in range(static.shape[0]):
        s = static[n]
        if s > 0:
            detail_row[n] = s
        elif bits[n] != 0:
            detail_row[n] = bits[n]
        else:
            detail_row[n] = -s if s < 0 and code_row[n] == _STATIC else 0
