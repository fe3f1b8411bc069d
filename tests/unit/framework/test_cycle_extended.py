"""Extended resources backed by DRA through the scheduling cycle: NodeResourcesFit leaves a
class-mapped resource to DynamicResources on a node whose allocatable has none of it, where
devices serve it; per release (DRAExtendedResource on from v1.36), with both kernels."""

from __future__ import annotations

import pytest

from plumb.backend.cache import clustercache as cache_module
from plumb.framework import cycle, emulation, scoring
from plumb.kernel import compiled, contract, reference
from plumb_dev.testing import drabuilders as drab
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support.small_clusters import cluster, pod

GPU = "example.com/gpu"
DRIVER = "gpu.example.com"
KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])
RELEASES = pytest.mark.parametrize("minor", emulation.MINORS)


def gpu_cluster(devices: int = 2) -> cache_module.Cache:
    """ "roomy" has one GPU through its device plugin, "small" ``devices`` in a slice."""
    c = cluster(
        [
            make_node("roomy").capacity(cpu="8", memory="16Gi", **{GPU: 1}),
            make_node("small").capacity(cpu="4", memory="16Gi"),
        ]
    )
    body = drab.make_class("gpu").driver(DRIVER).extended_resource(GPU).obj()
    c.dra.on_class(body, "gpu")
    found = [drab.device(f"gpu-{i}") for i in range(devices)]
    body = drab.make_slice("small-gpus", DRIVER).pool("small").node("small").devices(*found).obj()
    c.dra.on_slice(body, "small-gpus")
    return c


def decide(
    c: cache_module.Cache, builder: PodBuilder, minor: int, kernel: contract.Kernel
) -> cycle.Decision:
    profile = scoring.Profile(kube=emulation.emulate(minor))
    prepared = cycle.prepare([pod(builder, "uid-0")], c.snapshot(), c, profile)
    if prepared.early:
        return prepared.early[0]
    assert prepared.compiled is not None
    (decision,) = cycle.explain(
        prepared.compiled, kernel(prepared.compiled.cluster, prepared.compiled.batch)
    )
    return decision


@KERNELS
@RELEASES
def test_devices_serve_a_class_mapped_resource_where_no_device_plugin_does(
    minor: int, kernel: contract.Kernel
) -> None:
    # Two GPUs: more than roomy's device plugin has at all; small's devices have them.
    decision = decide(gpu_cluster(), make_pod("pair").req(cpu="1", **{GPU: 2}), minor, kernel)
    if minor >= 36:
        assert decision.node == "small"
    else:
        assert decision.node is None
        assert decision.message == f"0/2 nodes are available: 2 Insufficient {GPU}."


@KERNELS
def test_too_few_devices_is_dynamic_resources_reason_beside_the_device_plugins(
    kernel: contract.Kernel,
) -> None:
    decision = decide(gpu_cluster(1), make_pod("pair").req(cpu="1", **{GPU: 2}), 37, kernel)
    assert decision.node is None
    assert decision.message == (
        f"0/2 nodes are available: 1 Insufficient {GPU}, 1 cannot allocate all claims."
    )
    # Neither node can ever serve it: no preemption.
    assert decision.unresolvable


@KERNELS
def test_a_resource_no_class_maps_stays_node_resources_fits(kernel: contract.Kernel) -> None:
    c = gpu_cluster()
    decision = decide(c, make_pod("nic").req(**{"example.com/nic": 1}), 37, kernel)
    assert decision.message == "0/2 nodes are available: 2 Insufficient example.com/nic."
