"""Plugins are called off the loop and watched: a call past its timeout fails the pod it was
judging, the loop waits no longer than the timeout, and the rest of the batch is judged; a
plugin whose calls keep hanging is busy once it has abandoned.LIMIT of them running, its pods
failing at once, saying so, until one returns."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from plumb.extensions import abandoned, calls, enabling, interface, judgements, registry
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import sample_plugins
from tests.support.small_clusters import cluster, pod

FOUND = registry.of(sample_plugins.RackFilter)
RACK = enabling.enable(FOUND.plugins["RackFilter"], frozenset({interface.FILTER}), 0, None)


@pytest.fixture(autouse=True)
def _release_hung_calls() -> Iterator[None]:
    sample_plugins.released.clear()
    yield
    sample_plugins.released.set()  # let the abandoned workers finish


def _calls(left: abandoned.AbandonedCalls | None = None) -> calls.PluginCalls:
    return calls.PluginCalls(lambda: FOUND, left or abandoned.AbandonedCalls())


def _judge(plugin_calls: calls.PluginCalls, *names: str) -> dict[str, judgements.Judgement]:
    c = cluster([make_node("a").label("plumb.test/rack", "a"), make_node("b")])
    pods = [pod(make_pod(name), name) for name in names]
    return asyncio.run(plugin_calls.judge(pods, c.snapshot(), [RACK], now=0.0))


def test_a_hung_call_fails_its_pod_within_the_timeout_and_the_rest_are_judged() -> None:
    left = abandoned.AbandonedCalls()
    started = time.monotonic()
    found = _judge(_calls(left), "web-1", "hang-1", "web-2")
    took = time.monotonic() - started
    assert took < sample_plugins.HANG_SECONDS  # the loop waited about the timeout, not the call
    hung = found["hang-1"].failure
    assert hung is not None
    assert hung.message == 'running "RackFilter" filter plugin: did not answer within 0.5s'
    assert hung.why == judgements.TIMED_OUT
    for name in ("web-1", "web-2"):
        assert found[name].failure is None
        assert [r.reason for r in found[name].rejections] == [
            "node(s) had no rack label",
            "node(s) were in another rack",
        ]
    assert left.running() == {"RackFilter": 1}
    sample_plugins.released.set()
    kube_deadline = time.monotonic() + 5
    while left.running() and time.monotonic() < kube_deadline:
        time.sleep(0.01)
    assert left.running() == {}  # the call returned in the end, and is counted off


def test_a_plugin_that_keeps_hanging_is_busy_past_the_limit_until_a_call_returns() -> None:
    left = abandoned.AbandonedCalls(limit=2)
    plugin_calls = _calls(left)
    found = _judge(plugin_calls, "hang-1", "hang-2", "web-1")
    assert [found[n].failure.why for n in ("hang-1", "hang-2")] == [  # type: ignore[union-attr]
        judgements.TIMED_OUT,
        judgements.TIMED_OUT,
    ]
    busy = found["web-1"].failure
    assert busy is not None
    assert busy.why == judgements.BUSY
    assert busy.message == (
        'running "RackFilter" filter plugin: 2 earlier calls did not answer within 0.5s and '
        "are still running"
    )
    sample_plugins.released.set()
    deadline = time.monotonic() + 5
    while left.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _judge(plugin_calls, "web-2")["web-2"].failure is None


def test_a_raising_plugin_fails_only_its_pod() -> None:
    found = _judge(_calls(), "web-1", "raise-1", "web-2")
    failure = found["raise-1"].failure
    assert failure is not None
    assert failure.why == judgements.RAISED
    assert [found[n].failure for n in ("web-1", "web-2")] == [None, None]


def test_a_profile_without_judging_plugins_calls_nothing() -> None:
    c = cluster([make_node("a")])
    judged = asyncio.run(_calls().judge([pod(make_pod("w"), "w")], c.snapshot(), [], 0.0))
    assert judged == {}
