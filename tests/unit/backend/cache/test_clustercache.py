"""plumb.backend.cache.clustercache: the pod state machine and what the snapshot counts."""

from __future__ import annotations

import pytest

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache.clustercache import PodState
from plumb.backend.records import objects
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.small_clusters import pod


def node(name: str, **capacity: str | int) -> objects.NodeInfo:
    return objects.parse_node(make_node(name).capacity(**capacity).obj())


def used(c: cache_module.Cache, resource: str = "cpu") -> dict[str, int]:
    """What the snapshot shows requested of one resource, per node."""
    snap = c.snapshot()
    column = snap.resources.index(resource)
    return {name: int(snap.requested[i, column]) for i, name in enumerate(snap.names)}


@pytest.fixture
def two_nodes() -> cache_module.Cache:
    c = cache_module.Cache()
    c.upsert_node(node("n1"))
    c.upsert_node(node("n2"))
    return c


def test_assume_counts_the_pod(two_nodes: cache_module.Cache) -> None:
    web = pod(make_pod("web").req(cpu="1", memory="1Gi"), "u1")
    two_nodes.assume(web, "n1")
    assert two_nodes.state("u1") is PodState.ASSUMED
    assert two_nodes.node_of("u1") == "n1"
    assert used(two_nodes) == {"n1": 1000, "n2": 0}
    assert used(two_nodes, "memory") == {"n1": 1024**3, "n2": 0}
    assert used(two_nodes, "pods") == {"n1": 1, "n2": 0}


def test_assuming_twice_is_an_error(two_nodes: cache_module.Cache) -> None:
    web = pod(make_pod("web").req(cpu="1"), "u1")
    two_nodes.assume(web, "n1")
    with pytest.raises(cache_module.CacheError, match="u1"):
        two_nodes.assume(web, "n2")
    assert used(two_nodes) == {"n1": 1000, "n2": 0}


def test_assuming_an_added_pod_is_an_error(two_nodes: cache_module.Cache) -> None:
    two_nodes.add_pod(pod(make_pod("web").req(cpu="1").node("n1"), "u1"))
    with pytest.raises(cache_module.CacheError):
        two_nodes.assume(pod(make_pod("web").req(cpu="1"), "u1"), "n2")


def test_forget_undoes_an_assumption(two_nodes: cache_module.Cache) -> None:
    two_nodes.assume(pod(make_pod("web").req(cpu="1"), "u1"), "n1")
    two_nodes.forget("u1")
    assert two_nodes.state("u1") is None
    assert two_nodes.assumed_count() == 0
    assert used(two_nodes) == {"n1": 0, "n2": 0}
    assert used(two_nodes, "pods") == {"n1": 0, "n2": 0}
    # Forgotten, the pod may be assumed again (the next attempt).
    two_nodes.assume(pod(make_pod("web").req(cpu="1"), "u1"), "n2")
    assert used(two_nodes) == {"n1": 0, "n2": 1000}


def test_forget_of_an_added_pod_does_nothing(two_nodes: cache_module.Cache) -> None:
    two_nodes.add_pod(pod(make_pod("web").req(cpu="1").node("n1"), "u1"))
    two_nodes.forget("u1")
    two_nodes.forget("unknown")
    assert two_nodes.state("u1") is PodState.ADDED
    assert used(two_nodes) == {"n1": 1000, "n2": 0}


def test_add_confirms_an_assumed_pod_without_counting_it_twice(
    two_nodes: cache_module.Cache,
) -> None:
    two_nodes.assume(pod(make_pod("web").req(cpu="1"), "u1"), "n1")
    assert two_nodes.assumed_count() == 1
    two_nodes.add_pod(pod(make_pod("web").req(cpu="1").node("n1"), "u1"))
    assert two_nodes.assumed_count() == 0
    assert two_nodes.state("u1") is PodState.ADDED
    assert used(two_nodes) == {"n1": 1000, "n2": 0}
    assert used(two_nodes, "pods") == {"n1": 1, "n2": 0}
    assert two_nodes.pod_count() == 1


def test_add_on_another_node_moves_an_assumed_pod(two_nodes: cache_module.Cache) -> None:
    two_nodes.assume(pod(make_pod("web").req(cpu="1"), "u1"), "n1")
    two_nodes.add_pod(pod(make_pod("web").req(cpu="1").node("n2"), "u1"))
    assert two_nodes.node_of("u1") == "n2"
    assert used(two_nodes) == {"n1": 0, "n2": 1000}
    assert used(two_nodes, "pods") == {"n1": 0, "n2": 1}


def test_update_of_an_added_pod_replaces_its_requests(two_nodes: cache_module.Cache) -> None:
    two_nodes.add_pod(pod(make_pod("web").req(cpu="1").node("n1"), "u1"))
    two_nodes.add_pod(pod(make_pod("web").req(cpu="2").node("n1"), "u1"))
    assert used(two_nodes) == {"n1": 2000, "n2": 0}


