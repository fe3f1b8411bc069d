"""ImageLocality as kube-scheduler scores it: normalised names, sizes scaled by the share of
nodes holding the image, the per-container thresholds, and image volumes as each release counts
them; the numbers are worked by hand from plugins/imagelocality/image_locality.go."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plumb.backend.records import objects
from plumb.framework import cycle, emulation, scoring
from plumb.framework.plugins import imagelocality
from plumb.kernel import compiled, contract, reference
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.small_clusters import cluster, pod, statics

MB = 1024 * 1024
NEWEST = emulation.NEWEST_EMULATION.image_volumes  # a pod without image volumes: any release
KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])


@pytest.mark.parametrize(
    ("name", "normalised"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.27", "nginx:1.27"),
        ("registry.local:5000/app", "registry.local:5000/app:latest"),  # a port is no tag
        ("registry.local:5000/app:v2", "registry.local:5000/app:v2"),
        ("repo/app@sha256:0123abcd", "repo/app@sha256:0123abcd"),  # ":" after the last "/"
    ],
)
def test_names_without_a_tag_get_latest(name: str, normalised: str) -> None:
    assert objects.normalized_image(name) == normalised


def test_thresholds_per_container() -> None:
    # 23 MiB and below score 0, 1000 MiB per container and above 100, linear in between with
    # Go's integer division: 100 * (500 - 23) // (1000 - 23) = 47700 // 977 = 48.
    assert imagelocality.priority(0, 1) == 0
    assert imagelocality.priority(23 * MB, 1) == 0
    assert imagelocality.priority(500 * MB, 1) == 48
    assert imagelocality.priority(1000 * MB, 1) == 100
    assert imagelocality.priority(5000 * MB, 1) == 100
    # Two containers: the ceiling doubles, 100 * (1000 - 23) // (2000 - 23) = 97700 // 1977.
    assert imagelocality.priority(1000 * MB, 2) == 49


def test_an_image_is_scaled_by_the_share_of_nodes_holding_it() -> None:
    # 500 MiB held by 2 nodes of 4: int(524288000.0 * 0.5) = 262144000 (250 MiB).
    assert imagelocality.scaled_size(500 * MB, 2, 4) == 250 * MB
    # 1 of 3: int(524288000.0 * (1 / 3)) truncates 174762666.66...
    assert imagelocality.scaled_size(500 * MB, 1, 3) == 174762666


def test_node_images_are_parsed_and_indexed_with_their_holders() -> None:
    nodes = statics(
        make_node("n1").images((["docker.io/library/app:v1", "app:v1"], 500 * MB)),
        make_node("n2").images((["app:v1"], 500 * MB), (["side:latest"], 40 * MB)),
        make_node("n3"),
    )
    assert nodes.nodes[0].images == (("docker.io/library/app:v1", 500 * MB), ("app:v1", 500 * MB))
    size, where = nodes.images["app:v1"]
    assert size == 500 * MB
    assert where.tolist() == [0, 1]
    assert nodes.images["side:latest"][1].tolist() == [1]
    # Interned: every node's copy of a name is one string.
    assert nodes.nodes[0].images[1][0] is nodes.nodes[1].images[0][0]


def test_scores_per_node_by_hand() -> None:
    nodes = statics(
        make_node("n1").images((["app:v1"], 500 * MB), (["busybox:latest"], 100 * MB)),
        make_node("n2").images((["app:v1"], 500 * MB)),
        make_node("n3").images((["docker.io/library/app:v1"], 500 * MB)),  # another name: no match
        make_node("n4"),
    )
    one = pod(make_pod("one").images("app:v1"), "uid-one")
    # app:v1 on 2 of 4 nodes: 250 MiB; 100 * (250 - 23) MiB // 977 MiB = 22700 // 977 = 23.
    assert imagelocality.score(one, nodes, NEWEST).tolist() == [23, 23, 0, 0]
    # An init container counts, both for its image and for the number of containers:
    # n1 holds busybox (1 node of 4: 25 MiB) too, 275 MiB of a 2000 MiB ceiling:
    # 100 * (275 - 23) // (2000 - 23) = 25200 // 1977 = 12; n2 250 MiB: 22700 // 1977 = 11.
    two = pod(make_pod("two").images("app:v1", init=("busybox",)), "uid-two")
    assert two.images == ("busybox:latest", "app:v1")
    assert imagelocality.score(two, nodes, NEWEST).tolist() == [12, 11, 0, 0]
    assert (
        imagelocality.score(
            pod(make_pod("none").images("other:v1"), "uid-none"), nodes, NEWEST
        ).tolist()
        == [0] * 4
    )


@KERNELS
def test_the_node_holding_the_image_wins_between_alike_nodes(kernel: Any) -> None:
    nodes = [
        make_node("n1"),
        make_node("n2").images((["app:v1"], 800 * MB)),
        make_node("n3"),
    ]
    c = cluster(nodes)
    incoming = pod(make_pod("web").images("app:v1"), "uid-web")
    prepared = cycle.prepare([incoming], c.snapshot(), c, scoring.DEFAULT)
    assert prepared.compiled is not None
    batch = prepared.compiled.batch
    # 800 MiB on 1 node of 3: int(838860800.0 * (1 / 3)) = 279620266;
    # 100 * (279620266 - 24117248) // 1024458752 = 24.
    assert batch.image_score.tolist() == [[0, 24, 0]]
    (decision,) = cycle.explain(prepared.compiled, kernel(prepared.compiled.cluster, batch))
    assert decision.node == "n2"
    assert decision.candidates[0].scores[contract.IMAGE_LOCALITY] == 24
    # Weighed 0 (disabled), the score is not even computed.
    weights = list(scoring.DEFAULT_WEIGHTS)
    weights[contract.IMAGE_LOCALITY] = 0
    off = cycle.prepare([incoming], c.snapshot(), c, scoring.Profile(weights=tuple(weights)))
    assert off.compiled is not None
    assert not np.any(off.compiled.batch.image_score)


def test_replicas_share_one_row_and_other_images_get_their_own() -> None:
    c = cluster([make_node("n1").images((["app:v1"], 800 * MB)), make_node("n2")])
    pods = [
        pod(make_pod("a").images("app:v1"), "uid-a"),
        pod(make_pod("b").images("app:v1"), "uid-b"),
        pod(make_pod("c").images("db:v1"), "uid-c"),
    ]
    prepared = cycle.prepare(pods, c.snapshot(), c, scoring.DEFAULT)
    assert prepared.compiled is not None
    batch = prepared.compiled.batch
    assert batch.static_row.tolist() == [0, 0, 1]
    assert batch.image_score.tolist() == [[38, 0], [0, 0]]  # 400 MiB: 37700 // 977 = 38


# The notes' worked example (docs/versions.md): 3 nodes; a pod of one container whose image no
# node holds and one image volume of 500 MiB that node X alone holds.
_VOLUME = "registry.plumb.test/models/weights:v1"


def _volume_case() -> tuple[objects.PodInfo, Any]:
    nodes = statics(make_node("w"), make_node("x").images(([_VOLUME], 500 * MB)), make_node("y"))
    incoming = pod(
        make_pod("reader").images("registry.plumb.test/app:v1").image_volume("data", _VOLUME),
        "uid-reader",
    )
    return incoming, nodes


@pytest.mark.parametrize(
    ("minor", "expected"),
    [
        # v1.34, v1.35: the image volume is not looked at.
        (34, [0, 0, 0]),
        (35, [0, 0, 0]),
        # v1.36: int(524288000 / 3) = 174762666 in the sum, the bound one container's 1000 MiB:
        # 100 * (174762666 - 24117248) // (1048576000 - 24117248) = 15064541800 // 1024458752.
        (36, [0, 14, 0]),
        # v1.37: the image volume counts in the bound as well: 2000 MiB,
        # 15064541800 // (2097152000 - 24117248) = 15064541800 // 2073034752.
        (37, [0, 7, 0]),
    ],
)
def test_image_volumes_count_as_each_release_counts_them(minor: int, expected: list[int]) -> None:
    incoming, nodes = _volume_case()
    assert incoming.image_volumes == (_VOLUME,)
    assert incoming.images == ("registry.plumb.test/app:v1",)
    release = emulation.emulate(minor).image_volumes
    assert imagelocality.score(incoming, nodes, release).tolist() == expected


def test_an_image_volume_no_node_holds_lowers_the_score_from_v1_37() -> None:
    # The container's image, 800 MiB on x alone (279620266 scaled); the image volume nowhere.
    # Up to v1.36 the bound is one container's: 100 * (279620266 - 24117248) // 1024458752 =
    # 24; from v1.37 the image volume raises it to 2000 MiB: 25550301800 // 2073034752 = 12.
    nodes = statics(make_node("w"), make_node("x").images((["app:v1"], 800 * MB)), make_node("y"))
    incoming = pod(make_pod("r").images("app:v1").image_volume("data", "absent:v1"), "uid-r")
    scores = {
        minor: imagelocality.score(incoming, nodes, emulation.emulate(minor).image_volumes)
        for minor in emulation.MINORS
    }
    assert {minor: s.tolist() for minor, s in scores.items()} == {
        34: [0, 24, 0],
        35: [0, 24, 0],
        36: [0, 24, 0],
        37: [0, 12, 0],
    }


@pytest.mark.parametrize("minor", emulation.MINORS)
def test_the_profiles_release_scores_the_batch(minor: int) -> None:
    incoming, _nodes = _volume_case()
    c = cluster([make_node("w"), make_node("x").images(([_VOLUME], 500 * MB)), make_node("y")])
    profile = scoring.Profile(kube=emulation.emulate(minor))
    prepared = cycle.prepare([incoming], c.snapshot(), c, profile)
    assert prepared.compiled is not None
    expected = {34: 0, 35: 0, 36: 14, 37: 7}[minor]
    assert prepared.compiled.batch.image_score.tolist() == [[0, expected, 0]]
