"""What a Python scheduling plugin is given and what it answers: plumb's public plugin interface.

A plugin is a subclass of ``Plugin`` that an installed distribution names in the entry point
group ``plumb.plugins`` (``name = "package.module:Class"``). A profile of the
KubeSchedulerConfiguration enables it by its ``name`` as it enables a built-in plugin
(``plugins.filter.enabled``, ``plugins.score.enabled`` with a weight, ``plugins.multiPoint``);
``pluginConfig`` gives its arguments, decoded into its ``Args`` dataclass.

It implements any of these methods; the ones it defines are its extension points:

- ``pre_filter(pod, nodes) -> Status | None``: reject the pod before any node is looked at.
- ``filter(pod, nodes) -> FilterRejection | Sequence[FilterRejection] | None``: the nodes it
  rejects, each with its reason (the first rejection that names a node is that node's),
  checked after every built-in filter.
- ``score(pod, nodes) -> array``: an integer per node; 0 to 100 as it is, or normalised over
  the nodes every filter passed as ``normalize`` says; the profile's weight multiplies it.
- ``reserve(pod, node) -> Status | None`` and ``unreserve(pod, node)``; ``permit(pod, node) ->
  Status | None``; ``async pre_bind(pod, node) -> Status | None``; ``async post_bind(pod,
  node)``: as kube-scheduler's points of the same names, one pod and its chosen node.

Each is called once per pod (never per node) with ``nodes``, a read-only ``NodeView`` over every
node of the cycle's snapshot, in name order. A method that raises, answers late (``timeout``) or
answers in the wrong shape fails the attempt of the pod it judged, with its reason; the other
pods, and the loop, go on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import numpy as np
import numpy.typing as npt

_T = TypeVar("_T")

Strings = npt.NDArray[np.object_]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

# Extension points, named as kube-scheduler names them (its metrics' extension_point label).
PRE_FILTER, FILTER, SCORE = "PreFilter", "Filter", "Score"
RESERVE, PERMIT, PRE_BIND, POST_BIND = "Reserve", "Permit", "PreBind", "PostBind"
METHODS = {
    PRE_FILTER: "pre_filter",
    FILTER: "filter",
    SCORE: "score",
    RESERVE: "reserve",
    PERMIT: "permit",
    PRE_BIND: "pre_bind",
    POST_BIND: "post_bind",
}
"""Each extension point and the method that implements it (``unreserve`` goes with Reserve)."""

# How a score is normalised (Plugin.normalize): kube-scheduler's DefaultNormalizeScore.
AS_IS = "AsIs"  # the plugin's scores are already 0-100
HIGHEST = "Highest"  # score * 100 // the highest score of the nodes the filters passed
REVERSED = "Reversed"  # 100 - that: the lowest raw score is the best
NORMALIZATIONS = (AS_IS, HIGHEST, REVERSED)

# Cluster events after which a pod the plugin rejected may fit (Plugin.events).
NODE_ADDED, NODE_CHANGED, POD_DELETED, POD_ADDED = (
    "NodeAdded",
    "NodeChanged",
    "PodDeleted",
    "PodAdded",
)
EVENTS = (NODE_ADDED, NODE_CHANGED, POD_DELETED, POD_ADDED)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PodView:
    """The pod being scheduled: ``requests`` is its effective request per resource (cpu in
    millicores, everything else in its base unit, as the scheduler counts it)."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    requests: Mapping[str, int]
    priority: int
    scheduler_name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class NodeView:
    """Every node of the snapshot, in name order, as read-only columns (numpy arrays of N).

    ``requested`` counts the pods bound or assumed when the snapshot was taken; pods placed
    earlier in the same batch are not in it unless the plugin says ``batch_dependent`` (its
    pods are then decided one per batch). ``now`` is the cycle's clock (seconds since the
    epoch): a plugin that reads the time reads it here, so a replay decides as the cycle did.

    One view serves every pod of a cycle: ``kept(key, build)`` keeps what depends on the nodes
    alone (a mask, a parsed label) for the next pods, and returning the very array kept lets
    pods of one spec share the verdict plumb works out from it (their static row).
    """

    def __init__(
        self,
        names: tuple[str, ...],
        *,
        now: float,
        labels: Callable[[str], Strings],
        annotations: Callable[[str], Strings],
        allocatable: Callable[[str], Ints],
        requested: Callable[[str], Ints],
        taints: Callable[[str], Bools],
        label_ids: Callable[[str], tuple[npt.NDArray[np.int32], tuple[str, ...]]] | None = None,
    ) -> None:
        self.names = names
        self.now = now
        self._labels = labels
        self._label_ids = label_ids if label_ids is not None else self._factorised
        self._annotations = annotations
        self._allocatable = allocatable
        self._requested = requested
        self._taints = taints
        self._kept: dict[object, object] = {}

    def kept(self, key: object, build: Callable[[], _T]) -> _T:
        """``build()``, called once per view (per cycle) for ``key``; later calls get the
        same object. Keys are the plugin's own (include its name to keep them apart)."""
        if key not in self._kept:
            self._kept[key] = build()
        return self._kept[key]  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self.names)

    def label(self, key: str) -> Strings:
        """Each node's value of label ``key``; "" where the node lacks it."""
        return self._labels(key)

    def label_ids(self, key: str) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
        """Label ``key`` factorised: each node's index into the distinct values (-1 where the
        node lacks it), and those values. Work on each distinct value once, then spread the
        results with ``results[ids]`` (a result for -1 appended last)."""
        return self._label_ids(key)

    def _factorised(self, key: str) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
        column = self.label(key)
        present = column != ""
        values, inverse = np.unique(column[present], return_inverse=True)
        ids = np.full(len(column), -1, dtype=np.int32)
        ids[present] = inverse.reshape(-1)
        return ids, tuple(str(v) for v in values)

    def annotation(self, key: str) -> Strings:
        """Each node's value of annotation ``key`` ("" where it lacks it)."""
        return self._annotations(key)

    def allocatable(self, resource: str) -> Ints:
        """What each node offers of ``resource`` (cpu in millicores), 0 where none."""
        return self._allocatable(resource)

    def requested(self, resource: str) -> Ints:
        """What the pods on each node request of ``resource``."""
        return self._requested(resource)

    def tainted(self, key: str) -> Bools:
        """Where the node carries a taint with this key (any value, any effect)."""
        return self._taints(key)


