"""What leadership means to the scheduler: nothing is bound or reported while the gate is shut,
a lost lease cancels the bindings in flight and puts their pods back, and the probes say when a
replica is ready and when it is stuck."""

from __future__ import annotations

import asyncio
from typing import Any

from plumb import binder, events
from plumb import scheduler as scheduler_module
from plumb.app import leading, probes
from plumb.backend import queue as queue_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.records import objects
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module
from plumb.kernel import contract
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, reference_kernel

NODES = [make_node("node-a").capacity(cpu="8").obj()]


class SwitchableGate:
    """A leadership gate the test opens and shuts by setting ``open``."""

    def __init__(self) -> None:
        self.open = True

    def __call__(self) -> bool:
        return self.open


class HangingApi(FakeApi):
    """Bindings that never answer until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, traceparent: str | None = None
    ) -> k8s_client.ApiResponse:
        self.binds.append((name, node))
        await self.release.wait()
        return k8s_client.ApiResponse(status=201, body={})


def _scheduler(
    api: FakeApi,
    gate: SwitchableGate,
    clock: ManualClock,
    *,
    kernel: contract.KernelRunner = reference_kernel,
) -> scheduler_module.Scheduler:
    return scheduler_module.Scheduler(
        served=scheduler_module.defaults("plumb"),
        binder=binder.Binder(api, gate=gate),
        recorder=events.Recorder(api, instance="test", clock=clock, gate=gate),
        kernel=kernel,
        queue=queue_module.SchedulingQueue(clock=clock),
        may_act=gate,
        clock=clock,
    )


def _pods(*names: str) -> list[dict[str, Any]]:
    return [
        make_pod(name, "default").uid(f"uid-{name}").scheduler("plumb").req(cpu="1").obj()
        for name in names
    ]


async def _spin(times: int = 200) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def test_with_the_gate_shut_nothing_is_bound_or_reported_and_no_pod_is_lost() -> None:
    api, gate, clock = FakeApi(), SwitchableGate(), ManualClock()
    s = _scheduler(api, gate, clock)
    s.feed.resync(NODES, _pods("web-0", "web-1"))
    gate.open = False
    loop = asyncio.create_task(s.run())
    await _spin()
    assert api.binds == []
    assert api.events == []
    assert s.queue.counts()[queue_module.Where.ACTIVE] == 2
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)


async def test_a_binding_refused_by_the_gate_is_not_sent_and_the_pod_waits_again() -> None:
    api = FakeApi()
    refusing = binder.Binder(api, gate=lambda: False)
    result = await refusing.bind(make_pod_info("web-0"), "node-a")
    assert result.outcome is binder.BindOutcome.NOT_LEADER
    assert api.binds == []


def make_pod_info(name: str) -> objects.PodInfo:
    return objects.parse_pod(_pods(name)[0])


async def test_standing_down_cancels_bindings_in_flight_and_puts_their_pods_back() -> None:
    api, gate, clock = HangingApi(), SwitchableGate(), ManualClock()
    s = _scheduler(api, gate, clock)
    s.feed.resync(NODES, _pods("web-0", "web-1"))
    loop = asyncio.create_task(s.run())
    await _spin()
    assert sorted(name for name, _ in api.binds) == ["web-0", "web-1"]
    assert s.cache.assumed_count() == 2
    gate.open = False
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    await s.stand_down()
    assert s.cache.assumed_count() == 0
    uids = [objects_uid(p) for p in _pods("web-0", "web-1")]
    assert all(s.cache.state(uid) is not cache_module.PodState.ASSUMED for uid in uids)
    assert all(s.queue.where(uid) is not None for uid in uids)
    assert api.events == []  # no Scheduled event for a binding whose answer never came


def objects_uid(body: dict[str, Any]) -> str:
    return str(body["metadata"]["uid"])


class HeldKernel:
    """The reference kernel, which waits until ``free`` is set (a batch still being decided)."""

    def __init__(self) -> None:
        self.free = asyncio.Event()
        self.runs = 0

    async def __call__(self, cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
        self.runs += 1
        await self.free.wait()
        return await reference_kernel(cluster, batch)


async def test_leadership_lost_while_a_batch_is_decided_puts_its_pods_back_for_the_next_term() -> (
    None
):
    api, gate, clock, kernel = FakeApi(), SwitchableGate(), ManualClock(), HeldKernel()
    s = _scheduler(api, gate, clock, kernel=kernel)
    names = [f"web-{i}" for i in range(5)]
    s.feed.resync(NODES, _pods(*names))
    term = asyncio.create_task(s.run())
    await _spin()
    assert kernel.runs == 1  # the batch of five waits for the kernel
    assert s.queue.counts()[queue_module.Where.IN_FLIGHT] == 5
    term.cancel()  # the lease is lost mid-batch
    await asyncio.gather(term, return_exceptions=True)
    await s.stand_down()
    assert s.queue.counts()[queue_module.Where.IN_FLIGHT] == 0
    assert s.queue.counts()[queue_module.Where.ACTIVE] == 5
    # The same replica leads again (the Lease still names it): every pod is bound, once.
    kernel.free.set()
    term = asyncio.create_task(s.run())
    await _spin()
    await s.drain()
    assert sorted(name for name, _ in api.binds) == names
    assert len(s.queue) == 0
    term.cancel()
    await asyncio.gather(term, return_exceptions=True)


async def test_probes_report_ready_after_the_first_list_and_stuck_loops_and_watches() -> None:
    api, gate, clock = FakeApi(), SwitchableGate(), ManualClock()
    s = _scheduler(api, gate, clock)
    client = k8s_client.ApiClient(credentials_module.Credentials(server="http://127.0.0.1:1"))
    health = probes.Probes(s, client, leading.Leadership(s, client, None), clock=clock)
    assert not health.ready()
    s.feed.resync(NODES, [])
    assert health.ready()
    assert health.problems() == []

    async def forever() -> None:
        await asyncio.Event().wait()

    async def ended() -> None:
        return None

    alive = asyncio.create_task(forever(), name="plumb-watch /api/v1/pods")
    dead = asyncio.create_task(ended(), name="plumb-watch /api/v1/nodes")
    await _spin(5)
    health.watches = [alive, dead]
    client.streams["/api/v1/pods"] = k8s_client.StreamActivity(open=0, changed_at=clock.now)
    assert health.problems() == ["the watch of /api/v1/nodes has ended"]
    clock.now += probes.WATCH_STALL_SECONDS + 1
    assert health.problems() == [
        "the watch of /api/v1/pods has had no stream and no answer for 301 s",
        "the watch of /api/v1/nodes has ended",
    ]
    client.streams["/api/v1/pods"].open = 1  # a stream open is alive, however quiet
    assert len(health.problems()) == 1
    alive.cancel()
    await asyncio.gather(alive, return_exceptions=True)
    await client.close()


async def test_a_loop_stuck_on_one_batch_fails_liveness_but_an_idle_one_does_not() -> None:
    api, clock = FakeApi(), ManualClock()
    stuck = asyncio.Event()

    async def hanging_kernel(cluster: Any, batch: Any) -> Any:
        await stuck.wait()
        raise RuntimeError("never answers")

    s = scheduler_module.Scheduler(
        served=scheduler_module.defaults("plumb"),
        binder=binder.Binder(api),
        recorder=events.Recorder(api, instance="test", clock=clock),
        kernel=hanging_kernel,
        queue=queue_module.SchedulingQueue(clock=clock),
        clock=clock,
    )
    s.feed.resync(NODES, [])
    loop = asyncio.create_task(s.run())
    await _spin()
    clock.now += 3600  # idle for an hour: waiting for pods is not being stuck
    assert s.stalled() is None
    s.feed.on_pod("ADDED", _pods("web-0")[0])
    await _spin()
    clock.now += scheduler_module.STALLED_CYCLE_SECONDS + 1
    assert s.stalled() == (
        "the scheduling loop has been deciding one batch for 61 s (more than 60 s)"
    )
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
