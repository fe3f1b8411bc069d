"""VolumeBinding's storage-capacity score as a batch compiles it (Batch.volume_score) and as it
decides: where StorageCapacityScoring is on (v1.37's default, or set by --feature-gates), with
the profile's shape; nowhere else."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from plumb.backend.cache import clustercache as cache_module
from plumb.framework import compiling, cycle, emulation, scoring
from plumb.framework.plugins import volumecapacity
from plumb.kernel import compiled, contract, reference
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support.small_clusters import cluster, pod
from tests.support.volume_objects import (
    csidriver_body,
    pvc_body,
    storage_capacity_body,
    storage_class_body,
)

KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])
DRIVER = "csi.example"


def _cache() -> cache_module.Cache:
    """Three alike nodes; the driver reports 100Gi on n1, 20Gi on n2, 10Gi on n3 for "fast"."""
    c = cluster([make_node(f"n{i}").capacity(cpu="4", memory="8Gi") for i in (1, 2, 3)])
    store = c.volumes
    store.resync_pvcs([pvc_body("data", size="5Gi", storage_class="fast")])
    store.resync_storage_classes([storage_class_body("fast", provisioner=DRIVER)])
    store.resync_csidrivers([csidriver_body(DRIVER, storage_capacity=True)])
    store.resync_storage_capacities(
        [
            storage_capacity_body("c1", "fast", capacity="100Gi", node="n1"),
            storage_capacity_body("c2", "fast", capacity="20Gi", node="n2"),
            storage_capacity_body("c3", "fast", capacity="10Gi", node="n3"),
        ]
    )
    return c


def _web() -> PodBuilder:
    return make_pod("web").req(cpu="500m", memory="512Mi").claims("data")


def _profile(minor: int, **gates: bool) -> scoring.Profile:
    return scoring.Profile(kube=emulation.emulate(minor, gates))


def _compiled(profile: scoring.Profile, builder: PodBuilder) -> compiling.Compiled:
    c = _cache()
    return compiling.compile_batch([pod(builder, "uid-0")], c.snapshot(), c, profile=profile)


def test_the_score_is_compiled_where_the_gate_is_on() -> None:
    # 5Gi of 100Gi, 20Gi, 10Gi: utilization 5, 25, 50.
    on = _compiled(_profile(37), _web())
    assert on.batch.volume_score.tolist() == [[95, 75, 50]]
    off = _compiled(_profile(34), _web())
    assert off.batch.volume_score.tolist() == [[0, 0, 0]]
    gated = _compiled(_profile(34, StorageCapacityScoring=True), _web())
    assert gated.batch.volume_score.tolist() == [[95, 75, 50]]
    assert not _compiled(
        _profile(37, StorageCapacityScoring=False), _web()
    ).batch.volume_score.any()


def test_the_score_follows_the_profiles_shape_and_weight() -> None:
    packing = dataclasses.replace(_profile(37), capacity_shape=((0, 0), (100, 10)))
    assert _compiled(packing, _web()).batch.volume_score.tolist() == [[5, 25, 50]]
    weights = list(scoring.DEFAULT_WEIGHTS)
    weights[contract.VOLUME_BINDING] = 0
    unweighed = dataclasses.replace(_profile(37), weights=tuple(weights))
    assert not _compiled(unweighed, _web()).batch.volume_score.any()
    plain = _compiled(_profile(37), make_pod("plain").req(cpu="500m"))
    assert not plain.batch.volume_score.any()


@KERNELS
def test_the_node_with_the_most_free_capacity_wins_on_v1_37(kernel: contract.Kernel) -> None:
    c = _cache()

    def chosen(profile: scoring.Profile) -> str | None:
        prepared = cycle.prepare([pod(_web(), "uid-0")], c.snapshot(), c, profile)
        assert prepared.compiled is not None
        result = kernel(prepared.compiled.cluster, prepared.compiled.batch)
        (decision,) = cycle.explain(prepared.compiled, result)
        return decision.node

    assert chosen(_profile(37)) == "n1"
    packing = dataclasses.replace(_profile(37), capacity_shape=((0, 0), (100, 10)))
    assert chosen(packing) == "n3"
    # v1.34: no score; the nodes tie and the pod's hash picks one.
    prepared = cycle.prepare([pod(_web(), "uid-0")], c.snapshot(), c, _profile(34))
    assert prepared.compiled is not None
    totals = kernel(prepared.compiled.cluster, prepared.compiled.batch).total[0]
    assert len(set(totals.tolist())) == 1
    assert np.all(totals > 0)


def test_default_shape_is_kube_schedulers() -> None:
    assert scoring.DEFAULT.capacity_shape == volumecapacity.DEFAULT_SHAPE == ((0, 10), (100, 0))
