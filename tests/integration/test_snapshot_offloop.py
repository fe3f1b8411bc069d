"""The debug snapshot asked for while plumb is binding pods: the document lists the pods bound
before it, reads back as ``plumb replay`` reads it, and plumb goes on binding the rest."""

from __future__ import annotations

import functools
import json
import threading
import urllib.request
from typing import Any

import pytest

from plumb import runs
from plumb_dev.testing import builders, kube
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import PlumbFactory, free_port

pytestmark = pytest.mark.integration


def _bound(client: kube.Kube, namespace: str, count: int) -> dict[str, str] | None:
    """uid -> node of the namespace's bound pods, once there are ``count``."""
    bound = {
        p["metadata"]["uid"]: p["spec"]["nodeName"]
        for p in client.pods(namespace)
        if p["spec"].get("nodeName")
    }
    return bound if len(bound) == count else None


def _pods(namespace: str, first: int, count: int) -> list[dict[str, Any]]:
    return [
        builders.make_pod(f"p{i:03d}", namespace).scheduler("plumb").req(cpu="100m").obj()
        for i in range(first, first + count)
    ]


def test_a_snapshot_taken_while_pods_are_bound_lists_them_and_binding_goes_on(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, start_plumb: PlumbFactory
) -> None:
    for i in range(3):
        add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu="8"))
    port = free_port()
    start_plumb("--debug-port", str(port))

    for pod in _pods(namespace, 0, 20):
        kube_client.create_pod(pod)
    before = kube.wait_for(
        "the first 20 pods bound",
        functools.partial(_bound, kube_client, namespace, 20),
        timeout=30,
    )
    # The next pods are created, and scheduled, while the snapshot is asked for and encoded.
    creating = threading.Thread(
        target=lambda: [kube_client.create_pod(pod) for pod in _pods(namespace, 20, 40)]
    )
    creating.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/snapshot", timeout=30) as r:
            document = json.load(r)
    finally:
        creating.join()

    placed = {p["pod"]["uid"]: p["node"] for p in document["cache"]["pods"]}
    assert before.items() <= placed.items()  # each pod bound before it, on its node
    snapshot = runs.load(document)  # as plumb replay reads it
    decided = {pod.uid for run in snapshot.runs for pod in run.pods}
    assert set(before) <= decided
    after = kube.wait_for(
        "all 60 pods bound",
        functools.partial(_bound, kube_client, namespace, 60),
        timeout=30,
    )
    assert before.items() <= after.items()
