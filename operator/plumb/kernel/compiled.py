"""The compiled kernel: ``reference.run``'s contract and results, bit for bit, in numba.

``run`` unpacks the contract's dataclasses into plain arrays and calls
``compiled_batch.decide``: one ``nogil`` function that decides the pods of the batch in turn,
each over a working copy of the cluster updated by the placements before it. The semantics are
the reference's (read that one first); the kernel arranges the same arithmetic to be fast:

- Work once per batch what replicas share. Per-domain counts of every (count row, topology
  key, counted nodes) the constraints ask for are summed once (``compiled_aggregates``) and
  updated at each placement; so are the resource bits and scores of a request shape, and the
  static rows the framework shares between replicas are read from cache.
- Filters by tables. A node's spread or inter-pod verdict depends on its domain alone, so
  each key's domains get a verdict (the first failing check, ranked in kube-scheduler's
  order) and each node looks its domain up; a hostname's domains are its nodes, looked up
  in place. Passes over all nodes are branch-free, so that LLVM vectorises them.
- Scores over the feasible nodes only, listed once: their inputs gathered into contiguous
  arrays, the arithmetic over those arrays (where it vectorises; a loop that gathers does
  not).
- No integer division per node: ``x // d`` by a positive ``d`` known per node or
  per pod is a multiplication by ``1 / d`` and one exact correction. Negative maxima (raw
  scores the framework never sends) take a general path.
- Memory: scratch arrays live in a per-thread workspace and the output arrays are recycled
  once nobody holds them (allocating them for every call cost more than the kernel); why each
  node failed (``detail``) is written only for the pods no node fits.

Exactness: integers stay int64 and ``//`` floors like Python's (exact while 100 times an
allocatable fits in an int64); the tie-break hash is uint64 throughout (a uint64 mixed with a
signed integer becomes a float in numba); floats follow the reference's operation order (no
fastmath, no fused multiply-add), and numba's ``math.log`` is the C library's, as CPython's is.

The modules, in the order a batch goes through them (every one named ``compiled_*``, which the
cache stamp of ``compiled_jit`` relies on):

- ``compiled`` (this one): ``run``, ``check``, ``warm_up``, ``tiny`` and the workspace;
- ``compiled_checks``: the input checked against the contract, in numba and in words;
- ``compiled_batch``: the loop over the pods of a batch, and the placements;
- ``compiled_aggregates``: the per-domain counts the batch shares;
- ``compiled_filters``, ``compiled_scores``, ``compiled_selection``: the passes it runs
  (filters, scores, then totals and the best nodes);
- ``compiled_jit``: how all of them are compiled and cached, and what they share.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import numpy as np

# compiled_jit, which every compiled_* module imports first, configures numba's cache directory
# before numba is imported (see numbacache).
from plumb.kernel import (
    compiled_batch,
    compiled_checks,
    compiled_jit,
    compiled_selection,
    reference,
)
from plumb.kernel import contract as c

check = compiled_checks.check
# The compiled entry point and the tie-break hash, which the tests call directly.
_run = compiled_batch.decide
_tie = compiled_selection.tie_break


def run(cluster: c.Cluster, batch: c.Batch) -> c.Result:
    """Decide a batch of pods: the same contract and results as ``reference.run``.

    Raises ValueError for arrays of the wrong shape or indices out of range: the compiled code
    follows them without bounds checks.
    """
    nodes, pods = int(cluster.name_hashes.shape[0]), batch.size
    chosen = np.full(pods, -1, dtype=np.int32)
    code, detail, total, dirty = _OUTPUTS.arrays(pods, nodes)
    feasible = np.zeros(pods, dtype=np.int32)
    top = np.full((pods, c.TOP), -1, dtype=np.int32)
    top_scores = np.zeros((pods, c.TOP, compiled_jit.PLUGINS), dtype=np.int64)
    hinted = np.zeros(pods, dtype=np.bool_)
    outcome = compiled_batch.decide(
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
        _array(batch.static_row, np.int32),
        _array(batch.static_code, np.int32),
        _array(batch.taint_raw, np.int64),
        _array(batch.node_affinity_raw, np.int64),
        _array(batch.image_score, np.int64),
        _array(batch.volume_score, np.int64),
        _array(batch.dra_raw, np.int64),
        (_array(batch.extension_score, np.int64), bool(batch.extension_scored)),
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
        _array(batch.continues, np.bool_),
        int(batch.fit_strategy),
        _array(batch.zone_score, np.int64),
        bool(batch.fit_filter),
        (
            _array(batch.fit_columns, np.int32),
            _array(batch.fit_weights, np.int64),
            _array(batch.fit_nonzero, np.int32),
            _array(batch.fit_optional, np.bool_),
            _array(batch.fit_shape_utilization, np.int64),
            _array(batch.fit_shape_score, np.int64),
        ),
        (
            _array(batch.balanced_columns, np.int32),
            _array(batch.balanced_optional, np.bool_),
            bool(batch.balanced_change),
        ),
        chosen,
        code,
        detail,
        total,
        feasible,
        top,
        top_scores,
        hinted,
        dirty,
        *_WORKSPACE.arrays(nodes, cluster.allocatable.shape[0], cluster.domain_counts),
    )
    if outcome == compiled_batch.INVALID:
        compiled_checks.check(cluster, batch)  # names the problem
        raise ValueError("kernel input does not meet the contract")
    if outcome == compiled_batch.INEXACT:
        return reference.run(cluster, batch)  # exact, slowly: see compiled_batch.EXACT
    return c.Result(
        chosen=chosen,
        code=code,
        detail=detail,
        total=total,
        feasible=feasible,
        top=top,
        top_scores=top_scores,
        hinted=hinted,
    )


class _Workspace(threading.local):
    """Scratch arrays kept between calls, per thread: allocating them afresh every call cost
    more than the kernel (page faults on memory the allocator had just given back). Their
    layout is ``compiled_batch.decide``'s."""

    def __init__(self) -> None:
        self._key: tuple[int, int] | None = None
        self._arrays: tuple[Any, ...] = ()
        self._seen: Any = np.empty(1, dtype=np.bool_)

    def arrays(self, nodes: int, resources: int, domain_counts: Any) -> tuple[Any, ...]:
        if (nodes, resources) != self._key:
            self._arrays = (
                np.empty((resources + 17, nodes), dtype=np.int64),
                np.empty((2, nodes), dtype=np.int32),
                np.empty((5, nodes), dtype=np.float64),
                np.empty((3, nodes), dtype=np.bool_),
            )
            self._key = (nodes, resources)
        # A flag per domain of any key, plus the "" domain of nodes without the label.
        width = int(np.max(domain_counts)) + 1 if domain_counts.size else 1
        if self._seen.shape[0] < width:
            self._seen = np.empty(width, dtype=np.bool_)
        return (*self._arrays, self._seen)


