"""Tests for plumb.kernel.compiled, executor and numbacache: the numba kernel decides exactly as
the reference on random clusters and batches, a batch decides exactly as its pods one at a time,
nothing compiles after the warm-up, the kernel's own thread, and where numba keeps its cache.
(The hand-checked examples of every filter and score, run against both kernels, are in
test_reference.py.)"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import pathlib
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from plumb.kernel import compiled, executor, numbacache, reference
from plumb.kernel import contract as c
from tests.support.kernel_builders import (
    GI,
    MEMORY,
    RESULT_FIELDS,
    KernelCase,
    assert_same,
    failure_case,
    one_pod,
    place,
)

Kernel = c.Kernel
KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])


@pytest.fixture(scope="module", autouse=True)
def _compiled() -> None:
    # Compile (or load from the cache) once, outside any example's time.
    compiled.warm_up()


# Random inputs --------------------------------------------------------------------------------


# Value menus: the first entry is what hypothesis shrinks to; most pods fit most nodes, some don't.
_ALLOCATABLE = (
    (4000, 8000) * 4 + (2000, 1000, 0),  # cpu (millicores)
    (8 * GI, 16 * GI) * 4 + (4 * GI, 2 * GI, 0),  # memory
    (110,) * 9 + (4, 1, 0),  # pods
    (0, 1, 2),  # gpu
)
_REQUESTED = (
    (0, 500, 1000, 0, 1500, 2000, 500, 3500, 6000, 0),
    (0, GI // 2, GI, 0, 2 * GI, 3 * GI, GI // 2, 6 * GI, 10 * GI, 0),
    (0, 1, 2, 0, 1, 4),
    (0, 0, 0, 1),
)
_POD_REQUESTS = (
    (0, 100, 250, 500, 1000, 1750, 3000),
    (0, GI // 4, GI // 2, GI, 3 * GI),
    (1,),
    (0,) * 7 + (1,),
)
# The Python score plugins' weighted sums (Batch.extension_score): any int64, negative too.
_EXTENSION = (0, 0, 100, 7, 250, -40, -300, 10**15, -(10**15))
# The framework's reason codes, when a static filter fails: checked first (positive) or last
# (negative: NodeDeclaredFeatures').
_STATIC = (0,) * 18 + (1, 5, -3, -3)


@st.composite
def kernel_inputs(
    draw: st.DrawFn,
    max_nodes: int = 8,
    max_pods: int = 4,
    *,
    replicas: bool = False,
    exotic: bool = False,
    huge: bool = False,
    batching: bool = False,
) -> tuple[c.Cluster, c.Batch]:
    """A cluster and a batch of random but well-formed arrays (small values, to make ties).

    ``replicas``: every pod requests the same (the kernel reuses resource scores then).
    ``exotic``: raw scores the framework never sends (negative taint counts and node affinity
    sums, maxSkew 0), which the kernel computes on its general path. ``huge``: cpu or memory
    up to int64's maximum (clamped absurd quantities), which it hands over to the reference.
    ``batching``: pods continue the one before them (OpportunisticBatching) at random; else
    none does. The Python score plugins score half the batches.
    """
    nodes = draw(st.integers(1, max_nodes))
    pods = draw(st.integers(1, max_pods))
    keys = draw(st.integers(1, 3))
    rows = draw(st.integers(1, 3))
    columns = draw(st.permutations(range(4)))  # where cpu, memory, pods and gpu live
    cpu, memory, pods_column = columns[0], columns[1], columns[2]

    def menu(shape: Any, values: Sequence[int]) -> Any:
        # fill=nothing: every element drawn on its own (no array of one repeated value).
        elements = st.sampled_from(values)
        return draw(hnp.arrays(np.int64, shape, elements=elements, fill=st.nothing()))

    def ints(shape: Any, low: int, high: int) -> Any:
        return draw(hnp.arrays(np.int64, shape, elements=st.integers(low, high)))

    def flags(shape: Any, p_true: float = 0.5) -> Any:
        values = draw(hnp.arrays(np.float64, shape, elements=st.floats(0, 1)))
        return values < p_true

    def table(menus: Sequence[Sequence[int]], count: int) -> Any:
        out = np.zeros((count, 4), dtype=np.int64)
        for column, values in zip(columns, menus, strict=True):
            out[:, column] = menu(count, values)
        return out

    requested = table(_REQUESTED, nodes)
    # Request-less containers count 100m / 200Mi in the non-zero requests.
    nonzero = np.stack(
        [
            requested[:, cpu] + menu(nodes, (0, 100, 300)),
            requested[:, memory] + menu(nodes, (0, 200 << 20)),
        ],
        axis=1,
    )
    hashes = draw(
        st.one_of(
            hnp.arrays(np.uint64, nodes, elements=st.integers(0, 2**64 - 1)),
            hnp.arrays(np.uint64, nodes, elements=st.integers(0, 3)),  # collisions too
        )
    )
    domain_counts = menu(keys, (2, 1, 3, 0)).astype(np.int32)
    domains = np.stack([menu(nodes, [*range(int(dc))] * 4 + [-1]) for dc in domain_counts]).astype(
        np.int32
    )
    profile = _profile(draw, columns)
    big = (1 << 50, (1 << 50) + 1, 2**63 - 1) if huge else ()
    menus = (_ALLOCATABLE[0] + big, _ALLOCATABLE[1] + big, *_ALLOCATABLE[2:])
    cluster = c.Cluster(
        allocatable=table(menus, nodes).T.copy(),  # a row per resource
        requested=requested.T.copy(),
        nonzero_requested=nonzero.T.copy(),
        name_hashes=hashes,
        domains=domains,
        domain_counts=domain_counts,
        counts=ints((rows, nodes), 0, 3).astype(np.int32),
        pods_column=pods_column,
        cpu_column=cpu,
        memory_column=memory,
    )

    requests = table(_POD_REQUESTS, 1 if replicas else pods)
    requests = np.repeat(requests, pods, axis=0) if replicas else requests
    pod_nonzero = np.stack(
        [np.maximum(requests[:, cpu], 100), np.maximum(requests[:, memory], 200 << 20)], axis=1
    )

    def per_pod(most: int) -> list[int]:
        return [b for b in range(pods) for _ in range(draw(st.integers(0, most)))]

    spread_pod = per_pod(3)
    affinity_pod = per_pod(2)
    symmetric_pod = per_pod(1)
    preferred_pod = per_pod(3)
    n_spread, n_affinity = len(spread_pod), len(affinity_pod)
    n_symmetric, n_preferred = len(symmetric_pod), len(preferred_pod)
    i32 = np.int32
    # Pods with the same static rows share one (replicas); some of the rows no pod uses.
    distinct = draw(st.integers(1, pods + 1))
    static_row = draw(hnp.arrays(np.int32, pods, elements=st.integers(0, distinct - 1)))
    extension_scored = draw(st.booleans())
    extension = (
        menu((distinct, nodes), _EXTENSION)
        if extension_scored
        else np.zeros((distinct, nodes), dtype=np.int64)
    )
    batch = c.Batch(
        pod_hashes=draw(hnp.arrays(np.uint64, pods, elements=st.integers(0, 2**64 - 1))),
        requests=requests,
        nonzero=pod_nonzero,
        static_row=static_row,
        static_code=menu((distinct, nodes), _STATIC).astype(i32),
        taint_raw=ints((distinct, nodes), -3 if exotic else 0, 3),
        node_affinity_raw=menu(
            (distinct, nodes), (0, 10, 30, 45, 100) + ((-20, -5) if exotic else ())
        ),
        image_score=menu((distinct, nodes), (0, 0, 100, 37, 1, 64)),
        volume_score=menu((distinct, nodes), (0, 0, 100, 50, 95, 3)),
        dra_raw=menu((distinct, nodes), (0, 0, 0, 8, 16, 15)),
        extension_score=extension,
        extension_scored=extension_scored,
        member=ints((pods, rows), 0, 1).astype(i32),
        spread_pod=np.array(spread_pod, dtype=i32),
        spread_row=ints(n_spread, 0, rows - 1).astype(i32),
        spread_key=ints(n_spread, 0, keys - 1).astype(i32),
        spread_max_skew=ints(n_spread, 0 if exotic else 1, 3).astype(i32),
        spread_min_domains=ints(n_spread, 1, 4).astype(i32),
        spread_hard=flags(n_spread, 0.4),
        spread_self=flags(n_spread),
        spread_hostname=flags(n_spread, 0.3),
        spread_eligible=flags((n_spread, nodes), 0.85),
        spread_require_all=flags(pods, 0.7),
        affinity_pod=np.array(affinity_pod, dtype=i32),
        affinity_row=ints(n_affinity, 0, rows - 1).astype(i32),
        affinity_key=ints(n_affinity, 0, keys - 1).astype(i32),
        affinity_anti=flags(n_affinity),
        affinity_self=flags(pods),
        symmetric_pod=np.array(symmetric_pod, dtype=i32),
        symmetric_row=ints(n_symmetric, 0, rows - 1).astype(i32),
        symmetric_key=ints(n_symmetric, 0, keys - 1).astype(i32),
        preferred_pod=np.array(preferred_pod, dtype=i32),
        preferred_row=ints(n_preferred, 0, rows - 1).astype(i32),
        preferred_key=ints(n_preferred, 0, keys - 1).astype(i32),
        preferred_weight=menu(n_preferred, (1, 5, -3, 100, -100, 2)),
        weights=ints(len(c.SCORE_PLUGINS), 0, 5),
        balanced_skip=flags(pods, 0.2),
        continues=flags(pods, 0.6) if batching else np.zeros(pods, dtype=np.bool_),
        fit_strategy=draw(st.sampled_from(c.FIT_STRATEGIES)),
        zone_score=menu(nodes, (100, 100, 14, 37, 61, 0)),  # factors 1, e^-2, ...
        **profile,
    )
    return cluster, batch


def _profile(draw: st.DrawFn, columns: Sequence[int]) -> dict[str, Any]:
    """The resource plugins' arrays of a random profile: kube-scheduler's defaults (cpu and
    memory weighing 1) most often, else resources drawn among cpu, memory, gpu (optional: an
    extended resource) and pods (a plain column), with weights, a RequestedToCapacityRatio
    shape of increasing points and NodeResourcesFit's filter on or off."""
    cpu, memory, pods_column, gpu = columns
    fields = c.default_resources(cpu, memory)
    fields["fit_filter"] = draw(st.sampled_from((True, True, True, False)))
    if draw(st.booleans()):
        return fields
    names = st.sampled_from((cpu, memory, gpu, pods_column))
    chosen = draw(st.lists(names, min_size=0, max_size=4, unique=True))
    nonzero = {cpu: 0, memory: 1}
    fields["fit_columns"] = np.array(chosen, dtype=np.int32)
    fields["fit_weights"] = np.array([draw(st.integers(1, 5)) for _ in chosen], dtype=np.int64)
    # cpu and memory read their non-zero requests for NodeResourcesFit; sometimes not (a
    # column of plain requests, as ephemeral-storage is).
    plain = draw(st.booleans()) and draw(st.booleans())
    fields["fit_nonzero"] = np.array(
        [c.NO_NONZERO if plain else nonzero.get(col, c.NO_NONZERO) for col in chosen],
        dtype=np.int32,
    )
    fields["fit_optional"] = np.array([col == gpu for col in chosen], dtype=np.bool_)
    utilization = sorted(draw(st.sets(st.integers(0, 100), min_size=1, max_size=4)))
    fields["fit_shape_utilization"] = np.array(utilization, dtype=np.int64)
    fields["fit_shape_score"] = np.array(
        [10 * draw(st.integers(0, 10)) for _ in utilization], dtype=np.int64
    )
    balanced = draw(st.lists(names, min_size=0, max_size=4, unique=True))
    fields["balanced_columns"] = np.array(balanced, dtype=np.int32)
    fields["balanced_optional"] = np.array([col == gpu for col in balanced], dtype=np.bool_)
    return fields


