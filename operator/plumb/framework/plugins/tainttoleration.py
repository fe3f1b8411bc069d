"""TaintToleration: a node's NoSchedule and NoExecute taints must all be tolerated (filter), and
nodes with fewer untolerated PreferNoSchedule taints are preferred (score, weight 3).

A toleration matches a taint as core/v1 ``ToleratesTaint`` does (``specs.Toleration``): an empty
effect matches every effect, an empty key with ``Exists`` every key, ``Exists`` any value and
``Equal`` only the same value. The per-taint tests run over the statics' distinct taints as string
columns, so a pod costs a few numpy comparisons per toleration whatever the number of nodes.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from plumb.backend.cache import snapshot
from plumb.backend.records import objects, specs

NAME = "TaintToleration"
SCORE_WEIGHT = 3
# DefaultNormalizeScore with reverse=true: the node with the most untolerated
# PreferNoSchedule taints scores 0, nodes with none score 100.
SCORE_REVERSED = True
# A taint is the node owner's word: evicting pods does not lift it, so preemption cannot help.
UNRESOLVABLE = True
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_TAINT = -1
# v1.34 names no taint in the reason (the values can be sensitive); seen from the real
# kube-scheduler v1.34.4 in tests/integration/test_plugin_parity.py.
UNTOLERATED = "node(s) had untolerated taint(s)"

_NOWHERE = np.iinfo(np.int32).max  # position of a taint a node does not carry


@dataclasses.dataclass(frozen=True, kw_only=True)
class _TaintColumns:
    """The statics' distinct taints as columns, and where each node lists each of them."""

    keys: npt.NDArray[np.str_]
    values: npt.NDArray[np.str_]
    effects: npt.NDArray[np.str_]
    blocking: snapshot.BoolArray
    prefer: snapshot.BoolArray
    # (nodes x distinct taints): index of the taint in the node's own list, _NOWHERE if absent;
    # kube-scheduler reports the first untolerated taint in that order.
    position: snapshot.Int32Array


# One entry per NodeStatics alive; it goes with the statics at the next node change.
_columns_cache: weakref.WeakKeyDictionary[snapshot.NodeStatics, _TaintColumns] = (
    weakref.WeakKeyDictionary()
)


def _strings(texts: Sequence[str]) -> npt.NDArray[np.str_]:
    # An explicit dtype keeps an empty column a string array, so comparisons stay elementwise.
    return np.array(texts, dtype=np.str_) if texts else np.array([], dtype="<U1")


def _columns(statics: snapshot.NodeStatics) -> _TaintColumns:
    columns = _columns_cache.get(statics)
    if columns is not None:
        return columns
    taints = statics.distinct_taints
    column = {taint: j for j, taint in enumerate(taints)}
    position = np.full((len(statics), len(taints)), _NOWHERE, dtype=np.int32)
    for i, node in enumerate(statics.nodes):
        # reversed: should a taint repeat (the API server forbids it), the first place wins.
        for place, taint in reversed(list(enumerate(node.taints))):
            position[i, column[taint]] = place
    effects = _strings([t.effect for t in taints])
    position.flags.writeable = False
    columns = _TaintColumns(
        keys=_strings([t.key for t in taints]),
        values=_strings([t.value for t in taints]),
        effects=effects,
        blocking=np.isin(effects, BLOCKING_EFFECTS),
        prefer=effects == PREFER_NO_SCHEDULE,
        position=position,
    )
    _columns_cache[statics] = columns
    return columns


def _tolerated(
    tolerations: Sequence[specs.Toleration], columns: _TaintColumns
) -> snapshot.BoolArray:
    """Per distinct taint: whether any of the tolerations tolerates it (Toleration.tolerates)."""
    tolerated = np.zeros(columns.keys.shape, dtype=np.bool_)
    for toleration in tolerations:
        match = np.ones(columns.keys.shape, dtype=np.bool_)
        if toleration.effect:
            match &= columns.effects == toleration.effect
        if toleration.key:
            match &= columns.keys == toleration.key
        if toleration.operator != "Exists":
            match &= columns.values == toleration.value
        tolerated |= match
    return tolerated


def filter(
    pod: objects.PodInfo, statics: snapshot.NodeStatics
) -> tuple[snapshot.BoolArray, snapshot.Int32Array]:
    """Nodes with an untolerated NoSchedule or NoExecute taint, and which taint to name.

    Returns ``(fails, first)``: ``first[i]`` indexes ``statics.distinct_taints`` with the first
    such taint in node i's own taint order (what kube-scheduler's reason names), or NO_TAINT.
    """
    n = len(statics)
    columns = _columns(statics)
    untolerated = columns.blocking & ~_tolerated(pod.scheduling.tolerations, columns)
    if not untolerated.any():
        return np.zeros(n, dtype=np.bool_), np.full(n, NO_TAINT, dtype=np.int32)
    candidates = np.flatnonzero(untolerated).astype(np.int32)
    if len(candidates) == 1:  # the usual case: one taint the pod does not tolerate
        fails = statics.taint_matrix[:, candidates[0]].copy()
        return fails, np.where(fails, candidates[0], np.int32(NO_TAINT))
    places = columns.position[:, candidates]
    earliest = places.argmin(axis=1)
    fails = places[np.arange(n), earliest] != _NOWHERE
    return fails, np.where(fails, candidates[earliest], np.int32(NO_TAINT))


def score_raw(pod: objects.PodInfo, statics: snapshot.NodeStatics) -> snapshot.Int64Array:
    """Per node: how many PreferNoSchedule taints the pod does not tolerate (fewer is better)."""
    columns = _columns(statics)
    untolerated = columns.prefer & ~_tolerated(pod.scheduling.tolerations, columns)
    if not untolerated.any():
        return np.zeros(len(statics), dtype=np.int64)
    counted: snapshot.Int64Array = statics.taint_matrix[:, untolerated].sum(axis=1, dtype=np.int64)
    return counted
