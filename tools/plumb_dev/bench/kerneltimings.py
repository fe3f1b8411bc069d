"""The kernel micro-benchmark: µs per pod of the numba kernel, one pod per call and in batches,
and of the pure-Python reference, on a cluster where every filter and score has work to do.

``plumb bench`` runs it as a child process (``python -m plumb_dev.bench.kerneltimings --size
NODES:PODS:REFERENCE_PODS ...``), which prints one JSON object per size: the benchmark drives
the scheduler's code from outside, as it drives ``plumb run``, and the timings get a process of
their own.

The cluster (``node(i)``, the same at every size): nodes in five zones and of four sizes, some
tainted; four pods on every node from six apps; and replicas of one web pod that tolerates
one taint, requires three of the four node sizes and prefers two zones and the large nodes,
spreads over zones (DoNotSchedule, maxSkew 1) and hosts (ScheduleAnyway), must avoid hosts
running a cache pod, prefers zones running api pods, and asks for a host port that some api
pods hold; database pods keep web pods off their hosts. The arrays are what
``framework/compiling.py`` makes of those pods (tests/tools/bench/test_kernelbench.py holds them
equal, array by array). A size may ask for the Python score plugins' score too
(``NODES:PODS:REFERENCE_PODS:extension``): one plugin weighing ``EXTENSION_WEIGHT`` that scores
each node 0-100 at random, the row the compile step would hand the kernel
(``Batch.extension_score``), to show what it adds beside the same size without. Such a size
also times the installed example plugins' own calls through plumb's path, over the size's nodes
and pods in cycles of its batch (``plugintimings``: read its docstring), in this process after
the kernel's timings, and counts the calls into each (``Measurement.plugins``).

How it measures: every call is timed with ``time.perf_counter`` around ``compiled.run`` (or
``reference.run``) alone, the Python wrapper and the output arrays included; the placements
between calls are applied untimed, and each result is dropped before the next call, as the
scheduler drops it. Pods are decided in order, each on the cluster the earlier ones left. The
kernel is compiled (or loaded from its cache) and run once over the same pods before anything
is timed; each mode then runs ``repeats`` times, and each call counts with its fastest time
over the runs, since other processes share the CPUs (every run does the same work). Garbage
collection is off while timing. Single calls of the numba kernel and of the reference must
return the same arrays for every pod the reference decides, and the batches the same nodes as
the single calls: a fast wrong kernel fails here.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from plumb.kernel import compiled, executor, reference
from plumb.kernel import contract as c
from plumb_dev.bench import plugintimings

GI = 1 << 30
MI = 1 << 20
ZONES = 5
BATCH_SIZE = executor.BATCH
"""Pods per batch call: what the scheduler pops per cycle (scheduler.DEFAULT_BATCH)."""
RESIDENTS_PER_NODE = 4

# Node sizes: (name, millicores, memory); the web pods require any but the first.
SIZES = (
    ("small", 4000, 16 * GI),
    ("medium", 8000, 32 * GI),
    ("large", 16000, 64 * GI),
    ("xlarge", 32000, 128 * GI),
)
MAX_PODS = 110
# Apps of the pods already running: millicores and memory each requests.
APPS = {
    "web": (250, 512 * MI),
    "api": (500, 1 * GI),
    "batch": (1000, 2 * GI),
    "cache": (500, 4 * GI),
    "db": (1000, 8 * GI),
    "bulk": (6000, 8 * GI),  # fills a medium node
}
HOST_PORT = 9090
WEB_REQUEST = APPS["web"]
PREFERRED_ZONES = (0, 1)
PREFERRED_ZONE_WEIGHT = 50
PREFERRED_SIZE = "large"
PREFERRED_SIZE_WEIGHT = 20
API_AFFINITY_WEIGHT = 10
HOSTNAME_MAX_SKEW = 2
EXTENSION_WEIGHT = 2  # the Python score plugin's weight, when a size asks for one
EXTENSION_SEED = 30  # its random scores are the same at every run
# Reason codes of the static filters, numbered as compiling.py numbers them (every static
# plugin's reason is registered in order, 1 = NodeUnschedulable ... 5 = NodePorts).
STATIC_TAINT, STATIC_NODE_AFFINITY, STATIC_PORTS = 3, 4, 5
# Count rows, in the order compiling.py registers them for the web pods.
ROW_WEB, ROW_CACHE, ROW_API, ROW_DB_ANTI = range(4)
KEY_ZONE, KEY_HOSTNAME = range(2)
CODE_NAMES = {
    c.STATIC: "static",
    c.RESOURCES: "resources",
    c.SPREAD_LABEL: "spread_label",
    c.SPREAD_SKEW: "spread_skew",
    c.AFFINITY: "affinity",
    c.ANTI_AFFINITY: "anti_affinity",
    c.EXISTING_ANTI_AFFINITY: "existing_anti_affinity",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScenarioNode:
    """Node i of the scenario."""

    name: str
    zone: int
    size: str
    cpu: int
    memory: int
    taint: str | None  # "dedicated=<value>:NoSchedule": "batch" is tolerated, "gpu" is not
    spot: bool  # a "spot=true:PreferNoSchedule" taint, which the web pods do not tolerate
    residents: tuple[Resident, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Resident:
    """A pod already running on a node."""

    app: str
    host_port: bool  # holds HOST_PORT
    avoids_web: bool  # required anti-affinity to app=web on the hostname (database pods)


def node(i: int) -> ScenarioNode:
    """Node i: the patterns repeat every few nodes, so every zone looks alike at any size."""
    q = i // ZONES  # the i-th node of its zone, so each zone gets the same mix
    size, cpu, memory = SIZES[q % len(SIZES)]
    taint = "batch" if i % 10 == 3 else ("gpu" if i % 20 == 7 else None)
    last = "cache" if q % 7 == 2 else ("db" if q % 7 == 5 else ("bulk" if q % 11 == 3 else "batch"))
    residents = (
        Resident(app="web" if q % 3 == 0 else "api", host_port=False, avoids_web=False),
        Resident(app="batch", host_port=False, avoids_web=False),
        Resident(app="api", host_port=q % 25 == 4, avoids_web=False),
        Resident(app=last, host_port=False, avoids_web=last == "db"),
    )
    return ScenarioNode(
        name=f"node-{i:05d}",
        zone=i % ZONES,
        size=size,
        cpu=cpu,
        memory=memory,
        taint=taint,
        spot=i % 6 == 1,
        residents=residents,
    )


def pod_uid(k: int) -> str:
    return f"web-{k:05d}"


def _hash(text: str) -> int:
    # backend.hashing.stable_hash, which the kernel layer cannot import.
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def inputs(nodes: int, pods: int, *, extension: bool = False) -> tuple[c.Cluster, c.Batch]:
    """The kernel's input for ``pods`` web replicas on the scenario's first ``nodes`` nodes;
    ``extension``: with a Python score plugin's score (see the module's doc)."""
    infos = [node(i) for i in range(nodes)]
    resources = 3  # cpu, memory, pods: the columns compiling.py makes for these pods
    allocatable = np.array([[n.cpu, n.memory, MAX_PODS] for n in infos], dtype=np.int64).T.copy()
    requested = np.zeros((resources, nodes), dtype=np.int64)
    counts = np.zeros((4, nodes), dtype=np.int32)
    row = {"web": ROW_WEB, "cache": ROW_CACHE, "api": ROW_API}
    for i, info in enumerate(infos):
        for resident in info.residents:
            cpu, memory = APPS[resident.app]
            requested[:, i] += (cpu, memory, 1)
            if resident.app in row:
                counts[row[resident.app], i] += 1
            counts[ROW_DB_ANTI, i] += resident.avoids_web
    zone = np.array([n.zone for n in infos], dtype=np.int32)
    cluster = c.Cluster(
        allocatable=allocatable,
        requested=requested,
        nonzero_requested=requested[:2].copy(),  # every resident requests cpu and memory
        name_hashes=np.array([_hash(n.name) for n in infos], dtype=np.uint64),
        domains=np.stack([zone, np.arange(nodes, dtype=np.int32)]),
        domain_counts=np.array([ZONES, nodes], dtype=np.int32),
        counts=counts,
        pods_column=2,
        cpu_column=0,
        memory_column=1,
    )
    # Static verdicts, in compiling.py's order: TaintToleration, NodeAffinity, NodePorts.
    static = np.zeros(nodes, dtype=np.int32)
    for i, info in enumerate(infos):
        if info.taint == "gpu":
            static[i] = STATIC_TAINT
        elif info.size == SIZES[0][0]:
            static[i] = STATIC_NODE_AFFINITY
        elif any(r.host_port for r in info.residents):
            static[i] = STATIC_PORTS
    eligible = np.array([n.size != SIZES[0][0] for n in infos])  # nodeAffinityPolicy: Honor
    preferred = np.array(
        [
            PREFERRED_ZONE_WEIGHT * (n.zone in PREFERRED_ZONES)
            + PREFERRED_SIZE_WEIGHT * (n.size == PREFERRED_SIZE)
            for n in infos
        ],
        dtype=np.int64,
    )
    every = np.arange(pods, dtype=np.int32)
    twice = np.repeat(every, 2)  # two spread constraints per pod: zone, then hostname

    def per_pod(value: object, dtype: type) -> np.ndarray:
        return np.full(pods, value, dtype=dtype)

    batch = c.Batch(
        pod_hashes=np.array([_hash(pod_uid(k)) for k in range(pods)], dtype=np.uint64),
        requests=np.tile(np.array([*WEB_REQUEST, 1], dtype=np.int64), (pods, 1)),
        nonzero=np.tile(np.array(WEB_REQUEST, dtype=np.int64), (pods, 1)),
        static_row=np.zeros(pods, dtype=np.int32),  # replicas: one row for all
        static_code=static[np.newaxis],
        taint_raw=np.array([[n.spot for n in infos]], dtype=np.int64),
        node_affinity_raw=preferred[np.newaxis],
        image_score=np.zeros((1, nodes), dtype=np.int64),  # the nodes report no images
        volume_score=np.zeros((1, nodes), dtype=np.int64),  # the pods claim no volumes
        dra_raw=np.zeros((1, nodes), dtype=np.int64),  # nor devices
        extension_score=_extension_score(nodes) if extension else np.zeros((1, nodes), np.int64),
        extension_scored=extension,
        member=np.tile(np.array([1, 0, 0, 0], dtype=np.int32), (pods, 1)),
        spread_pod=twice,
        spread_row=np.full(2 * pods, ROW_WEB, dtype=np.int32),
        spread_key=np.tile(np.array([KEY_ZONE, KEY_HOSTNAME], dtype=np.int32), pods),
        spread_max_skew=np.tile(np.array([1, HOSTNAME_MAX_SKEW], dtype=np.int32), pods),
        spread_min_domains=np.ones(2 * pods, dtype=np.int32),
        spread_hard=np.tile(np.array([True, False]), pods),
        spread_self=np.ones(2 * pods, dtype=np.bool_),
        spread_hostname=np.tile(np.array([False, True]), pods),
        spread_eligible=np.tile(eligible, (2 * pods, 1)),
        spread_require_all=per_pod(True, np.bool_),
        affinity_pod=every,
        affinity_row=np.full(pods, ROW_CACHE, dtype=np.int32),
        affinity_key=np.full(pods, KEY_HOSTNAME, dtype=np.int32),
        affinity_anti=per_pod(True, np.bool_),
        affinity_self=per_pod(False, np.bool_),
        symmetric_pod=every,
        symmetric_row=np.full(pods, ROW_DB_ANTI, dtype=np.int32),
        symmetric_key=np.full(pods, KEY_HOSTNAME, dtype=np.int32),
        preferred_pod=every,
        preferred_row=np.full(pods, ROW_API, dtype=np.int32),
        preferred_key=np.full(pods, KEY_ZONE, dtype=np.int32),
        preferred_weight=np.full(pods, API_AFFINITY_WEIGHT, dtype=np.int64),
        weights=np.array([1, 1, 3, 2, 2, 2, 0, 1, 1, 2], dtype=np.int64),  # the default profile's
        balanced_skip=per_pod(False, np.bool_),
        continues=per_pod(False, np.bool_),  # the default profile signs no pod
        fit_strategy=c.LEAST_ALLOCATED,
        zone_score=np.full(nodes, c.MAX_NODE_SCORE, dtype=np.int64),  # no zone factors
        **c.default_resources(cluster.cpu_column, cluster.memory_column),
        balanced_change=True,  # BalancedAllocation as from v1.36, the framework's default
    )
    return cluster, batch


def _extension_score(nodes: int) -> c.I64:
    """One plugin's normalised score, 0-100 per node at random, weighed: the one static row."""
    scores = np.random.default_rng(EXTENSION_SEED).integers(0, c.MAX_NODE_SCORE + 1, nodes)
    return (EXTENSION_WEIGHT * scores).astype(np.int64)[np.newaxis]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measurement:
    """One size's figures; times in µs per pod, each call at its fastest of ``repeats`` runs."""

    nodes: int
    resident_pods: int
    pods: int  # decided by numba, one per call and in batches
    batch_size: int
    reference_pods: int  # decided by the reference (the first ones)
    repeats: int
    numba_single_us: float
    numba_batch_us: float
    reference_us: float
    placed: int  # of ``pods``, how many found a node
    feasible_share: float  # nodes passing every filter, on average over the pods
    rejected_share: dict[str, float]  # per failure code: the share of nodes it rejected
    extension: bool  # with a Python score plugin's score (Batch.extension_score)
    # With the extension: the example plugins' calls (plugintimings), one record per plugin.
    plugins: list[plugintimings.CallTimings] = dataclasses.field(default_factory=list)


