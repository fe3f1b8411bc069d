"""A SchedulingPolicy's preemption rules (``spec.preemption``, docs/policy.md "Preemption rules")
against the real control plane: each rule changes the victims as documented.

Every scenario runs twice: ``with-rule`` under a policy carrying the rule, and ``without-rule``
under the same policy (same selector, same pods) lacking that one field. Each scenario is built
so that kube-scheduler's default choice differs from the rule's, so the pair shows that the
rule, and nothing else, changed the victims.

The pods placed on the nodes are bound at creation (``.node``) and hold a finalizer, so that a
victim stays visible as terminating with the DisruptionTarget condition (a scale node has no
kubelet); the test releases them at the end. Start times are unset (no kubelet), so priorities
alone order the pods in these scenarios, never the name tie-break.

The QoS classes are the API server's (``status.qosClass``): Guaranteed when every container
limits cpu and memory to what it requests, BestEffort without any request or limit, Burstable
otherwise. A BestEffort pod requests no cpu, so the scenarios that rank BestEffort pods make
room with the node's pod count (``capacity(pods=...)``, "Too many pods") instead.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from plumb import DEFAULT_SCHEDULER_NAME
from plumb.framework import preemption
from plumb.testing import builders, crds, kube
from tests.integration.conftest import NodeFactory, Plumb, events_of

pytestmark = pytest.mark.integration

HOLD = "plumb.test/hold"
HIGH = 1000
APP = "app"
TENANT = "tenant"  # the label value every policy here selects
POLICY = "tenant"  # the policy's name
JSON = dict[str, Any]


@pytest.fixture(params=[True, False], ids=["with-rule", "without-rule"])
def rule(request: pytest.FixtureRequest) -> bool:
    """Whether the scenario's policy carries the rule under test."""
    return bool(request.param)


# Pods ------------------------------------------------------------------------------------------


def _pod(
    namespace: str,
    name: str,
    *,
    cpu: str | None = None,
    priority: int = 0,
    governed: bool = True,
) -> builders.PodBuilder:
    """A pod for plumb, grace period 0; ``governed`` carries the label the policy selects;
    with ``cpu`` it requests that (Burstable), without it requests nothing (BestEffort)."""
    pod = builders.make_pod(name, namespace).scheduler(DEFAULT_SCHEDULER_NAME).grace(0)
    if cpu is not None:
        pod = pod.req(cpu=cpu)
    if governed:
        pod = pod.label(APP, TENANT)
    return pod.priority(priority) if priority else pod


def _guaranteed(pod: builders.PodBuilder, *, cpu: str, memory: str = "256Mi") -> JSON:
    """``pod``'s body with its one container limiting cpu and memory to what it requests."""
    body = pod.obj()
    amounts = {"cpu": cpu, "memory": memory}
    body["spec"]["containers"][0]["resources"] = {"requests": amounts, "limits": dict(amounts)}
    return body


def _place(client: kube.Kube, node: str, *bodies: builders.PodBuilder | JSON) -> None:
    """Pods already running on ``node`` (bound at creation), holding a finalizer."""
    for item in bodies:
        body = item.obj() if isinstance(item, builders.PodBuilder) else item
        body["spec"]["nodeName"] = node
        body["metadata"].setdefault("finalizers", []).append(HOLD)
        client.create_pod(body)


def _qos(client: kube.Kube, namespace: str) -> dict[str, str]:
    """Each pod's QoS class as the API server set it."""
    return {
        p["metadata"]["name"]: (p.get("status") or {}).get("qosClass", "")
        for p in client.pods(namespace)
    }


def _terminating(client: kube.Kube, namespace: str) -> dict[str, str]:
    """Pods being deleted, by name, with the reason of their DisruptionTarget condition."""
    found = {}
    for pod in client.pods(namespace):
        if pod["metadata"].get("deletionTimestamp"):
            conditions = pod["status"].get("conditions") or []
            reasons = [c.get("reason", "") for c in conditions if c["type"] == "DisruptionTarget"]
            found[pod["metadata"]["name"]] = reasons[0] if reasons else ""
    return found


