"""Per-domain totals of count rows: built once per batch, kept current as its pods are placed.

Every constraint of the batch asks "how many counted pods are in the domain of node n": the
sum of a count row over the nodes of each domain of a key, over the nodes a mask lets count
(PodTopologySpread's eligible nodes, with every key of the pod's constraints) or over all of
them (InterPodAffinity). Summing per pod costs a pass over every node per constraint; here each
distinct (row, key, mask) is summed once per batch (an *aggregate*), and placing a pod on node
x adds its membership to the aggregates of its rows at x's domains. Replicas share aggregates:
their constraints differ only in which pod they belong to.

Layout: aggregate a sums row ``row[a]`` per domain of key ``key[a]`` into
``totals[offset[a] : offset[a] + domain_counts[key[a]]]``, over the nodes of ``masks[mask[a]]``
(``mask[a] == -1``: every node); ``present`` marks the domains holding at least one counted
node (what PodTopologySpread's minimum is taken over), ``sums[a]`` is the aggregate's total.
Where key k's domain d is node d (``identity[k]``, the hostname usually), an unmasked
aggregate is the count row itself: ``by_node[a]``, no totals, and readers use the row.
Hard spread constraints count over ``eligible & every hard key present``, soft ones over
``eligible & every soft key present`` (every node when the pod does not require all keys);
the constraints of InterPodAffinity over every node.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plumb.kernel import compiled_jit
from plumb.kernel import contract as c

NONE = -1
_MAX_KEYS = 62  # key sets as bits of an int64; more keys: no sharing of masked aggregates


@compiled_jit.jit
def build(
    domains: c.I32,
    domain_counts: c.I32,
    identity: c.B1,
    counts: c.I32,
    pods: int,
    spread: Any,
    spread_eligible: c.B1,
    spread_require_all: c.B1,
    tables: Any,
) -> Any:
    """The batch's aggregates, and the aggregate of every constraint (-1: needs none).

    ``spread``: (pod, row, key, hard, hostname) columns of the spread table; ``tables``: the
    (pod, row, key) columns of the affinity, symmetric and preferred tables, in that order.
    Returns (row, key, mask, offset, sums, masks, totals, present, per-table aggregate ids).
    """
    spread_pod, spread_row, spread_key, spread_hard, spread_hostname = spread
    nodes = domains.shape[1]
    keys = domains.shape[0]
    n_spread = spread_pod.shape[0]
    upper = n_spread
    for table in tables:
        upper += table[0].shape[0]
    row = np.empty(upper, dtype=np.int64)
    key = np.empty(upper, dtype=np.int64)
    mask = np.empty(upper, dtype=np.int64)
    key_sets = np.zeros(upper, dtype=np.int64)  # masked: the keys (bits) the mask requires
    hard = np.zeros(upper, dtype=np.bool_)
    masks = np.empty((max(n_spread, 1), nodes), dtype=np.bool_)
    count = 0
    n_masks = 0

    # Spread constraints: masked aggregates, shared when row, key, the keys required and the
    # eligible nodes are the same. Soft hostname constraints count per node and need none.
    spread_agg = np.full(n_spread, NONE, dtype=np.int64)
    first = np.zeros(pods + 1, dtype=np.int64)  # pod b's entries: first[b] .. first[b + 1]
    for i in range(n_spread):
        first[spread_pod[i] + 1] += 1
    for b in range(pods):
        first[b + 1] += first[b]
    shareable = keys <= _MAX_KEYS
    for i in range(n_spread):
        b = spread_pod[i]
        if not spread_hard[i] and spread_hostname[i]:
            continue
        # The keys every counted node must carry: the pod's hard keys for a hard constraint,
        # its soft keys for a soft one when it requires all of them.
        required = spread_hard[i] or spread_require_all[b]
        key_set = np.int64(0)
        if shareable and required:
            for j in range(first[b], first[b + 1]):
                if spread_hard[j] == spread_hard[i]:
                    key_set |= np.int64(1) << spread_key[j]
        found = NONE
        if shareable:
            for a in range(count):
                if (
                    mask[a] != NONE
                    and row[a] == spread_row[i]
                    and key[a] == spread_key[i]
                    and hard[a] == spread_hard[i]
                    and key_sets[a] == key_set
                    and _same(masks[mask[a]], spread_eligible[i], key_set, domains)
                ):
                    found = a
                    break
        if found == NONE:
            target = masks[n_masks]
            target[:] = spread_eligible[i]
            if required:
                for j in range(first[b], first[b + 1]):
                    if spread_hard[j] == spread_hard[i]:
                        key_domains = domains[spread_key[j]]
                        for n in range(nodes):
                            target[n] &= key_domains[n] >= 0
            row[count], key[count], mask[count] = spread_row[i], spread_key[i], n_masks
            key_sets[count], hard[count] = key_set, spread_hard[i]
            n_masks += 1
            found = count
            count += 1
        spread_agg[i] = found

    # Every other constraint: unmasked aggregates, one per (row, key).
    ids = []
    for table in tables:
        table_pod, table_row, table_key = table
        agg = np.empty(table_pod.shape[0], dtype=np.int64)
        for e in range(table_pod.shape[0]):
            found = NONE
            for a in range(count):
                if mask[a] == NONE and row[a] == table_row[e] and key[a] == table_key[e]:
                    found = a
                    break
            if found == NONE:
                row[count], key[count], mask[count] = table_row[e], table_key[e], NONE
                found = count
                count += 1
            agg[e] = found
        ids.append(agg)

    # An unmasked aggregate of a key whose domain d is node d is its count row itself: the
    # kernel reads the row (``by_node``), and only its sum is kept here.
    by_node = np.zeros(count, dtype=np.bool_)
    offset = np.empty(count + 1, dtype=np.int64)
    offset[0] = 0
    for a in range(count):
        by_node[a] = mask[a] == NONE and identity[key[a]]
        offset[a + 1] = offset[a] + (0 if by_node[a] else domain_counts[key[a]])
    totals = np.zeros(offset[count], dtype=np.int64)
    present = np.zeros(offset[count], dtype=np.bool_)
    sums = np.zeros(count, dtype=np.int64)
    for a in range(count):
        key_domains, counted, start = domains[key[a]], counts[row[a]], offset[a]
        total = np.int64(0)
        if by_node[a]:
            for n in range(nodes):
                total += counted[n]
        elif mask[a] == NONE:
            for n in range(nodes):
                d = key_domains[n]
                if d >= 0:
                    totals[start + d] += counted[n]
                    total += counted[n]
        else:
            allowed = masks[mask[a]]
            for n in range(nodes):
                d = key_domains[n]
                if d >= 0 and allowed[n]:
                    totals[start + d] += counted[n]
                    present[start + d] = True
                    total += counted[n]
        sums[a] = total
    return (
        row[:count],
        key[:count],
        mask[:count],
        offset,
        sums,
        masks[:n_masks],
        totals,
        present,
        spread_agg,
        ids[0],
        ids[1],
        ids[2],
        by_node,
    )


@compiled_jit.inline
def _same(built: c.B1, eligible: c.B1, key_set: Any, domains: c.I32) -> bool:
    """Whether ``eligible``, restricted to the nodes carrying every key of ``key_set``, is the
    mask ``built``: one pass without early exit, which vectorises."""
    differ = np.uint8(0)
    left, right = built.view(np.uint8), eligible.view(np.uint8)
    for n in range(left.shape[0]):
        differ |= left[n] ^ right[n]
    if differ == 0:
        return True
    # The masks differ where eligible nodes lack a required key: compare what is left.
    differ = np.uint8(0)
    for n in range(left.shape[0]):
        carries = True
        for k in range(domains.shape[0]):
            if (key_set >> k) & 1:
                carries = carries and domains[k, n] >= 0
        differ |= left[n] ^ (right[n] & np.uint8(carries))
    return bool(differ == 0)


@compiled_jit.jit
def place(aggregates: Any, domains: c.I32, member: c.I32, node: int) -> None:
    """Count a pod placed on ``node`` whose membership of each count row is ``member``."""
    row, key, mask, offset, sums, masks, totals = aggregates[:7]
    by_node = aggregates[12]
    for a in range(row.shape[0]):
        added = member[row[a]]
        if added == 0:
            continue
        d = domains[key[a], node]
        if by_node[a]:
            sums[a] += added  # the count row itself is updated by the caller
        elif d >= 0 and (mask[a] == NONE or masks[mask[a], node]):
            totals[offset[a] + d] += added
            sums[a] += added
