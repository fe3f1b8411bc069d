"""The steps the preemption integration tests share: placing pods, reading what a preemption
did to them (terminating, DisruptionTarget, Preempted events, nomination, binding), and PDBs.

test_preemption*.py place their pods bound at creation with a finalizer (``place``), so that a
victim stays visible as Terminating until ``release_all``. The side-by-side scenarios build on
these in preemption_scenes.py.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from plumb_dev.testing import builders, kube
from tests.support import side_by_side

HOLD = "plumb.test/hold"
PREEMPTOR = "preemptor"
PREEMPTOR_PRIORITY = 1000
ABOVE_PREEMPTOR = 2000
INSUFFICIENT_CPU = "Insufficient cpu"
PREEMPTED = "PreemptionByScheduler"  # the reason of a victim's DisruptionTarget condition
_PREEMPTED_BY = "Preempted by pod {uid} on node {node}"
# Long enough for a scheduler to have acted on a pod that it should leave alone: a test sleeps
# it only to show that nothing more happens.
QUIET_SECONDS = 3.0


# --- pods placed with a finalizer ----------------------------------------------------------------


def place(client: kube.Kube, node: str, *pods: builders.PodBuilder | kube.JSON) -> None:
    """Pods already running on ``node`` (bound at creation), holding a finalizer: a victim
    stays Terminating, its DisruptionTarget condition readable, until it is released."""
    for pod in pods:
        body = pod.obj() if isinstance(pod, builders.PodBuilder) else pod
        body["spec"]["nodeName"] = node
        body["metadata"].setdefault("finalizers", []).append(HOLD)
        client.create_pod(body)


def terminating(client: kube.Kube, namespace: str) -> dict[str, str]:
    """Pods being deleted, by name, with the reason of their DisruptionTarget condition."""
    return {
        pod["metadata"]["name"]: str((disruption_target(pod) or {}).get("reason", ""))
        for pod in client.pods(namespace)
        if pod["metadata"].get("deletionTimestamp")
    }


def release_all(client: kube.Kube, namespace: str) -> None:
    """Removes every finalizer of the namespace's pods, letting their deletion finish."""
    for pod in client.pods(namespace):
        if pod["metadata"].get("finalizers"):
            client.release(namespace, pod["metadata"]["name"])


# --- what a preemption did -----------------------------------------------------------------------


def deleted(client: kube.Kube, namespace: str, names: Iterable[str]) -> set[str]:
    """Those of the named pods that are Terminating or gone."""
    pods = {p["metadata"]["name"]: p for p in client.pods(namespace)}
    return {
        name
        for name in names
        if name not in pods or pods[name]["metadata"].get("deletionTimestamp")
    }


def nominated(pod: kube.JSON) -> str | None:
    """The pod's status.nominatedNodeName, None if it has none."""
    return (pod.get("status") or {}).get("nominatedNodeName") or None


def bound(client: kube.Kube, namespace: str, name: str, timeout: float = 60.0) -> str | None:
    """Where the pod is bound once it is (None if it is not within timeout): unlike
    side_by_side.wait_settled, an earlier FailedScheduling does not end the wait."""
    with contextlib.suppress(kube.WaitTimeout):
        return str(
            kube.wait_for(
                f"{name} to be bound",
                lambda: client.pod(namespace, name)["spec"].get("nodeName"),
                timeout=timeout,
            )
        )
    return None


def disruption_target(pod: kube.JSON) -> dict[str, str] | None:
    """The pod's DisruptionTarget condition (type, status, reason, message), None if none."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget":
            return {key: str(condition.get(key)) for key in ("type", "status", "reason", "message")}
    return None


def preempted_condition(scheduler_name: str) -> dict[str, str]:
    """The DisruptionTarget condition a scheduler called scheduler_name gives its victims."""
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": PREEMPTED,
        "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
    }


def preempted_by(uid: str, node: str) -> str:
    """The Preempted event's message for a victim of the pod of this uid, nominated to node."""
    return _PREEMPTED_BY.format(uid=uid, node=node)


def event_text(event: kube.JSON) -> str:
    """An event's text: ``note`` in the events.k8s.io view, ``message`` in core/v1."""
    return str(event.get("note") or event.get("message") or "")


def newest_failed_scheduling(
    client: kube.Kube, namespace: str, name: str, containing: str = ""
) -> str:
    """Waits for the pod's newest FailedScheduling message that contains ``containing``."""

    def newest() -> str | None:
        texts = [
            event_text(e)
            for e in client.events(namespace, name)
            if e.get("reason") == side_by_side.FAILED_SCHEDULING
        ]
        texts = [text for text in texts if containing in text]
        return texts[-1] if texts else None

    return kube.wait_for(f"a FailedScheduling event on {namespace}/{name}", newest)


def first_seen(event: kube.JSON) -> datetime.datetime:
    stamps = (event.get("eventTime"), event.get("firstTimestamp"))
    return min(
        (datetime.datetime.fromisoformat(s) for s in stamps if s),
        default=datetime.datetime.min.replace(tzinfo=datetime.UTC),
    )


# --- PodDisruptionBudgets and pod status ---------------------------------------------------------


def pdb(
    namespace: str, name: str, labels: Mapping[str, str], *, min_available: int | None = None
) -> kube.JSON:
    """A PodDisruptionBudget over the pods with these labels: allowing no disruption at all
    (maxUnavailable 0), or keeping min_available of them.

    maxUnavailable 0 gives disruptionsAllowed 0 whatever the disruption controller makes of it
    (for pods with no owner it cannot compute maxUnavailable at all), and 0 is also what a
    scheduler reads before the controller has written any status; minAvailable it computes
    for any pods."""
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(labels)}}
    if min_available is None:
        spec["maxUnavailable"] = 0
    else:
        spec["minAvailable"] = min_available
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def disruptions_allowed(client: kube.Kube, namespace: str, name: str) -> int | None:
    """The PDB's status.disruptionsAllowed, None until the disruption controller wrote it."""
    allowed = (client.pdb(namespace, name).get("status") or {}).get("disruptionsAllowed")
    return None if allowed is None else int(allowed)


def make_ready(
    client: kube.Kube, namespace: str, names: Iterable[str], *, started: str | None = None
) -> None:
    """Reports the pods Running and Ready, as their kubelet would (these nodes have none), so
    that the disruption controller counts them healthy; started, an RFC 3339 time, is their
    status.startTime."""
    for name in names:
        status: dict[str, object] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        if started is not None:
            status["startTime"] = started
        client.core.patch_namespaced_pod_status(name, namespace, {"status": status})
