"""NodeAffinity: nodeSelector and required node affinity decide where a pod may go; preferred
terms add their weights to the nodes they match."""

from __future__ import annotations

import pytest

from plumb.backend.cache import snapshot
from plumb.backend.records import objects
from plumb.framework.plugins import nodeaffinity
from plumb_dev.testing.builders import (
    ZONE_LABEL,
    PodBuilder,
    expr,
    make_node,
    make_pod,
)
from tests.support.small_clusters import statics

DISK = "example.com/disk"
CORES = "example.com/cores"


CLUSTER = statics(
    make_node("a1").zone("a").label(DISK, "ssd").label(CORES, "8"),
    make_node("a2").zone("a").label(DISK, "hdd").label(CORES, "64"),
    make_node("b1").zone("b").label(DISK, "ssd").label(CORES, "many"),
    make_node("c1").zone("c"),
)


def fitting(pod: PodBuilder, cluster: snapshot.NodeStatics = CLUSTER) -> list[str]:
    parsed = objects.parse_pod(pod.obj())
    assert parsed.problem is None
    fails = nodeaffinity.filter(parsed, cluster)
    assert (nodeaffinity.matches(parsed, cluster) == ~fails).all()
    return [name for name, failed in zip(cluster.names, fails, strict=True) if not failed]


def scores(pod: PodBuilder) -> dict[str, int]:
    raw = nodeaffinity.score_raw(objects.parse_pod(pod.obj()), CLUSTER)
    return dict(zip(CLUSTER.names, raw.tolist(), strict=True))


def test_a_pod_without_constraints_fits_everywhere() -> None:
    assert fitting(make_pod("web")) == ["a1", "a2", "b1", "c1"]


def test_node_selector_needs_every_label_with_its_value() -> None:
    assert fitting(make_pod("web").node_selector(ZONE_LABEL, "a")) == ["a1", "a2"]
    pod = make_pod("web").node_selector(ZONE_LABEL, "a").node_selector(DISK, "ssd")
    assert fitting(pod) == ["a1"]


def test_node_selector_on_a_value_no_node_has_fits_nowhere() -> None:
    assert fitting(make_pod("web").node_selector(ZONE_LABEL, "z")) == []


def test_node_selector_and_affinity_must_both_hold() -> None:
    pod = make_pod("web").node_selector(DISK, "ssd").node_affinity(expr(ZONE_LABEL, "In", "a", "c"))
    # b1 has the disk but not the zone; a2 and c1 have the zone but not the disk.
    assert fitting(pod) == ["a1"]


def test_in_matches_any_listed_value() -> None:
    assert fitting(make_pod("web").node_affinity(expr(ZONE_LABEL, "In", "b", "c", "nowhere"))) == [
        "b1",
        "c1",
    ]


def test_not_in_and_does_not_exist_match_nodes_without_the_label() -> None:
    assert fitting(make_pod("web").node_affinity(expr(DISK, "NotIn", "hdd"))) == ["a1", "b1", "c1"]
    assert fitting(make_pod("web").node_affinity(expr(DISK, "DoesNotExist"))) == ["c1"]
    assert fitting(make_pod("web").node_affinity(expr(DISK, "Exists"))) == ["a1", "a2", "b1"]


def test_gt_and_lt_compare_integers_not_strings() -> None:
    # "64" < "8" as strings; as integers 64 > 8.
    assert fitting(make_pod("web").node_affinity(expr(CORES, "Gt", "10"))) == ["a2"]
    assert fitting(make_pod("web").node_affinity(expr(CORES, "Lt", "10"))) == ["a1"]


def test_gt_never_matches_a_non_integer_or_missing_label() -> None:
    # b1's "many" and c1's missing label match neither Gt nor Lt.
    assert fitting(make_pod("web").node_affinity(expr(CORES, "Gt", "-1000"))) == ["a1", "a2"]
    assert fitting(make_pod("web").node_affinity(expr(CORES, "Lt", "1000"))) == ["a1", "a2"]


def test_expressions_in_a_term_are_anded() -> None:
    pod = make_pod("web").node_affinity(expr(ZONE_LABEL, "In", "a"), expr(DISK, "In", "ssd"))
    assert fitting(pod) == ["a1"]


