"""plumb.backend.cache.nodetable: the columnar node store and the snapshots it hands out."""

from __future__ import annotations

import numpy as np
import pytest

from plumb.backend.cache import nodetable, snapshot
from plumb.backend.records import hashing, objects
from plumb_dev.testing.builders import make_node

GI = 1024**3


def node(name: str, **capacity: str | int) -> objects.NodeInfo:
    return objects.parse_node(make_node(name).capacity(**capacity).obj())


def rows(snap: snapshot.Snapshot, resource: str) -> dict[str, tuple[int, int]]:
    """(allocatable, requested) of one resource per node name, read from the snapshot arrays."""
    column = snap.resources.index(resource)
    return {
        name: (int(snap.allocatable[i, column]), int(snap.requested[i, column]))
        for i, name in enumerate(snap.names)
    }


@pytest.mark.parametrize("order", [["a", "b", "c"], ["c", "a", "b"], ["b", "c", "a"]])
def test_snapshot_rows_are_in_name_order(order: list[str]) -> None:
    table = nodetable.NodeTable()
    cpus = {"a": "1", "b": "2", "c": "3"}
    for name in order:
        table.upsert(node(name, cpu=cpus[name]))
    table.add_request("b", {"cpu": 500}, +1)
    snap = table.snapshot()
    assert snap.names == ("a", "b", "c")
    assert snap.resources[:4] == objects.BASE_RESOURCES
    assert rows(snap, "cpu") == {"a": (1000, 0), "b": (2000, 500), "c": (3000, 0)}
    expected = [hashing.stable_hash_u64(name) for name in ("a", "b", "c")]
    assert snap.name_hashes.tolist() == expected


def test_requested_counts_one_pod_per_request() -> None:
    table = nodetable.NodeTable()
    table.upsert(node("n1", cpu="4"))
    table.add_request("n1", {"cpu": 500, "memory": GI}, +1)
    table.add_request("n1", {}, +1)
    assert table.requested("n1") == {
        "cpu": 500,
        "memory": GI,
        "ephemeral-storage": 0,
        "pods": 2,
    }
    table.add_request("n1", {"cpu": 500, "memory": GI}, -1)
    assert table.requested("n1") == {"cpu": 0, "memory": 0, "ephemeral-storage": 0, "pods": 1}


def test_request_on_an_unknown_node_is_ignored() -> None:
    table = nodetable.NodeTable()
    table.upsert(node("n1"))
    table.add_request("ghost", {"cpu": 500}, +1)
    assert "ghost" not in table
    assert table.requested("n1")["pods"] == 0
    assert table.snapshot().names == ("n1",)


def test_upsert_changes_allocatable_and_keeps_requested() -> None:
    table = nodetable.NodeTable()
    table.upsert(node("n1", cpu="4"))
    table.add_request("n1", {"cpu": 1500}, +1)
    table.upsert(node("n1", cpu="8"))
    assert len(table) == 1
    assert rows(table.snapshot(), "cpu") == {"n1": (8000, 1500)}


def test_new_extended_resource_adds_a_column_of_zeros() -> None:
    table = nodetable.NodeTable()
    table.upsert(node("a"))
    table.add_request("a", {"cpu": 100}, +1)
    table.upsert(node("b", **{"nvidia.com/gpu": 4}))
    table.add_request("b", {"nvidia.com/gpu": 1}, +1)
    snap = table.snapshot()
    assert snap.resources == (*objects.BASE_RESOURCES, "nvidia.com/gpu")
    assert rows(snap, "nvidia.com/gpu") == {"a": (0, 0), "b": (4, 1)}
    # The older columns of the older node are untouched by the widening.
    assert rows(snap, "cpu") == {"a": (4000, 100), "b": (4000, 0)}
    assert rows(snap, "pods") == {"a": (110, 1), "b": (110, 1)}


def test_a_request_for_an_unseen_resource_adds_its_column() -> None:
    table = nodetable.NodeTable()
    table.upsert(node("a"))
    table.add_request("a", {"example.com/widget": 3}, +1)
    assert rows(table.snapshot(), "example.com/widget") == {"a": (0, 3)}


