"""Scenario 2: kube-apiserver, and separately etcd, restarted in the middle of a burst.

plumb must reconnect with a backoff (not a hot loop: its request count while the server is down
stays small), resume its watches, and end with the invariant holding: every pod bound once,
none lost, the cache equal to the API server. It must not crash-loop (the same process runs
throughout) nor grow without bound while disconnected (its RSS is recorded before and after).

Caught: a watch answered 200 and closed at once was reopened thousands of times a second (fixed
with client-go's "very short watch" backoff, k8s/watching.py); while the API server is down the
count of plumb's failed requests stays in the tens, which the test asserts.
"""

from __future__ import annotations

import time

import pytest

from plumb.controlplane import config
from plumb.controlplane import running as controlplane
from plumb.testing import kube
from tests.chaos import harness, invariant
from tests.chaos.conftest import PlumbFactory

DOWN_SECONDS = 4.0


@pytest.mark.parametrize("part", [config.APISERVER, config.ETCD])
def test_a_control_plane_restart_mid_burst_costs_no_placement(
    part: str,
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    namespace: str,
    node_prefix: str,
    start_plumb: PlumbFactory,
) -> None:
    pods = harness.size(200, 2000)
    harness.create_nodes(client, harness.nodes(pods // 36 + 1, prefix=node_prefix))
    plumb = start_plumb()
    pid = plumb.process.pid if plumb.process else 0
    burst = harness.Burst(plane.kubeconfig, namespace, harness.pods(namespace, pods)).start()
    harness.wait_until(
        "a third of the pods bound", lambda: _bound(client, namespace) >= pods // 3, timeout=300
    )
    rss_before = plumb.rss_bytes()
    errors_before = _failed_requests(plumb)
    began = time.monotonic()
    _stop(plane, part)
    time.sleep(DOWN_SECONDS)
    errors_down = _failed_requests(plumb) - errors_before
    rss_down = plumb.rss_bytes()
    _start(plane, part)
    burst.join()
    client.close()
    fresh = kube.Kube(plane.kubeconfig)
    try:
        verdict = invariant.check(fresh, [namespace], plumb)
    finally:
        fresh.close()
    recovered = time.monotonic() - began
    harness.record(
        f"restart-{part}",
        pods=pods,
        faults=f"{part} stopped for {DOWN_SECONDS:.0f} s mid-burst",
        violations=len(verdict.violations),
        recovery_s=round(recovered, 1),
        cache_matched_s=verdict.cache_matched_after,
        failed_requests_while_down=errors_down,
        rss_mb=[
            round(rss_before / 2**20),
            round(rss_down / 2**20),
            round(plumb.rss_bytes() / 2**20),
        ],
    )
    assert plumb.process is not None
    assert plumb.process.pid == pid
    assert plumb.running()
    assert not verdict.violations, verdict.summary()
    assert verdict.bound == pods, verdict.summary()


def _stop(plane: controlplane.ControlPlane, part: str) -> None:
    controlplane.stop_part(plane.directory, part)


def _start(plane: controlplane.ControlPlane, part: str) -> None:
    controlplane.start_part(plane.directory, part)


def _bound(client: kube.Kube, namespace: str) -> int:
    try:
        return sum(bool(p["spec"].get("nodeName")) for p in client.pods(namespace))
    except Exception:
        return 0


def _failed_requests(plumb: harness.Plumb) -> int:
    """Lines in plumb's log that report a failed request or a watch reconnecting."""
    words = ("Cannot connect", "reconnect", "ClientConnectorError", "Server disconnected")
    return sum(any(w in line for w in words) for line in plumb.output().splitlines())
