"""The gang workload's groups: who belongs where, the time to a whole group, part-placed groups."""

from __future__ import annotations

import math

import pytest

from plumb_dev.bench import gangload
from plumb_dev.testing import builders, groupbuilders


def test_consecutive_measured_pods_make_a_group_and_name_it_in_spec_and_label() -> None:
    assert [gangload.group_of(i, 8) for i in (0, 7, 8, 2399)] == [
        "gang-00000",
        "gang-00000",
        "gang-00001",
        "gang-00299",
    ]
    body = gangload.member(builders.make_pod("pod-00009", "ns"), 9, 8).obj()
    assert body["spec"]["schedulingGroup"] == {"podGroupName": "gang-00001"}
    assert body["metadata"]["labels"][gangload.GROUP_LABEL] == "gang-00001"


def test_each_group_is_an_upstream_gang_of_its_size() -> None:
    body = gangload.group_body("gang-00003", "ns", 8)
    assert body["apiVersion"] == groupbuilders.UPSTREAM_API
    assert body["kind"] == "PodGroup"
    assert body["spec"]["schedulingPolicy"] == {"gang": {"minCount": 8}}
    assert gangload.GATES == {"GenericWorkload": True}


def test_a_group_is_placed_whole_at_its_last_members_binding() -> None:
    groups = {"a0": "a", "a1": "a", "b0": "b", "b1": "b"}
    sent = {"a0": 1.0, "a1": 1.5, "b0": 2.0, "b1": 2.1}
    bound = {"a0": 2.0, "a1": 4.0, "b0": 2.5}  # b1 never bound: b is not whole
    assert gangload.placed_whole(sent, bound, groups) == [3.0]
    figures = gangload.group_figures([3.0, 1.0], 3)
    assert figures == {"groups": 3, "whole": 2, "p50": 1.0, "p99": 3.0}
    assert math.isnan(gangload.group_figures([], 3)["p99"])


def _pod(name: str, group: str | None, node: str | None) -> dict[str, object]:
    pod = builders.make_pod(name, "ns")
    if group is not None:
        pod = pod.label(gangload.GROUP_LABEL, group)
    if node is not None:
        pod = pod.node(node)
    return pod.obj()


@pytest.mark.parametrize(
    ("bound_of_a", "expected"),
    [
        (0, []),
        (2, ["group a has 2 of its 3 members bound"]),
        (3, []),
    ],
)
def test_a_group_with_some_but_not_all_members_bound_is_part_placed(
    bound_of_a: int, expected: list[str]
) -> None:
    pods = [_pod(f"a{i}", "a", "n1" if i < bound_of_a else None) for i in range(3)]
    pods += [_pod("b0", "b", "n2"), _pod("b1", "b", "n2"), _pod("b2", "b", "n3")]
    pods.append(_pod("init", None, "n1"))  # an initial pod is in no group
    assert gangload.part_placed(pods, 3) == expected
