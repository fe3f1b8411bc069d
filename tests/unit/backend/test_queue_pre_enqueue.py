"""Pods a PreEnqueue check turns away (DynamicResources: claims not created yet) wait gated,
are never popped, and are let in by the events that may help the plugin that turned them away,
or by an update of the pod."""

from __future__ import annotations

import pytest

from plumb.backend.queue import SchedulingQueue, Where
from plumb.backend.records import objects
from plumb_dev.testing.builders import make_pod
from tests.support.fakes import ManualClock
from tests.unit.backend.test_queue import pop_names

DRA = "DynamicResources"
DRA_ONLY = frozenset({DRA})


def claim_pod(name: str, *, claim: str = "", made: str = "") -> objects.PodInfo:
    """A pod using one claim: named (``claim``), or from a template, made as ``made``."""
    body = make_pod(name, "ml").uid(f"uid-{name}").scheduler("plumb").obj()
    entry = {"name": "gpu"}
    entry |= {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": "one"}
    body["spec"]["resourceClaims"] = [entry]
    if made:
        body["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": made}]}
    return objects.parse_pod(body)


class Claims:
    """A stand-in for the DRA store: the claims that exist; PreEnqueue as DynamicResources'."""

    def __init__(self) -> None:
        self.existing: set[str] = set()

    def __call__(self, pod: objects.PodInfo) -> str | None:
        names = pod.resource_claim_names
        if len(names) < len(pod.resource_claims) or not self.existing.issuperset(names):
            return DRA
        return None


@pytest.fixture
def claims() -> Claims:
    return Claims()


@pytest.fixture
def queue(claims: Claims) -> SchedulingQueue:
    return SchedulingQueue(clock=ManualClock(), pre_enqueue=claims)


async def test_a_pod_whose_claim_does_not_exist_waits_gated(queue: SchedulingQueue) -> None:
    queue.add(claim_pod("train", claim="team-gpus"))
    assert queue.where("uid-train") is Where.GATED
    assert await pop_names(queue) == []


async def test_the_claim_appearing_lets_the_pod_in(queue: SchedulingQueue, claims: Claims) -> None:
    queue.add(claim_pod("train", claim="team-gpus"))
    queue.add(claim_pod("other", claim="other-gpus"))
    claims.existing.add("team-gpus")
    queue.move_claim_users("ml", "team-gpus", DRA_ONLY)
    assert await pop_names(queue) == ["train"]
    assert queue.where("uid-other") is Where.GATED


async def test_only_events_for_the_plugin_that_turned_it_away_ask_again(
    queue: SchedulingQueue, claims: Claims
) -> None:
    queue.add(claim_pod("train", claim="team-gpus"))
    claims.existing.add("team-gpus")
    queue.move_all(frozenset({"NodeResourcesFit"}))
    assert await pop_names(queue) == []
    queue.move_all(DRA_ONLY)  # a ResourceSlice or DeviceClass added
    assert await pop_names(queue) == ["train"]


async def test_the_controller_naming_the_template_claim_lets_the_pod_in(
    queue: SchedulingQueue, claims: Claims
) -> None:
    queue.add(claim_pod("train"))
    claims.existing.add("train-gpu-x")
    queue.move_claim_users("ml", "train-gpu-x", DRA_ONLY)  # created before the pod names it
    assert await pop_names(queue) == []
    queue.add(claim_pod("train", made="train-gpu-x"))  # status.resourceClaimStatuses written
    assert await pop_names(queue) == ["train"]


async def test_a_pod_dynamic_resources_rejected_is_retried_when_its_claim_changes(
    queue: SchedulingQueue, claims: Claims
) -> None:
    claims.existing |= {"team-gpus", "other-gpus"}
    queue.add(claim_pod("train", claim="team-gpus"))
    queue.add(claim_pod("other", claim="other-gpus"))
    assert await pop_names(queue) == ["train", "other"]
    queue.unschedulable("uid-train", DRA_ONLY)
    queue.unschedulable("uid-other", frozenset({"NodeResourcesFit"}))
    queue.move_claim_users("ml", "team-gpus", DRA_ONLY)
    queue.move_claim_users("ml", "other-gpus", DRA_ONLY)
    assert queue.where("uid-train") is not Where.UNSCHEDULABLE
    assert queue.where("uid-other") is Where.UNSCHEDULABLE


async def test_a_deleted_pod_is_no_claim_user(queue: SchedulingQueue, claims: Claims) -> None:
    queue.add(claim_pod("train", claim="team-gpus"))
    queue.delete("uid-train")
    claims.existing.add("team-gpus")
    queue.move_claim_users("ml", "team-gpus", DRA_ONLY)
    assert len(queue) == 0
    assert await pop_names(queue) == []


async def test_a_pod_turned_away_is_asked_again_after_five_minutes(claims: Claims) -> None:
    clock = ManualClock()
    queue = SchedulingQueue(clock=clock, pre_enqueue=claims)
    queue.add(claim_pod("train", claim="team-gpus"))
    claims.existing.add("team-gpus")  # an event the queue never heard of
    clock.advance(299)
    assert await pop_names(queue) == []
    clock.advance(1)
    assert await pop_names(queue) == ["train"]
