"""Plugins are called off the loop and watched: a call past its timeout fails the pod it was
judging, and the loop never waits longer than the timeout; while that call runs on, the pods
the plugin would judge fail at once, saying so; once it returns, the plugin judges again."""

from __future__ import annotations

import asyncio
import time

import pytest

from plumb.extensions import calls, enabling, interface, judgements, registry
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import sample_plugins
from tests.support.small_clusters import cluster, pod

FOUND = registry.of(sample_plugins.RackFilter)
RACK = enabling.enable(FOUND.plugins["RackFilter"], frozenset({interface.FILTER}), 0, None)


@pytest.fixture(autouse=True)
def _release_hung_calls() -> object:
    sample_plugins.released.clear()
    yield
    sample_plugins.released.set()  # let the abandoned worker finish


def _judge(plugin_calls: calls.PluginCalls, *names: str) -> dict[str, judgements.Judgement]:
    c = cluster([make_node("a").label("plumb.test/rack", "a"), make_node("b")])
    pods = [pod(make_pod(name), name) for name in names]
    return asyncio.run(plugin_calls.judge(pods, c.snapshot(), [RACK], now=0.0))


def test_a_hung_call_fails_its_pod_within_the_timeout_and_the_plugin_is_busy_until_it_returns() -> (
    None
):
    plugin_calls = calls.PluginCalls(lambda: FOUND)
    started = time.monotonic()
    found = _judge(plugin_calls, "web-1", "hang-1", "web-2")
    took = time.monotonic() - started
    assert took < sample_plugins.HANG_SECONDS  # the loop waited about the timeout, not the call
    hung = found["hang-1"].failure
    assert hung is not None
    assert hung.message == 'running "RackFilter" filter plugin: did not answer within 0.5s'
    assert hung.why == judgements.TIMED_OUT
    assert found["web-1"].failure is None  # judged before the hang
    assert [r.reason for r in found["web-1"].rejections] == [
        "node(s) had no rack label",
        "node(s) were in another rack",
    ]
    # While that call runs on, the plugin is busy: its next pods fail at once, saying so.
    after = found["web-2"].failure
    assert after is not None
    assert after.why == judgements.BUSY
    again = _judge(plugin_calls, "web-3")["web-3"].failure
    assert again is not None
    assert again.why == judgements.BUSY
    assert "an earlier call did not answer within 0.5s and is still running" in again.message
    # Once it returns, the plugin judges again.
    sample_plugins.released.set()
    deadline = time.monotonic() + 5
    while plugin_calls.busy() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert plugin_calls.busy() == {}
    assert _judge(plugin_calls, "web-4")["web-4"].failure is None


def test_a_raising_plugin_fails_only_its_pod() -> None:
    found = _judge(calls.PluginCalls(lambda: FOUND), "web-1", "raise-1", "web-2")
    failure = found["raise-1"].failure
    assert failure is not None
    assert failure.why == judgements.RAISED
    assert [found[n].failure for n in ("web-1", "web-2")] == [None, None]


def test_a_profile_without_judging_plugins_calls_nothing() -> None:
    c = cluster([make_node("a")])
    judged = asyncio.run(
        calls.PluginCalls(lambda: FOUND).judge([pod(make_pod("w"), "w")], c.snapshot(), [], 0.0)
    )
    assert judged == {}
