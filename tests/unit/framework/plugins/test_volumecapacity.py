"""VolumeBinding's storage capacity (plugins/volumecapacity.py, and its use in
plugins/volumebinding.py): the scoring function and its default shape as kube-scheduler's
scorer.go computes them, the CSIStorageCapacity check behind "did not have enough free storage",
and the per-node score for dynamic provisioning and for static PV matching."""

from __future__ import annotations

import numpy as np
import pytest

from plumb.backend.cache import snapshot, volumes
from plumb.framework.plugins import volumebinding, volumecapacity
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support import small_clusters
from tests.support.volume_objects import (
    FIVE,
    JSON,
    csidriver_body,
    pv_body,
    pvc_body,
    storage_capacity_body,
    storage_class_body,
    store_of,
)

DRIVER = "csi.example"
FAST = "fast"
DEFAULT = volumecapacity.DEFAULT_SHAPE


# --- the function -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("utilization", "expected"), [(0, 100), (1, 99), (30, 70), (99, 1), (100, 0), (150, 0)]
)
def test_the_default_shape_scores_free_capacity(utilization: int, expected: int) -> None:
    assert volumecapacity.broken_linear(DEFAULT, utilization) == expected


def test_a_falling_segment_divides_as_go_does_toward_zero() -> None:
    # 100 + (0 - 100) * 1 / 3: Go truncates -33.3 to -33 (67); floor division would give 66.
    assert volumecapacity.broken_linear(((0, 10), (3, 0)), 1) == 67
    assert volumecapacity.broken_linear(((0, 0), (3, 10)), 1) == 33
    # Before the first point and after the last, the shape is flat.
    assert volumecapacity.broken_linear(((20, 4), (80, 6)), 5) == 40
    assert volumecapacity.broken_linear(((20, 4), (80, 6)), 90) == 60


def test_a_class_without_capacity_or_too_little_scores_as_full() -> None:
    assert volumecapacity.class_score(10, 0, DEFAULT) == 0
    assert volumecapacity.class_score(11, 10, DEFAULT) == 0
    assert volumecapacity.class_score(5, 10, DEFAULT) == 50
    # requested * 100 // capacity: 1 of 3 is utilization 33.
    assert volumecapacity.class_score(1, 3, DEFAULT) == 67


def test_the_node_score_is_the_mean_of_its_classes_rounded_half_up() -> None:
    uses = [volumecapacity.ClassUse(50, 100), volumecapacity.ClassUse(49, 100)]  # 50 and 51
    assert volumecapacity.node_score(uses, DEFAULT) == 51
    assert volumecapacity.node_score([], DEFAULT) == 0


# --- the capacity check (VolumeBinding's filter) ------------------------------------------------


def _dynamic(
    *capacities: JSON,
    storage_capacity: bool = True,
    claims: tuple[JSON, ...] = (pvc_body("data", size="5Gi", storage_class=FAST),),
) -> volumes.Volumes:
    return store_of(
        claims=claims,
        classes=(storage_class_body(FAST, provisioner=DRIVER),),
        csidrivers=(csidriver_body(DRIVER, storage_capacity=storage_capacity),),
        capacities=capacities,
    )


def _verdicts(builder: PodBuilder, store: volumes.Volumes) -> volume_plugins.VolumeVerdicts:
    return volume_plugins.verdicts(
        small_clusters.pod(builder, "pod-uid"), FIVE, store, volumes.NOTHING_IN_USE
    )


def _names(mask: np.ndarray, cluster: snapshot.NodeStatics = FIVE) -> list[str]:
    return [name for name, failed in zip(cluster.names, mask, strict=True) if failed]


def _histogram(verdict: volume_plugins.VolumeVerdicts) -> dict[str, list[str]]:
    return {v.reason: _names(v.fails) for v in verdict.filters}


def test_a_node_without_a_capacity_that_holds_the_volume_has_not_enough_free_storage() -> None:
    store = _dynamic(
        storage_capacity_body("a", FAST, capacity="10Gi", node="node-a"),
        storage_capacity_body("b", FAST, capacity="4Gi", node="node-b"),  # too small
        storage_capacity_body("c", FAST, capacity="100Gi", maximum="4Gi", node="node-c"),
        storage_capacity_body("d", "slow", capacity="100Gi", node="node-d"),  # another class
    )
    verdict = _verdicts(make_pod("web").claims("data"), store)
    assert _histogram(verdict) == {
        volumebinding.NOT_ENOUGH_SPACE: ["node-b", "node-c", "node-d", "node-e"]
    }


