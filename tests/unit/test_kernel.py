"""Tests for plumb.kernel.reference: the filter-and-score contract, checked by hand and against a
plain-Python oracle."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from plumb.kernel import reference

# Columns as a snapshot has them: cpu, memory, ephemeral-storage, pods, then one extended.
CPU, MEMORY, STORAGE, PODS, GPU = range(5)
SCORED = (CPU, MEMORY)
U64 = 2**64


def i64(rows: list[list[int]] | list[int]) -> npt.NDArray[np.int64]:
    return np.array(rows, dtype=np.int64)


def u64(values: list[int]) -> npt.NDArray[np.uint64]:
    return np.array(values, dtype=np.uint64)


def run(
    allocatable: list[list[int]],
    requested: list[list[int]],
    request: list[int],
    *,
    hashes: list[int] | None = None,
    pod_hash: int = 7,
) -> reference.Result:
    return reference.filter_and_score(
        allocatable=i64(allocatable),
        requested=i64(requested),
        request=i64(request),
        pods_column=PODS,
        score_columns=SCORED,
        name_hashes=u64(hashes if hashes is not None else list(range(1, len(allocatable) + 1))),
        pod_hash=np.uint64(pod_hash),
    )


def splitmix(node_hash: int, pod_hash: int) -> int:
    """splitmix64's finaliser in plain Python integers, the oracle for reference.mix."""
    z = node_hash ^ pod_hash
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % U64
    return z ^ (z >> 31)


# By hand --------------------------------------------------------------------------------------


def test_bits_scores_and_choice_by_hand() -> None:
    result = run(
        allocatable=[
            [4000, 8000, 0, 10, 0],
            [2000, 4000, 0, 10, 2],
            [8000, 1000, 0, 10, 0],
            [4000, 3000, 0, 10, 0],
        ],
        requested=[
            [1000, 2000, 0, 2, 0],
            [1500, 0, 0, 10, 0],
            [0, 0, 0, 0, 0],
            [1000, 0, 0, 0, 0],
        ],
        request=[1000, 2000, 0, 0, 0],
    )
    # Node 1 lacks cpu (bit 0) and a pod slot (bit 3); node 2 lacks memory (bit 1).
    assert result.insufficient.tolist() == [0, 0b1001, 0b10, 0]
    # Node 0: cpu (4000-2000)*100//4000 = 50, memory (8000-4000)*100//8000 = 50 -> 50.
    # Node 3: cpu (4000-2000)*100//4000 = 50, memory (3000-2000)*100//3000 = 33 -> 83//2 = 41.
    assert result.scores.tolist() == [50, 0, 0, 41]
    assert result.chosen == 0


def test_scores_floor_each_resource_then_the_average() -> None:
    result = run(
        allocatable=[[3000, 3000, 0, 10, 0]],
        requested=[[0, 0, 0, 0, 0]],
        request=[1000, 1000, 0, 0, 0],
    )
    # 66 per resource (200000//3000), not 66.67 averaged.
    assert result.scores.tolist() == [66]


def test_extended_resource_the_node_lacks() -> None:
    result = run(
        allocatable=[[4000, 4000, 0, 10, 0], [4000, 4000, 0, 10, 1]],
        requested=[[0, 0, 0, 0, 0], [0, 0, 0, 0, 0]],
        request=[0, 0, 0, 0, 1],
    )
    assert result.insufficient.tolist() == [0b10000, 0]
    assert result.chosen == 1


def test_only_requested_resources_are_checked() -> None:
    # Overcommitted on cpu and memory, yet a pod asking for neither fits; the pod slot is checked.
    result = run(
        allocatable=[[1000, 1000, 0, 2, 0], [1000, 1000, 0, 2, 0]],
        requested=[[2000, 5000, 0, 1, 0], [2000, 5000, 0, 2, 0]],
        request=[0, 0, 0, 0, 0],
    )
    assert result.insufficient.tolist() == [0, 0b1000]
    assert result.scores.tolist() == [0, 0]  # used beyond capacity scores 0, as kube does
    assert result.chosen == 0


def test_zero_capacity_scores_zero_without_dividing_by_it() -> None:
    result = run(
        allocatable=[[0, 4000, 0, 10, 0]],
        requested=[[0, 0, 0, 0, 0]],
        request=[0, 1000, 0, 0, 0],
    )
    # cpu: no capacity, 0; memory: (4000-1000)*100//4000 = 75; (0+75)//2 = 37.
    assert result.scores.tolist() == [37]
    assert result.chosen == 0


def test_nothing_fits() -> None:
    result = run(
        allocatable=[[1000, 1000, 0, 10, 0], [1000, 1000, 0, 10, 0]],
        requested=[[0, 0, 0, 0, 0], [0, 0, 0, 0, 0]],
        request=[2000, 0, 0, 0, 0],
    )
    assert result.chosen == -1
    assert result.insufficient.tolist() == [1, 1]
    assert result.scores.tolist() == [0, 0]


def test_no_nodes() -> None:
    result = reference.filter_and_score(
        allocatable=np.zeros((0, 5), dtype=np.int64),
        requested=np.zeros((0, 5), dtype=np.int64),
        request=i64([1000, 0, 0, 0, 0]),
        pods_column=PODS,
        score_columns=SCORED,
        name_hashes=np.zeros(0, dtype=np.uint64),
        pod_hash=np.uint64(1),
    )
    assert result.chosen == -1


