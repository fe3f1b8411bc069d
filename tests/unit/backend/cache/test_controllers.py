"""Services' and controllers' selectors: an event that leaves a selector as it was (a ReplicaSet's
status) keeps it and journals nothing; a change is journalled as the one selector it replaced,
and a dump still rewinds through every change."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import controllers, dumps

REPLICA_SETS = 1_000


def _replica_set(name: str, app: str, *, ready: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "shop", "name": name},
        "spec": {"selector": {"matchLabels": {"app": app, "pod-template-hash": name}}},
        "status": {"readyReplicas": ready},
    }


def _service(name: str, selector: dict[str, str] | None) -> dict[str, Any]:
    spec = {"selector": selector} if selector is not None else {}
    return {"metadata": {"namespace": "shop", "name": name}, "spec": spec}


def _cluster() -> cache_module.Cache:
    cache = cache_module.Cache()
    cache.workloads.replace(
        controllers.REPLICA_SET, [_replica_set(f"rs-{i}", f"app-{i}") for i in range(REPLICA_SETS)]
    )
    return cache


def test_a_status_only_event_keeps_the_selector_and_writes_no_journal_entry() -> None:
    cache = _cluster()
    before = cache.workloads.state().controllers["ReplicaSet/shop/rs-7"]
    seq = cache.journal.seq
    for ready in range(1, 4):
        cache.workloads.on_event(
            controllers.REPLICA_SET, "MODIFIED", _replica_set("rs-7", "app-7", ready=ready)
        )
    assert cache.journal.seq == seq
    assert cache.workloads.state().controllers["ReplicaSet/shop/rs-7"] is before
    # A relist of the same objects changes nothing either.
    cache.workloads.replace(
        controllers.REPLICA_SET, [_replica_set(f"rs-{i}", f"app-{i}") for i in range(REPLICA_SETS)]
    )
    assert cache.journal.seq == seq
    assert cache.workloads.state().controllers["ReplicaSet/shop/rs-7"] is before


def test_the_journal_keeps_only_the_selector_each_change_replaced() -> None:
    cache = _cluster()
    rollouts = 50
    tracemalloc.start()
    try:
        start = tracemalloc.take_snapshot()
        for i in range(rollouts):
            # A rollout: the new ReplicaSet appears, the old one's selector is changed.
            cache.workloads.on_event(
                controllers.REPLICA_SET, "ADDED", _replica_set(f"new-{i}", f"app-{i}")
            )
            cache.workloads.on_event(
                controllers.REPLICA_SET, "MODIFIED", _replica_set(f"rs-{i}", f"moved-{i}")
            )
        grown = sum(
            stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(start, "filename")
        )
    finally:
        tracemalloc.stop()
    assert cache.journal.seq >= 2 * rollouts
    # The selectors themselves (a few hundred bytes each) and one small undo per change: a
    # whole copy of the 1,000 selectors' map per change would be megabytes.
    assert grown < 1_000_000, f"{grown} bytes kept for {2 * rollouts} selector changes"


def test_a_dump_rewinds_through_every_selector_change() -> None:
    cache = cache_module.Cache()
    seen = {cache.journal.seq: cache.workloads.state()}

    def saw() -> None:
        seen[cache.journal.seq] = cache.workloads.state()

    cache.workloads.on_event(controllers.SERVICE, "ADDED", _service("web", {"app": "web"}))
    saw()
    cache.workloads.on_event(controllers.REPLICA_SET, "ADDED", _replica_set("rs-a", "web"))
    saw()
    cache.workloads.on_event(controllers.SERVICE, "MODIFIED", _service("web", {"app": "web2"}))
    cache.workloads.on_event(controllers.SERVICE, "ADDED", _service("db", {"app": "db"}))
    saw()
    cache.workloads.on_event(
        controllers.REPLICA_SET, "MODIFIED", _replica_set("rs-a", "web", ready=2)
    )
    cache.workloads.on_event(controllers.SERVICE, "MODIFIED", _service("db", None))  # selects none
    saw()
    cache.workloads.replace(controllers.REPLICA_SET, [_replica_set("rs-b", "api")])
    saw()
    cache.workloads.on_event(controllers.SERVICE, "DELETED", _service("web", {"app": "web2"}))
    saw()
    assert len(seen) == 7  # every step above changed something

    dumped = dumps.load(json.loads(json.dumps(dumps.dump(cache))))
    for seq, expected in seen.items():
        assert dumped.rewind(seq).workloads.state() == expected, f"state {seq}"