def test_capacity_is_checked_only_for_a_driver_that_tracks_it() -> None:
    untracked = _dynamic(storage_capacity=False)
    assert _verdicts(make_pod("web").claims("data"), untracked).filters == ()
    no_driver = store_of(
        claims=(pvc_body("data", size="5Gi", storage_class=FAST),),
        classes=(storage_class_body(FAST, provisioner=DRIVER),),
    )
    assert _verdicts(make_pod("web").claims("data"), no_driver).filters == ()


def test_the_first_claim_to_provision_that_fails_decides_the_reason() -> None:
    # Claims are matched smallest first; "big" has no capacity anywhere but node-a, "small"
    # can only be provisioned in zone z1 (node-b): node-b is short of storage for "big", the
    # others cannot provision "small" at all (kube-scheduler stops at the first claim).
    cluster = small_clusters.statics(
        *(make_node(f"node-{c}").zone("z1" if c == "b" else "z0") for c in "abc")
    )
    store = store_of(
        claims=(
            pvc_body("small", size="1Gi", storage_class="zonal"),
            pvc_body("big", size="5Gi", storage_class=FAST),
        ),
        classes=(
            storage_class_body(FAST, provisioner=DRIVER),
            storage_class_body("zonal", provisioner=DRIVER, zones=("z1",)),
        ),
        csidrivers=(csidriver_body(DRIVER, storage_capacity=True),),
        capacities=(storage_capacity_body("a", FAST, capacity="10Gi", node="node-a"),),
    )
    verdict = volume_plugins.verdicts(
        small_clusters.pod(make_pod("web").claims("big", "small"), "pod-uid"),
        cluster,
        store,
        volumes.NOTHING_IN_USE,
    )
    assert {v.reason: _names(v.fails, cluster) for v in verdict.filters} == {
        volumebinding.BIND_CONFLICT: ["node-a", "node-c"],
        volumebinding.NOT_ENOUGH_SPACE: ["node-b"],
    }


def test_the_per_node_and_vectorised_capacity_checks_agree() -> None:
    store = _dynamic(
        storage_capacity_body("a", FAST, capacity="10Gi", node="node-a"),
        storage_capacity_body("z", FAST, capacity="10Gi", match_labels={"missing": "label"}),
    )
    pod = small_clusters.pod(make_pod("web").claims("data"), "pod-uid")
    _, claimed = volumebinding.prefilter(pod, store)
    fast = volumebinding.filter(FIVE, store, claimed)
    slow: dict[str, list[str]] = {}
    candidates = volumebinding._matching_candidates(claimed, store)
    for node in FIVE.nodes:
        result = volumebinding._find(node.name, node.labels, claimed, candidates, store, {})
        for reason in result.reasons:
            slow.setdefault(reason, []).append(node.name)
    assert {reason: _names(mask) for reason, mask in fast.items()} == slow
    assert slow == {volumebinding.NOT_ENOUGH_SPACE: ["node-b", "node-c", "node-d", "node-e"]}


# --- the score ----------------------------------------------------------------------------------


def _scores(
    builder: PodBuilder, store: volumes.Volumes, shape: volumecapacity.Shape = DEFAULT
) -> list[int]:
    pod = small_clusters.pod(builder, "pod-uid")
    failure, claimed = volumebinding.prefilter(pod, store)
    assert failure is None
    return [int(score) for score in volumebinding.score(FIVE, store, claimed, shape)]


