"""The DRA micro-benchmark: µs per pod of DynamicResources' Filter (PreFilter included) and
Reserve over every node, on a cluster of node-local GPUs.

``python -m plumb_dev.bench.devicetimings --nodes 500 --devices 8 --pods 200`` prints one JSON
object. The cluster: ``nodes`` nodes, each publishing one ResourceSlice (a pool of its own) of
``devices`` GPUs of driver gpu.example.com; the first half of each node's GPUs have 80Gi of
memory, the others 20Gi. The DeviceClass ``gpu`` selects the driver; every pod has one claim
made from the template ``big-gpu``, whose request asks for one device with at least 40Gi
(a CEL selector on the capacity), as the resourceclaim controller makes it (owned by the pod,
named in its status).

How it measures: pods are decided in order, each on the devices the earlier ones took. For
each, PreFilter and Filter over every node are timed together with ``time.perf_counter``
(``filter``), then Reserve on the chosen node (``reserve``: the allocation found again); the
chosen node is the passing node the pod's number picks (spread over the cluster, as a scorer
spreads), and the allocation is assumed in the store untimed, as the scheduler's Reserve
holds it. The selector verdicts are evaluated once before anything is timed (the cache is
warm, as it is in a scheduler that has run a while). ``--check`` also runs the structured
allocator on every node for every pod (untimed) and fails if any node's verdict differs
from Filter's: a fast wrong Filter fails here. ``--allocator-only`` measures Filter as it was
before counting (the allocator on every node). ``filter_after_slice_change_us``: the first
Filter after one node's slice is republished (what Filter derives from the slices rebuilt).

``--cycle BATCH`` measures the whole scheduling cycle instead (``measure_cycle``): claim pods
popped BATCH at a time (1: each alone, as before they shared batches), the numba kernel.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from plumb.backend.cache import clustercache, dra, snapshot
from plumb.backend.records import objects
from plumb.framework import cycle, emulation
from plumb.framework.plugins import dynamicresources
from plumb.kernel import compiled
from plumb_dev.testing import builders, drabuilders

DRIVER = "gpu.example.com"
NAMESPACE = "bench"
TEMPLATE = "big-gpu"
SELECTOR = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'


def node_name(i: int) -> str:
    return f"node-{i:04d}"


def node_slice(i: int, devices: int, version: int = 1) -> dict[str, Any]:
    name = node_name(i)
    gpus = [
        drabuilders.device(f"gpu-{d}")
        .attr("model", "a100" if d < devices // 2 else "t4")
        .capacity("memory", "80Gi" if d < devices // 2 else "20Gi")
        for d in range(devices)
    ]
    body = drabuilders.make_slice(f"{name}-gpus", DRIVER).node(name).devices(*gpus).obj()
    body["metadata"]["resourceVersion"] = str(version)
    return body


def _republished(nodes: int, devices: int) -> dict[str, Any]:
    body = node_slice(0, devices, version=2)
    body["spec"]["pool"]["generation"] = 2
    return body


def cluster(nodes: int, devices: int) -> tuple[dra.DraStore, snapshot.NodeStatics]:
    """The store with every node's slice and the class; the nodes' statics."""
    store = dra.DraStore()
    store.on_class(drabuilders.make_class("gpu").driver(DRIVER).obj(), "gpu")
    infos = []
    for i in range(nodes):
        store.on_slice(node_slice(i, devices), f"{node_name(i)}-gpus")
        infos.append(objects.NodeInfo(name=node_name(i), allocatable={}, labels={}))
    statics = snapshot.NodeStatics(
        infos, np.zeros(nodes, dtype=np.uint64), np.zeros((nodes, 1), dtype=np.int64)
    )
    return store, statics


def claim_pod(store: dra.DraStore, k: int) -> objects.PodInfo:
    """Pod ``k`` with its claim made from the template (the claim added to the store)."""
    name, uid = f"train-{k}", f"uid-train-{k}"
    spec = drabuilders.make_template(TEMPLATE, NAMESPACE).request(
        "gpu", "gpu", selectors=[SELECTOR]
    )
    claim = f"{name}-gpu"
    owner = {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "controller": True}
    body = {
        "apiVersion": drabuilders.API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim,
            "namespace": NAMESPACE,
            "uid": f"uid-{claim}",
            "resourceVersion": "1",
            "annotations": {drabuilders.POD_CLAIM_NAME_ANNOTATION: "gpu"},
            "ownerReferences": [owner],
        },
        "spec": spec.spec(),
    }
    store.on_claim(body, NAMESPACE, claim)
    return objects.parse_pod(
        {
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid},
            "spec": {
                "schedulerName": "plumb",
                "containers": [{"name": "c", "image": "x"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}],
            },
            "status": {
                "phase": "Pending",
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}],
            },
        }
    )


def _filter(
    pod: objects.PodInfo,
    store: dra.DraStore,
    statics: snapshot.NodeStatics,
    features: emulation.DeviceFeatures,
    **options: Any,
) -> dynamicresources.NodeVerdicts:
    devices = dynamicresources.prefilter(pod, store, features)
    assert isinstance(devices, dynamicresources.PodDevices), devices
    return dynamicresources.filter(
        devices,
        statics,
        np.ones(len(statics), dtype=np.bool_),
        store,
        features,
        dynamicresources.MATCHER,
        scored=False,
        **options,
    )


def measure(
    nodes: int,
    devices: int,
    pods: int,
    *,
    minor: int = emulation.NEWEST,
    check: bool = False,
    fast: bool = True,
) -> dict[str, Any]:
    features = emulation.emulate(minor).devices
    store, statics = cluster(nodes, devices)
    pod_infos = [claim_pod(store, k) for k in range(pods)]
    _filter(pod_infos[0], store, statics, features, fast=fast)  # the selector verdicts, once
    filters: list[float] = []
    reserves: list[float] = []
    placed = 0
    gc.disable()
    try:
        for k, pod in enumerate(pod_infos):
            start = time.perf_counter()
            verdicts = _filter(pod, store, statics, features, fast=fast)
            filters.append(time.perf_counter() - start)
            assert verdicts.error is None, verdicts.error
            if check:
                slow = _filter(pod, store, statics, features, fast=False)
                if not np.array_equal(slow.fails, verdicts.fails):
                    raise AssertionError(f"pod {k}: Filter's verdicts differ from the allocator's")
            passing = np.flatnonzero(~verdicts.fails)
            if not len(passing):
                continue
            chosen = statics.nodes[int(passing[(k * 7919) % len(passing)])]
            start = time.perf_counter()
            reserved = dynamicresources.allocate_on(
                pod, chosen, store, features, dynamicresources.MATCHER
            )
            reserves.append(time.perf_counter() - start)
            assert reserved is not None
            for claim, allocation in reserved.claims:
                assert allocation is not None
                store.assume(claim.key, allocation, pod.uid)
            placed += 1
        # One node's driver republishes its slice: the next Filter rebuilds what it derives
        # from the slices (the selector verdicts of the other slices stay cached).
        store.on_slice(_republished(nodes, devices), f"{node_name(0)}-gpus")
        fresh = claim_pod(store, pods)
        start = time.perf_counter()
        _filter(fresh, store, statics, features, fast=fast)
        republished = time.perf_counter() - start
    finally:
        gc.enable()
    return {
        "nodes": nodes,
        "devices": devices,
        "pods": pods,
        "placed": placed,
        "release": f"v1.{minor}",
        "filter": "counting, else the allocator" if fast else "the allocator on every node",
        "filter_us_mean": round(statistics.fmean(filters) * 1e6, 1),
        "filter_us_median": round(statistics.median(filters) * 1e6, 1),
        "filter_us_max": round(max(filters) * 1e6, 1),
        "reserve_us_mean": round(statistics.fmean(reserves) * 1e6, 1) if reserves else None,
        "filter_after_slice_change_us": round(republished * 1e6, 1),
    }


def measure_cycle(nodes: int, devices: int, pods: int, batch: int) -> dict[str, Any]:
    """µs per pod of the scheduling cycle (PreFilter, Filter, compile, the numba kernel,
    explain: ``cycle.schedule_batch``) for claim pods popped ``batch`` at a time, each batch's
    deferred pods first in the next; Reserve (devices and pod assumed) untimed after each."""
    cache = clustercache.Cache()
    for i in range(nodes):
        node = builders.make_node(node_name(i)).capacity(cpu="64", memory="256Gi")
        cache.upsert_node(objects.parse_node(node.obj()))
    store = cache.dra
    store.on_class(drabuilders.make_class("gpu").driver(DRIVER).obj(), "gpu")
    for i in range(nodes):
        store.on_slice(node_slice(i, devices), f"{node_name(i)}-gpus")
    features = emulation.emulate(emulation.NEWEST).devices
    waiting = [claim_pod(store, k) for k in range(pods)]
    warm = [claim_pod(store, pods + k) for k in range(2)]
    cycle.schedule_batch(warm, cache.snapshot(), cache, kernel=compiled.run)  # numba, verdicts
    seconds = 0.0
    decided = batches = placed = 0
    gc.disable()
    try:
        while waiting:
            popped, waiting = waiting[:batch], waiting[batch:]
            snap = cache.snapshot()
            start = time.perf_counter()
            decisions, deferred = cycle.schedule_batch(popped, snap, cache, kernel=compiled.run)
            seconds += time.perf_counter() - start
            batches += 1
            decided += len(decisions)
            for decision in decisions:
                if decision.node is None:
                    continue
                info = cache.nodes.info(decision.node)
                assert info is not None
                reserved = dynamicresources.allocate_on(
                    decision.pod, info, store, features, dynamicresources.MATCHER
                )
                assert reserved is not None, decision.pod.name
                for claim, allocation in reserved.claims:
                    assert allocation is not None
                    store.assume(claim.key, allocation, decision.pod.uid)
                cache.assume(decision.pod, decision.node)
                placed += 1
            waiting = [*deferred, *waiting]
    finally:
        gc.enable()
    return {
        "nodes": nodes,
        "devices": devices,
        "pods": pods,
        "batch": batch,
        "kernel runs": batches,
        "placed": placed,
        "cycle_us_per_pod": round(seconds / decided * 1e6, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--minor", type=int, default=emulation.NEWEST)
    parser.add_argument("--check", action="store_true")
    parser.add_argument(
        "--allocator-only", action="store_true", help="Filter without counting (as before)"
    )
    parser.add_argument(
        "--cycle",
        type=int,
        metavar="BATCH",
        help="measure the whole scheduling cycle, pods popped BATCH at a time, instead",
    )
    args = parser.parse_args(argv)
    if args.cycle:
        json.dump(measure_cycle(args.nodes, args.devices, args.pods, args.cycle), sys.stdout)
        sys.stdout.write("\n")
        return 0
    result = measure(
        args.nodes,
        args.devices,
        args.pods,
        minor=args.minor,
        check=args.check,
        fast=not args.allocator_only,
    )
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