def _release_all(client: kube.Kube, namespace: str) -> None:
    for pod in client.pods(namespace):
        if pod["metadata"].get("finalizers"):
            client.release(namespace, pod["metadata"]["name"])


def _victims(
    client: kube.Kube, namespaces: tuple[str, ...], preemptor: str, count: int
) -> tuple[str, dict[str, str]]:
    """The preemptor's nominated node and, once ``count`` pods terminate, every terminating pod
    of ``namespaces`` as "namespace/name" with its DisruptionTarget reason."""
    home = namespaces[0]
    node = kube.wait_for(
        f"{preemptor}'s nomination",
        lambda: (client.pod(home, preemptor).get("status") or {}).get("nominatedNodeName"),
    )

    def all_terminating() -> dict[str, str] | None:
        found = {
            f"{ns}/{name}": reason
            for ns in namespaces
            for name, reason in _terminating(client, ns).items()
        }
        return found if len(found) >= count else None

    return str(node), kube.wait_for(f"{count} victim(s) to be terminating", all_terminating)


def _failed_with_preemption(client: kube.Kube, namespace: str, name: str) -> str:
    """The newest FailedScheduling message of the pod that carries the PostFilter's text."""

    def newest() -> str | None:
        events = events_of(client, namespace, name, "FailedScheduling")
        texts = [str(e.get("note") or e.get("message")) for e in events]
        texts = [text for text in texts if preemption.PREFIX in text]
        return texts[-1] if texts else None

    return kube.wait_for(f"a FailedScheduling event with preemption's text on {name}", newest)


# Policies --------------------------------------------------------------------------------------


def _apply_policy(kubectl: crds.Kubectl, namespace: str, rules: JSON) -> None:
    """The policy governing the pods labelled app=tenant of ``namespace`` with these preemption
    rules, and wait until plumb has it in force (its status Ready, generation 1)."""
    policy = {
        "apiVersion": "scheduling.plumb.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": POLICY},
        "spec": {"selector": {"matchLabels": {APP: TENANT}}, "preemption": rules},
    }
    kubectl.check("apply", "-n", namespace, "-f", "-", stdin=json.dumps(policy))

    def ready() -> bool:
        got = json.loads(kubectl.check("get", "spol", POLICY, "-n", namespace, "-o", "json"))
        status = got.get("status") or {}
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        return (
            status.get("activeGeneration") == 1
            and conditions.get("Ready", {}).get("status") == "True"
        )

    kube.wait_for(f"plumb to put SchedulingPolicy {namespace}/{POLICY} in force", ready)


@pytest.fixture
def other_namespace(kube_client: kube.Kube) -> Iterator[str]:
    """A second tenant's namespace; its pods released and deleted at the end."""
    name = f"other-tenant-{uuid.uuid4().hex[:6]}"
    kube_client.create_namespace(name)
    yield name
    _release_all(kube_client, name)
    kube_client.delete_workloads(name)


@pytest.fixture
def released(kube_client: kube.Kube, namespace: str) -> Iterator[None]:
    """The test's pods lose their finalizers at the end, whatever the outcome."""
    yield
    _release_all(kube_client, namespace)


# The rules -------------------------------------------------------------------------------------


