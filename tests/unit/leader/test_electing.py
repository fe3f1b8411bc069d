"""Lease leader election on fake time: who leads, when a standby takes over, and that a leader
cut off from the API server stops acting before anyone else may start."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import socket
from typing import Any

import pytest

from plumb import cli, leader
from plumb.app import runtime
from tests.support.leases import TIMINGS, CuttableLeaseApi, LeaseStore


class FakeTime:
    """Virtual seconds: ``sleep`` parks a task until ``advance`` reaches its wake time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def clock(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1_700_000_000.0 + self.now

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + max(0.0, seconds), next(self._seq), future))
        await future

    async def advance(self, seconds: float, *, step: float = 0.05, check: Any = None) -> None:
        """Move time on by ``seconds`` in small steps, waking sleepers on the way; ``check``
        runs after each step."""
        await _settle()  # tasks started just now run at the current time
        end = self.now + seconds
        while self.now < end:
            target = min(end, self.now + step)
            while self._sleepers and self._sleepers[0][0] <= target:
                wake, _, future = heapq.heappop(self._sleepers)
                self.now = max(self.now, wake)
                if not future.done():
                    future.set_result(None)
                await _settle()
            self.now = target
            await _settle()
            if check is not None:
                check()


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


class ElectorReplica:
    """One replica's elector on fake time, over its own cuttable API to the shared Lease."""

    def __init__(self, name: str, store: LeaseStore, time: FakeTime) -> None:
        self.api = CuttableLeaseApi(store)
        self.changes: list[tuple[float, bool]] = []
        self.elector = leader.Elector(
            self.api,
            leader.ElectionSettings(namespace="plumb-system", identity=name, timings=TIMINGS),
            on_change=lambda leading: self.changes.append((time.now, leading)),
            clock=time.clock,
            wall=time.wall,
            sleep=time.sleep,
        )
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.elector.run())

    async def kill(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task


def _spec(store: LeaseStore) -> dict[str, Any]:
    assert store.lease is not None
    return dict(store.lease["spec"])


def _never_two(*replicas: ElectorReplica) -> Any:
    def check() -> None:
        acting = [r.elector.settings.identity for r in replicas if r.elector.may_act()]
        assert len(acting) <= 1, f"two replicas may act at once: {acting}"

    return check


async def test_the_first_replica_takes_a_free_lease_and_renews_it_every_retry_period() -> None:
    time, store = FakeTime(), LeaseStore()
    a = ElectorReplica("a", store, time)
    a.start()
    await time.advance(0.1)
    assert a.elector.leading
    assert a.elector.may_act()
    spec = _spec(store)
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    first_renew = spec["renewTime"]
    await time.advance(10)
    assert _spec(store)["renewTime"] != first_renew
    assert _spec(store)["acquireTime"] == spec["acquireTime"]  # renewals keep the acquire time
    assert len(store.writes) == 6  # the create at 0, renewals at 2, 4, 6, 8, 10
    assert a.changes == [(1000.0, True)]
    await a.kill()


async def test_a_standby_waits_for_the_lease_to_expire_by_its_own_clock_then_takes_it() -> None:
    time, store = FakeTime(), LeaseStore()
    a, b = ElectorReplica("a", store, time), ElectorReplica("b", store, time)
    a.start()
    await time.advance(0.1)
    b.start()
    await time.advance(5, check=_never_two(a, b))
    assert [r.elector.leading for r in (a, b)] == [True, False]
    await a.kill()  # SIGKILL: no release; the last renewal stays in the Lease
    killed_at = time.now
    last_renew = store.writes[-1]
    await time.advance(TIMINGS.lease_duration + TIMINGS.retry_period + 0.5, check=_never_two(b))
    assert b.elector.leading
    took_at = b.changes[0][0]
    # Not before the lease expired (judged from when b saw the last renewal), and within lease
    # duration + one retry period of the kill.
    assert took_at - killed_at <= TIMINGS.lease_duration + TIMINGS.retry_period
    assert took_at - killed_at >= TIMINGS.lease_duration - TIMINGS.retry_period
    spec = _spec(store)
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    assert spec["acquireTime"] != last_renew["spec"]["acquireTime"]
    await b.kill()


async def test_a_released_lease_is_taken_within_one_retry_period() -> None:
    time, store = FakeTime(), LeaseStore()
    a, b = ElectorReplica("a", store, time), ElectorReplica("b", store, time)
    a.start()
    await time.advance(0.1)
    b.start()
    await time.advance(3.3)
    await a.kill()
    assert await a.elector.release()
    released_at = time.now
    assert _spec(store)["holderIdentity"] is None
    assert a.changes[-1] == (released_at, False)
    await time.advance(TIMINGS.retry_period + 0.1, check=_never_two(a, b))
    assert b.elector.leading
    assert b.changes[0][0] - released_at <= TIMINGS.retry_period
    await b.kill()


async def test_a_leader_cut_off_stops_acting_before_its_lease_can_expire() -> None:
    time, store = FakeTime(), LeaseStore()
    a, b = ElectorReplica("a", store, time), ElectorReplica("b", store, time)
    a.start()
    await time.advance(0.1)
    b.start()
    await time.advance(4.5)
    a.api.cut = True  # a's requests time out from now on; b still reaches the server
    cut_at = time.now
    last_sent = 1004.0  # a's last successful renewal was sent at 4 s
    await time.advance(TIMINGS.lease_duration + 2 * TIMINGS.retry_period, check=_never_two(a, b))
    stopped_at = next(t for t, leading in a.changes if not leading)
    took_at = next(t for t, leading in b.changes if leading)
    assert stopped_at == pytest.approx(last_sent + TIMINGS.renew_deadline, abs=0.06)
    assert stopped_at < took_at
    assert took_at - cut_at <= TIMINGS.lease_duration + TIMINGS.retry_period
    assert not a.elector.may_act()
    assert b.elector.may_act()
    # Back on the network, a finds b holding the lease and stays a candidate.
    a.api.cut = False
    await time.advance(5, check=_never_two(a, b))
    assert not a.elector.leading
    assert _spec(store)["holderIdentity"] == "b"
    await a.kill()
    await b.kill()


async def test_two_candidates_racing_for_a_free_lease_end_with_one_leader() -> None:
    time, store = FakeTime(), LeaseStore()
    replicas = [ElectorReplica(name, store, time) for name in "abc"]
    for replica in replicas:
        replica.start()
    await time.advance(6, check=_never_two(*replicas))
    leaders = [r.elector.settings.identity for r in replicas if r.elector.leading]
    assert leaders == [_spec(store)["holderIdentity"]]
    for replica in replicas:
        await replica.kill()


async def test_a_leader_that_sees_another_holder_stands_down_at_once() -> None:
    time, store = FakeTime(), LeaseStore()
    a = ElectorReplica("a", store, time)
    a.start()
    await time.advance(0.1)
    assert store.lease is not None
    store.lease["spec"]["holderIdentity"] = "intruder"  # e.g. a forced kubectl edit
    store.lease["metadata"]["resourceVersion"] = "999"
    await time.advance(TIMINGS.retry_period + 0.1)
    assert not a.elector.leading
    await a.kill()


def test_durations_are_read_as_go_writes_them() -> None:
    assert leader.parse_duration("15s") == 15.0
    assert leader.parse_duration("500ms") == 0.5
    assert leader.parse_duration("1m30s") == 90.0
    assert leader.parse_duration("2") == 2.0
    with pytest.raises(ValueError, match="'fast' is not a duration"):
        leader.parse_duration("fast")


def test_timings_that_would_let_two_leaders_act_are_refused() -> None:
    with pytest.raises(ValueError, match=r"renew deadline .* < lease duration"):
        leader.Timings(lease_duration=10, renew_deadline=10, retry_period=2)
    with pytest.raises(ValueError, match="retry period"):
        leader.Timings(lease_duration=15, renew_deadline=2, retry_period=2)


def test_identity_is_the_pod_name_else_the_host_and_a_suffix_unique_per_process() -> None:
    assert runtime.identity({"POD_NAME": "plumb-7d9f-abcde"}) == "plumb-7d9f-abcde"
    first, second = runtime.identity({}), runtime.identity({})
    assert first.startswith(f"{socket.gethostname()}_")
    assert first != second


def test_run_takes_the_leader_election_flags_as_kube_scheduler_spells_them() -> None:
    args = cli._parser().parse_args(
        [
            "run",
            "--leader-elect",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
            "--leader-elect-resource-name=sched",
            "--leader-elect-resource-namespace=ops",
        ]
    )
    assert args.leader_elect
    assert (
        args.leader_elect_lease_duration,
        args.leader_elect_renew_deadline,
        args.leader_elect_retry_period,
    ) == (4.0, 3.0, 0.5)
    assert (args.leader_elect_resource_name, args.leader_elect_resource_namespace) == (
        "sched",
        "ops",
    )
    defaults = cli._parser().parse_args(["run"])
    assert not defaults.leader_elect
    assert defaults.leader_elect_lease_duration == 15.0
    assert defaults.leader_elect_renew_deadline == 10.0
    assert defaults.leader_elect_retry_period == 2.0
    assert defaults.leader_elect_resource_name == "plumb"
    assert defaults.leader_elect_resource_namespace is None  # the pod's, else plumb-system
