"""A snapshot dump carries the DRA store, and its journal rewinds it to each state it went
through: slices, classes, claims, templates and the allocations plumb assumed."""

from __future__ import annotations

import json
from typing import Any

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import dumps
from plumb.backend.records import draobjects, objects
from tests.support.dra_bodies import claim_body, device, result, slice_body

NODE = objects.NodeInfo(name="node-a", allocatable={})


def _fingerprint(cache: cache_module.Cache) -> dict[str, Any]:
    store = cache.dra
    return {
        "state": store.state(),
        "pools": store.pools(NODE),
        "allocated": store.allocated(),
        "reserved": store.claims_reserved_for("pod-1"),
    }


def test_the_journal_rewinds_the_dra_store_to_each_state() -> None:
    cache = cache_module.Cache()
    store = cache.dra
    seen: dict[int, dict[str, Any]] = {}

    def saw() -> None:
        seen[cache.journal.seq] = _fingerprint(cache)

    saw()
    store.on_slice(slice_body("s", device("gpu-0"), device("gpu-1")), "s")
    store.on_class({"metadata": {"name": "gpu"}, "spec": {"selectors": []}}, "gpu")
    store.on_template({"metadata": {"namespace": "ml", "name": "t"}, "spec": {}}, "ml", "t")
    store.on_claim(claim_body("c0"), "ml", "c0")
    saw()
    allocation = draobjects.Allocation(
        devices=(
            draobjects.AllocatedDevice(
                request="gpu", driver="gpu.example.com", pool="pool-a", device="gpu-0"
            ),
        )
    )
    store.assume("ml/c0", allocation, "pod-1")
    saw()
    store.on_claim(
        claim_body("c0", version="2", results=(result("gpu-0"),), reserved=("pod-1",)), "ml", "c0"
    )
    saw()
    store.on_slice(slice_body("s", device("gpu-0"), generation=2), "s")
    store.on_class(None, "gpu")
    store.on_claim(None, "ml", "c0")
    saw()

    dumped = dumps.load(json.loads(json.dumps(dumps.dump(cache))))
    for seq, expected in seen.items():
        assert _fingerprint(dumped.rewind(seq)) == expected, f"state {seq}"


def test_a_dump_from_before_dra_loads_with_an_empty_store() -> None:
    document = dumps.dump(cache_module.Cache())
    del document["dra"]
    assert len(dumps.load(document).rewind(0).dra) == 0
