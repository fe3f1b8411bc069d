"""The Python plugins' micro-benchmark: µs per pod of calling the installed example plugins
through plumb's own path over every node, and how many calls each gets.

``kerneltimings`` runs it, in its child process and after the kernel's timings, for a size with
the Python plugins' score (``NODES:PODS:REFERENCE_PODS:extension``), over the size's nodes and
pods in cycles of the size's batch; ``python -m plumb_dev.bench.plugintimings --nodes 5000
--pods 256`` runs it alone and prints a JSON object per plugin.

The cluster: ``nodes`` node bodies made with the test builders (``make_node``), read by
``objects.parse_node`` into a real ``Cache``; its snapshot is what the plugins see. The nodes
come in five zones and four sizes; each carries an hourly price in the label
``plumb.io/hourly-price`` (by size and zone, twenty distinct values), but every 50th none
(PriceLabel gives it the highest price); every 10th node carries the annotation
``plumb.io/maintenance-window``, half of them (every 20th) with a window open at the cycle's
clock ``NOW``, the others with one a week later (five distinct values of each). The pods:
``pods`` web replicas.

The plugins (``EXAMPLES``): PriceLabel at Score (weight 2) and MaintenanceWindow at Filter,
each found by ``registry.discover()``, enabled alone with ``enabling.enable`` and made by
``enabling.instance``, as a profile enables and makes it; an example not installed (or
installed with a problem) is reported as not measured (``version`` None), not a failure.
AcceleratorPacking, the third example, is not measured: it is batch-dependent (plumb decides its
pods one per batch) and these pods request no accelerator.

How it measures: pods are judged in cycles of ``cycle`` pods (the scheduler's batch), each
cycle with a NodeView (``judgements.node_view(snapshot, NOW)``) and a ``CheckedAnswers`` of its
own, as ``extensions/calls.py`` makes them per batch; a pod's call is
``judgements.judge(pod_view, view, plugins, checked=checked)``, timed alone with
``time.perf_counter``; the pod's ``judgements.pod_view(pod)``, which plumb makes once per pod
for all its plugins, is timed apart (``pod_view_us``, µs per pod on average). The first call of
a cycle (``first_us``, µs per cycle) counts the view and CheckedAnswers made too, and builds
what the cycle keeps (the nodes' label or annotation column, the plugin's kept arrays); the
other calls (``steady_us``, µs per pod on average) find them kept. An untimed run comes first:
it warms the plugins' per-process caches (parsed prices and windows, as in a scheduler that has
run a while), and in it each of the plugin's methods is wrapped with a counter: ``calls`` says
how often each was called over the ``pods`` pods (once per pod, not per node: calls == pods).
Every judgement of that run must end without a failure, PriceLabel must score every node and
MaintenanceWindow reject exactly the nodes in a window, or the benchmark fails
(``WrongJudgement``). Then ``repeats`` runs, garbage collection off, and each call counts at
its fastest over the runs (other processes share the CPUs).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import gc
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from plumb.backend.cache import clustercache, snapshot
from plumb.backend.records import objects
from plumb.extensions import enabling, interface, judgements, registry
from plumb.kernel import executor
from plumb_dev.testing.builders import make_node, make_pod

PRICE_LABEL = "plumb.io/hourly-price"
WINDOW_ANNOTATION = "plumb.io/maintenance-window"
NOW = datetime.datetime(2026, 6, 1, 12, tzinfo=datetime.UTC).timestamp()
"""The cycles' clock (NodeView.now), the same at every run."""
ZONES = 5
SIZE_PRICES = (0.192, 0.384, 0.768, 1.536)  # per hour, by node size
SCORE_WEIGHT = 2  # kerneltimings.EXTENSION_WEIGHT
WEB_REQUEST = {"cpu": "250m", "memory": "512Mi"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Example:
    """An example plugin as the benchmark enables it: its extension point and weight."""

    name: str
    point: str
    weight: int = 0


EXAMPLES = (
    Example(name="PriceLabel", point=interface.SCORE, weight=SCORE_WEIGHT),
    Example(name="MaintenanceWindow", point=interface.FILTER),
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CallTimings:
    """One example plugin's figures; ``version`` None when it is not installed (nothing else
    measured then). Times are each call's fastest of ``repeats`` runs."""

    plugin: str
    point: str
    version: str | None
    nodes: int
    pods: int
    cycle: int  # pods per cycle: one NodeView each
    repeats: int
    steady_us: float | None = None  # µs per pod: every call but a cycle's first, on average
    first_us: float | None = None  # µs per cycle: the view made and its first pod's call
    pod_view_us: float | None = None  # µs per pod: its PodView made, before the call (apart)
    calls: dict[str, int] = dataclasses.field(default_factory=dict)  # by method, over the pods


class WrongJudgement(AssertionError):
    """A plugin's judgement was not what the cluster makes it: a fast wrong call fails here."""


def node(i: int) -> objects.NodeInfo:
    """Node i: its zone, size, price and maintenance window repeat every few nodes."""
    zone, size = i % ZONES, (i // ZONES) % len(SIZE_PRICES)
    body = make_node(f"node-{i:05d}").zone(f"zone-{zone}")
    if i % 50 != 49:
        body = body.label(PRICE_LABEL, f"{SIZE_PRICES[size] * (1 + 0.02 * zone):.4f}")
    opens = (i // 20) % 5  # the hour a window opens: five values of each kind
    if in_window(i):
        body = body.annotate(WINDOW_ANNOTATION, f"2026-06-01T0{opens}:00:00Z/2026-06-01T15:00:00Z")
    elif i % 10 == 0:
        body = body.annotate(WINDOW_ANNOTATION, f"2026-06-08T0{opens}:00:00Z/2026-06-08T06:00:00Z")
    return objects.parse_node(body.obj())


def in_window(i: int) -> bool:
    """Whether node i's maintenance window is open at NOW (it opens at 00:00-04:00 UTC that day
    and closes at 15:00; the other annotated nodes' opens a week later)."""
    return i % 20 == 0


def cluster(nodes: int) -> snapshot.Snapshot:
    """The snapshot of a cache holding the first ``nodes`` nodes."""
    cache = clustercache.Cache()
    for i in range(nodes):
        cache.upsert_node(node(i))
    return cache.snapshot()


def web_pods(pods: int) -> list[objects.PodInfo]:
    return [
        objects.parse_pod(make_pod(f"web-{k}").uid(f"web-{k:05d}").req(**WEB_REQUEST).obj())
        for k in range(pods)
    ]


def measure(nodes: int, *, pods: int, cycle: int, repeats: int) -> list[CallTimings]:
    """Each example plugin's figures, called over ``nodes`` nodes for ``pods`` pods in cycles of
    ``cycle`` (see the module's doc)."""
    if nodes <= 0 or pods <= 0 or cycle <= 0 or repeats <= 0:
        raise ValueError(
            f"need nodes, pods, cycle and repeats > 0: got nodes={nodes}, pods={pods}, "
            f"cycle={cycle}, repeats={repeats}"
        )
    found = registry.discover().usable()
    snap, pod_infos = cluster(nodes), web_pods(pods)
    figures = []
    for example in EXAMPLES:
        installed = found.get(example.name)
        unmeasured = CallTimings(
            plugin=example.name,
            point=example.point,
            version=None,
            nodes=nodes,
            pods=pods,
            cycle=cycle,
            repeats=repeats,
        )
        if installed is None:
            figures.append(unmeasured)
            continue
        enabled = enabling.enable(installed, frozenset({example.point}), example.weight, None)
        plugin = enabling.instance(enabled, registry.Registry({example.name: installed}))
        plugins = [(enabled, plugin)]
        judged: list[judgements.Judgement] = []
        with _counted(plugin) as calls:
            _cycles(snap, pod_infos, plugins, cycle, judged)
        _check(example, judged, nodes)
        del judged
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            runs = [_cycles(snap, pod_infos, plugins, cycle) for _ in range(repeats)]
        finally:
            if gc_was_enabled:
                gc.enable()
        fastest = np.min(np.array([call for call, _ in runs]), axis=0)
        viewing = np.min(np.array([view for _, view in runs]), axis=0)
        first = np.arange(pods) % cycle == 0
        steady = fastest[~first]
        figures.append(
            dataclasses.replace(
                unmeasured,
                version=installed.version,
                steady_us=round(float(steady.mean()) * 1e6, 2) if steady.size else None,
                first_us=round(float(fastest[first].mean()) * 1e6, 1),
                pod_view_us=round(float(viewing.mean()) * 1e6, 2),
                calls=dict(calls),
            )
        )
    return figures


def _cycles(
    snap: snapshot.Snapshot,
    pods: Sequence[objects.PodInfo],
    plugins: judgements.Plugins,
    cycle: int,
    judged: list[judgements.Judgement] | None = None,
) -> tuple[list[float], list[float]]:
    """Seconds of each pod's call (a cycle's first with its view and CheckedAnswers made) and
    of each pod's PodView made, in cycles of ``cycle`` pods; the judgements go to ``judged`` if
    given, else each is dropped before the next call."""
    calls, viewing = [], []
    for start in range(0, len(pods), cycle):
        began = time.perf_counter()
        view = judgements.node_view(snap, NOW)
        checked = judgements.CheckedAnswers()
        setting_up = time.perf_counter() - began
        for pod in pods[start : start + cycle]:
            began = time.perf_counter()
            seen = judgements.pod_view(pod)
            viewed = time.perf_counter()
            judgement = judgements.judge(seen, view, plugins, checked=checked)
            calls.append(time.perf_counter() - viewed + setting_up)
            viewing.append(viewed - began)
            setting_up = 0.0
            if judged is not None:
                judged.append(judgement)
            del judgement, seen
    return calls, viewing


@contextlib.contextmanager
def _counted(plugin: interface.Plugin) -> Iterator[dict[str, int]]:
    """The plugin's judging methods wrapped on the instance, each counting its calls (by
    extension point) while the block runs; the class's methods again after it."""
    calls: dict[str, int] = {}
    wrapped = []
    for point in registry.points_of(type(plugin)):
        if point not in (interface.PRE_FILTER, interface.FILTER, interface.SCORE):
            continue
        method = interface.METHODS[point]
        calls[point] = 0
        setattr(plugin, method, _counter(getattr(plugin, method), calls, point))
        wrapped.append(method)
    try:
        yield calls
    finally:
        for method in wrapped:
            delattr(plugin, method)


def _counter(method: Callable[..., Any], calls: dict[str, int], point: str) -> Callable[..., Any]:
    def counting(*args: Any) -> Any:
        calls[point] += 1
        return method(*args)

    return counting


def _check(example: Example, judged: Sequence[judgements.Judgement], nodes: int) -> None:
    """Every judgement as the cluster makes it (see the module's doc)."""
    windows = np.array([in_window(i) for i in range(nodes)])
    for k, judgement in enumerate(judged):
        if judgement.failure is not None or judgement.refused is not None:
            said = judgement.failure.message if judgement.failure else judgement.refused
            raise WrongJudgement(f"{example.name}, pod {k}: {said}")
        if example.point == interface.SCORE:
            scores = judgement.scores.get(example.name)
            if scores is None or scores.shape != (nodes,):
                raise WrongJudgement(f"{example.name}, pod {k}: no score for every node")
        if example.point == interface.FILTER:
            rejected = np.zeros(nodes, dtype=np.bool_)
            for rejection in judgement.rejections:
                rejected |= rejection.fails
            if not np.array_equal(rejected, windows):
                raise WrongJudgement(
                    f"{example.name}, pod {k}: rejected {int(rejected.sum())} nodes, not the "
                    f"{int(windows.sum())} in a maintenance window"
                )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m plumb_dev.bench.plugintimings", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--pods", type=int, required=True)
    parser.add_argument("--cycle", type=int, default=executor.BATCH, help="pods per NodeView")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        figures = measure(args.nodes, pods=args.pods, cycle=args.cycle, repeats=args.repeats)
    except (WrongJudgement, ValueError) as error:
        print(f"plugin micro-benchmark at {args.nodes} nodes: {error}", file=sys.stderr)
        return 1
    for timings in figures:
        print(json.dumps(dataclasses.asdict(timings)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