class Disagreement(AssertionError):
    """The numba kernel decided differently from the reference, or a batch from single calls."""


Kernel = Callable[[c.Cluster, c.Batch], c.Result]


def measure(
    nodes: int,
    *,
    pods: int,
    reference_pods: int,
    batch_size: int = BATCH_SIZE,
    repeats: int = 5,
    extension: bool = False,
) -> Measurement:
    """Time the kernels on ``pods`` web replicas over ``nodes`` nodes (see the module's doc),
    with a Python score plugin's score if ``extension`` (and the example plugins' calls)."""
    if not 0 < reference_pods <= pods or batch_size <= 0 or repeats <= 0:
        raise ValueError(
            f"need 0 < reference_pods <= pods, batch_size > 0 and repeats > 0: got "
            f"pods={pods}, reference_pods={reference_pods}, batch_size={batch_size}, "
            f"repeats={repeats}"
        )
    cluster, batch = inputs(nodes, pods, extension=extension)
    singles = [c.part(batch, b, b + 1) for b in range(pods)]
    batches = [
        (start, c.part(batch, start, min(start + batch_size, pods)))
        for start in range(0, pods, batch_size)
    ]
    compiled.warm_up()
    # Untimed first runs: the kernel compiled or loaded for these inputs, and what to agree on.
    single_results: list[c.Result] = []
    batch_results: list[c.Result] = []
    reference_results: list[c.Result] = []
    _singles(compiled.run, cluster, batch, singles, single_results)
    _batches(cluster, batch, batches, batch_results)
    _singles(reference.run, cluster, batch, singles[:reference_pods], reference_results)
    chosen = [int(r.chosen[0]) for r in single_results]
    _agree(single_results, reference_results, chosen, batch_results)
    codes = np.concatenate([r.code for r in batch_results])
    del single_results, batch_results, reference_results  # the timed runs drop every result

    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        single = _fastest([_singles(compiled.run, cluster, batch, singles) for _ in range(repeats)])
        batched = _fastest([_batches(cluster, batch, batches) for _ in range(repeats)])
        slow = _fastest(
            [
                _singles(reference.run, cluster, batch, singles[:reference_pods])
                for _ in range(repeats)
            ]
        )
    finally:
        if gc_was_enabled:
            gc.enable()
    plugins = (
        plugintimings.measure(nodes, pods=pods, cycle=batch_size, repeats=repeats)
        if extension
        else []
    )
    shares = {name: round(float(np.mean(codes == code)), 4) for code, name in CODE_NAMES.items()}
    return Measurement(
        nodes=nodes,
        resident_pods=nodes * RESIDENTS_PER_NODE,
        pods=pods,
        batch_size=batch_size,
        reference_pods=reference_pods,
        repeats=repeats,
        numba_single_us=round(single / pods * 1e6, 2),
        numba_batch_us=round(batched / pods * 1e6, 2),
        reference_us=round(slow / reference_pods * 1e6, 1),
        placed=sum(1 for node_index in chosen if node_index >= 0),
        feasible_share=round(float(np.mean(codes == c.PASS)), 4),
        rejected_share=shares,
        extension=extension,
        plugins=plugins,
    )