def test_exempt_qos_keeps_a_governed_guaranteed_pod_from_being_a_victim(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    policy_crd: crds.Kubectl,
    plumb: Plumb,
    released: None,
    rule: bool,
) -> None:
    """exemptQoS: [Guaranteed]. One 4-cpu node holds two governed 2-cpu pods: ``guaranteed``
    (priority 0, limits = requests) and ``burstable`` (priority 5). A 2-cpu pod of priority
    1000, which no policy governs (exemptQoS protects from every preemptor), needs one of them
    gone.

    Default: both are removed, then reprieved most important first: ``burstable`` (5) is kept
    (2 + 2 = 4 cpu fits), ``guaranteed`` (0) no longer fits back: it is the victim.
    With the rule: ``guaranteed`` stays like a pod of equal priority, so ``burstable``, of
    higher priority, is the only pod whose eviction makes room: it is the victim."""
    _apply_policy(policy_crd, namespace, {"exemptQoS": ["Guaranteed"]} if rule else {})
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4"))
    _place(
        kube_client,
        node,
        _guaranteed(_pod(namespace, "guaranteed"), cpu="2"),
        _pod(namespace, "burstable", cpu="2", priority=5),
    )
    assert _qos(kube_client, namespace) == {"guaranteed": "Guaranteed", "burstable": "Burstable"}
    kube_client.create_pod(_pod(namespace, "vip", cpu="2", priority=HIGH, governed=False).obj())

    nominated, victims = _victims(kube_client, (namespace,), "vip", 1)
    assert nominated == node
    expected = "burstable" if rule else "guaranteed"
    assert victims == {f"{namespace}/{expected}": "PreemptionByScheduler"}


def test_victim_order_qos_then_priority_evicts_best_effort_before_burstable_before_guaranteed(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    policy_crd: crds.Kubectl,
    plumb: Plumb,
    released: None,
    rule: bool,
) -> None:
    """victimOrder: QoSThenPriority. One node with room for 3 pods (and 4 cpu) holds three
    governed pods: ``guaranteed`` (1 cpu, priority 0), ``burstable`` (1 cpu, priority 3) and
    ``besteffort`` (no requests, priority 5). A governed 1-cpu pod of priority 1000 needs one
    pod slot: exactly one victim, any of the three (cpu: 1 + 1 + 1 ≤ 4).

    Default (Priority): reprieved most important first, ``besteffort`` (5) then ``burstable``
    (3) are kept, which fills the slots: ``guaranteed`` (0) is the victim.
    With the rule: importance is the QoS class first, so ``guaranteed`` then ``burstable`` are
    kept whatever their priority: ``besteffort`` is the victim."""
    _apply_policy(policy_crd, namespace, {"victimOrder": "QoSThenPriority"} if rule else {})
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4", pods="3"))
    _place(
        kube_client,
        node,
        _guaranteed(_pod(namespace, "guaranteed"), cpu="1"),
        _pod(namespace, "burstable", cpu="1", priority=3),
        _pod(namespace, "besteffort", priority=5),
    )
    assert _qos(kube_client, namespace) == {
        "guaranteed": "Guaranteed",
        "burstable": "Burstable",
        "besteffort": "BestEffort",
    }
    kube_client.create_pod(_pod(namespace, "vip", cpu="1", priority=HIGH).obj())

    nominated, victims = _victims(kube_client, (namespace,), "vip", 1)
    assert nominated == node
    expected = "besteffort" if rule else "guaranteed"
    assert victims == {f"{namespace}/{expected}": "PreemptionByScheduler"}


def test_scope_same_namespace_evicts_only_pods_of_the_preemptors_namespace(
    kube_client: kube.Kube,
    namespace: str,
    other_namespace: str,
    add_node: NodeFactory,
    policy_crd: crds.Kubectl,
    plumb: Plumb,
    released: None,
    rule: bool,
) -> None:
    """scope: SameNamespace. One 4-cpu node holds ``mine`` (2 cpu, priority 5, the
    preemptor's namespace) and ``theirs`` (2 cpu, priority 0, another namespace, no policy).
    A governed 2-cpu pod of priority 1000 needs one of them gone.

    Default (Cluster): ``mine`` (5) is reprieved first and still leaves room: ``theirs`` (0)
    is the victim.
    With the rule: ``theirs`` stays as if it had higher priority, so ``mine`` is the victim."""
    _apply_policy(policy_crd, namespace, {"scope": "SameNamespace"} if rule else {})
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4"))
    _place(kube_client, node, _pod(namespace, "mine", cpu="2", priority=5))
    _place(kube_client, node, _pod(other_namespace, "theirs", cpu="2", governed=False))
    kube_client.create_pod(_pod(namespace, "vip", cpu="2", priority=HIGH).obj())

    nominated, victims = _victims(kube_client, (namespace, other_namespace), "vip", 1)
    assert nominated == node
    expected = f"{namespace}/mine" if rule else f"{other_namespace}/theirs"
    assert victims == {expected: "PreemptionByScheduler"}


