"""The Python plugins' verdicts on one pod over every node: PreFilter, Filter and Score.

``judge`` calls each enabled plugin once for the pod with the snapshot's ``NodeView`` and
checks what it answers: a Filter's rejections must be boolean arrays of one per node, a Score
an integer array of one per node within its normalisation's range. A plugin that raises or
answers in the wrong shape ends the pod's attempt with an error in kube-scheduler's words for
that extension point ("running \"Name\" filter plugin: ..."); the timing out of a call is the
caller's to see (extensions/calls.py), since a call that never returns cannot be judged here.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from plumb.backend.cache import snapshot
from plumb.backend.records import objects
from plumb.extensions import enabling, interface

MAX_SCORE = 100
_R = TypeVar("_R")

# Why a call failed, as the failures metric labels it.
RAISED, MALFORMED, TIMED_OUT, BUSY = "raised", "malformed", "timeout", "busy"


@dataclasses.dataclass(frozen=True, slots=True)
class Rejected:
    """One Filter rejection: the plugin, the nodes, the reason."""

    plugin: str
    fails: interface.Bools
    reason: str
    unresolvable: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class PluginFailure:
    """A plugin that failed for this pod: the message FailedScheduling gives (reason
    SchedulerError), the extension point, and why (RAISED, MALFORMED, TIMED_OUT, BUSY)."""

    plugin: str
    point: str
    message: str
    why: str


@dataclasses.dataclass(frozen=True, slots=True)
class Judgement:
    """What the plugins said of one pod: refused before any node (``refused``: PreFilter's
    status), failed (``failure``), or each Filter's rejections and each Score's raw scores
    (in the profile's order), and the seconds each call took, by (plugin, point).
    ``extender_score``: the HTTP extenders' prioritize total per node, already weighed
    (score * weight * 10), added to each feasible node's total as it is (None: none); their
    filters' verdicts come as rejections of plugin "Extender" (scheduler/extendercycle.py)."""

    nodes: tuple[str, ...] = ()  # the nodes judged, in the order of every array here
    refused: tuple[str, interface.Status] | None = None
    failure: PluginFailure | None = None
    rejections: tuple[Rejected, ...] = ()
    scores: Mapping[str, interface.Ints] = dataclasses.field(default_factory=dict)
    seconds: Mapping[tuple[str, str], float] = dataclasses.field(default_factory=dict)
    extender_score: interface.Ints | None = None


def pod_view(pod: objects.PodInfo) -> interface.PodView:
    """The pod as a plugin sees it."""
    return interface.PodView(
        namespace=pod.namespace,
        name=pod.name,
        uid=pod.uid,
        labels=pod.labels,
        requests=pod.requests,
        priority=pod.priority,
        scheduler_name=pod.scheduler_name,
    )


def node_view(snap: snapshot.Snapshot, now: float) -> interface.NodeView:
    """Every node of the snapshot as read-only columns, each built on first use."""
    statics = snap.statics
    columns: dict[tuple[str, str], Any] = {}

    def kept(kind: str, key: str, build: Callable[[], Any]) -> Any:
        found = columns.get((kind, key))
        if found is None:
            found = build()
            found.flags.writeable = False
            columns[(kind, key)] = found
        return found

    def resource(table: Any, name: str) -> Any:
        if name not in snap.resources:
            return np.zeros(len(statics), dtype=np.int64)
        return np.ascontiguousarray(table[:, snap.resources.index(name)], dtype=np.int64)

    def tainted(key: str) -> Any:
        return np.array(
            [any(t.key == key for t in node.taints) for node in statics.nodes], dtype=np.bool_
        )

    return interface.NodeView(
        statics.names,
        now=now,
        # Kept on the statics, which outlive the cycle while the nodes do not change.
        labels=statics.label_texts,
        label_ids=lambda key: (statics.label_ids(key), statics.values(key)),
        annotations=statics.annotation_texts,
        allocatable=lambda name: kept(
            "allocatable", name, lambda: resource(snap.allocatable, name)
        ),
        requested=lambda name: kept("requested", name, lambda: resource(snap.requested, name)),
        taints=lambda key: kept("taint", key, lambda: tainted(key)),
    )


Plugins = Sequence[tuple[enabling.Enabled, interface.Plugin]]


def judge(
    pod: interface.PodView,
    nodes: interface.NodeView,
    plugins: Plugins,
    calling: Callable[[str, str], None] = lambda plugin, point: None,
    *,
    watched: bool = False,
    checked: CheckedAnswers | None = None,
) -> Judgement:
    """Each plugin's PreFilter, then Filter, then Score for ``pod`` (``calling`` is told of
    each call before it is made: the caller's watch for calls that do not return). When
    ``watched``, a call that answers after its plugin's timeout fails the pod. ``checked``:
    the cycle's answers already checked (a plugin handing every pod the same array is checked
    once)."""
    seconds: dict[tuple[str, str], float] = {}
    memo = checked if checked is not None else CheckedAnswers()
    names = nodes.names
    count = len(names)
    for enabled, plugin in plugins:
        if interface.PRE_FILTER in enabled.points:
            status = _call(
                enabled, plugin, interface.PRE_FILTER, pod, nodes, calling, seconds, watched
            )
            if isinstance(status, PluginFailure):
                return Judgement(nodes=names, failure=status, seconds=seconds)
            if status is not None:
                if not isinstance(status, interface.Status):
                    wrong = _shape(status, "a Status or None")
                    failure = _failed(enabled, interface.PRE_FILTER, wrong, MALFORMED)
                    return Judgement(nodes=names, failure=failure, seconds=seconds)
                return Judgement(nodes=names, refused=(enabled.name, status), seconds=seconds)
    rejections: list[Rejected] = []
    for enabled, plugin in plugins:
        if interface.FILTER not in enabled.points:
            continue
        answer = _call(enabled, plugin, interface.FILTER, pod, nodes, calling, seconds, watched)
        if isinstance(answer, PluginFailure):
            return Judgement(nodes=names, failure=answer, seconds=seconds)
        found = memo.seen(enabled.name, answer)
        if found is None:
            found = memo.keep(enabled.name, answer, _rejections(enabled.name, answer, count))
        if isinstance(found, str):
            failure = _failed(enabled, interface.FILTER, found, MALFORMED)
            return Judgement(nodes=names, failure=failure, seconds=seconds)
        rejections.extend(found)
    scores: dict[str, interface.Ints] = {}
    for enabled, plugin in plugins:
        if interface.SCORE not in enabled.points or enabled.weight == 0:
            continue
        answer = _call(enabled, plugin, interface.SCORE, pod, nodes, calling, seconds, watched)
        if isinstance(answer, PluginFailure):
            return Judgement(nodes=names, failure=answer, seconds=seconds)
        checked_scores = memo.seen(enabled.name, answer)
        if checked_scores is None:
            checked_scores = memo.keep(
                enabled.name, answer, _checked_scores(answer, count, enabled.normalize)
            )
        raw, out_of_range = checked_scores
        if isinstance(raw, str):
            failure = _failed(enabled, interface.SCORE, raw, MALFORMED)
            return Judgement(nodes=names, failure=failure, seconds=seconds)
        if out_of_range is not None:
            message = _INVALID_SCORE.format(name=enabled.name, score=out_of_range)
            failure = PluginFailure(enabled.name, interface.SCORE, message, MALFORMED)
            return Judgement(nodes=names, failure=failure, seconds=seconds)
        scores[enabled.name] = raw
    return Judgement(nodes=names, rejections=tuple(rejections), scores=scores, seconds=seconds)


def _call(
    enabled: enabling.Enabled,
    plugin: interface.Plugin,
    point: str,
    pod: interface.PodView,
    nodes: interface.NodeView,
    calling: Callable[[str, str], None],
    seconds: dict[tuple[str, str], float],
    watched: bool,
) -> Any:
    """The plugin's answer at ``point``, or the PluginFailure that ends the pod's attempt;
    its time in ``seconds``."""
    calling(enabled.name, point)
    started = time.perf_counter()
    try:
        answer = getattr(plugin, interface.METHODS[point])(pod, nodes)
    except Exception as error:
        return _failed(enabled, point, _said(error), RAISED)
    finally:
        took = time.perf_counter() - started
        seconds[(enabled.name, point)] = took
    if watched and took > enabled.timeout:
        return _failed(enabled, point, late(enabled.timeout), TIMED_OUT)
    return answer


def _failed(enabled: enabling.Enabled, point: str, error: str, why: str) -> PluginFailure:
    return PluginFailure(enabled.name, point, error_words(point, enabled.name, error), why)


class CheckedAnswers:
    """The answers of one cycle already checked, by plugin and identity: each kept alive with
    what checking it gave, so an identity cannot be reused by another array meanwhile."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int], tuple[object, Any]] = {}

    def seen(self, plugin: str, answer: object) -> Any:
        """What checking ``answer`` gave, None when it was not checked yet."""
        found = self._seen.get((plugin, id(answer)))
        return None if found is None else found[1]

    def keep(self, plugin: str, answer: object, result: _R) -> _R:
        """Keep what checking ``answer`` gave (and the answer, alive); returns ``result``."""
        self._seen[(plugin, id(answer))] = (answer, result)
        return result


def _checked_scores(answer: Any, count: int, how: str) -> tuple[interface.Ints | str, int | None]:
    """A Score's answer as int64 per node (or what is wrong with it), and a score that cannot
    be normalised into 0-100 (None when none)."""
    raw = _scores(answer, count)
    return raw, (None if isinstance(raw, str) else _out_of_range(raw, how))


def normalised(raw: interface.Ints, how: str, passing: interface.Bools) -> interface.Ints:
    """A plugin's raw scores as 0-100 (DefaultNormalizeScore over the nodes ``passing`` every
    filter): as they are, or scaled by the highest (reversed: the lowest raw is 100)."""
    if how == interface.AS_IS:
        return raw
    highest = int(raw[passing].max()) if passing.any() else 0
    if highest == 0:
        scaled = np.zeros_like(raw)
        return np.full_like(raw, MAX_SCORE) if how == interface.REVERSED else scaled
    scaled = raw * MAX_SCORE // highest
    return MAX_SCORE - scaled if how == interface.REVERSED else scaled


# kube-scheduler's words for a plugin's error at each point (framework/runtime/framework.go).
_ERROR_WORDS = {
    interface.PRE_FILTER: 'running PreFilter plugin "{name}": {error}',
    interface.FILTER: 'running "{name}" filter plugin: {error}',
    interface.SCORE: 'running Score plugins: plugin "{name}" failed with: {error}',
    interface.RESERVE: 'running Reserve plugin "{name}": {error}',
    interface.PERMIT: 'running Permit plugin "{name}": {error}',
    interface.PRE_BIND: 'running PreBind plugin "{name}": {error}',
    interface.POST_BIND: 'running PostBind plugin "{name}": {error}',
}
_INVALID_SCORE = (
    'applying score defaultWeights on Score plugins: plugin "{name}" returns an invalid score '
    "{score}, it should in the range of [0, 100] after normalizing"
)


def error_words(point: str, name: str, error: str) -> str:
    """kube-scheduler's message for plugin ``name`` failing at ``point`` with ``error``."""
    return _ERROR_WORDS[point].format(name=name, error=error)