def _singles(
    kernel: Kernel,
    cluster: c.Cluster,
    batch: c.Batch,
    singles: Sequence[c.Batch],
    results: list[c.Result] | None = None,
) -> list[float]:
    """Seconds in ``kernel`` of each call, deciding a pod per call; the results go to
    ``results`` if given (otherwise each is dropped before the next call, as the scheduler
    drops it)."""
    elapsed = []
    for b, single in enumerate(singles):
        start = time.perf_counter()
        result = kernel(cluster, single)
        elapsed.append(time.perf_counter() - start)
        node = int(result.chosen[0])
        if results is not None:
            results.append(result)
        del result
        if node >= 0:
            cluster = c.placed(cluster, batch, b, node)
    return elapsed


def _batches(
    cluster: c.Cluster,
    batch: c.Batch,
    batches: Sequence[tuple[int, c.Batch]],
    results: list[c.Result] | None = None,
) -> list[float]:
    """Seconds in the numba kernel of each call, deciding a batch per call (see ``_singles``)."""
    elapsed = []
    for first, part in batches:
        start = time.perf_counter()
        result = compiled.run(cluster, part)
        elapsed.append(time.perf_counter() - start)
        chosen = [int(node) for node in result.chosen]
        if results is not None:
            results.append(result)
        del result
        for offset, node in enumerate(chosen):
            if node >= 0:
                cluster = c.placed(cluster, batch, first + offset, node)
    return elapsed


