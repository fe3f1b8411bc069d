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

import dataclasses
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from plumb import DEFAULT_SCHEDULER_NAME
from plumb.preemption import evaluator
from plumb_dev.testing import builders, crds, kube
from tests.support import preemption_steps, side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import Plumb
from tests.support.preemption_steps import PREEMPTED
from tests.support.preemption_steps import PREEMPTOR_PRIORITY as HIGH

pytestmark = pytest.mark.integration

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


# Policies --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Tenant:
    """The test's namespace on a cluster where plumb runs with the SchedulingPolicy CRD."""

    client: kube.Kube
    namespace: str
    add_node: NodeFactory
    kubectl: crds.Kubectl

    def node(self, name: str, **capacity: str) -> str:
        """Adds a node called ``<namespace>-<name>`` with this capacity."""
        return self.add_node(builders.make_node(f"{self.namespace}-{name}").capacity(**capacity))

    def pod(
        self, name: str, *, cpu: str | None = None, priority: int = 0, governed: bool = True
    ) -> builders.PodBuilder:
        """A pod of the tenant's (see ``_pod``)."""
        return _pod(self.namespace, name, cpu=cpu, priority=priority, governed=governed)

    def place(self, node: str, *pods: builders.PodBuilder | JSON) -> None:
        """Pods already running on ``node``, holding a finalizer."""
        preemption_steps.place(self.client, node, *pods)

    def qos(self) -> dict[str, str]:
        """Each pod's QoS class as the API server set it."""
        return {
            p["metadata"]["name"]: (p.get("status") or {}).get("qosClass", "")
            for p in self.client.pods(self.namespace)
        }

    def apply(self, rules: JSON) -> None:
        """Applies the policy with these preemption rules and waits until plumb has it."""
        _apply_policy(self.kubectl, self.namespace, rules)

    def preempt(
        self, vip: builders.PodBuilder, count: int, *others: str
    ) -> tuple[str, dict[str, str]]:
        """Creates the preemptor ``vip``; returns its nominated node and, once ``count`` pods
        terminate, every terminating pod of the tenant's namespace and ``others`` as
        "namespace/name" with its DisruptionTarget reason."""
        name = self.create(vip)
        node = kube.wait_for(
            f"{name}'s nomination",
            lambda: preemption_steps.nominated(self.client.pod(self.namespace, name)),
        )

        def all_terminating() -> dict[str, str] | None:
            found = {
                f"{ns}/{pod}": reason
                for ns in (self.namespace, *others)
                for pod, reason in preemption_steps.terminating(self.client, ns).items()
            }
            return found if len(found) >= count else None

        return str(node), kube.wait_for(f"{count} victim(s) to be terminating", all_terminating)

    def create(self, pod: builders.PodBuilder) -> str:
        """Creates the pod; returns its name."""
        body = pod.obj()
        self.client.create_pod(body)
        return str(body["metadata"]["name"])


@pytest.fixture
def tenant(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    policy_crd: crds.Kubectl,
    plumb: Plumb,
) -> Iterator[Tenant]:
    """The test's Tenant; its pods lose their finalizers at the end, whatever the outcome."""
    yield Tenant(kube_client, namespace, add_node, policy_crd)
    preemption_steps.release_all(kube_client, namespace)


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
    preemption_steps.release_all(kube_client, name)
    kube_client.delete_workloads(name)


# The rules -------------------------------------------------------------------------------------


def test_exempt_qos_keeps_a_governed_guaranteed_pod_from_being_a_victim(
    tenant: Tenant, rule: bool
) -> None:
    """exemptQoS: [Guaranteed]. One 4-cpu node holds two governed 2-cpu pods: ``guaranteed``
    (priority 0, limits = requests) and ``burstable`` (priority 5). A 2-cpu pod of priority
    1000, which no policy governs (exemptQoS protects from every preemptor), needs one of them
    gone.

    Default: both are removed, then reprieved most important first: ``burstable`` (5) is kept
    (2 + 2 = 4 cpu fits), ``guaranteed`` (0) no longer fits back: it is the victim.
    With the rule: ``guaranteed`` stays like a pod of equal priority, so ``burstable``, of
    higher priority, is the only pod whose eviction makes room: it is the victim."""
    tenant.apply({"exemptQoS": ["Guaranteed"]} if rule else {})
    node = tenant.node("n", cpu="4")
    tenant.place(
        node,
        _guaranteed(tenant.pod("guaranteed"), cpu="2"),
        tenant.pod("burstable", cpu="2", priority=5),
    )
    assert tenant.qos() == {"guaranteed": "Guaranteed", "burstable": "Burstable"}
    vip = tenant.pod("vip", cpu="2", priority=HIGH, governed=False)
    victim = "burstable" if rule else "guaranteed"
    assert tenant.preempt(vip, 1) == (node, {f"{tenant.namespace}/{victim}": PREEMPTED})