@dataclasses.dataclass(frozen=True, slots=True)
class FilterRejection:
    """The nodes a Filter rejects (``fails``: a boolean per node) for one ``reason``, in the
    words FailedScheduling counts ("3 <reason>"). ``unresolvable``: no preemption on such a
    node could help (kube-scheduler's UnschedulableAndUnresolvable)."""

    fails: Bools
    reason: str
    unresolvable: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Status:
    """A pod refused at a point that judges the pod, not a node (PreFilter, Reserve, Permit,
    PreBind), for this ``reason``."""

    reason: str
    unresolvable: bool = False


class Plugin:
    """The base of a plugin. A subclass sets ``name`` and defines its extension points'
    methods (the module docstring lists them); ``Args``, a frozen dataclass, receives its
    ``pluginConfig`` arguments, validated field by field (its ``__post_init__`` may raise
    ValueError for a rule of its own); the instance finds them in ``self.args``.

    - ``node_annotations``: the node annotations it reads (``NodeView.annotation``), for a
      person reading ``plumb plugins``; the cache keeps every node annotation.
    - ``normalize``: how its scores become 0-100 (AS_IS, HIGHEST, REVERSED).
    - ``batch_dependent``: its verdict on a pod depends on where earlier pods of the same batch
      went (beyond ``requested``): its pods are decided one per batch.
    - ``timeout``: seconds one call may take; a later answer fails the pod's attempt.
    - ``events``: after which cluster events a pod it rejected is tried again (EVENTS);
      empty: after any.
    - ``version``: recorded with every decision it took part in; by default its
      distribution's version.
    """

    name: ClassVar[str] = ""
    version: ClassVar[str] = ""
    Args: ClassVar[type[Any] | None] = None
    node_annotations: ClassVar[tuple[str, ...]] = ()
    normalize: ClassVar[str] = AS_IS
    batch_dependent: ClassVar[bool] = False
    timeout: ClassVar[float] = 1.0
    events: ClassVar[tuple[str, ...]] = ()

    def __init__(self, args: Any = None) -> None:
        self.args = args
