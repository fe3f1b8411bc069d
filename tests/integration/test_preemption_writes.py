"""The writes of a preemption against the real API server: the preemptor's nominated node, a
victim's DisruptionTarget condition, its uid-guarded deletion and its Preempted event."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from plumb import events
from plumb.backend.records import objects
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials
from plumb.preemption import execution
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube
from tests.support.live_cluster import NodeFactory

pytestmark = pytest.mark.integration

FINALIZER = "plumb.dev/test-hold"


@pytest.fixture
async def api(control_plane: controlplane.ControlPlane) -> AsyncIterator[k8s_client.ApiClient]:
    client = k8s_client.ApiClient(credentials.load(control_plane.kubeconfig))
    yield client
    await client.close()


def _pod(
    kube_client: kube.Kube, namespace: str, name: str, *, node: str = "", hold: bool = False
) -> objects.PodInfo:
    builder = builders.make_pod(name, namespace).scheduler("nobody")
    if node:
        builder = builder.node(node)
    if hold:
        builder = builder.finalizer(FINALIZER)
    return objects.parse_pod(kube_client.create_pod(builder.obj()))


def _release(kube_client: kube.Kube, namespace: str, name: str) -> None:
    kube_client.core.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": None}})


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition["type"] == kind:
            return dict(condition)
    return None


async def test_nominate_and_clear_keep_the_pod_scheduled_condition(
    api: k8s_client.ApiClient, kube_client: kube.Kube, namespace: str, add_node: NodeFactory
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n"))
    recorder = events.Recorder(api, instance="test")
    pod = _pod(kube_client, namespace, "preemptor")

    recorder.failed_scheduling(pod, "0/1 nodes are available: 1 Insufficient cpu.")
    await recorder.drain()
    assert await execution.Executor(recorder).nominate(pod, node)
    body = kube_client.pod(namespace, "preemptor")
    assert body["status"]["nominatedNodeName"] == node
    scheduled = _condition(body, "PodScheduled")
    assert scheduled is not None
    assert scheduled["reason"] == "Unschedulable"

    # The condition patched after the nomination leaves the nomination alone, too.
    recorder.failed_scheduling(pod, "0/1 nodes are available: 2 Insufficient cpu.")
    await recorder.drain()
    body = kube_client.pod(namespace, "preemptor")
    assert body["status"]["nominatedNodeName"] == node

    execution.Executor(recorder).clear_nomination(pod)
    await recorder.drain()
    body = kube_client.pod(namespace, "preemptor")
    assert "nominatedNodeName" not in body["status"]
    scheduled = _condition(body, "PodScheduled")
    assert scheduled is not None
    assert "2 Insufficient cpu" in scheduled["message"]

    # Not the leader: nothing is written, and nominate says so.
    shut = events.Recorder(api, instance="test", gate=lambda: False)
    assert not await execution.Executor(shut).nominate(pod, node)
    assert "nominatedNodeName" not in kube_client.pod(namespace, "preemptor")["status"]

    # Gone: the API server's 404 is a False.
    ghost = objects.parse_pod(builders.make_pod("ghost", namespace).uid("no-such-uid").obj())
    assert not await execution.Executor(recorder).nominate(ghost, node)


async def test_preempt_marks_deletes_and_reports_the_victim(
    api: k8s_client.ApiClient, kube_client: kube.Kube, namespace: str, add_node: NodeFactory
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n"))
    recorder = events.Recorder(api, instance="test")
    preemptor = _pod(kube_client, namespace, "preemptor")
    victim = _pod(kube_client, namespace, "victim", node=node, hold=True)
    try:
        assert await execution.Executor(recorder).preempt(victim, preemptor, node)
        await recorder.drain()
        body = kube_client.pod(namespace, "victim")
        assert body["metadata"].get("deletionTimestamp")
        target = _condition(body, "DisruptionTarget")
        assert target is not None
        assert target["status"] == "True"
        assert target["reason"] == "PreemptionByScheduler"
        assert target["message"] == "nobody: preempting to accommodate a higher priority pod"
        assert target.get("lastTransitionTime")

        preempted = [
            e for e in kube_client.events(namespace, "victim") if e["reason"] == "Preempted"
        ]
        assert len(preempted) == 1
        event = preempted[0]
        assert event["type"] == "Normal"
        assert event["action"] == "Preempting"
        assert event["message"] == f"Preempted by pod {preemptor.uid} on node {node}"
        assert event["reportingComponent"] == "plumb"
        assert event["involvedObject"]["uid"] == victim.uid
        assert event["related"]["kind"] == "Pod"
        assert event["related"]["name"] == "preemptor"
        assert event["related"]["uid"] == preemptor.uid

    finally:
        _release(kube_client, namespace, "victim")
    # No kubelet ends the graceful deletion: end it here.
    kube_client.core.delete_namespaced_pod("victim", namespace, grace_period_seconds=0)
    kube.wait_for(
        "the victim to be gone",
        lambda: not any(p["metadata"]["name"] == "victim" for p in kube_client.pods(namespace)),
    )
    # Gone: True, nothing written.
    assert await execution.Executor(recorder).preempt(victim, preemptor, node)


async def test_a_pod_recreated_under_the_victims_name_is_left_alone(
    api: k8s_client.ApiClient, kube_client: kube.Kube, namespace: str, add_node: NodeFactory
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n"))
    recorder = events.Recorder(api, instance="test")
    preemptor = _pod(kube_client, namespace, "preemptor")
    current = _pod(kube_client, namespace, "victim", node=node)
    stale = objects.parse_pod(
        builders.make_pod("victim", namespace).scheduler("nobody").uid("an-older-uid").obj()
    )

    refused = await api.delete_pod(namespace=namespace, name="victim", uid=stale.uid)
    assert refused.status == 409, refused.body
    assert "UID in the precondition" in refused.message()
    # The recorder reads this answer as "the victim is gone": the real wording, checked.
    assert execution._gone(refused)
    body = kube_client.pod(namespace, "victim")
    assert body["metadata"]["uid"] == current.uid
    assert not body["metadata"].get("deletionTimestamp")

    # The stale victim counts as gone: no condition on the new pod, no deletion, no event.
    assert await execution.Executor(recorder).preempt(stale, preemptor, node)
    await recorder.drain()
    body = kube_client.pod(namespace, "victim")
    assert not body["metadata"].get("deletionTimestamp")
    assert _condition(body, "DisruptionTarget") is None
    assert not [e for e in kube_client.events(namespace, "victim") if e["reason"] == "Preempted"]

    # A stale nomination is refused too.
    old = objects.parse_pod(
        builders.make_pod("preemptor", namespace).scheduler("nobody").uid("an-older-uid").obj()
    )
    assert not await execution.Executor(recorder).nominate(old, node)
    assert "nominatedNodeName" not in kube_client.pod(namespace, "preemptor")["status"]

    # The right uid deletes.
    deleted = await api.delete_pod(namespace=namespace, name="victim", uid=current.uid)
    assert deleted.ok, deleted.body