def test_remove_pod_frees_its_resources(two_nodes: cache_module.Cache) -> None:
    two_nodes.add_pod(pod(make_pod("a").req(cpu="1").node("n1"), "u1"))
    two_nodes.add_pod(pod(make_pod("b").req(cpu="2").node("n1"), "u2"))
    two_nodes.remove_pod("u1")
    two_nodes.remove_pod("u1")
    assert two_nodes.state("u1") is None
    assert used(two_nodes) == {"n1": 2000, "n2": 0}
    assert used(two_nodes, "pods") == {"n1": 1, "n2": 0}


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_terminal_pods_hold_nothing(two_nodes: cache_module.Cache, phase: str) -> None:
    two_nodes.add_pod(pod(make_pod("job").req(cpu="1").node("n1"), "u1"))
    two_nodes.add_pod(pod(make_pod("job").req(cpu="1").node("n1").phase(phase), "u1"))
    two_nodes.add_pod(pod(make_pod("old").req(cpu="1").node("n2").phase(phase), "u2"))
    assert two_nodes.state("u1") is None
    assert two_nodes.state("u2") is None
    assert used(two_nodes) == {"n1": 0, "n2": 0}
    assert used(two_nodes, "pods") == {"n1": 0, "n2": 0}


def test_pods_on_an_unseen_node_count_when_it_appears() -> None:
    c = cache_module.Cache()
    c.upsert_node(node("n1"))
    c.add_pod(pod(make_pod("early").req(cpu="1").node("late"), "u1"))
    c.assume(pod(make_pod("mine").req(cpu="500m"), "u2"), "late")
    assert used(c) == {"n1": 0}
    c.upsert_node(node("late"))
    assert used(c) == {"late": 1500, "n1": 0}
    assert used(c, "pods") == {"late": 2, "n1": 0}
    # A later update of the node does not count them again.
    c.upsert_node(node("late", cpu="8"))
    assert used(c) == {"late": 1500, "n1": 0}


def test_removing_a_pod_from_an_unseen_node_is_harmless() -> None:
    c = cache_module.Cache()
    c.add_pod(pod(make_pod("early").req(cpu="1").node("late"), "u1"))
    c.remove_pod("u1")
    c.upsert_node(node("late"))
    assert used(c) == {"late": 0}


def test_removed_node_comes_back_with_its_pods(two_nodes: cache_module.Cache) -> None:
    two_nodes.add_pod(pod(make_pod("a").req(cpu="1").node("n1"), "u1"))
    two_nodes.assume(pod(make_pod("b").req(cpu="2"), "u2"), "n1")
    two_nodes.remove_node("n1")
    assert used(two_nodes) == {"n2": 0}
    # A pod that leaves while the node is gone is not counted when it comes back.
    two_nodes.add_pod(pod(make_pod("c").req(cpu="250m").node("n1"), "u3"))
    two_nodes.remove_pod("u3")
    two_nodes.upsert_node(node("n1"))
    assert used(two_nodes) == {"n1": 3000, "n2": 0}
    assert used(two_nodes, "pods") == {"n1": 2, "n2": 0}


def test_reconcile_sweeps_what_the_list_no_longer_has(two_nodes: cache_module.Cache) -> None:
    two_nodes.add_pod(pod(make_pod("kept").req(cpu="1").node("n1"), "kept"))
    two_nodes.add_pod(pod(make_pod("gone").req(cpu="2").node("n1"), "gone"))
    two_nodes.add_pod(pod(make_pod("finished").req(cpu="1").node("n1"), "finished"))
    two_nodes.assume(pod(make_pod("mine").req(cpu="500m"), "mine"), "n1")
    # Assumed, then deleted while the watch was down: the list lacks it.
    two_nodes.assume(pod(make_pod("deleted").req(cpu="700m"), "deleted"), "n1")
    two_nodes.add_pod(pod(make_pod("on-n2").req(cpu="1").node("n2"), "on-n2"))

    two_nodes.reconcile(
        [node("n1"), node("n3")],
        [
            pod(make_pod("kept").req(cpu="1").node("n1"), "kept"),
            pod(make_pod("finished").req(cpu="1").node("n1").phase("Succeeded"), "finished"),
            pod(make_pod("new").req(cpu="250m").node("n3"), "new"),
            pod(make_pod("pending").req(cpu="4"), "pending"),
            pod(make_pod("mine").req(cpu="500m"), "mine"),  # its binding not seen yet
        ],
    )

    assert two_nodes.nodes.names() == ["n1", "n3"]
    assert two_nodes.state("kept") is PodState.ADDED
    assert two_nodes.state("gone") is None
    assert two_nodes.state("finished") is None
    assert two_nodes.state("mine") is PodState.ASSUMED
    assert two_nodes.state("deleted") is None  # its room is free again
    assert two_nodes.assumed_count() == 1
    assert two_nodes.state("new") is PodState.ADDED
    assert two_nodes.state("pending") is None
    assert two_nodes.state("on-n2") is None
    assert used(two_nodes) == {"n1": 1500, "n3": 250}
    assert used(two_nodes, "pods") == {"n1": 2, "n3": 1}


