"""NodeResourcesFit's DeviceClass events (DRAExtendedResource, v1.36+): a class that comes to
back an extended resource moves the pods that plugin turned away; one that changes nothing
about it does not; before v1.36 a class never does."""

from __future__ import annotations

from typing import Any

from plumb import scheduler as scheduler_module
from plumb.backend.queue import Where
from plumb.framework import emulation
from plumb.framework.plugins import noderesourcesfit
from plumb_dev.testing.builders import make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

CLASS = scheduler_module.DEVICE_CLASS
FIT = frozenset({noderesourcesfit.NAME})


def gpu_class(resource: str = "", selector: str = "true") -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": selector}}]}
    if resource:
        spec["extendedResourceName"] = resource
    return {"metadata": {"name": "gpu"}, "spec": spec}


def turned_away(minor: int) -> tuple[scheduler_module.Scheduler, ManualClock]:
    """A pod asking for example.com/gpu, rejected by NodeResourcesFit (no node has any)."""
    clock = ManualClock()
    plumb = make_scheduler(FakeApi(), clock, kube=emulation.emulate(minor))
    body = make_pod("train", "ml").uid("train").scheduler("plumb").req(**{"example.com/gpu": 1})
    plumb.feed.on_pod("ADDED", body.obj())
    entry = plumb.queue._pop_active()
    assert entry is not None
    plumb.queue.unschedulable("train", FIT)
    clock.advance(60)
    return plumb, clock


def test_a_class_added_or_renamed_moves_the_pods_node_resources_fit_turned_away() -> None:
    plumb, clock = turned_away(37)
    plumb.feed.on_dra(CLASS, "ADDED", gpu_class())  # its implicit name may be what they ask
    assert plumb.queue.where("train") is Where.ACTIVE
    entry = plumb.queue._pop_active()
    assert entry is not None
    plumb.queue.unschedulable("train", FIT)
    clock.advance(60)
    plumb.feed.on_dra(CLASS, "MODIFIED", gpu_class(selector='device.driver != ""'))
    assert plumb.queue.where("train") is Where.UNSCHEDULABLE  # the same extended resource
    plumb.feed.on_dra(CLASS, "MODIFIED", gpu_class("example.com/gpu"))
    assert plumb.queue.where("train") is Where.ACTIVE


def test_before_v1_36_a_class_does_not_concern_node_resources_fit() -> None:
    plumb, _ = turned_away(35)
    plumb.feed.on_dra(CLASS, "ADDED", gpu_class("example.com/gpu"))
    assert plumb.queue.where("train") is Where.UNSCHEDULABLE