def test_removed_node_leaves_the_snapshot() -> None:
    table = nodetable.NodeTable()
    for name in ("a", "b", "c"):
        table.upsert(node(name))
    assert table.snapshot().names == ("a", "b", "c")
    table.remove("b")
    table.remove("b")  # removing twice is harmless
    assert table.snapshot().names == ("a", "c")
    assert "b" not in table
    assert len(table) == 2


def test_reused_slot_starts_empty() -> None:
    table = nodetable.NodeTable()
    table.upsert(node("a", cpu="1"))
    table.upsert(node("b", cpu="2"))
    table.add_request("b", {"cpu": 1500, "nvidia.com/gpu": 1}, +1)
    table.remove("b")
    table.upsert(node("d", cpu="3"))
    table.upsert(node("b", cpu="5"))
    snap = table.snapshot()
    assert snap.names == ("a", "b", "d")
    assert rows(snap, "cpu") == {"a": (1000, 0), "b": (5000, 0), "d": (3000, 0)}
    assert rows(snap, "pods") == {"a": (110, 0), "b": (110, 0), "d": (110, 0)}
    assert rows(snap, "nvidia.com/gpu") == {"a": (0, 0), "b": (0, 0), "d": (0, 0)}
    assert snap.name_hashes.tolist() == [hashing.stable_hash_u64(n) for n in ("a", "b", "d")]


def test_churn_reuses_slots() -> None:
    table = nodetable.NodeTable()
    for round_ in range(5):
        names = [f"r{round_}-{i:02d}" for i in range(64)]
        for i, name in enumerate(names):
            table.upsert(node(name, cpu=i + 1))
            table.add_request(name, {"cpu": i}, +1)
        snap = table.snapshot()
        assert snap.names == tuple(names)
        assert rows(snap, "cpu") == {n: ((i + 1) * 1000, i) for i, n in enumerate(names)}
        for name in names:
            table.remove(name)
    assert len(table) == 0
    # Freed rows are reused: five rounds of 64 nodes never needed more than 64 rows.
    assert table._allocatable.shape[0] == 64


@pytest.mark.parametrize("count", [65, 129, 300])
def test_growth_keeps_data(count: int) -> None:
    table = nodetable.NodeTable()
    # Insert in reverse name order so that slot order and name order differ.
    names = [f"node-{i:03d}" for i in range(count)]
    for i in reversed(range(count)):
        table.upsert(node(names[i], cpu=i + 1))
        table.add_request(names[i], {"cpu": i, "memory": i * GI}, +1)
    snap = table.snapshot()
    assert snap.names == tuple(names)
    assert rows(snap, "cpu") == {n: ((i + 1) * 1000, i) for i, n in enumerate(names)}
    assert rows(snap, "memory") == {n: (32 * GI, i * GI) for i, n in enumerate(names)}
    assert snap.requested[:, snap.resources.index("pods")].tolist() == [1] * count
    assert snap.name_hashes.tolist() == [hashing.stable_hash_u64(n) for n in names]


def test_snapshot_arrays_are_read_only() -> None:
    table = nodetable.NodeTable()
    table.upsert(node("a"))
    snap = table.snapshot()
    for array in (snap.allocatable, snap.requested, snap.name_hashes):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1


def test_snapshot_does_not_see_later_changes() -> None:
    table = nodetable.NodeTable()
    table.upsert(node("a", cpu="1"))
    before = table.snapshot()
    table.add_request("a", {"cpu": 500}, +1)
    table.upsert(node("a", cpu="2"))
    table.upsert(node("b"))
    after = table.snapshot()
    assert rows(before, "cpu") == {"a": (1000, 0)}
    assert rows(after, "cpu") == {"a": (2000, 500), "b": (4000, 0)}
    assert after.generation > before.generation
    assert len(before) == 1
    assert len(after) == 2


def test_vector_follows_the_column_order() -> None:
    table = nodetable.NodeTable()
    row = table.vector({"example.com/widget": 2, "cpu": 300})
    assert table.resources == [*objects.BASE_RESOURCES, "example.com/widget"]
    assert row.tolist() == [300, 0, 0, 0, 2]
    assert row.dtype == np.int64