# Properties -----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(kernel_inputs())
def test_numba_decides_as_the_reference(inputs: tuple[c.Cluster, c.Batch]) -> None:
    cluster, batch = inputs
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


@settings(max_examples=20, deadline=None)
@given(kernel_inputs(max_nodes=60, max_pods=8))
def test_numba_decides_as_the_reference_on_more_nodes(inputs: tuple[c.Cluster, c.Batch]) -> None:
    cluster, batch = inputs
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


@settings(max_examples=40, deadline=None)
@given(kernel_inputs(max_pods=6, replicas=True))
def test_numba_decides_as_the_reference_for_replicas(inputs: tuple[c.Cluster, c.Batch]) -> None:
    cluster, batch = inputs
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


@settings(max_examples=40, deadline=None)
@given(kernel_inputs(exotic=True))
def test_numba_decides_as_the_reference_on_exotic_scores(inputs: tuple[c.Cluster, c.Batch]) -> None:
    cluster, batch = inputs
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


@settings(max_examples=80, deadline=None)
@given(kernel_inputs(max_pods=6, batching=True), st.booleans())
def test_numba_decides_as_the_reference_when_pods_continue_the_one_before(
    inputs: tuple[c.Cluster, c.Batch], full: bool
) -> None:
    # Pods continuing a batch take the next node of a kept ranking when the node just chosen
    # fails them. ``full``: replicas (one request, one static row) on nodes with room for one
    # of them each, so that the node just chosen does fail the next.
    cluster, batch = inputs
    if full:
        room = cluster.requested + batch.requests[0][:, None]
        cluster = dataclasses.replace(cluster, allocatable=room)
        batch = dataclasses.replace(
            batch,
            requests=batch.requests[:1].repeat(batch.size, 0),
            nonzero=batch.nonzero[:1].repeat(batch.size, 0),
            static_row=np.zeros(batch.size, dtype=np.int32),
        )
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