def test_victim_order_qos_then_priority_evicts_best_effort_before_burstable_before_guaranteed(
    tenant: Tenant, rule: bool
) -> None:
    """victimOrder: QoSThenPriority. One node with room for 3 pods (and 4 cpu) holds three
    governed pods: ``guaranteed`` (1 cpu, priority 0), ``burstable`` (1 cpu, priority 3) and
    ``besteffort`` (no requests, priority 5). A governed 1-cpu pod of priority 1000 needs one
    pod slot: exactly one victim, any of the three (cpu: 1 + 1 + 1 ≤ 4).

    Default (Priority): reprieved most important first, ``besteffort`` (5) then ``burstable``
    (3) are kept, which fills the slots: ``guaranteed`` (0) is the victim.
    With the rule: importance is the QoS class first, so ``guaranteed`` then ``burstable`` are
    kept whatever their priority: ``besteffort`` is the victim."""
    tenant.apply({"victimOrder": "QoSThenPriority"} if rule else {})
    node = tenant.node("n", cpu="4", pods="3")
    tenant.place(
        node,
        _guaranteed(tenant.pod("guaranteed"), cpu="1"),
        tenant.pod("burstable", cpu="1", priority=3),
        tenant.pod("besteffort", priority=5),
    )
    assert tenant.qos() == {
        "guaranteed": "Guaranteed",
        "burstable": "Burstable",
        "besteffort": "BestEffort",
    }
    victim = "besteffort" if rule else "guaranteed"
    vip = tenant.pod("vip", cpu="1", priority=HIGH)
    assert tenant.preempt(vip, 1) == (node, {f"{tenant.namespace}/{victim}": PREEMPTED})


def test_scope_same_namespace_evicts_only_pods_of_the_preemptors_namespace(
    tenant: Tenant, other_namespace: str, rule: bool
) -> None:
    """scope: SameNamespace. One 4-cpu node holds ``mine`` (2 cpu, priority 5, the
    preemptor's namespace) and ``theirs`` (2 cpu, priority 0, another namespace, no policy).
    A governed 2-cpu pod of priority 1000 needs one of them gone.

    Default (Cluster): ``mine`` (5) is reprieved first and still leaves room: ``theirs`` (0)
    is the victim.
    With the rule: ``theirs`` stays as if it had higher priority, so ``mine`` is the victim."""
    tenant.apply({"scope": "SameNamespace"} if rule else {})
    node = tenant.node("n", cpu="4")
    tenant.place(node, tenant.pod("mine", cpu="2", priority=5))
    tenant.place(node, _pod(other_namespace, "theirs", cpu="2", governed=False))
    victim = f"{tenant.namespace}/mine" if rule else f"{other_namespace}/theirs"
    vip = tenant.pod("vip", cpu="2", priority=HIGH)
    assert tenant.preempt(vip, 1, other_namespace) == (node, {victim: PREEMPTED})


def test_max_victims_per_pod_skips_a_node_needing_more_victims(tenant: Tenant, rule: bool) -> None:
    """maxVictimsPerPod: 1. Node a (4 cpu) holds ``a0`` and ``a1``, 2 cpu each, priority 0:
    a 4-cpu pod needs both gone (2 victims, highest priority 0). Node b (4 cpu) holds ``b0``,
    4 cpu, priority 10: 1 victim, highest priority 10. The preemptor is governed, priority
    1000, 4 cpu.

    Default: the node whose most important victim has the lower priority wins: a (0 < 10),
    victims ``a0`` and ``a1``.
    With the rule: a would need 2 > 1 victims and is no candidate: b, victim ``b0``."""
    tenant.apply({"maxVictimsPerPod": 1} if rule else {})
    a, b = tenant.node("a", cpu="4"), tenant.node("b", cpu="4")
    tenant.place(a, tenant.pod("a0", cpu="2"), tenant.pod("a1", cpu="2"))
    tenant.place(b, tenant.pod("b0", cpu="4", priority=10))
    vip = tenant.pod("vip", cpu="4", priority=HIGH)
    ns = tenant.namespace
    if rule:
        assert tenant.preempt(vip, 1) == (b, {f"{ns}/b0": PREEMPTED})
    else:
        assert tenant.preempt(vip, 2) == (a, {f"{ns}/a0": PREEMPTED, f"{ns}/a1": PREEMPTED})


def test_max_victims_per_pod_with_no_node_left_the_pod_waits_naming_the_cap(
    tenant: Tenant, rule: bool, words: side_by_side.Words
) -> None:
    """maxVictimsPerPod: 1. One 4-cpu node holds four 1-cpu priority-0 pods; a governed 2-cpu
    pod of priority 1000 needs two of them gone.

    Default: two victims (the two least important: equal priorities and no start times, so
    plumb's fallback order by name keeps ``p0`` and ``p1`` and evicts ``p2`` and ``p3``).
    With the rule: 2 > 1, the only node is no candidate: nothing is evicted, the pod waits
    nominated nowhere, and its FailedScheduling message names the cap and the policy."""
    tenant.apply({"maxVictimsPerPod": 1} if rule else {})
    node = tenant.node("n", cpu="4")
    tenant.place(node, *(tenant.pod(f"p{i}", cpu="1") for i in range(4)))
    vip = tenant.pod("vip", cpu="2", priority=HIGH)
    ns = tenant.namespace
    if not rule:
        assert tenant.preempt(vip, 2) == (node, {f"{ns}/p2": PREEMPTED, f"{ns}/p3": PREEMPTED})
        return
    tenant.create(vip)
    message = preemption_steps.newest_failed_scheduling(
        tenant.client, ns, "vip", containing=evaluator.PREFIX
    )
    cap = evaluator.cap_reason(
        evaluator.Rules(max_victims=1, source=f"SchedulingPolicy {ns}/{POLICY}")
    )
    assert cap == (
        "node(s) would need more than 1 victims "
        f"(maxVictimsPerPod of SchedulingPolicy {ns}/{POLICY})"
    )
    assert message == words.post_filter(
        "0/1 nodes are available: 1 Insufficient cpu.", f"0/1 nodes are available: 1 {cap}."
    )
    assert not preemption_steps.terminating(tenant.client, ns)
    assert not preemption_steps.nominated(tenant.client.pod(ns, "vip"))
    assert tenant.client.pod(ns, "vip")["spec"].get("nodeName") is None
