"""Leadership lost mid-batch: the API server stalls every write past the renew deadline while
plumb decides a large batch, then answers again and the same replica leads again.

Every node is full of low-priority pods; a backlog of high-priority pods arrives, each needing
a whole node, so the batch they are decided in (above the kernel's on-loop limit: pods x nodes
over 20,000) fits nowhere and each pod goes on to preemption. The fault proxy holds every
request but reads and watches (bindings, status patches, events, Lease renewals) while
``stalled``. A first, higher-priority preemptor holds the loop (its nomination write is held)
while the backlog arrives and waits in the queue; that write is then let through, the loop
pops the backlog in one batch, its first nomination write hangs, the loop waits in that batch,
and at the renew deadline the elector stands down and cancels it. The batch's pods used to stay "in
flight" in the queue for ever: when the same replica (the Lease still names it) led again,
nothing popped them, and they were never bound. Fixed in backend/queue.py (``recall``) and
scheduler/loop.py (``stand_down``). A thread plays the kubelets' part for the victims: plumb
deletes them, and it finishes their deletion.
"""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube
from tests.chaos import faultproxy, harness, invariant
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.long]  # ~20 s: make test-long

HIGH = 1000
HIGHEST = 2000
# Shorter than kube-scheduler's 15 s / 10 s / 2 s, so the scenario waits less; the backlog is
# queued within about 2 s of the stall.
LEADER = (
    "--leader-elect",
    "--leader-elect-lease-duration",
    "8s",
    "--leader-elect-renew-deadline",
    "6s",
    "--leader-elect-retry-period",
    "1s",
)


class WriteStall(faultproxy.FaultProxy):
    """The fault proxy, holding every request but GETs (lists, watches) while ``stalled`` is
    set, as an API server whose etcd stopped taking writes would; a request to a path in
    ``let_through`` goes on (``holding`` lists the paths held now)."""

    def __init__(self, upstream: str, **kwargs: Any) -> None:
        super().__init__(upstream, **kwargs)
        self.stalled = threading.Event()
        self.let_through: set[str] = set()
        self.holding: list[str] = []
        self.held = 0

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method != "GET" and self.stalled.is_set():
            self.held += 1
            self.holding.append(request.path)
            # The test's thread clears it: an asyncio.Event would belong to the proxy's loop.
            while self.stalled.is_set() and request.path not in self.let_through:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            self.holding.remove(request.path)
        return await super()._answer(request)


class Kubelets:
    """Finishes the deletion of terminating pods, as the nodes' kubelets would."""

    def __init__(self, client: kube.Kube, namespace: str) -> None:
        self._client, self._namespace = client, namespace
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Kubelets:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self._client.force_delete_terminating(self._namespace)


def test_leadership_lost_mid_batch_and_regained_binds_every_pod_once(
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    namespace: str,
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    tmp_path: Path,
) -> None:
    nodes = harness.size(200, 400)
    wanted = harness.size(130, 390)  # batches of up to 128: 128 x 200 nodes > 20,000
    names = harness.create_nodes(client, harness.nodes(nodes, prefix=node_prefix))
    fillers = harness.pods(namespace, nodes, prefix="filler", cpu="4")
    for body, node in zip(fillers, names, strict=True):
        body["spec"]["nodeName"] = node
    harness.Burst(plane.kubeconfig, namespace, fillers).start().join()
    client.ensure_priority_class(HIGH)
    client.ensure_priority_class(HIGHEST)
    backlog = harness.pods(namespace, wanted, prefix="vip", cpu="4")
    for body in backlog:
        body["spec"]["priorityClassName"] = builders.priority_class_name(HIGH)

    proxy = WriteStall(plane.server, ca_file=plane.ca_file)
    with proxy, Kubelets(client, namespace):
        plumb = start_plumb(
            *LEADER,
            "--leader-elect-resource-namespace",
            namespace,
            kubeconfig=proxy.write_kubeconfig(tmp_path / "kc", plane.token),
        )
        harness.wait_until("plumb to lead", lambda: "became leader" in plumb.output(), 30)
        proxy.stalled.set()
        blocker = harness.pods(namespace, 1, prefix="blocker", cpu="4")[0]
        blocker["spec"]["priorityClassName"] = builders.priority_class_name(HIGHEST)
        client.create_pod(blocker)
        nomination = f"/api/v1/namespaces/{namespace}/pods/blocker-0/status"
        harness.wait_until("the blocker's nomination held", lambda: nomination in proxy.holding)
        harness.Burst(plane.kubeconfig, namespace, backlog).start().join()
        harness.wait_until(
            # plumb_pending_pods counts the pods waiting, not the blocker being decided.
            "the backlog queued",
            lambda: _metric(plumb, "plumb_pending_pods") >= wanted,
            30,
        )
        proxy.let_through.add(nomination)
        harness.wait_until(
            "a nomination of the backlog held",
            lambda: any("/pods/vip-" in path for path in proxy.holding),
        )
        assert "lost leadership" not in plumb.output(), "the lease was lost before the backlog"
        harness.wait_until(
            "plumb to lose leadership", lambda: "lost leadership" in plumb.output(), 60
        )
        proxy.stalled.clear()
        harness.wait_until(
            "plumb to lead again", lambda: plumb.output().count("became leader") >= 2, 60
        )

        def vips_bound() -> int:
            return sum(
                bool(p["spec"].get("nodeName"))
                for p in client.pods(namespace)
                if p["metadata"]["name"].startswith("vip")
            )

        try:
            harness.wait_until(f"{wanted} high-priority pods bound", lambda: vips_bound() >= wanted)
        except kube.WaitTimeout as error:
            raise AssertionError(f"{error}: {vips_bound()} bound") from None
        verdict = invariant.check(client, [namespace], plumb)
        put_back = re.findall(r"(\d+) pods being decided put back", plumb.output())
        harness.record(
            "leadership-stall",
            pods=wanted,
            faults=f"writes held {proxy.held} times; leadership lost once and regained",
            violations=len(verdict.violations),
            recovery_s=verdict.cache_matched_after,
            nodes=nodes,
            put_back=int(put_back[0]) if put_back else 0,  # the batch cut short
        )
        assert not verdict.violations, verdict.summary()
        assert put_back, "the stand-down found no batch being decided"
        assert int(put_back[0]) > 20_000 // nodes  # a batch decided off the loop
        assert plumb.stop() == 0


def _metric(plumb: harness.RestartablePlumb, name: str) -> float:
    """The sum of a metric's samples, as plumb's metrics endpoint serves it now."""
    _, body = plumb.get(plumb.metrics_port, "/metrics")
    samples = re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", body.decode(), re.MULTILINE)
    return sum(float(match.group(1)) for match in samples)