@settings(max_examples=20, deadline=None)
@given(kernel_inputs(huge=True))
def test_numba_decides_as_the_reference_on_huge_quantities(
    inputs: tuple[c.Cluster, c.Batch],
) -> None:
    cluster, batch = inputs
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


@pytest.mark.parametrize(
    "strategy",
    c.FIT_STRATEGIES,
    ids=["LeastAllocated", "MostAllocated", "BalancedAllocation", "RequestedToCapacityRatio"],
)
@settings(max_examples=60, deadline=None)
@given(inputs=kernel_inputs(max_pods=6), replicas=st.booleans(), zone_weight=st.integers(0, 10))
def test_numba_decides_as_the_reference_with_each_strategy_and_zone_scores(
    strategy: int, inputs: tuple[c.Cluster, c.Batch], replicas: bool, zone_weight: int
) -> None:
    # Each strategy, with zone health weighed up to ten times the others' weights, and for
    # replicas, whose resource scores (zone health among them) the kernel keeps between pods.
    cluster, batch = inputs
    weights = batch.weights.copy()
    weights[c.ZONE_HEALTH] = zone_weight
    batch = dataclasses.replace(batch, fit_strategy=strategy, weights=weights)
    if replicas:
        same = np.zeros_like(batch.requests) + batch.requests[0]
        nonzero = np.zeros_like(batch.nonzero) + batch.nonzero[0]
        skip = np.zeros_like(batch.balanced_skip) | batch.balanced_skip[0]
        batch = dataclasses.replace(batch, requests=same, nonzero=nonzero, balanced_skip=skip)
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


