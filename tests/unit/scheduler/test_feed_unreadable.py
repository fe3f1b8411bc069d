"""One object plumb cannot read (a bug in plumb's parsing, met with a body the API server
accepted) is logged and left out: the rest of its list, and the watch of its collection, go on.
Left to raise, it would make every relist of the collection fail on it again, and the pods
watch would stop for good."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

# Bodies no API server would serve, standing for any body plumb's parsing has a bug with.
UNREADABLE_POD: dict[str, Any] = {
    "metadata": {"name": "odd", "namespace": "shop", "uid": "uid-odd"},
    "spec": {"schedulerName": "plumb", "containers": [None]},
}
UNREADABLE_NODE: dict[str, Any] = {"metadata": {"name": "odd"}, "status": {"allocatable": "x"}}
WEB = make_pod("web", "shop").uid("uid-web").scheduler("plumb").req(cpu="100m")


def test_a_list_with_an_unreadable_pod_and_node_keeps_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = make_scheduler(FakeApi(), ManualClock())
    node = make_node("n1").capacity(cpu="4").obj()
    with caplog.at_level(logging.ERROR):
        s.feed.resync([UNREADABLE_NODE, node], [UNREADABLE_POD, WEB.obj()])
    assert s.cache.nodes.names() == ["n1"]
    assert "uid-web" in s.queue
    assert "uid-odd" not in s.queue
    assert "cannot read Pod shop/odd: AttributeError" in caplog.text
    assert "cannot read Node odd" in caplog.text


def test_an_unreadable_pod_event_leaves_the_watch_going() -> None:
    s = make_scheduler(FakeApi(), ManualClock())
    s.feed.resync([make_node("n1").capacity(cpu="4").obj()], [])
    s.feed.on_pod("ADDED", UNREADABLE_POD)  # raising here would end the pods watch
    s.feed.on_pod("ADDED", WEB.obj())
    assert "uid-web" in s.queue
