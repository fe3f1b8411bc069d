"""Scenario 1: plumb SIGKILLed at random moments of a burst, and started again each time.

Nothing of plumb's state survives a SIGKILL: pods it had assumed but whose bindings had not yet
been sent, bindings in flight, trace lines not written. The next run starts from a LIST, so the
invariant must hold after each kill: every pod bound once or pending with a reason, no node
overcommitted, the cache equal to the API server.

A kill may land between a binding the API server committed and the trace line that says so;
the check allows a bound pod with no trace line, never two. Rejected: a build whose startup
list leaves out the pods already bound (``feed.resync`` reconciling only pending pods) fails
with "cache differs from the API server after 30 s: bound pod ... missing" (run once, in a
scratch clone; with 9 nodes for 300 pods the short run has too much room left to overcommit).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from plumb_dev.testing import kube
from tests.chaos import harness, invariant
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def test_sigkill_at_random_moments_of_a_burst_loses_no_pod_and_binds_none_twice(
    client: kube.Kube, namespace: str, node_prefix: str, start_plumb: RestartablePlumbFactory
) -> None:
    pods = harness.size(200, 2000)
    kills = harness.size(1, 3)
    # Room for every pod, a little over: the overcommit check has teeth only when nodes fill.
    nodes = harness.create_nodes(client, harness.nodes(pods // 36 + 1, prefix=node_prefix))
    plumb = start_plumb()
    rng = random.Random(15)
    burst = harness.Burst(plumb.kubeconfig, namespace, harness.pods(namespace, pods)).start()
    restarts = []
    for kill in range(kills):
        # A random moment while pods still arrive or wait: after 5-60 % of them are bound.
        target = int(pods * (kill + rng.random()) / (kills + 1) * 0.9) + 1
        harness.wait_until(f"{target} pods bound", _at_least(client, namespace, target), 300)
        assert plumb.kill() == -9
        began = time.monotonic()
        plumb.start()
        restarts.append(round(time.monotonic() - began, 1))
    burst.join()
    verdict = invariant.check(client, [namespace], plumb)
    harness.record(
        "sigkill",
        pods=pods,
        nodes=len(nodes),
        faults=f"{kills} SIGKILL",
        violations=len(verdict.violations),
        recovery_s=verdict.cache_matched_after,
        restart_s=restarts,
    )
    assert not verdict.violations, verdict.summary()
    assert verdict.bound == pods, verdict.summary()


def _at_least(client: kube.Kube, namespace: str, count: int) -> Callable[[], bool]:
    def probe() -> bool:
        return sum(bool(p["spec"].get("nodeName")) for p in client.pods(namespace)) >= count

    return probe
