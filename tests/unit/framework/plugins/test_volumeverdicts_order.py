"""Where the volume plugins stand among the filters: after NodeResourcesFit, as in
kube-scheduler, so a node short of cpu says so even when its volumes would not fit either; and
the volume PreFilter's message, which names no node."""

from __future__ import annotations

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.records import objects
from plumb.framework import cycle
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.volume_objects import (
    NS,
    pv_body,
    pvc_body,
    storage_class_body,
)


def _cache() -> cache_module.Cache:
    cache = cache_module.Cache()
    # full: no cpu and no PV; roomy and far: cpu, no PV (the one local PV is on a node gone).
    for name, cpu in (("full", "1"), ("roomy", "4"), ("far", "4")):
        cache.upsert_node(objects.parse_node(make_node(name).capacity(cpu=cpu).obj()))
    cache.volumes.on_storage_class(storage_class_body(), "local-wffc")
    cache.volumes.on_pv(pv_body("pv-gone", node="gone"), "pv-gone")
    cache.volumes.on_pvc(pvc_body("data"), NS, "data")
    return cache


def test_a_node_short_of_cpu_reports_the_cpu_before_its_volumes() -> None:
    cache = _cache()
    pod = objects.parse_pod(make_pod("web", NS).uid("u1").req(cpu="2").claims("data").obj())
    decision = cycle.schedule(pod, cache.snapshot(), cache)
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) didn't find available persistent volumes to bind."
    )


def test_a_missing_claim_fails_the_pod_before_any_node_is_looked_at() -> None:
    cache = _cache()
    pod = objects.parse_pod(make_pod("web", NS).uid("u1").claims("nowhere").obj())
    decision = cycle.schedule(pod, cache.snapshot(), cache)
    assert decision.node is None
    assert decision.unresolvable
    assert decision.message == (
        '0/3 nodes are available: persistentvolumeclaim "nowhere" not found. not found'
    )
