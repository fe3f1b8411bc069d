"""plumb's /metrics on the real control plane: after a workload of N pods that fit and M that
fit nowhere, the page counts exactly what happened — N scheduled attempts, as many
unschedulable attempts as plumb made (its debug endpoint counts them per pod), one latency
observation per attempt, N bindings and N SLI observations, M pods waiting in the unschedulable
queue, and the cache holding the cluster's nodes and bound pods. Never a timing."""

from __future__ import annotations

import json

import pytest

from plumb.observability import metrics
from plumb_dev.testing import builders, kube
from tests.support import metrics_page
from tests.support.live_cluster import NodeFactory
from tests.support.metrics_page import Samples
from tests.support.plumb_process import PlumbFactory, free_port

pytestmark = pytest.mark.integration

SCHEDULABLE = 8
UNSCHEDULABLE = 3


def _value(samples: Samples, name: str, **labels: str) -> float:
    found = metrics_page.value(samples, name, **labels)
    return 0.0 if found is None else found


def _by(samples: Samples, name: str, label: str, values: tuple[str, ...]) -> dict[str, float]:
    return {v: _value(samples, name, **{label: v}) for v in values}


def _total(samples: Samples, name: str) -> float:
    return sum(value for (series, _), value in samples.items() if series == name)


def _bound_pods(client: kube.Kube) -> int:
    """Pods the API server shows bound and holding resources, in every namespace: what a
    scheduler's cache holds."""
    listed = client.core.list_pod_for_all_namespaces(_preload_content=False)
    pods = json.loads(listed.data)["items"]
    return sum(
        1
        for pod in pods
        if pod["spec"].get("nodeName")
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )


def test_the_metrics_page_counts_what_the_workload_did(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
) -> None:
    for i in range(3):
        add_node(builders.make_node(f"{namespace}-n{i}").zone(f"z{i}").capacity(cpu="4"))
    metrics_port, debug_port = free_port(), free_port()
    start_plumb(
        "--metrics-port",
        str(metrics_port),
        "--metrics-address",
        "127.0.0.1",
        "--debug-port",
        str(debug_port),
    )
    before = metrics_page.scrape(metrics_port)
    assert _by(before, metrics.SCHEDULE_ATTEMPTS, "result", metrics.RESULTS) == {
        "scheduled": 0,
        "unschedulable": 0,
        "error": 0,
    }
    assert _value(before, metrics.LEADER) == 1

    fits = [f"web-{i}" for i in range(SCHEDULABLE)]
    huge = [f"huge-{i}" for i in range(UNSCHEDULABLE)]
    for name in fits:
        kube_client.create_pod(
            builders.make_pod(name, namespace).scheduler("plumb").req(cpu="500m").obj()
        )
    for name in huge:
        kube_client.create_pod(
            builders.make_pod(name, namespace).scheduler("plumb").req(cpu="64").obj()
        )

    def bound() -> bool:
        pods = {p["metadata"]["name"]: p for p in kube_client.pods(namespace)}
        return all(pods[name]["spec"].get("nodeName") for name in fits)

    kube.wait_for(f"{SCHEDULABLE} pods bound", bound, timeout=60)

    def settled(beyond: int = 0) -> tuple[Samples, int] | None:
        """The page once every pod has had its answer and the watch confirmed the bindings,
        with the unschedulable attempts plumb made (more than ``beyond``, and unchanged around
        the scrape)."""
        tried = [metrics_page.tried(debug_port, namespace, name) for name in huge]
        samples = metrics_page.scrape(metrics_port)
        again = [metrics_page.tried(debug_port, namespace, name) for name in huge]
        known = [t for t in tried if t is not None]
        if len(known) < len(huge) or tried != again or sum(known) <= beyond:
            return None
        pending = _by(samples, metrics.PENDING_PODS, "queue", metrics.QUEUES)
        done = (
            _value(samples, metrics.SCHEDULE_ATTEMPTS, result="scheduled") == SCHEDULABLE
            and pending["unschedulable"] == UNSCHEDULABLE
            and _value(samples, metrics.CACHE_SIZE, type="assumed_pods") == 0
        )
        return (samples, sum(known)) if done else None

    samples, unschedulable_attempts = kube.wait_for("the metrics to settle", settled, timeout=60)

    # Every unschedulable pod was tried at least once, and each try is counted once, with one
    # latency observation per attempt.
    assert unschedulable_attempts >= UNSCHEDULABLE
    _assert_attempts(samples, unschedulable=unschedulable_attempts)
    # One SLI observation per pod bound, whatever its attempts label; none for the others.
    assert _total(samples, f"{metrics.SLI_DURATION}_count") == SCHEDULABLE
    sli_labels = {
        dict(labels)["attempts"]
        for (name, labels) in samples
        if name == f"{metrics.SLI_DURATION}_count"
    }
    assert sli_labels <= {metrics.attempts_label(n) for n in range(1, metrics.MAX_ATTEMPTS_LABEL)}
    # One binding per pod placed, all accepted.
    bindings = _by(samples, f"{metrics.BINDING_DURATION}_count", "result", metrics.BIND_RESULTS)
    assert bindings == {"bound": SCHEDULABLE, "conflict": 0, "gone": 0, "error": 0}
    # A kernel run decides one pod or more.
    kernel_runs = _value(samples, f"{metrics.KERNEL_DURATION}_count")
    assert 1 <= kernel_runs <= SCHEDULABLE + unschedulable_attempts
    # The cache: the cluster's nodes and its bound pods (this test's, and any other's).
    nodes = len(kube_client.nodes())
    assert _value(samples, metrics.CACHE_SIZE, type="nodes") == nodes

    def cache_pods() -> bool:
        scraped = _value(metrics_page.scrape(metrics_port), metrics.CACHE_SIZE, type="pods")
        return scraped == _bound_pods(kube_client) >= SCHEDULABLE

    kube.wait_for("the cache's pods to match the API server's bound pods", cache_pods)
    assert _value(samples, metrics.LEADER) == 1
    # Nothing but the series plumb declares, and no label names a pod.
    pods = set(fits) | set(huge)
    for name, labels in samples:
        assert name in metrics.SERIES, name
        assert not any(pod in value for _, value in labels for pod in pods), (name, labels)

    # A node joins: it might fit the waiting pods, so each is tried again, and counted again.
    add_node(builders.make_node(f"{namespace}-n3").zone("z3").capacity(cpu="4"))
    samples, retried = kube.wait_for(
        "the retries to settle", lambda: settled(beyond=unschedulable_attempts), timeout=60
    )
    assert retried >= unschedulable_attempts + UNSCHEDULABLE
    _assert_attempts(samples, unschedulable=retried)
    assert _value(samples, metrics.CACHE_SIZE, type="nodes") == nodes + 1


def _assert_attempts(samples: Samples, *, unschedulable: int) -> None:
    attempts = _by(samples, metrics.SCHEDULE_ATTEMPTS, "result", metrics.RESULTS)
    assert attempts == {"scheduled": SCHEDULABLE, "unschedulable": unschedulable, "error": 0}
    durations = _by(samples, f"{metrics.ATTEMPT_DURATION}_count", "result", metrics.RESULTS)
    assert durations == attempts
    pending = _by(samples, metrics.PENDING_PODS, "queue", metrics.QUEUES)
    assert pending == {"active": 0, "backoff": 0, "unschedulable": UNSCHEDULABLE, "gated": 0}