@KERNELS
@settings(max_examples=50, deadline=None)
@given(inputs=kernel_inputs())
def test_a_batch_decides_as_its_pods_one_at_a_time(
    kernel: Kernel, inputs: tuple[c.Cluster, c.Batch]
) -> None:
    cluster, batch = inputs
    whole = kernel(cluster, batch)
    for b in range(batch.size):
        single = kernel(cluster, one_pod(batch, b))
        for name in RESULT_FIELDS:
            np.testing.assert_array_equal(getattr(single, name)[0], getattr(whole, name)[b], name)
        if single.chosen[0] >= 0:
            cluster = place(cluster, batch, b, int(single.chosen[0]))


@settings(max_examples=30, deadline=None)
@given(kernel_inputs())
def test_the_callers_arrays_are_left_alone(inputs: tuple[c.Cluster, c.Batch]) -> None:
    # The kernel works on copies: a snapshot is shared, and must not change under anyone.
    cluster, batch = inputs
    before = [np.copy(array) for array in _arrays(cluster) + _arrays(batch)]
    compiled.run(cluster, batch)
    after = _arrays(cluster) + _arrays(batch)
    for old, new in zip(before, after, strict=True):
        np.testing.assert_array_equal(old, new)


def _arrays(record: Any) -> list[Any]:
    values = [getattr(record, field.name) for field in dataclasses.fields(record)]
    return [value for value in values if isinstance(value, np.ndarray)]