def test_dynamic_provisioning_scores_the_capacity_found_on_each_node() -> None:
    store = _dynamic(
        storage_capacity_body("a", FAST, capacity="100Gi", node="node-a"),
        storage_capacity_body("b", FAST, capacity="10Gi", node="node-b"),
        storage_capacity_body("c", FAST, capacity="5Gi", node="node-c"),
        # Only maximumVolumeSize: it holds the volume, its missing capacity counts as 0.
        storage_capacity_body("d", FAST, maximum="10Gi", node="node-d"),
    )
    # 5Gi of 100Gi: utilization 5; of 10Gi: 50; of 5Gi: 100; node-e: no capacity (filtered).
    assert _scores(make_pod("web").claims("data"), store) == [95, 50, 0, 0, 0]
    # Another shape turns the preference round (the old VolumeCapacityPriority's packing).
    assert _scores(make_pod("web").claims("data"), store, ((0, 0), (100, 10))) == [
        5,
        50,
        100,
        100,
        0,
    ]


def test_untracked_capacity_gives_no_score() -> None:
    store = _dynamic(storage_capacity=False)
    assert _scores(make_pod("web").claims("data"), store) == [0, 0, 0, 0, 0]


def test_two_claims_of_a_class_share_its_capacity() -> None:
    claims = (
        pvc_body("one", size="30Gi", storage_class=FAST),
        pvc_body("two", size="30Gi", storage_class=FAST),
    )
    store = _dynamic(
        storage_capacity_body("a", FAST, capacity="100Gi", node="node-a"), claims=claims
    )
    # 60Gi requested of 100Gi (not of 200Gi): 40.
    assert _scores(make_pod("web").claims("one", "two"), store)[0] == 40


def test_static_matching_scores_the_pv_chosen_on_each_node() -> None:
    # The smallest PV that fits is chosen per node; a bigger one leaves more free: 5Gi of
    # 20Gi scores 75, of 10Gi 50, of 5Gi 0.
    store = store_of(
        pvs=(
            pv_body("pv-a", size="20Gi", node="node-a"),
            pv_body("pv-b1", size="10Gi", node="node-b"),
            pv_body("pv-b2", size="40Gi", node="node-b"),
            pv_body("pv-c", size="5Gi", node="node-c"),
        ),
        claims=(pvc_body("data", size="5Gi"),),
    )
    assert _scores(make_pod("web").claims("data"), store) == [75, 50, 0, 0, 0]


def test_static_bindings_alone_count_when_a_node_has_them() -> None:
    # "local" binds a 20Gi PV on node-a; "data" is provisioned with a 100Gi capacity there.
    # kube-scheduler scores the static binding only: 5Gi of 20Gi.
    store = store_of(
        pvs=(pv_body("pv-a", size="20Gi", node="node-a"),),
        claims=(pvc_body("local", size="5Gi"), pvc_body("data", size="5Gi", storage_class=FAST)),
        classes=(storage_class_body(), storage_class_body(FAST, provisioner=DRIVER)),
        csidrivers=(csidriver_body(DRIVER, storage_capacity=True),),
        capacities=(storage_capacity_body("a", FAST, capacity="100Gi", node="node-a"),),
    )
    assert _scores(make_pod("web").claims("local", "data"), store)[0] == 75


def test_a_pod_whose_claims_are_all_bound_scores_zero() -> None:
    store = store_of(
        pvs=(pv_body("pv-a", size="20Gi", claim=("default", "data")),),
        claims=(pvc_body("data", size="5Gi", volume="pv-a", bound=True),),
    )
    assert _scores(make_pod("web").claims("data"), store) == [0, 0, 0, 0, 0]


def test_the_per_node_and_vectorised_scores_agree() -> None:
    store = store_of(
        pvs=(
            pv_body("pv-a", size="20Gi", node="node-a"),
            pv_body("pv-b", size="8Gi", node="node-b"),
        ),
        claims=(pvc_body("data", size="5Gi"),),
    )
    pod = small_clusters.pod(make_pod("web").claims("data"), "pod-uid")
    _, claimed = volumebinding.prefilter(pod, store)
    fast = volumebinding.score(FIVE, store, claimed, DEFAULT).tolist()
    candidates = volumebinding._matching_candidates(claimed, store)
    slow = []
    for node in FIVE.nodes:
        result = volumebinding._find(node.name, node.labels, claimed, candidates, store, {})
        uses = volumebinding._uses(result) if not result.reasons else []
        slow.append(volumecapacity.node_score(uses, DEFAULT))
    assert fast == slow == [75, 38, 0, 0, 0]  # 5 of 8: utilization 62