_WORKSPACE = _Workspace()


class _Outputs(threading.local):
    """The (pods, nodes) output arrays, recycled once nobody holds them any more.

    Fresh arrays of that size cost more than the kernel: the allocator maps new pages for them
    and every first write to a page faults (docs/performance.md#the-kernel). So a
    few sets are kept per thread and handed out again when the set's reference count shows
    that no result, view or slice of them is alive (numpy's views and slices hold a reference
    to the array that owns the memory); otherwise the kernel gets a fresh set. The kernel
    writes every element of ``code`` and ``total``; ``detail`` only for the pods no node fits,
    so each set carries which of its detail rows are not all zeros (``dirty``), for the kernel
    to clear, and a fresh one starts as zeros.
    """

    KEPT = 4

    def __init__(self) -> None:
        self._sets: list[tuple[Any, Any, Any, Any]] = []

    def arrays(self, pods: int, nodes: int) -> tuple[Any, Any, Any, Any]:
        for kept in self._sets:
            if kept[0].shape == (pods, nodes) and _unreferenced(kept):
                return kept
        fresh = (
            np.empty((pods, nodes), dtype=np.int8),
            np.zeros((pods, nodes), dtype=np.int64),  # untouched zero pages cost nothing
            np.empty((pods, nodes), dtype=np.int64),
            np.zeros(pods, dtype=np.bool_),
        )
        if len(self._sets) < self.KEPT:
            self._sets.append(fresh)
        else:
            for i, kept in enumerate(self._sets):
                if _unreferenced(kept):
                    self._sets[i] = fresh  # another shape: the oldest unused set makes room
                    break
        return fresh


def _unreferenced(arrays: tuple[Any, ...]) -> bool:
    """Whether only the pool holds these arrays (its tuple, this loop and getrefcount's own
    argument make three references)."""
    return all(sys.getrefcount(array) <= 3 for array in arrays)


_OUTPUTS = _Outputs()


def _array(values: Any, dtype: Any) -> Any:
    """C-contiguous, writeable and of the dtype of the compiled signature: an array of another
    layout, dtype or read-only flag would compile another signature (seconds) on its first
    use. No copy when it is all that already, the usual case."""
    flags = values.flags
    if values.dtype == dtype and flags.c_contiguous and flags.writeable:
        return values
    return np.array(values, dtype=dtype, order="C")  # a copy: writeable


_first_warm_up: list[float] = []  # the seconds the process's first warm_up took


def warm_up() -> float:
    """Compile (or load from the cache) every variant of the kernel on a tiny input, so that
    no pod waits for it; the seconds the process's first call took (the load; a later call
    only runs the tiny batch again)."""
    started = time.monotonic()
    run(*tiny())
    if not _first_warm_up:
        _first_warm_up.append(time.monotonic() - started)
    return _first_warm_up[0]


def tiny() -> tuple[c.Cluster, c.Batch]:
    """Two nodes in two zones and two pods with every kind of constraint between them, the
    second with negative raw taint scores (the general path), and the Python score plugins'
    scores, to exercise every variant."""
    i32, i64, b1 = np.int32, np.int64, np.bool_
    cluster = c.Cluster(
        allocatable=np.array([[4000, 4000], [8 << 30, 8 << 30], [110, 110]], dtype=i64),
        requested=np.zeros((3, 2), dtype=i64),
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
        static_row=np.array([0, 1], dtype=i32),
        static_code=np.zeros((2, 2), dtype=i32),
        taint_raw=np.array([[0, 1], [-1, -2]], dtype=i64),
        node_affinity_raw=np.zeros((2, 2), dtype=i64),
        image_score=np.array([[0, 40], [7, 0]], dtype=i64),
        volume_score=np.array([[50, 0], [0, 95]], dtype=i64),
        dra_raw=np.array([[0, 3], [0, 0]], dtype=i64),
        extension_score=np.array([[0, -7], [250, 0]], dtype=i64),
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
        weights=np.array([1, 1, 3, 2, 2, 2, 1, 1, 1, 2], dtype=i64),
        balanced_skip=np.zeros(2, dtype=b1),
        continues=np.array([False, True]),
        fit_strategy=c.LEAST_ALLOCATED,
        zone_score=np.array([100, 14], dtype=i64),
        **c.default_resources(cluster.cpu_column, cluster.memory_column),
        extension_scored=True,
    )
    return cluster, batch
