"""Scenario 5: node churn during a burst: nodes deleted, added, cordoned, tainted NoExecute and
resized while pods arrive.

The invariant judges each binding against the node as the test last wrote it before plumb's
decision (``invariant.NodeHistory``): a pod bound to a node deleted, cordoned or tainted more
than a few seconds earlier is a violation, as is a pod over a node's allocatable. Resizing only
grows nodes: kube-scheduler does not evict, so a node shrunk under its pods would be
"overcommitted" by no fault of the scheduler's.

Caught: a build whose cache kept deleted nodes (a relist that did not sweep them) binds pods to
them; the check reports "bound to chaos-...-3, which did not exist then".
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from plumb_dev.testing import kube
from tests.chaos import harness, invariant
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

JSON = dict[str, Any]


class Churn:
    """Changes nodes one step at a time (delete, add, cordon, taint, resize in turn, on nodes
    picked by a seeded random), recording each write."""

    ACTIONS = ("delete", "add", "cordon", "taint", "resize")

    def __init__(self, client: kube.Kube, names: list[str], prefix: str, seed: int) -> None:
        self.client = client
        self.names = list(names)
        self.prefix = prefix
        self.rng = random.Random(seed)
        self.history = invariant.NodeHistory()
        self.done: dict[str, int] = {}
        self._added = 0
        self._steps = 0
        for name in self.names:
            self.history.wrote(self._read(name))

    def _read(self, name: str) -> JSON:
        body: JSON = self.client._raw(self.client.core.read_node(name, _preload_content=False))
        return body

    def step(self) -> None:
        action = self.ACTIONS[self._steps % len(self.ACTIONS)]
        self._steps += 1
        self.done[action] = self.done.get(action, 0) + 1
        getattr(self, f"_{action}")()

    def _pick(self) -> str:
        return self.rng.choice(self.names)

    def _delete(self) -> None:
        if len(self.names) <= 4:
            return self._add()
        name = self._pick()
        self.names.remove(name)
        self.client.delete_node(name)
        self.history.wrote(None, name)
        return None

    def _add(self) -> None:
        body = harness.nodes(1, prefix=f"{self.prefix}-new{self._added}")[0]
        self._added += 1
        self.client.create_node(body)
        name = str(body["metadata"]["name"])
        self.names.append(name)
        self.history.wrote(self._read(name))

    def _cordon(self) -> None:
        name = self._pick()
        self.client.patch_node(name, {"spec": {"unschedulable": True}})
        self.history.wrote(self._read(name))

    def _taint(self) -> None:
        name = self._pick()
        taint = {"key": "plumb.test/evict", "value": "now", "effect": "NoExecute"}
        self.client.patch_node(name, {"spec": {"taints": [taint]}})
        self.history.wrote(self._read(name))

    def _resize(self) -> None:
        name = self._pick()
        node = self._read(name)
        cpu = int(node["status"]["allocatable"]["cpu"]) + 2
        status = {"status": {"capacity": {"cpu": str(cpu)}, "allocatable": {"cpu": str(cpu)}}}
        self.client.core.patch_node_status(name, status)
        self.history.wrote(self._read(name))


def test_nodes_deleted_added_cordoned_tainted_and_resized_mid_burst_get_nothing_they_should_not(
    client: kube.Kube, namespace: str, node_prefix: str, start_plumb: RestartablePlumbFactory
) -> None:
    pods = harness.size(200, 2000)
    names = harness.create_nodes(client, harness.nodes(pods // 25 + 4, prefix=node_prefix))
    plumb = start_plumb()
    churn = Churn(client, names, node_prefix, seed=5)
    bodies = harness.pods(namespace, pods)
    # A tenth tolerate the churn's taint: they may land on tainted nodes, the rest may not.
    for body in bodies[::10]:
        body["spec"]["tolerations"] = [
            {"key": "plumb.test/evict", "operator": "Exists", "effect": "NoExecute"}
        ]
    # Pods arrive in chunks; two node changes follow each chunk while plumb places it.
    chunk = pods // harness.size(10, 40)
    for first in range(0, pods, chunk):
        harness.Burst(plumb.kubeconfig, namespace, bodies[first : first + chunk]).start().join()
        churn.step()
        churn.step()
    harness.wait_until(
        "every pod bound or judged",
        lambda: len(_settled(client, namespace)) == pods,
        timeout=300,
    )
    began = time.monotonic()
    verdict = invariant.check(client, [namespace], plumb, history=churn.history)
    harness.record(
        "node-churn",
        pods=pods,
        faults=", ".join(f"{n} {a}" for a, n in sorted(churn.done.items())),
        violations=len(verdict.violations),
        recovery_s=verdict.cache_matched_after,
        checked_s=round(time.monotonic() - began, 1),
        bound=verdict.bound,
        pending=verdict.pending,
    )
    assert not verdict.violations, verdict.summary()


def _settled(client: kube.Kube, namespace: str) -> list[str]:
    failed = {
        e["involvedObject"]["uid"]
        for e in client.events(namespace)
        if e.get("reason") == invariant.FAILED_SCHEDULING
    }
    return [
        p["metadata"]["name"]
        for p in client.pods(namespace)
        if p["spec"].get("nodeName") or p["metadata"]["uid"] in failed
    ]