def test_reconcile_confirms_an_assumed_pod_the_list_shows_bound(
    two_nodes: cache_module.Cache,
) -> None:
    two_nodes.assume(pod(make_pod("mine").req(cpu="1"), "mine"), "n1")
    two_nodes.reconcile(
        [node("n1"), node("n2")], [pod(make_pod("mine").req(cpu="1").node("n1"), "mine")]
    )
    assert two_nodes.state("mine") is PodState.ADDED
    assert used(two_nodes) == {"n1": 1000, "n2": 0}


def test_reconcile_keeps_counts_of_nodes_it_lists(two_nodes: cache_module.Cache) -> None:
    # Re-listing the same world twice changes nothing.
    world_pods = [pod(make_pod("a").req(cpu="1").node("n1"), "a")]
    for _ in range(2):
        two_nodes.reconcile([node("n1"), node("n2")], world_pods)
    assert used(two_nodes) == {"n1": 1000, "n2": 0}
    assert two_nodes.pod_count() == 1


def test_the_watch_confirming_an_assumed_pod_keeps_the_decided_record(
    two_nodes: cache_module.Cache,
) -> None:
    decided = pod(make_pod("web").label("app", "web").req(cpu="1"), "u1")
    two_nodes.assume(decided, "n1")
    two_nodes.add_pod(pod(make_pod("web").label("app", "web").req(cpu="1").node("n1"), "u1"))
    # Only spec.nodeName differs: one record of the pod is kept, the one the scheduler decided.
    (placed,) = two_nodes.placed()
    assert placed.pod is decided
    assert (placed.node, placed.state) == ("n1", PodState.ADDED)

    relabelled = pod(make_pod("web").label("app", "api").req(cpu="1").node("n1"), "u1")
    two_nodes.add_pod(relabelled)
    (placed,) = two_nodes.placed()
    assert placed.pod is relabelled


def test_the_watch_confirming_an_assumed_pod_leaves_the_snapshot_as_it_was(
    two_nodes: cache_module.Cache,
) -> None:
    # The room the pod takes is the same before and after: the next batch reuses the
    # snapshot rather than copying the node table again.
    two_nodes.assume(pod(make_pod("web").req(cpu="1"), "u1"), "n1")
    before = two_nodes.snapshot()
    two_nodes.add_pod(pod(make_pod("web").req(cpu="1").node("n1"), "u1"))
    after = two_nodes.snapshot()
    assert after.generation == before.generation
    assert used(two_nodes) == {"n1": 1000, "n2": 0}
    # A confirmation that changes what the pod asks for does take a new snapshot.
    two_nodes.assume(pod(make_pod("api").req(cpu="1"), "u2"), "n2")
    assumed = two_nodes.snapshot()
    two_nodes.add_pod(pod(make_pod("api").req(cpu="2").node("n2"), "u2"))
    assert two_nodes.snapshot().generation != assumed.generation
    assert used(two_nodes) == {"n1": 1000, "n2": 2000}


def test_the_cache_keeps_no_trace_of_pods_and_nodes_it_no_longer_holds(
    two_nodes: cache_module.Cache,
) -> None:
    # A write tick is kept only for what is in the cache (about 150 B a pod otherwise, for
    # every pod ever seen).
    for i in range(1000):
        uid = f"p{i}"
        two_nodes.add_pod(pod(make_pod(uid).req(cpu="1m").node("n1"), uid))
        two_nodes.remove_pod(uid)
    two_nodes.upsert_node(node("n9"))
    two_nodes.remove_node("n9")
    assert two_nodes._pod_ticks == {}  # the leak was private state
    assert set(two_nodes._node_ticks) == {"n1", "n2"}


def test_a_sweep_keeps_what_was_written_after_the_list_began(two_nodes: cache_module.Cache) -> None:
    listed_at = two_nodes.tick
    two_nodes.assume(pod(make_pod("late").req(cpu="1"), "late"), "n1")  # after the list began
    two_nodes.sweep(None, set(), listed_at=listed_at)
    assert two_nodes.state("late") is PodState.ASSUMED
    assert len(two_nodes.sweep(None, set(), listed_at=two_nodes.tick)) == 1
    assert two_nodes.state("late") is None
