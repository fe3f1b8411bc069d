"""Scenario 3: plumb's watches expire (410 Gone after an etcd compaction) while pods and nodes
are deleted and created; after the re-list its cache must hold no ghosts: the room freed by
deleted pods is used again, deleted nodes get nothing.

The test cuts plumb off behind the fault proxy (its watches closed, its new requests held),
changes the cluster, compacts etcd past everything plumb has seen, and lets plumb back. The
chaos plane's API server runs without its watch cache, so the resumed watches reach etcd, which
answers that the revision was compacted: the API server's 410, and plumb lists again.

Caught: an assumed pod whose confirming event was lost in such a gap, and which was deleted in
it, stayed assumed for ever, its requests still counted on its node (fixed: a relist sweeps
assumed pods the list no longer has). Here every node is full before the gap, so a ghost of any
kind leaves a new pod pending and the check fails.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import kube
from tests.chaos import faultproxy, harness, invariant
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

PODS_PER_NODE = 10  # 10 x 400m fills a 4-cpu node


def test_watches_expired_by_a_compaction_relist_without_ghosts(
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    namespace: str,
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    tmp_path: Path,
) -> None:
    count = harness.size(6, 40)
    history = invariant.NodeHistory()
    names = harness.create_nodes(client, harness.nodes(count, prefix=node_prefix))
    for name in names:
        history.wrote(_node(client, name))
    with faultproxy.FaultProxy(plane.server, ca_file=plane.ca_file) as proxy:
        plumb = start_plumb(kubeconfig=proxy.write_kubeconfig(tmp_path / "kc", plane.token))
        first = harness.pods(namespace, count * PODS_PER_NODE, prefix="a", cpu="400m")
        harness.Burst(plane.kubeconfig, namespace, first).start().join()
        harness.wait_until(
            "every node full", lambda: harness.bound(client, namespace) == len(first)
        )

        proxy.pause()
        # In the gap: half the nodes' pods deleted (their room is free again), a third of the
        # nodes deleted with their pods, as many new nodes created.
        doomed = names[: count // 3]
        for name in doomed:
            client.delete_node(name)
            history.wrote(None, name)
        for pod in client.pods(namespace):
            node = pod["spec"]["nodeName"]
            index = int(pod["metadata"]["name"].rsplit("-", 1)[1])
            if node in doomed or index % 2:
                client.core.delete_namespaced_pod(
                    pod["metadata"]["name"], namespace, grace_period_seconds=0
                )
        added = harness.create_nodes(client, harness.nodes(len(doomed), prefix=f"{node_prefix}-b"))
        for name in added:
            history.wrote(_node(client, name))
        revision = _compact(plane)
        time.sleep(1.0)
        proxy.resume()
        began = time.monotonic()
        harness.wait_until(
            "plumb to list again after the 410",
            lambda: plumb.output().count("expired at resourceVersion") >= 2,
            timeout=60,
        )
        # Exactly the room there is: what the deletions freed on each surviving node, and all
        # of each new one.
        left = [p["spec"]["nodeName"] for p in client.pods(namespace)]
        room = sum(PODS_PER_NODE - left.count(name) for name in names if name not in doomed)
        room += len(added) * PODS_PER_NODE
        second = harness.pods(namespace, room, prefix="b", cpu="400m")
        harness.Burst(plane.kubeconfig, namespace, second).start().join()
        verdict = invariant.check(client, [namespace], plumb, history=history)
        recovered = time.monotonic() - began
        harness.record(
            "watch-expiry",
            pods=len(first) + len(second),
            faults=f"watches cut, etcd compacted at revision {revision}, 410 on every resume",
            violations=len(verdict.violations),
            recovery_s=verdict.cache_matched_after,
            refilled_s=round(recovered, 1),
            nodes_deleted=len(doomed),
        )
        assert not verdict.violations, verdict.summary()
        assert verdict.pending == 0, f"freed room was not used again: {verdict.summary()}"
        plumb.stop()


def _node(client: kube.Kube, name: str) -> dict[str, object]:
    body: dict[str, object] = client._raw(client.core.read_node(name, _preload_content=False))
    return body


def _compact(plane: controlplane.ControlPlane) -> int:
    """Compacts etcd at its current revision through its JSON gateway; returns the revision."""
    state = json.loads((plane.directory / controlplane.STATE_FILE).read_text())
    base = f"http://127.0.0.1:{state['etcd_port']}/v3/kv"
    key = base64.b64encode(b"/").decode()
    revision = int(_post(f"{base}/range", {"key": key, "limit": 1})["header"]["revision"])
    _post(f"{base}/compaction", {"revision": revision, "physical": True})
    return revision


def _post(url: str, body: dict[str, object]) -> dict[str, dict[str, str]]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, dict[str, str]] = json.loads(response.read())
        return answer


def test_an_assumed_pod_deleted_in_the_gap_is_swept_by_the_relist(
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    namespace: str,
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    tmp_path: Path,
) -> None:
    """The regression test against the real API server for an assumed pod lost in a 410 gap.

    plumb decides pod ``a`` and sends its binding, which the proxy holds for 3 s; meanwhile
    plumb's watches are cut and held, so the binding commits but the watch never says so. ``a``
    is deleted and etcd compacted in the gap. On the way back plumb's watches get 410 and it
    lists again: the list no longer has ``a``, and its assumption must go with it, or its 3 cpu
    stay counted on the node and ``b``, which needs them, waits for ever."""
    (node,) = harness.create_nodes(client, harness.nodes(1, prefix=node_prefix))
    rules = [faultproxy.Rule(faultproxy.RequestClass.BINDING, faultproxy.Fault.DELAY, 1.0)]
    with faultproxy.FaultProxy(plane.server, ca_file=plane.ca_file, delay=3.0) as proxy:
        plumb = start_plumb(kubeconfig=proxy.write_kubeconfig(tmp_path / "kc", plane.token))
        proxy.set_rules(rules)
        client.create_pod(harness.pods(namespace, 1, prefix="a", cpu="3")[0])
        harness.wait_until("plumb to send a's binding", lambda: _assumed(plumb, "a-0"), 30)
        proxy.pause()
        harness.wait_until(
            "a's binding to commit", lambda: harness.bound(client, namespace) == 1, 30
        )
        client.core.delete_namespaced_pod("a-0", namespace, grace_period_seconds=0)
        revision = _compact(plane)
        proxy.set_rules([])
        proxy.resume()
        client.create_pod(harness.pods(namespace, 1, prefix="b", cpu="3")[0])
        verdict = invariant.check(client, [namespace], plumb)
        assert not verdict.violations, verdict.summary()
        assert client.pod(namespace, "b-0")["spec"].get("nodeName") == node, (
            f"b is pending although a, deleted at revision <{revision}, freed the room: "
            f"{verdict.summary()}"
        )
        plumb.stop()


def _assumed(plumb: harness.RestartablePlumb, name: str) -> bool:
    document = plumb.snapshot()
    if document is None:
        return False
    return any(
        p["pod"]["name"] == name and p["state"] == "Assumed" for p in document["cache"]["pods"]
    )
