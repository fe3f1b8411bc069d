"""A scheduler of the unit tests with DRA objects around it: nodes, a DeviceClass, node-local
ResourceSlices (one pool per node), ResourceClaims, pods naming them; its claim writes are
accepted (``claim_api.AcceptingClaims``) and fed back as the watch would deliver them, and its
trace lines are kept.

``world = DraWorld(log)``; ``world.nodes("node-a", "node-b")``; ``world.device_class("gpu")``;
``world.publish("node-a", device("gpu-0"))``; ``world.claim(make_claim("c0", NS).request("gpu",
"gpu"))``; ``world.pod("p0", "c0")``; ``await world.settle()``; ``world.traces()``.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.framework import emulation
from plumb.observability import trace
from plumb_dev.testing import drabuilders
from plumb_dev.testing.builders import HOSTNAME_LABEL, make_node, make_pod
from tests.support.claim_api import AcceptingClaims
from tests.support.fakes import FakeApi, ManualClock, make_scheduler
from tests.support.log_capture import Lines

NS = "ml"
DRIVER = "gpu.example.com"
JSON = dict[str, Any]
# Slices' resourceVersions, unique in the process as the API server's are: selector verdicts
# are kept per slice name and version (dynamicresources.VERDICTS, one for the process).
_VERSIONS = itertools.count(1)
BACKOFF_WAIT = 20.0  # seconds: past any backoff, short of the unschedulable pods' 5 minutes


class DraWorld:
    """One scheduler, its DRA objects and its trace lines (see the module doc)."""

    def __init__(
        self,
        lines: tuple[logging.Logger, Lines],
        *,
        kube: emulation.Emulation = emulation.NEWEST_EMULATION,
    ) -> None:
        log, self._handler = lines
        self.api = AcceptingClaims()
        self.clock = ManualClock()
        self.scheduler = make_scheduler(
            FakeApi(), self.clock, log=log, kube=kube, claim_api=self.api
        )
        self.pods: dict[str, JSON] = {}
        self._uids = 0

    def nodes(self, *names: str, cpu: str = "4") -> None:
        self.scheduler.feed.resync([make_node(n).capacity(cpu=cpu).obj() for n in names], [])

    def device_class(self, name: str, *selectors: str) -> None:
        body = drabuilders.make_class(name).driver(DRIVER)
        for expression in selectors:
            body.selector(expression)
        self.scheduler.feed.on_dra(scheduler_module.DEVICE_CLASS, "ADDED", body.obj())

    def publish(self, node: str, *devices: drabuilders.DeviceBuilder) -> None:
        """The node's devices: one slice, a pool named after the node."""
        body = drabuilders.make_slice(f"{node}-slice", DRIVER).pool(node).node(node)
        body_json = body.devices(*devices).obj()
        body_json["metadata"]["resourceVersion"] = str(next(_VERSIONS))
        self.scheduler.feed.on_dra(scheduler_module.RESOURCE_SLICE, "ADDED", body_json)

    def claim(self, claim: drabuilders.ClaimBuilder | JSON) -> JSON:
        body = claim.obj() if isinstance(claim, drabuilders.ClaimBuilder) else claim
        metadata = body["metadata"]
        metadata.setdefault("uid", f"uid-{metadata['name']}")
        metadata.setdefault("resourceVersion", "1")
        self.api.add(body)
        self.scheduler.feed.on_dra(scheduler_module.RESOURCE_CLAIM, "ADDED", body)
        return body

    def pod(self, name: str, *claims: str, cpu: str = "100m", on: str = "") -> JSON:
        """A pod naming each of ``claims`` (request names c0, c1...) as it is added; ``on``:
        a node its nodeSelector asks for."""
        pod = make_pod(name, NS).uid(f"uid-{name}").scheduler("plumb").req(cpu=cpu)
        if on:
            pod = pod.node_selector(HOSTNAME_LABEL, on)
        body = pod.obj()
        body["spec"]["resourceClaims"] = [
            {"name": f"c{i}", "resourceClaimName": claim} for i, claim in enumerate(claims)
        ]
        self.pods[name] = body
        self.scheduler.feed.on_pod("ADDED", body)
        return body

    async def settle(self) -> None:
        """Decide every active pod, one batch at a time, each claim written fed back; a pod
        an event moved back waits out its backoff (the clock moved on) and is decided too."""
        s = self.scheduler
        for _ in range(100):
            counts = s.queue.counts()
            if not counts[queue_module.Where.ACTIVE]:
                if not counts[queue_module.Where.BACKOFF]:
                    return
                self.clock.advance(BACKOFF_WAIT)
                s.queue._flush(self.clock())
                continue
            await s.schedule_batch(await s.queue.pop_batch(8))
            await s.drain()
            for claim in self.api.claims.values():
                s.feed.on_dra(scheduler_module.RESOURCE_CLAIM, "MODIFIED", claim)
        raise AssertionError("the queue never emptied: pods kept coming back")

    def echo_writes(self) -> None:
        """From now on each claim written comes back through the feed before the write
        returns, as a quick watch event does while the writer awaits its answer."""

        def feed(claim: JSON) -> None:
            self.scheduler.feed.on_dra(scheduler_module.RESOURCE_CLAIM, "MODIFIED", claim)

        self.api.echo = feed

    def traces(self) -> list[trace.Trace]:
        return [r for r in map(trace.from_log_line, self._handler.lines) if r is not None]

    def last(self, pod: str) -> trace.Trace:
        return [r for r in self.traces() if r.pod == f"{NS}/{pod}"][-1]
