"""The feed's part in DRA: a pod whose claims do not exist yet waits (PreEnqueue), and claim,
slice and class events move the pods DynamicResources rejected, as its queueing hints do."""

from __future__ import annotations

from typing import Any

import pytest

from plumb import scheduler as scheduler_module
from plumb.backend.cache import dra
from plumb.backend.queue import Where
from plumb.backend.records import objects
from plumb.framework.plugins import noderesourcesfit
from plumb_dev.testing.builders import make_pod
from tests.support.dra_bodies import claim_body, device, result, slice_body
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

DRA = frozenset({dra.PLUGIN})
CLAIM = scheduler_module.RESOURCE_CLAIM
SLICE = scheduler_module.RESOURCE_SLICE
CLASS = scheduler_module.DEVICE_CLASS


def pod_body(name: str, *, template: bool = True, made: str | None = None) -> dict[str, Any]:
    body = make_pod(name, "ml").uid(name).scheduler("plumb").req(cpu="1").obj()
    if template:
        body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one"}]
    else:
        body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    if made is not None:
        statuses = [{"name": "gpu", "resourceClaimName": made}]
        body["status"] = {"phase": "Pending", "resourceClaimStatuses": statuses}
    return body


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def plumb(clock: ManualClock) -> scheduler_module.Scheduler:
    return make_scheduler(FakeApi(), clock)


def rejected(plumb: scheduler_module.Scheduler, uid: str, plugins: frozenset[str]) -> None:
    """The pod's attempt failed, ``plugins`` rejecting it."""
    entry = plumb.queue._pop_active()
    assert entry is not None
    assert entry.pod.uid == uid
    plumb.queue.unschedulable(uid, plugins)


def test_a_pod_waits_until_the_controller_makes_and_names_its_claim(
    plumb: scheduler_module.Scheduler,
) -> None:
    plumb.feed.on_pod("ADDED", pod_body("train"))
    assert plumb.queue.where("train") is Where.GATED
    claim = claim_body("train-gpu-x", owner="train")
    plumb.feed.on_dra(CLAIM, "ADDED", claim)  # made, not yet named in the pod's status
    assert plumb.queue.where("train") is Where.GATED
    plumb.feed.on_pod("MODIFIED", pod_body("train", made="train-gpu-x"))
    assert plumb.queue.where("train") is Where.ACTIVE


def test_a_pod_naming_a_missing_claim_is_let_in_when_it_is_created(
    plumb: scheduler_module.Scheduler,
) -> None:
    plumb.feed.on_pod("ADDED", pod_body("train", template=False))
    plumb.feed.on_pod("ADDED", pod_body("other", template=False))
    assert plumb.queue.where("train") is Where.GATED
    plumb.feed.on_dra(CLAIM, "ADDED", claim_body("train-gpu"))
    assert plumb.queue.where("train") is Where.ACTIVE
    assert plumb.queue.where("other") is Where.GATED


def test_a_claim_another_pod_owns_keeps_the_pod_out(plumb: scheduler_module.Scheduler) -> None:
    plumb.feed.on_dra(CLAIM, "ADDED", claim_body("stolen", owner="someone-else"))
    plumb.feed.on_pod("ADDED", pod_body("train", made="stolen"))
    assert plumb.queue.where("train") is Where.GATED


def test_slices_and_classes_added_or_updated_move_the_pods_dynamic_resources_rejected(
    plumb: scheduler_module.Scheduler, clock: ManualClock
) -> None:
    plumb.feed.on_dra(CLAIM, "ADDED", claim_body("a-gpu"))
    plumb.feed.on_dra(CLAIM, "ADDED", claim_body("b-gpu"))
    plumb.feed.on_pod("ADDED", pod_body("a", template=False))
    plumb.feed.on_pod("ADDED", pod_body("b", template=False))
    rejected(plumb, "a", DRA)
    rejected(plumb, "b", frozenset({noderesourcesfit.NAME}))
    clock.advance(60)
    plumb.feed.on_dra(SLICE, "DELETED", slice_body("s", device("gpu-0")))
    assert plumb.queue.where("a") is Where.UNSCHEDULABLE  # a slice gone frees nothing
    plumb.feed.on_dra(SLICE, "ADDED", slice_body("s", device("gpu-0")))
    assert plumb.queue.where("a") is Where.ACTIVE
    assert plumb.queue.where("b") is Where.UNSCHEDULABLE
    rejected(plumb, "a", DRA)
    clock.advance(60)
    plumb.feed.on_dra(CLASS, "ADDED", {"metadata": {"name": "gpu"}})
    assert plumb.queue.where("a") is Where.ACTIVE


def test_a_claim_deallocated_moves_every_pod_dynamic_resources_rejected(
    plumb: scheduler_module.Scheduler, clock: ManualClock
) -> None:
    plumb.feed.on_dra(CLAIM, "ADDED", claim_body("a-gpu"))
    plumb.feed.on_pod("ADDED", pod_body("a", template=False))
    rejected(plumb, "a", DRA)
    clock.advance(60)
    allocated = claim_body("elsewhere", version="2", results=(result("gpu-0"),))
    plumb.feed.on_dra(CLAIM, "ADDED", allocated)
    assert plumb.queue.where("a") is Where.UNSCHEDULABLE  # another pod's claim: no help
    plumb.feed.on_dra(CLAIM, "MODIFIED", claim_body("elsewhere", version="3"))
    assert plumb.queue.where("a") is Where.ACTIVE
    assert plumb.cache.dra.allocated().devices == frozenset()


def test_only_a_status_change_of_its_own_claim_moves_a_pod(
    plumb: scheduler_module.Scheduler, clock: ManualClock
) -> None:
    plumb.feed.on_dra(CLAIM, "ADDED", claim_body("a-gpu"))
    plumb.feed.on_pod("ADDED", pod_body("a", template=False))
    rejected(plumb, "a", DRA)
    clock.advance(60)
    finalized = claim_body("a-gpu", version="2")
    finalized["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    plumb.feed.on_dra(CLAIM, "MODIFIED", finalized)
    assert plumb.queue.where("a") is Where.UNSCHEDULABLE
    plumb.feed.on_dra(CLAIM, "MODIFIED", claim_body("a-gpu", version="3", reserved=("x",)))
    assert plumb.queue.where("a") is Where.ACTIVE


def test_a_relist_of_claims_forgets_the_deleted_and_lets_waiting_pods_in(
    plumb: scheduler_module.Scheduler,
) -> None:
    plumb.feed.on_dra(CLAIM, "ADDED", claim_body("gone"))
    plumb.feed.on_pod("ADDED", pod_body("train", template=False))
    plumb.feed.relist_dra(CLAIM, [claim_body("train-gpu")])
    assert plumb.cache.dra.claim("ml", "gone") is None
    assert plumb.queue.where("train") is Where.ACTIVE


def test_a_node_label_change_helps_dynamic_resources() -> None:
    before = objects.NodeInfo(name="n", allocatable={}, labels={"rack": "1"})
    after = objects.NodeInfo(name="n", allocatable={}, labels={"rack": "2"})
    assert dra.PLUGIN in scheduler_module.node_change_helps(before, after)