def test_after_warm_up_no_input_compiles_anything() -> None:
    # The first real pod must not wait seconds for numba: warm_up compiled every variant, and
    # the wrapper normalises layouts, dtypes and read-only flags into the compiled signature.
    compiled.warm_up()
    dispatchers = [value for value in vars(compiled).values() if hasattr(value, "signatures")]
    before = {dispatcher: len(dispatcher.signatures) for dispatcher in dispatchers}
    cluster, batch = failure_case().build()
    frozen = np.asfortranarray(cluster.allocatable)
    frozen.flags.writeable = False
    odd = dataclasses.replace(cluster, allocatable=frozen, counts=cluster.counts.astype(np.int64))
    negative = dataclasses.replace(batch, taint_raw=-batch.taint_raw - 1)
    for inputs in [(cluster, batch), (odd, batch), (cluster, negative), compiled.tiny()]:
        compiled.run(*inputs)
    assert {dispatcher: len(dispatcher.signatures) for dispatcher in dispatchers} == before


def test_quantities_beyond_the_exact_range_go_to_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Up to 2**50 the compiled kernel decides; a clamped absurd quantity (int64's maximum) would
    # overflow it, and the reference's Python integers decide instead.
    edge = (
        KernelCase(2).allocatable(MEMORY, [1 << 50, 8 * GI]).requested(MEMORY, [(1 << 50) - GI, 0])
    )
    beyond = KernelCase(2).allocatable(MEMORY, [2**63 - 1, 8 * GI])
    cases = [case.pod(cpu=100, memory=GI).build() for case in (edge, beyond)]
    wanted = [reference.run(*inputs) for inputs in cases]
    handed_over: list[int] = []
    real = reference.run

    def spy(cluster: c.Cluster, batch: c.Batch) -> c.Result:
        handed_over.append(cluster.name_hashes.size)
        return real(cluster, batch)

    monkeypatch.setattr(reference, "run", spy)
    assert_same(compiled.run(*cases[0]), wanted[0])
    assert handed_over == []
    assert_same(compiled.run(*cases[1]), wanted[1])
    assert handed_over == [2]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda cl, b: (dataclasses.replace(cl, domains=cl.domains + 1), b), "domains holds ids"),
        (
            lambda cl, b: (cl, dataclasses.replace(b, spread_row=b.spread_row + 9)),
            "spread_row holds values outside 0 .. 3",
        ),
        (
            lambda cl, b: (cl, dataclasses.replace(b, static_code=b.static_code[:, :3])),
            "static_code has shape (1, 3), not (1, 8)",
        ),
        (
            lambda cl, b: (cl, dataclasses.replace(b, extension_score=b.extension_score[:, :3])),
            "extension_score has shape (1, 3), not (1, 8)",
        ),
        (
            lambda cl, b: (cl, dataclasses.replace(b, static_row=b.static_row + 1)),
            "static_row holds values outside 0 .. 0",
        ),
        (
            lambda cl, b: (dataclasses.replace(cl, cpu_column=7), b),
            "cpu_column 7 is not one of the 4 resource columns",
        ),
        (
            lambda cl, b: (cl, dataclasses.replace(b, fit_strategy=4)),
            "fit_strategy 4 is not one of (0, 1, 2, 3)",
        ),
        (
            lambda cl, b: (cl, dataclasses.replace(b, zone_score=b.zone_score[:5])),
            "zone_score has shape (5,), not (8,)",
        ),
        (
            lambda cl, b: (cl, dataclasses.replace(b, weights=b.weights[:6])),
            "weights has shape (6,), not (10,)",
        ),
    ],
)
def test_out_of_range_input_is_refused_before_the_unchecked_code_reads_it(
    change: Callable[[c.Cluster, c.Batch], tuple[c.Cluster, c.Batch]], message: str
) -> None:
    # numba does no bounds checks: a bad index would read or write out of bounds.
    with pytest.raises(ValueError, match=re.escape(message)):
        compiled.run(*change(*failure_case().build()))


