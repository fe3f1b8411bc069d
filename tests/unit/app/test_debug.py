"""The debug snapshot is encoded off the event loop: the loop only captures (copies containers),
keeps running while a worker thread encodes, and the document is the one it always was.

Run as a script, it measures a snapshot at 1,000 nodes and 10,000 pods (how long the loop is
blocked, and the total): ``.venv/bin/python -m tests.unit.app.test_debug``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import itertools
import json
import logging
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, cast

from plumb import runs
from plumb.app import debug, runtime
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import dumps
from plumb.backend.records import objects
from plumb.framework.plugins import podtopologyspread
from plumb.observability import tracing
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

ZONE = podtopologyspread.ZONE


@dataclasses.dataclass(frozen=True)
class CacheAndRuns:
    """A cache and the run log beside it, as the scheduler would have left them."""

    cache: cache_module.Cache
    log: runs.RunLog


def build(nodes: int, pods: int, batch: int = 10) -> CacheAndRuns:
    """A cache holding ``nodes`` nodes and ``pods`` bound pods (each assumed, then confirmed:
    two journal entries), and one run per ``batch`` pods, as the scheduler would have left."""
    cache = cache_module.Cache()
    cache.set_namespace("shop", {"team": "web"})
    for i in range(nodes):
        body = make_node(f"n{i}").zone("abc"[i % 3]).capacity(cpu="64", memory="256Gi").obj()
        cache.upsert_node(objects.parse_node(body))
    log = runs.RunLog()
    pending: list[objects.PodInfo] = []
    for i in range(pods):
        body = (
            make_pod(f"web-{i}", "shop")
            .uid(f"u{i:06}")
            .scheduler("plumb")
            .label("app", f"web{i % 50}")
            .req(cpu="100m", memory="128Mi")
            .spread(ZONE, 1, selector={"app": f"web{i % 50}"})
            .obj()
        )
        pod = objects.parse_pod(body)
        node = f"n{i % nodes}"
        pending.append(pod)
        if len(pending) == batch:
            log.record(
                runs.Run(seq=cache.journal.seq, generation=0, nodes=nodes, pods=tuple(pending))
            )
            pending = []
        cache.assume(pod, node)
        cache.add_pod(dataclasses.replace(pod, node_name=node))
    return CacheAndRuns(cache=cache, log=log)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_capture_encodes_to_the_snapshot_of_its_instant_while_the_cache_moves_on() -> None:
    cluster = build(nodes=6, pods=40)
    before = runs.snapshot(cluster.cache, cluster.log, "plumb")
    taken = runs.capture(cluster.cache, cluster.log, "plumb")
    # The loop goes on after the capture: a pod leaves, a node changes, a namespace relabelled.
    cluster.cache.remove_pod("u000003")
    cluster.cache.upsert_node(objects.parse_node(make_node("n0").capacity(cpu="1").obj()))
    cluster.cache.set_namespace("shop", {"team": "db"})
    cluster.cache.assume(objects.parse_pod(make_pod("late", "shop").uid("late").obj()), "n1")
    encoded = taken.encode()
    assert {**encoded, "taken": ""} == {**before, "taken": ""}
    uids = [placed["pod"]["uid"] for placed in encoded["cache"]["pods"]]
    assert len(uids) == 40
    assert "u000003" in uids
    assert "late" not in uids
    # And the document reads back as plumb replay reads it, at the state it was taken.
    back = runs.load(json.loads(json.dumps(encoded)))
    assert back.cache.seq == before["cache"]["seq"]
    assert len(back.runs) == 4
    assert dumps.load(encoded["cache"]).rewind(back.cache.seq).pod_count() == 40


def test_the_document_written_piece_by_piece_is_json_dumps_of_the_snapshot() -> None:
    cluster = build(nodes=5, pods=30)
    taken = runs.capture(cluster.cache, cluster.log, "plumb")
    assert debug.serialise(taken) == json.dumps(taken.encode()).encode()
    empty = runs.capture(cache_module.Cache(), runs.RunLog(), "plumb")  # empty arrays too
    assert debug.serialise(empty) == json.dumps(empty.encode()).encode()
    assert json.loads(debug.serialise(empty))["runs"] == []


def _the_one_snapshot_in(directory: Path) -> dict[str, Any]:
    (written,) = directory.glob("plumb-snapshot-*.json")
    return dict(json.loads(written.read_text()))


async def test_sigusr1_writes_the_snapshot_of_the_moment_it_came(tmp_path: Path) -> None:
    scheduler = make_scheduler(FakeApi(), ManualClock())
    scheduler.feed.resync([make_node("n0").capacity(cpu="4").obj()], [])
    scheduler.cache.assume(objects.parse_pod(make_pod("web-0", "shop").uid("u0").obj()), "n0")
    expected = scheduler.dump()
    writing: set[asyncio.Task[None]] = set()
    runtime._write_snapshot(scheduler, tmp_path, writing)
    # What happens after the signal is not in the file, though it is written later.
    scheduler.cache.forget("u0")
    assert len(writing) == 1
    await asyncio.gather(*writing)
    assert not writing
    document = _the_one_snapshot_in(tmp_path)
    assert {**document, "taken": ""} == {**expected, "taken": ""}
    assert [p["pod"]["uid"] for p in document["cache"]["pods"]] == ["u0"]


async def test_the_loop_keeps_running_while_the_endpoint_encodes_a_big_snapshot() -> None:
    cluster = build(nodes=200, pods=2_000)
    gc.collect()  # the build's garbage is not the snapshot's
    # How long the whole encoding takes here, had it stayed on the loop.
    started = time.perf_counter()
    json.dumps(runs.snapshot(cluster.cache, cluster.log, "plumb"))
    on_loop = time.perf_counter() - started

    tracer = tracing.Tracer(log=logging.Logger("quiet"))
    port = _free_port()
    encoded_on: list[int] = []  # the thread each encoding ran on

    class Watched:
        """The capture, noting which thread encodes it."""

        def __init__(self, taken: runs.Capture) -> None:
            self.taken = taken

        def encode_lazily(self) -> Any:
            encoded_on.append(threading.get_ident())
            return self.taken.encode_lazily()

    def capture() -> runs.Capture:
        return cast(runs.Capture, Watched(runs.capture(cluster.cache, cluster.log, "plumb")))

    loop_thread = threading.get_ident()
    runner = await debug.start(tracer, port, dump=capture)
    assert runner is not None
    ticks: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.001)

    def get() -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/snapshot", timeout=30) as r:
            return dict(json.loads(r.read()))

    ticker = asyncio.create_task(tick())
    try:
        asked = time.perf_counter()
        document = await asyncio.to_thread(get)
        answered = time.perf_counter()
    finally:
        done.set()
        await ticker
        await debug.stop(runner, tracer)
    during = [t for t in ticks if asked <= t <= answered]
    # The encoding ran in a worker thread, not on the loop's, and the loop went on meanwhile
    # (structural checks: how long anything took depends on the machine, and is not asserted).
    assert encoded_on, "the endpoint never encoded the capture"
    assert encoded_on[0] != loop_thread, "the snapshot was encoded on the event loop's thread"
    assert during, (answered - asked, on_loop)
    assert len(document["cache"]["pods"]) == 2_000
    assert document["format"] == runs.FORMAT
    assert len(runs.load(document).runs) == 200


async def _measure(cluster: CacheAndRuns, offloop: bool) -> tuple[float, float, int]:
    """(longest the loop went without a tick, total seconds, bytes) of one snapshot written as
    the endpoint writes it: on the loop (the old way) or captured, then encoded in a thread."""
    ticks: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.001)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    if offloop:
        taken = runs.capture(cluster.cache, cluster.log, "plumb")
        size = len(await asyncio.to_thread(debug.serialise, taken))
    else:
        size = len(json.dumps(runs.snapshot(cluster.cache, cluster.log, "plumb")))
    total = time.perf_counter() - started
    await asyncio.sleep(0.05)
    done.set()
    await ticker
    during = [t for t in ticks if t >= started - 0.01]
    blocked = max(b - a for a, b in itertools.pairwise(during))
    return blocked, total, size


async def _benchmark() -> None:
    started = time.perf_counter()
    cluster = build(nodes=1_000, pods=10_000)
    print(f"built 1,000 nodes / 10,000 pods in {time.perf_counter() - started:.1f} s")
    # The full collections a heap this size sets off once built are none of the snapshot's.
    gc.collect()
    started = time.perf_counter()
    runs.capture(cluster.cache, cluster.log, "plumb")
    print(f"capture alone: {1000 * (time.perf_counter() - started):.1f} ms")
    for offloop in (False, True, False, True):
        blocked, total, size = await _measure(cluster, offloop)
        how = "captured, encoded in a thread" if offloop else "all on the loop"
        print(
            f"{how:30}: loop blocked at most {1000 * blocked:6.1f} ms, "
            f"total {1000 * total:6.1f} ms, {size / 1e6:.1f} MB"
        )


if __name__ == "__main__":
    asyncio.run(_benchmark())
