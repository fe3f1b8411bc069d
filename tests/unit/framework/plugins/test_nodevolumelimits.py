"""NodeVolumeLimits' CSI driver check (VolumeLimitScaling): a node without a driver the pod's
new volumes need is refused with kube-scheduler's words, per release: not at all in v1.34 (or
with the gate off), for any driver with a CSIDriver object in v1.35, for a driver whose
CSIDriver sets preventPodSchedulingIfMissing from v1.36."""

from __future__ import annotations

import numpy as np
import pytest

from plumb.backend.cache import snapshot, volumes
from plumb.framework import emulation
from plumb.framework.plugins import nodevolumelimits
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb_dev.testing.builders import make_pod
from tests.support import small_clusters
from tests.support.volume_objects import (
    FIVE,
    NS,
    csidriver_body,
    csinode_body,
    pv_body,
    pvc_body,
    storage_class_body,
    store_of,
)

DRIVER = "csi.example"
MISSING = f"{DRIVER} CSI driver is not installed on the node"


def _store(
    *, prevent: bool | None, csinodes: tuple[str, ...] = ("node-a", "node-b")
) -> volumes.Volumes:
    """A claim bound to a CSI PV of DRIVER, whose CSIDriver sets preventPodSchedulingIfMissing
    to ``prevent`` (None: unset); the driver registered on ``csinodes`` (node-c has a CSINode
    without it, node-d and node-e none)."""
    return store_of(
        pvs=(pv_body("pv-1", csi=(DRIVER, "h1"), claim=(NS, "data"), phase="Bound"),),
        claims=(pvc_body("data", volume="pv-1", bound=True),),
        csinodes=(
            *(csinode_body(node, DRIVER) for node in csinodes),
            csinode_body("node-c", "other.example"),
        ),
        csidrivers=(csidriver_body(DRIVER, prevent_if_missing=prevent),),
    )


def _names(mask: np.ndarray, cluster: snapshot.NodeStatics = FIVE) -> list[str]:
    return [name for name, failed in zip(cluster.names, mask, strict=True) if failed]


def _check(minor: int, **gates: bool) -> int:
    kube = emulation.emulate(minor, gates)
    return nodevolumelimits.driver_check(kube.gate(nodevolumelimits.GATE), kube.csi_driver_opt_in)


def _refused(store: volumes.Volumes, drivers: int) -> dict[str, list[str]]:
    verdict = volume_plugins.verdicts(
        small_clusters.pod(make_pod("web").claims("data"), "pod-uid"),
        FIVE,
        store,
        volumes.NOTHING_IN_USE,
        drivers=drivers,
    )
    assert all(v.plugin == nodevolumelimits.NAME and not v.unresolvable for v in verdict.filters)
    return {v.reason: _names(v.fails) for v in verdict.filters}


def test_the_check_in_force_per_release() -> None:
    assert _check(34) == nodevolumelimits.DRIVERS_UNCHECKED
    assert _check(35) == nodevolumelimits.DRIVERS_UNCHECKED  # alpha, off
    assert _check(35, VolumeLimitScaling=True) == nodevolumelimits.DRIVERS_ANY
    assert _check(36, VolumeLimitScaling=True) == nodevolumelimits.DRIVERS_OPT_IN
    assert _check(37) == nodevolumelimits.DRIVERS_OPT_IN
    assert _check(37, VolumeLimitScaling=False) == nodevolumelimits.DRIVERS_UNCHECKED


def test_a_driver_that_opts_in_is_required_on_the_node() -> None:
    refused = _refused(_store(prevent=True), nodevolumelimits.DRIVERS_OPT_IN)
    assert refused == {MISSING: ["node-c", "node-d", "node-e"]}


@pytest.mark.parametrize("prevent", [False, None])
def test_a_csidriver_that_does_not_opt_in_is_required_only_in_v1_35(prevent: bool | None) -> None:
    store = _store(prevent=prevent)
    assert _refused(store, nodevolumelimits.DRIVERS_OPT_IN) == {}
    assert _refused(store, nodevolumelimits.DRIVERS_ANY) == {
        MISSING: ["node-c", "node-d", "node-e"]
    }


def test_a_driver_without_a_csidriver_object_is_never_required() -> None:
    store = _store(prevent=None)
    store.resync_csidrivers([])
    assert _refused(store, nodevolumelimits.DRIVERS_ANY) == {}


def test_nothing_is_checked_with_the_gate_off() -> None:
    assert _refused(_store(prevent=True), nodevolumelimits.DRIVERS_UNCHECKED) == {}


def test_an_unbound_claim_needs_its_classs_provisioner() -> None:
    store = store_of(
        claims=(pvc_body("data", storage_class="fast"),),
        classes=(storage_class_body("fast", provisioner=DRIVER),),
        csinodes=(csinode_body("node-a", DRIVER),),
        csidrivers=(csidriver_body(DRIVER, prevent_if_missing=True),),
    )
    refused = _refused(store, nodevolumelimits.DRIVERS_OPT_IN)
    assert refused == {MISSING: ["node-b", "node-c", "node-d", "node-e"]}


def test_the_missing_driver_comes_before_the_attach_limit() -> None:
    # node-a has the driver at its limit (one volume attached by another pod); node-c lacks it.
    store = store_of(
        pvs=(
            pv_body("pv-1", csi=(DRIVER, "h1"), claim=(NS, "one"), phase="Bound"),
            pv_body("pv-2", csi=(DRIVER, "h2"), claim=(NS, "data"), phase="Bound"),
        ),
        claims=(
            pvc_body("one", volume="pv-1", bound=True),
            pvc_body("data", volume="pv-2", bound=True),
        ),
        csinodes=(
            csinode_body("node-a", DRIVER, limits={DRIVER: 1}),
            csinode_body("node-b", DRIVER),
            csinode_body("node-c", "other.example", limits={"other.example": 0}),
        ),
        csidrivers=(csidriver_body(DRIVER, prevent_if_missing=True),),
    )
    holder = small_clusters.pod(make_pod("holder").claims("one"), "holder")
    verdict = volume_plugins.verdicts(
        small_clusters.pod(make_pod("web").claims("data"), "pod-uid"),
        FIVE,
        store,
        volumes.InUse.of([("node-a", holder)]),
        drivers=nodevolumelimits.DRIVERS_OPT_IN,
    )
    assert [(v.reason, _names(v.fails)) for v in verdict.filters] == [
        (MISSING, ["node-c", "node-d", "node-e"]),
        (nodevolumelimits.MAX_VOLUME_COUNT, ["node-a"]),
    ]