@settings(deadline=None)  # the first call compiles the hash on its own (a second, uncached)
@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_tie_break_hash_wraps_like_the_reference(node_hash: int, pod_hash: int) -> None:
    want = reference.mix(np.array([node_hash], dtype=np.uint64), np.uint64(pod_hash))[0]
    got = cast(Any, compiled._tie)(np.uint64(node_hash), np.uint64(pod_hash))
    assert type(got) is int  # numba boxes its uint64 as an int; a float would mean promotion
    assert got == int(want)


def test_compiled_logarithm_is_the_c_librarys() -> None:
    # Spread weights are log(size + 2) for up to every node; one ulp apart would move a
    # math.floor(x + 0.5) somewhere.
    sizes = np.arange(20_000, dtype=np.int64)
    logs = cast(Any, numba.njit(_logs))(sizes)
    assert logs.tolist() == [math.log(int(size) + 2) for size in sizes]


def _logs(sizes: Any) -> Any:
    out = np.empty(sizes.shape[0], dtype=np.float64)
    for i in range(sizes.shape[0]):
        out[i] = math.log(sizes[i] + 2)
    return out


def test_arrays_of_another_layout_or_dtype_decide_the_same() -> None:
    cluster, batch = failure_case().build()
    want = compiled.run(cluster, batch)
    read_only = cluster.requested.copy()
    read_only.flags.writeable = False
    other = dataclasses.replace(
        cluster,
        allocatable=np.asfortranarray(cluster.allocatable),
        requested=read_only,
        domains=cast(Any, cluster.domains.astype(np.int64)),
        counts=cast(Any, cluster.counts.astype(np.int64)),
    )
    assert_same(compiled.run(other, batch), want)


# The kernel's thread --------------------------------------------------------------------------


async def test_the_kernel_runs_on_its_own_thread() -> None:
    threads: list[int] = []

    def kernel(cluster: c.Cluster, batch: c.Batch) -> c.Result:
        threads.append(threading.get_ident())
        return reference.run(cluster, batch)

    with executor.KernelExecutor(kernel, inline_pairs=0) as kernels:
        first = await kernels.run(*failure_case().build())
        await kernels.run(*failure_case().build())
    assert first.chosen.tolist() == [0]
    assert threads[0] != threading.get_ident()
    assert threads[0] == threads[1]


async def test_a_small_batch_is_decided_on_the_event_loop() -> None:
    threads: list[int] = []

    def kernel(cluster: c.Cluster, batch: c.Batch) -> c.Result:
        threads.append(threading.get_ident())
        return compiled.run(cluster, batch)

    cluster, batch = failure_case().build()
    pairs = cluster.name_hashes.shape[0] * batch.requests.shape[0]
    with executor.KernelExecutor(kernel, inline_pairs=pairs) as kernels:
        small = await kernels.run(cluster, batch)
    with executor.KernelExecutor(kernel, inline_pairs=pairs - 1) as kernels:
        large = await kernels.run(cluster, batch)
    assert threads[0] == threading.get_ident()
    assert threads[1] != threading.get_ident()
    assert small.chosen.tolist() == large.chosen.tolist() == [0]


async def test_the_event_loop_keeps_running_while_the_kernel_works() -> None:
    release = threading.Event()

    def kernel(cluster: c.Cluster, batch: c.Batch) -> c.Result:
        # Only the event loop can set the event: if it were blocked, this would time out.
        assert release.wait(timeout=5), "the event loop stalled while the kernel ran"
        return compiled.run(cluster, batch)

    with executor.KernelExecutor(kernel, inline_pairs=0) as kernels:
        decision = asyncio.ensure_future(kernels.run(*failure_case().build()))
        await asyncio.sleep(0)
        release.set()
        result = await decision
    assert result.chosen.tolist() == [0]