def _fastest(runs: Sequence[Sequence[float]]) -> float:
    """Seconds of the calls in total, each call at its fastest over the runs: every run does
    the same work, so a slower call was interrupted by something else on the machine."""
    return float(np.sum(np.min(np.array(runs), axis=0)))


_FIELDS = ("chosen", "code", "detail", "total", "feasible", "top", "top_scores")


def _agree(
    single: Sequence[c.Result],
    reference_results: Sequence[c.Result],
    chosen: Sequence[int],
    batched: Sequence[c.Result],
) -> None:
    for b, (mine, theirs) in enumerate(zip(single, reference_results, strict=False)):
        for name in _FIELDS:
            if not np.array_equal(getattr(mine, name), getattr(theirs, name)):
                raise Disagreement(
                    f"pod {b}: the numba kernel's {name} differs from the reference's "
                    f"(numba chose node {int(mine.chosen[0])}, the reference "
                    f"{int(theirs.chosen[0])})"
                )
    in_batches = [int(n) for result in batched for n in result.chosen]
    if in_batches != list(chosen):
        b = next(i for i, (x, y) in enumerate(zip(in_batches, chosen, strict=True)) if x != y)
        raise Disagreement(
            f"pod {b}: a batch placed it on node {in_batches[b]}, a call of its own on "
            f"node {chosen[b]}"
        )


EXTENSION = "extension"  # the last part of a --size with a Python score plugin's score


def _size(text: str) -> tuple[int, int, int, bool]:
    parts = text.split(":")
    extension = parts[3:] == [EXTENSION]
    try:
        if len(parts) != (4 if extension else 3):
            raise ValueError(text)
        nodes, pods, reference_pods = (int(part) for part in parts[:3])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--size {text!r}: expected NODES:PODS:REFERENCE_PODS, e.g. 5000:256:8, with "
            f":{EXTENSION} for a Python score plugin's score"
        ) from None
    return nodes, pods, reference_pods, extension


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m plumb_dev.bench.kerneltimings", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--size", type=_size, action="append", required=True)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    for nodes, pods, reference_pods, extension in args.size:
        try:
            figures = measure(
                nodes,
                pods=pods,
                reference_pods=reference_pods,
                batch_size=args.batch_size,
                repeats=args.repeats,
                extension=extension,
            )
        except (Disagreement, plugintimings.WrongJudgement, ValueError) as error:
            print(f"kernel micro-benchmark at {nodes} nodes: {error}", file=sys.stderr)
            return 1
        print(json.dumps(dataclasses.asdict(figures)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