def test_max_victims_per_pod_skips_a_node_needing_more_victims(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    policy_crd: crds.Kubectl,
    plumb: Plumb,
    released: None,
    rule: bool,
) -> None:
    """maxVictimsPerPod: 1. Node a (4 cpu) holds ``a0`` and ``a1``, 2 cpu each, priority 0:
    a 4-cpu pod needs both gone (2 victims, highest priority 0). Node b (4 cpu) holds ``b0``,
    4 cpu, priority 10: 1 victim, highest priority 10. The preemptor is governed, priority
    1000, 4 cpu.

    Default: the node whose most important victim has the lower priority wins: a (0 < 10),
    victims ``a0`` and ``a1``.
    With the rule: a would need 2 > 1 victims and is no candidate: b, victim ``b0``."""
    _apply_policy(policy_crd, namespace, {"maxVictimsPerPod": 1} if rule else {})
    a = add_node(builders.make_node(f"{namespace}-a").capacity(cpu="4"))
    b = add_node(builders.make_node(f"{namespace}-b").capacity(cpu="4"))
    _place(kube_client, a, _pod(namespace, "a0", cpu="2"), _pod(namespace, "a1", cpu="2"))
    _place(kube_client, b, _pod(namespace, "b0", cpu="4", priority=10))
    kube_client.create_pod(_pod(namespace, "vip", cpu="4", priority=HIGH).obj())

    nominated, victims = _victims(kube_client, (namespace,), "vip", 1 if rule else 2)
    reason = "PreemptionByScheduler"
    if rule:
        assert nominated == b
        assert victims == {f"{namespace}/b0": reason}
    else:
        assert nominated == a
        assert victims == {f"{namespace}/a0": reason, f"{namespace}/a1": reason}


def test_max_victims_per_pod_with_no_node_left_the_pod_waits_naming_the_cap(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    policy_crd: crds.Kubectl,
    plumb: Plumb,
    released: None,
    rule: bool,
) -> None:
    """maxVictimsPerPod: 1. One 4-cpu node holds four 1-cpu priority-0 pods; a governed 2-cpu
    pod of priority 1000 needs two of them gone.

    Default: two victims (the two least important: equal priorities and no start times, so
    plumb's fallback order by name keeps ``p0`` and ``p1`` and evicts ``p2`` and ``p3``).
    With the rule: 2 > 1, the only node is no candidate: nothing is evicted, the pod waits
    nominated nowhere, and its FailedScheduling message names the cap and the policy."""
    _apply_policy(policy_crd, namespace, {"maxVictimsPerPod": 1} if rule else {})
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4"))
    _place(kube_client, node, *(_pod(namespace, f"p{i}", cpu="1") for i in range(4)))
    kube_client.create_pod(_pod(namespace, "vip", cpu="2", priority=HIGH).obj())

    if not rule:
        nominated, victims = _victims(kube_client, (namespace,), "vip", 2)
        assert nominated == node
        reason = "PreemptionByScheduler"
        assert victims == {f"{namespace}/p2": reason, f"{namespace}/p3": reason}
        return
    message = _failed_with_preemption(kube_client, namespace, "vip")
    cap = preemption.cap_reason(
        preemption.Rules(max_victims=1, source=f"SchedulingPolicy {namespace}/{POLICY}")
    )
    assert cap == (
        "node(s) would need more than 1 victims "
        f"(maxVictimsPerPod of SchedulingPolicy {namespace}/{POLICY})"
    )
    assert message == (
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
        f"preemption: 0/1 nodes are available: 1 {cap}."
    )
    assert not _terminating(kube_client, namespace)
    assert not (kube_client.pod(namespace, "vip").get("status") or {}).get("nominatedNodeName")
    assert kube_client.pod(namespace, "vip")["spec"].get("nodeName") is None
