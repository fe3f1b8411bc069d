"""A deviation is charged to a SchedulingPolicy's budget once per placement that stands: a
binding that fails gives it back, and a new leader does not charge again for a pod the old
leader charged before its binding was cut short."""

from __future__ import annotations

import asyncio

from plumb.k8s import client as k8s_client
from plumb.policy import spec
from plumb.scheduler import Scheduler
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler
from tests.support.policy_builders import make_policy

# Zone c is too small for a web pod: with one pod in a and one in b, maxSkew 1 blocks every
# node for the third, which deviates on the budget (to a or b, where the skew rises least).
NODES = [
    make_node("a1").zone("a").capacity(cpu="4").obj(),
    make_node("b1").zone("b").capacity(cpu="4").obj(),
    make_node("c1").zone("c").capacity(cpu="500m").obj(),
]
# Pods of app=web, created a second apart: web-0, web-1, web-2.
WEB = [
    make_pod(f"web-{i}", "shop")
    .uid(f"w{i}")
    .created(f"2026-12-01T00:00:0{i}Z")
    .scheduler("plumb")
    .label("app", "web")
    .req(cpu="1")
    for i in range(3)
]


def _policy(s: Scheduler) -> spec.Policy:
    state = s.policies.store.get("shop", "web")
    assert state is not None
    assert state.active is not None
    return state.active


def _used(s: Scheduler) -> int:
    state = s.policies.budget_state(_policy(s))
    assert state is not None
    return state.used


async def _decide_all(s: Scheduler, clock: ManualClock) -> None:
    for _ in range(10):
        if len(s.queue) == 0:
            return
        clock.now += 20  # past any backoff
        await s.schedule_batch(await s.queue.pop_batch(8))
        await s.drain()


async def test_a_deviation_whose_binding_fails_is_charged_once_when_the_retry_binds() -> None:
    created = k8s_client.ApiResponse(status=201, body={})
    failed = k8s_client.ApiResponse(status=500, body={"message": "etcd timeout"})
    api, clock = FakeApi(created, created, failed), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync(NODES, [])
    s.feed.on_policy("ADDED", make_policy("web", "shop").spread().budget(max_violations=3).obj())
    for pod in WEB:
        s.feed.on_pod("ADDED", pod.obj())
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()
    assert [name for name, _ in api.binds] == ["web-0", "web-1", "web-2"]
    assert _used(s) == 0  # the deviating binding failed: nothing stands, nothing is charged
    await _decide_all(s, clock)
    assert [name for name, _ in api.binds] == ["web-0", "web-1", "web-2", "web-2"]
    assert _used(s) == 1
    status = s.policies.status("shop", "web")
    assert status is not None
    assert status["budget"]["used"] == 1
    assert status["budget"]["chargedPods"] == ["w2"]


class HangingThird(FakeApi):
    """Bindings answered at once but for web-2's, which never answers (the API server stalls
    and the lease is lost)."""

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, traceparent: str | None = None
    ) -> k8s_client.ApiResponse:
        if name == "web-2":
            self.binds.append((name, node))
            await asyncio.Event().wait()
        return await super().bind(namespace=namespace, name=name, uid=uid, node=node)


async def test_a_new_leader_does_not_charge_again_for_a_deviation_cut_short_by_the_handover() -> (
    None
):
    old_api, clock = HangingThird(), ManualClock()
    old = make_scheduler(old_api, clock)
    old.feed.resync(NODES, [])
    policy_body = make_policy("web", "shop").spread().budget(max_violations=1).obj()
    old.feed.on_policy("ADDED", policy_body)
    for pod in WEB:
        old.feed.on_pod("ADDED", pod.obj())
    await old.schedule_batch(await old.queue.pop_batch(8))
    for _ in range(50):
        await asyncio.sleep(0)
    (deviated_to,) = [node for name, node in old_api.binds if name == "web-2"]
    assert _used(old) == 1
    written = old.policies.status("shop", "web")  # what the old leader's status writer wrote
    await old.stand_down()  # the lease is lost with web-2's binding unanswered
    assert _used(old) == 0  # given back here; the status the new leader reads says 1

    new_api = FakeApi()
    new = make_scheduler(new_api, clock)
    new.feed.resync(
        NODES, [WEB[0].copy().node("a1").obj(), WEB[1].copy().node("b1").obj(), WEB[2].obj()]
    )
    new.feed.on_policy("ADDED", policy_body)
    new.policies.take_over({**policy_body, "status": written})
    assert _used(new) == 1
    await _decide_all(new, clock)
    # The budget of one was spent on web-2 itself: it deviates once more, not charged again.
    assert new_api.binds == [("web-2", deviated_to)]
    assert _used(new) == 1