def test_terms_are_ored() -> None:
    pod = (
        make_pod("web")
        .node_affinity(expr(ZONE_LABEL, "In", "a"), expr(DISK, "In", "ssd"))
        .node_affinity(expr(ZONE_LABEL, "In", "c"))
    )
    assert fitting(pod) == ["a1", "c1"]


def test_an_empty_term_list_matches_no_node() -> None:
    assert fitting(make_pod("web").no_node_selector_terms()) == []


def test_an_empty_term_matches_no_node_but_other_terms_still_count() -> None:
    assert fitting(make_pod("web").node_affinity()) == []
    pod = make_pod("web").node_affinity().node_affinity(expr(ZONE_LABEL, "In", "b"))
    assert fitting(pod) == ["b1"]


def test_match_fields_pins_the_node_name() -> None:
    pin = expr("metadata.name", "In", "a2")
    assert fitting(make_pod("ds").node_affinity(fields=[pin])) == ["a2"]
    avoid = expr("metadata.name", "NotIn", "a2")
    assert fitting(make_pod("web").node_affinity(fields=[avoid])) == ["a1", "b1", "c1"]


def test_match_fields_and_expressions_in_one_term_are_anded() -> None:
    pod = make_pod("ds").node_affinity(
        expr(DISK, "In", "ssd"), fields=[expr("metadata.name", "In", "a2")]
    )
    assert fitting(pod) == []


def test_match_fields_in_with_two_names_is_unparseable_and_matches_nothing() -> None:
    # component-helpers accepts exactly one value for a field selector; the term is dropped.
    pod = make_pod("ds").node_affinity(fields=[expr("metadata.name", "In", "a1", "a2")])
    assert fitting(pod) == []


def test_preferred_terms_add_their_weights_where_they_match() -> None:
    pod = (
        make_pod("web")
        .preferred_node_affinity(10, expr(ZONE_LABEL, "In", "a"))
        .preferred_node_affinity(5, expr(DISK, "In", "ssd"))
        .preferred_node_affinity(7, fields=[expr("metadata.name", "In", "c1")])
    )
    assert scores(pod) == {"a1": 15, "a2": 10, "b1": 5, "c1": 7}


def test_an_empty_preferred_term_scores_nothing() -> None:
    assert scores(make_pod("web").preferred_node_affinity(50)) == dict.fromkeys(CLUSTER.names, 0)


def test_preferred_terms_do_not_filter() -> None:
    pod = make_pod("web").preferred_node_affinity(10, expr(ZONE_LABEL, "In", "nowhere"))
    assert fitting(pod) == ["a1", "a2", "b1", "c1"]


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (make_pod("web"), None),
        (make_pod("web").node_affinity(expr(ZONE_LABEL, "In", "a")), None),
        (make_pod("ds").node_affinity(fields=[expr("metadata.name", "In", "a1")]), {"a1"}),
        # One term without a name pin lets every node through.
        (
            make_pod("ds")
            .node_affinity(fields=[expr("metadata.name", "In", "a1")])
            .node_affinity(expr(ZONE_LABEL, "In", "b")),
            None,
        ),
        # Union over terms.
        (
            make_pod("ds")
            .node_affinity(fields=[expr("metadata.name", "In", "a1")])
            .node_affinity(fields=[expr("metadata.name", "In", "b1")]),
            {"a1", "b1"},
        ),
        # Intersection within a term: no name satisfies both, so the terms conflict.
        (
            make_pod("ds").node_affinity(
                fields=[expr("metadata.name", "In", "a1"), expr("metadata.name", "In", "b1")]
            ),
            set(),
        ),
    ],
)
def test_prefilter_pins_node_names_as_kube_scheduler(
    pod: PodBuilder, expected: set[str] | None
) -> None:
    names = nodeaffinity.prefilter_nodes(objects.parse_pod(pod.obj()))
    assert names == (None if expected is None else frozenset(expected))


def test_reasons_and_plugin_name_are_kube_schedulers() -> None:
    assert nodeaffinity.NAME == "NodeAffinity"
    assert nodeaffinity.MISMATCH == "node(s) didn't match Pod's node affinity/selector"
    assert nodeaffinity.CONFLICT == "pod affinity terms conflict"
    assert nodeaffinity.NOT_PREFILTERED == "node(s) didn't satisfy plugin(s) [NodeAffinity]"
    assert nodeaffinity.UNRESOLVABLE is True
    assert (nodeaffinity.SCORE_WEIGHT, nodeaffinity.SCORE_REVERSED) == (2, False)