def late(timeout: float) -> str:
    """A call's error when it did not answer within ``timeout`` seconds."""
    return f"did not answer within {timeout:g}s"


def first_point(enabled: enabling.Enabled) -> str:
    """The first extension point at which the plugin judges a pod over the nodes."""
    return next(
        p for p in (interface.PRE_FILTER, interface.FILTER, interface.SCORE) if enabled.runs(p)
    )


def _said(error: Exception) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _shape(answer: Any, wanted: str) -> str:
    return f"answered {type(answer).__name__}, not {wanted}"


def _rejections(name: str, answer: Any, count: int) -> list[Rejected] | str:
    """A Filter's answer as rejections, or what is wrong with it."""
    if answer is None:
        return []
    items = [answer] if isinstance(answer, interface.FilterRejection) else answer
    if not isinstance(items, list | tuple):
        return _shape(answer, "a FilterRejection, a list of them or None")
    found = []
    for item in items:
        if not isinstance(item, interface.FilterRejection):
            return _shape(item, "a FilterRejection")
        fails = np.asarray(item.fails)
        if fails.dtype != np.bool_ or fails.shape != (count,):
            return (
                f"a FilterRejection's fails is {fails.dtype}{list(fails.shape)}, "
                f"not one boolean per node (bool[{count}])"
            )
        if not isinstance(item.reason, str) or not item.reason:
            return "a FilterRejection has no reason"
        found.append(Rejected(name, fails, item.reason, bool(item.unresolvable)))
    return found


def _scores(answer: Any, count: int) -> interface.Ints | str:
    """A Score's answer as int64 per node, or what is wrong with it."""
    array = np.asarray(answer) if isinstance(answer, np.ndarray | list | tuple) else None
    if array is None:
        return _shape(answer, "an array of one integer per node")
    if array.shape != (count,) or not np.issubdtype(array.dtype, np.integer):
        return (
            f"scores are {array.dtype}{list(array.shape)}, not one integer per node (int[{count}])"
        )
    return array.astype(np.int64, copy=False)


def _out_of_range(raw: interface.Ints, how: str) -> int | None:
    """A score that cannot be 0-100 once normalised (any negative; above 100 as is)."""
    if raw.size == 0:
        return None
    low, high = int(raw.min()), int(raw.max())
    if low < 0:
        return low
    if how == interface.AS_IS and high > MAX_SCORE:
        return high
    return None