def test_request_row_is_not_modified() -> None:
    request = i64([1000, 0, 0, 0, 0])
    reference.filter_and_score(
        allocatable=i64([[4000, 4000, 0, 10, 0]]),
        requested=i64([[0, 0, 0, 0, 0]]),
        request=request,
        pods_column=PODS,
        score_columns=SCORED,
        name_hashes=u64([1]),
        pod_hash=np.uint64(1),
    )
    assert request.tolist() == [1000, 0, 0, 0, 0]


def test_tie_goes_to_the_highest_mix() -> None:
    hashes = [11, 22, 33, 44]
    same = [[4000, 4000, 0, 10, 0]] * 4
    for pod_hash in (1, 2, 3, 2**63 + 5):
        result = run(same, [[0] * 5] * 4, [1000, 0, 0, 0, 0], hashes=hashes, pod_hash=pod_hash)
        expected = max(range(4), key=lambda i: splitmix(hashes[i], pod_hash))
        assert result.chosen == expected


def test_tie_break_only_among_the_best_scores() -> None:
    hashes = [5, 6, 7]
    pod_hash = 99
    # Make the best-mixing node the one with a worse score: it must still lose.
    worst = max(range(3), key=lambda i: splitmix(hashes[i], pod_hash))
    requested = [[0] * 5 for _ in range(3)]
    requested[worst][CPU] = 1000
    result = run([[4000, 4000, 0, 10, 0]] * 3, requested, [1000, 0, 0, 0, 0], hashes=hashes)
    assert result.chosen != worst
    assert result.scores[result.chosen] > result.scores[worst]


# mix ------------------------------------------------------------------------------------------


def test_mix_matches_splitmix64() -> None:
    hashes = [0, 1, 12345, 2**63, 2**64 - 1]
    for pod_hash in (0, 42, 2**64 - 1):
        mixed = reference.mix(u64(hashes), np.uint64(pod_hash))
        assert mixed.tolist() == [splitmix(h, pod_hash) for h in hashes]


def test_mix_is_deterministic_and_depends_on_the_pod() -> None:
    hashes = u64([3, 1, 4, 1, 5, 9, 2, 6])
    first = reference.mix(hashes, np.uint64(1))
    assert first.tolist() == reference.mix(hashes.copy(), np.uint64(1)).tolist()
    other = reference.mix(hashes, np.uint64(2))
    assert all(a != b for a, b in zip(first.tolist(), other.tolist(), strict=True))


# Properties -----------------------------------------------------------------------------------

_AMOUNT = st.sampled_from([0, 1, 2, 4, 8])  # few values, so ties and exact fits are common


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[list[int]], list[list[int]], list[int], list[int]]:
    nodes = draw(st.integers(min_value=1, max_value=10))
    row = st.lists(_AMOUNT, min_size=5, max_size=5)
    allocatable = draw(st.lists(row, min_size=nodes, max_size=nodes))
    requested = draw(st.lists(row, min_size=nodes, max_size=nodes))
    request = draw(row)
    request[PODS] = 0  # a pod's request never names pods; the kernel adds the one slot itself
    hashes = draw(
        st.lists(
            st.integers(min_value=0, max_value=U64 - 1),
            min_size=nodes,
            max_size=nodes,
            unique=True,
        )
    )
    return allocatable, requested, request, hashes


def oracle_scores(alloc: list[int], used: list[int], request: list[int]) -> int:
    total = 0
    for column in SCORED:
        capacity, after = alloc[column], used[column] + request[column]
        if capacity > 0 and after <= capacity:
            total += (capacity - after) * 100 // capacity
    return total // len(SCORED)


@settings(max_examples=300, deadline=None)
@given(
    problem=problems(),
    pod_hash=st.integers(min_value=0, max_value=U64 - 1),
    data=st.data(),
)
def test_choice_is_the_best_feasible_node_in_any_row_order(
    problem: tuple[list[list[int]], list[list[int]], list[int], list[int]],
    pod_hash: int,
    data: st.DataObject,
) -> None:
    allocatable, requested, request, hashes = problem
    result = run(allocatable, requested, request, hashes=hashes, pod_hash=pod_hash)

    need = [*request[:PODS], 1, *request[PODS + 1 :]]
    feasible = []
    for node, (alloc, used) in enumerate(zip(allocatable, requested, strict=True)):
        bits = sum(
            1 << r for r, amount in enumerate(need) if amount > 0 and amount > alloc[r] - used[r]
        )
        assert result.insufficient[node] == bits
        expected = oracle_scores(alloc, used, request) if bits == 0 else 0
        assert result.scores[node] == expected
        if bits == 0:
            feasible.append(node)

    if not feasible:
        assert result.chosen == -1
    else:
        assert result.chosen in feasible
        best = max(int(result.scores[n]) for n in feasible)
        assert result.scores[result.chosen] == best
        tied = [n for n in feasible if result.scores[n] == best]
        assert result.chosen == max(tied, key=lambda n: splitmix(hashes[n], pod_hash))

    perm = data.draw(st.permutations(range(len(allocatable))), label="row order")
    shuffled = run(
        [allocatable[i] for i in perm],
        [requested[i] for i in perm],
        request,
        hashes=[hashes[i] for i in perm],
        pod_hash=pod_hash,
    )
    if result.chosen == -1:
        assert shuffled.chosen == -1
    else:
        assert perm[shuffled.chosen] == result.chosen
    assert shuffled.scores.tolist() == [int(result.scores[i]) for i in perm]
    assert shuffled.insufficient.tolist() == [int(result.insufficient[i]) for i in perm]