async def test_warm_up_runs_on_the_kernel_thread() -> None:
    threads: list[int] = []
    with executor.KernelExecutor(warm_up=lambda: threads.append(threading.get_ident())) as k:
        await k.warm_up()
    assert threads
    assert threads[0] != threading.get_ident()
    with executor.KernelExecutor() as k:
        await k.warm_up()  # the real one: compiled.warm_up, loads from the cache


# The numba cache ------------------------------------------------------------------------------


def test_numba_uses_the_configured_cache_directory() -> None:
    # compiled configured the cache before importing numba, and numba's dispatchers write there.
    directory = os.environ[numbacache.VARIABLE]
    assert vars(numba.core.config)["CACHE_DIR"] == directory
    cache_path = cast(Any, compiled._run)._cache._cache_path
    assert pathlib.Path(cache_path).is_relative_to(directory)


def test_an_explicit_cache_directory_is_honoured(tmp_path: pathlib.Path) -> None:
    environ = {numbacache.VARIABLE: str(tmp_path / "mine")}
    chosen = numbacache.configure(environ, defaults=[tmp_path / "default"])
    assert chosen == tmp_path / "mine"
    assert chosen.is_dir()
    assert environ[numbacache.VARIABLE] == str(tmp_path / "mine")


def test_the_first_writable_default_is_chosen(tmp_path: pathlib.Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    environ: dict[str, str] = {}
    chosen = numbacache.configure(environ, defaults=[blocker / "numba", tmp_path / "fallback"])
    assert chosen == tmp_path / "fallback"
    assert environ == {numbacache.VARIABLE: str(tmp_path / "fallback")}


def test_defaults_follow_xdg_then_the_temporary_directory(tmp_path: pathlib.Path) -> None:
    first, second = numbacache.default_locations({"XDG_CACHE_HOME": str(tmp_path)})
    assert first == tmp_path / "plumb" / "numba"
    assert second.name.startswith("plumb-numba-")


def test_no_writable_directory_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(numbacache.KernelCacheError) as caught:
        numbacache.configure({}, defaults=[blocker / "one", blocker / "two"])
    message = str(caught.value)
    assert str(blocker / "one") in message
    assert str(blocker / "two") in message
    assert "set NUMBA_CACHE_DIR" in message


def test_an_unwritable_explicit_directory_is_an_error_not_a_fallback(
    tmp_path: pathlib.Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    environ = {numbacache.VARIABLE: str(blocker / "cache")}
    with pytest.raises(numbacache.KernelCacheError, match="NUMBA_CACHE_DIR"):
        numbacache.configure(environ, defaults=[tmp_path / "default"])
    assert not (tmp_path / "default").exists()


def test_output_arrays_are_reused_only_once_nobody_holds_them() -> None:
    # compiled.run recycles its (pods, nodes) outputs; a result (or a view of it) still held
    # must never be written over, and a recycled detail row must not keep an old pod's details.
    fits_nowhere = KernelCase(2).pod(cpu=8000).build()  # details for both nodes
    fits = KernelCase(2).pod(cpu=1000).build()
    held = compiled.run(*fits_nowhere)
    snapshot = [np.copy(getattr(held, name)) for name in RESULT_FIELDS]
    view = held.detail[0]
    del held
    other = compiled.run(*fits)
    assert not np.shares_memory(other.detail, view)
    assert view.tolist() == snapshot[RESULT_FIELDS.index("detail")][0].tolist()
    del view, other
    recycled = compiled.run(*fits)
    assert_same(recycled, reference.run(*fits))
    assert recycled.detail.tolist() == [[0, 0]]
    address = recycled.detail.__array_interface__["data"][0]
    del recycled
    again = compiled.run(*fits_nowhere)
    assert again.detail.__array_interface__["data"][0] == address  # nobody held it: recycled
    assert_same(again, reference.run(*fits_nowhere))
