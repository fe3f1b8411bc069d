"""Preemption side by side: each scenario runs once under plumb and once under the real
kube-scheduler v1.34.4 on the same control plane (the harness of test_plugins.py).

Each test says which pods the preemptor deletes, which node it is nominated to
(status.nominatedNodeName), where it is finally bound, and the FailedScheduling text, exactly,
the same for both schedulers, and that no victim has the preemptor's priority or more.
kube-scheduler breaks exact ties between candidate nodes at random, so every scenario is built
so that exactly one node is best by its criteria, in order: fewest PodDisruptionBudget
violations, lowest highest-victim priority, smallest sum of victim priorities (each offset by
2^31, so one more victim outweighs any priority), fewest victims, latest start of the most
important victims. The nodes are API objects with no kubelet, so no pod starts unless a test
writes its status (one does, to reach the last criterion). Within a node the victims kept back
("reprieved") are tried most important first (priority, then earlier start), those whose
deletion would violate a PDB before the others; pods of equal priority and no start time on a
node that only some of them must leave would make the victims a coin toss, so the pods of one
node have distinct priorities wherever that matters.

What kube-scheduler v1.34.4 does, as these tests pin down:
- a pod that fits nowhere gets FailedScheduling; its message is the node histogram (sorted as
  text, counts included) followed by the PostFilter plugins' messages joined by ", ":
  DynamicResources' "no new claims to deallocate", then DefaultPreemption's "preemption: …",
  which is "not eligible due to preemptionPolicy=Never." or a histogram of its own over all
  nodes: the reason each searched node failed after its lower-priority pods were removed ("No
  preemption victims found for incoming pod" where there were none), "Preemption is not
  helpful for scheduling" for the nodes not searched (UnschedulableAndUnresolvable);
- when preemption finds a node, the message is the histogram alone, the preemptor gets
  status.nominatedNodeName (kept after it is bound, even bound elsewhere), and each victim gets
  the condition DisruptionTarget (True, PreemptionByScheduler, "<schedulerName>: preempting to
  accommodate a higher priority pod"), a graceful delete and a Preempted event ("Preempted by
  pod <preemptor uid> on node <node>");
- a graceful delete of a pod bound to a node leaves it Terminating until its kubelet confirms;
  these nodes have none, so the tests do the kubelet's last step (``_finish_terminating``),
  after which the preemptor binds on the nominated node. Tried again meanwhile (which depends
  on timing), the preemptor gets "… preemption: not eligible due to a terminating pod on the
  nominated node." and deletes nothing more;
- a pod already Terminating is still a pod on its node: it can be chosen as a victim again
  (condition, delete, event once more).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import time
from collections.abc import Iterable, Mapping

import pytest
from kubernetes import client as k8s

from plumb.testing import builders, kube
from plumb.testing.builders import HOSTNAME_LABEL, ZONE_LABEL
from tests.integration import schedulers
from tests.integration.conftest import NodeFactory
from tests.integration.schedulers import scheduler_fixture  # noqa: F401

pytestmark = pytest.mark.integration

PREEMPTOR = "preemptor"
PREEMPTOR_PRIORITY = 1000
HIGH = 2000
_PROBES = 20
# DynamicResources' PostFilter message for a pod without claims, which comes before
# DefaultPreemption's in kube-scheduler's message.
_NO_CLAIMS = "no new claims to deallocate"
_NO_VICTIMS = "No preemption victims found for incoming pod"
_TERMINATING = "not eligible due to a terminating pod on the nominated node."
_NOT_HELPFUL = "Preemption is not helpful for scheduling"
_INSUFFICIENT_CPU = "Insufficient cpu"
_AFFINITY = "node(s) didn't match pod affinity rules"
_SPREAD = "node(s) didn't match pod topology spread constraints"
_PORTS = "node(s) didn't have free ports for the requested pod ports"
_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
_SELECTOR = "node(s) didn't match Pod's node affinity/selector"
_TAINTS = "node(s) had untolerated taint(s)"
# Long enough for a scheduler to have acted on a pod that it should leave alone.
_QUIET_SECONDS = 3.0


# --- helpers -------------------------------------------------------------------------------------


def _create_pod(client: kube.Kube, body: kube.JSON, timeout: float = 15.0) -> None:
    """``client.create_pod``, retried while the Priority admission plugin has not yet seen the
    PriorityClass that call has just made (it reads classes from an informer, so a pod created
    right after its class is refused with 403 "no PriorityClass with name ... was found")."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.create_pod(body)
            return
        except k8s.ApiException as error:
            if error.status != 403 or "no PriorityClass" not in str(error.body):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _in_view(
    client: kube.Kube, scheduler: schedulers.Runner, namespace: str, nodes: list[str]
) -> None:
    """Waits until the scheduler has every node of the test in view (as test_plugins does).

    A pod that fits nowhere and is judged against all the test's nodes proves every node has
    been seen. Probes stay pending with priority 0 and hold nothing, so they are never victims.
    """
    prefix = f"0/{len(nodes)} nodes are available"
    messages = []
    for attempt in range(_PROBES):
        probe = f"probe-{attempt}"
        _create_pod(
            client,
            scheduler.pod(probe, namespace).node_selector("plumb.test/probe", "nowhere").obj(),
        )
        schedulers.wait_settled(client, namespace, [probe])
        message = schedulers.failed_scheduling(client, namespace, probe)
        if message is not None and message.startswith(prefix):
            return
        messages.append(message)
    raise AssertionError(
        f"{scheduler.name} never judged a pod against {len(nodes)} nodes: {messages}"
    )


@dataclasses.dataclass(frozen=True)
class Occupant:
    """A pod placed on a node before the preemptor comes: what it is called, where it goes,
    its priority and what it holds."""

    name: str
    node: str
    priority: int
    cpu: str = "1"
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _occupy(
    client: kube.Kube,
    scheduler: schedulers.Runner,
    namespace: str,
    nodes: list[str],
    occupants: Iterable[Occupant | builders.PodBuilder],
    pin: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """Places the occupants, each pinned to its node by a hostname nodeSelector, through the
    scheduler under test (so its cache holds them before the preemptor arrives); returns
    {pod: priority}. A PodBuilder is taken as it is, its node given in pin."""
    priorities: dict[str, int] = {}
    expected: dict[str, str] = {}
    for occupant in occupants:
        if isinstance(occupant, Occupant):
            pod = (
                scheduler.pod(occupant.name, namespace)
                .req(cpu=occupant.cpu)
                .priority(occupant.priority)
                .node_selector(HOSTNAME_LABEL, occupant.node)
            )
            for key, value in occupant.labels.items():
                pod.label(key, value)
            body = pod.obj()
            node = occupant.node
        else:
            body = occupant.obj()
            node = (pin or {})[body["metadata"]["name"]]
        _create_pod(client, body)
        name = body["metadata"]["name"]
        priorities[name] = int(body["spec"].get("priority") or 0)
        expected[name] = node
    placed = schedulers.wait_settled(client, namespace, expected, cluster_nodes=len(nodes))
    assert placed == expected, "the occupants did not land where the scenario puts them"
    return priorities


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a scheduler did with a preemptor."""

    deleted: frozenset[str]
    """The occupants it deleted (Terminating or gone)."""
    nominated: str | None
    """status.nominatedNodeName as first seen, None if it never had one."""
    node: str | None
    """Where the preemptor was bound in the end, None if it stayed pending."""
    messages: tuple[str, ...]
    """The preemptor's FailedScheduling messages, distinct, oldest first."""
    conditions: Mapping[str, Mapping[str, str] | None]
    """Each deleted pod's DisruptionTarget condition (type, status, reason, message) as seen
    while it was Terminating; None if it was gone before it could be read."""
    preempted_events: Mapping[str, tuple[str, ...]]
    """Each deleted pod's Preempted event messages."""
    nominated_at_end: str | None
    """status.nominatedNodeName once the preemptor is bound (or given up on)."""


def _gone_or_terminating(client: kube.Kube, namespace: str, names: Iterable[str]) -> set[str]:
    pods = {p["metadata"]["name"]: p for p in client.pods(namespace)}
    return {
        name
        for name in names
        if name not in pods or pods[name]["metadata"].get("deletionTimestamp")
    }


def _nominated(pod: kube.JSON) -> str | None:
    return (pod.get("status") or {}).get("nominatedNodeName") or None


def _failed_scheduling_messages(client: kube.Kube, namespace: str, name: str) -> tuple[str, ...]:
    """The pod's FailedScheduling messages, distinct, in the order they were first posted."""
    uid = client.pod(namespace, name)["metadata"]["uid"]
    first: dict[str, datetime.datetime] = {}
    for event in client.events(namespace, name):
        if event.get("reason") != schedulers.FAILED_SCHEDULING:
            continue
        if (event.get("involvedObject") or {}).get("uid") != uid:
            continue
        message = str(event.get("message") or "")
        when = _event_time(event)
        if message not in first or when < first[message]:
            first[message] = when
    return tuple(sorted(first, key=lambda message: first[message]))


def _event_time(event: kube.JSON) -> datetime.datetime:
    stamps = (event.get("eventTime"), event.get("firstTimestamp"))
    return min(
        (datetime.datetime.fromisoformat(s) for s in stamps if s),
        default=datetime.datetime.min.replace(tzinfo=datetime.UTC),
    )


def _preempted_events(client: kube.Kube, namespace: str, name: str) -> tuple[str, ...]:
    return tuple(
        sorted(
            str(e.get("message") or "")
            for e in client.events(namespace, name)
            if e.get("reason") == "Preempted"
        )
    )


def _disruption_target(pod: kube.JSON) -> dict[str, str] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget":
            return {key: str(condition.get(key)) for key in ("type", "status", "reason", "message")}
    return None


def _finish_terminating(client: kube.Kube, namespace: str) -> None:
    """The kubelet's last step for the Terminating pods (these nodes have no kubelet)."""
    client.force_delete_terminating(namespace)


def _preempt(
    client: kube.Kube,
    namespace: str,
    preemptor: builders.PodBuilder,
    occupants: Mapping[str, int],
    *,
    victims: int,
    nodes: list[str],
    timeout: float = 60.0,
) -> Outcome:
    """Creates the preemptor and follows a preemption that should delete ``victims`` pods.

    Waits for the nomination and for that many occupants to be Terminating or gone, then
    a moment more (so that a scheduler deleting too many is caught), reads the victims'
    conditions, finishes their deletion as a kubelet would, and waits for the preemptor to be
    bound. A wait that times out returns what was seen so far, for the assertions to tell.
    """
    body = preemptor.obj()
    name = body["metadata"]["name"]
    _create_pod(client, body)
    prefix = f"0/{len(nodes)} nodes are available"

    def nominated_or_failed() -> str | None:
        pod = client.pod(namespace, name)
        if nominee := _nominated(pod):
            return nominee
        if pod["spec"].get("nodeName"):
            return "(bound without nomination)"
        messages = _failed_scheduling_messages(client, namespace, name)
        if any(m.startswith(prefix) and "preemption: " in m for m in messages):
            return "(failed without nomination)"
        return None

    with contextlib.suppress(kube.WaitTimeout):
        kube.wait_for(f"{name} to be nominated", nominated_or_failed, timeout=timeout)
    nominated = _nominated(client.pod(namespace, name))
    with contextlib.suppress(kube.WaitTimeout):
        kube.wait_for(
            f"{victims} of {sorted(occupants)} to be deleted",
            lambda: len(_gone_or_terminating(client, namespace, occupants)) >= victims,
            timeout=timeout if nominated else _QUIET_SECONDS,
        )
    time.sleep(1.0)
    conditions: dict[str, Mapping[str, str] | None] = {}
    pods = {p["metadata"]["name"]: p for p in client.pods(namespace)}
    deleted = frozenset(_gone_or_terminating(client, namespace, occupants))
    for victim in deleted:
        conditions[victim] = _disruption_target(pods[victim]) if victim in pods else None
    _finish_terminating(client, namespace)
    if nominated:
        node = _bound(client, namespace, name, timeout)
    else:
        node = client.pod(namespace, name)["spec"].get("nodeName")
    return Outcome(
        deleted=deleted,
        nominated=nominated,
        node=node,
        messages=_failed_scheduling_messages(client, namespace, name),
        conditions=conditions,
        preempted_events={v: _preempted_events(client, namespace, v) for v in deleted},
        nominated_at_end=_nominated(client.pod(namespace, name)),
    )


def _assert_preempted(
    client: kube.Kube,
    scheduler: schedulers.Runner,
    namespace: str,
    outcome: Outcome,
    occupants: Mapping[str, int],
    *,
    deleted: set[str],
    node: str,
    message: str,
) -> None:
    """The whole story of a successful preemption, the same under both schedulers."""
    print(f"{scheduler.name}: {outcome}")
    assert outcome.deleted == deleted
    assert all(occupants[v] < PREEMPTOR_PRIORITY for v in outcome.deleted), outcome.deleted
    assert outcome.nominated == node
    assert outcome.node == node
    # A retry while the victims are still Terminating (they are until _preempt finishes
    # their deletion) does not preempt again; kube-scheduler retries when a victim's update
    # wakes the pod, which depends on timing, so that second message may or may not be there.
    assert outcome.messages[:1] == (message,), outcome.messages
    assert set(outcome.messages[1:]) <= {_waiting(message)}, outcome.messages
    uid = client.pod(namespace, PREEMPTOR)["metadata"]["uid"]
    expected_condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": f"{scheduler.scheduler_name}: preempting to accommodate a higher priority pod",
    }
    for victim in outcome.deleted:
        assert outcome.conditions[victim] == expected_condition, victim
        assert outcome.preempted_events[victim] == (f"Preempted by pod {uid} on node {node}",)


def _assert_not_preempted(
    client: kube.Kube,
    namespace: str,
    preemptor: builders.PodBuilder,
    occupants: Mapping[str, int],
    nodes: list[str],
    message: str,
) -> None:
    """The preemptor stays pending with exactly this message; nothing is deleted, nobody
    nominated."""
    name = preemptor.obj()["metadata"]["name"]
    _create_pod(client, preemptor.obj())
    assert schedulers.wait_settled(client, namespace, [name], cluster_nodes=len(nodes)) == {
        name: None
    }
    time.sleep(_QUIET_SECONDS)
    pod = client.pod(namespace, name)
    assert _gone_or_terminating(client, namespace, occupants) == set()
    assert _nominated(pod) is None
    assert not pod["spec"].get("nodeName")
    assert _failed_scheduling_messages(client, namespace, name) == (message,)


def _bound(client: kube.Kube, namespace: str, name: str, timeout: float = 60.0) -> str | None:
    """Where the pod is bound once it is (None if it is not within timeout): unlike
    schedulers.wait_settled, an earlier FailedScheduling does not end the wait."""
    try:
        node = kube.wait_for(
            f"{name} to be bound",
            lambda: client.pod(namespace, name)["spec"].get("nodeName"),
            timeout=timeout,
        )
    except kube.WaitTimeout:
        return None
    return str(node)


def _wait_nominated(
    client: kube.Kube, namespace: str, name: str, timeout: float = 30.0
) -> str | None:
    """The pod's nominatedNodeName once it has one, None if it has none within timeout."""
    try:
        return kube.wait_for(
            f"{name} to be nominated",
            lambda: _nominated(client.pod(namespace, name)),
            timeout=timeout,
        )
    except kube.WaitTimeout:
        return None


def _waiting(diagnosis: str) -> str:
    """The message of a nominated preemptor tried again while its victims terminate."""
    return f"{diagnosis} {_NO_CLAIMS}, preemption: {_TERMINATING}"


def _preemptor(scheduler: schedulers.Runner, namespace: str, cpu: str) -> builders.PodBuilder:
    return scheduler.pod(PREEMPTOR, namespace).req(cpu=cpu).priority(PREEMPTOR_PRIORITY)


def _make_ready(
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


def _pdb(client: kube.Kube, namespace: str, name: str, labels: Mapping[str, str]) -> None:
    """A PodDisruptionBudget allowing no disruption of the pods with these labels.

    maxUnavailable 0: disruptionsAllowed is 0 whatever the disruption controller makes of it
    (for pods with no owner it cannot compute maxUnavailable at all), and 0 is also what a
    scheduler reads before the controller has written any status."""
    client.create_pdb(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": dict(labels)}},
        }
    )


def _nodes(add_node: NodeFactory, namespace: str, *names: str, cpu: str = "2") -> list[str]:
    return [add_node(builders.make_node(f"{namespace}-{n}").capacity(cpu=cpu)) for n in names]


# --- scenarios: where the preemptor goes ---------------------------------------------------------


def test_reprieve_leaves_all_but_the_least_important_pod(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """One node of 3 cpu, full with three 1-cpu pods of priority 1, 2 and 3; the preemptor
    (priority 1000) asks 1 cpu. With all three removed it fits; reprieve puts them back most
    important first: priority 3 (2 cpu left), priority 2 (1 left), priority 1 (0 left: does
    not fit, a victim). So exactly one pod goes, the priority-1 one."""
    (node,) = nodes = _nodes(add_node, namespace, "n", cpu="3")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client, scheduler, namespace, nodes, [Occupant(f"p{p}", node, p) for p in (1, 2, 3)]
    )
    preemptor = _preemptor(scheduler, namespace, "1")
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=1, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"p1"},
        node=node,
        message=f"0/1 nodes are available: 1 {_INSUFFICIENT_CPU}.",
    )


def test_fewer_victims_of_equal_priority_win(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 2 cpu, each full with priority-0 pods: "a-two" with two pods of 1 cpu,
    "b-one" with one pod of 2 cpu; the preemptor asks 2 cpu, so every pod of the chosen node
    goes. No PDBs; the highest victim priority is 0 on both; the priority sums (each victim's
    priority plus 2^31) are 2^32 on a-two and 2^31 on b-one: b-one, the later name."""
    two, one = nodes = _nodes(add_node, namespace, "a-two", "b-one")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            Occupant("two-x", two, 0),
            Occupant("two-y", two, 0),
            Occupant("one", one, 0, cpu="2"),
        ],
    )
    preemptor = _preemptor(scheduler, namespace, "2")
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=1, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"one"},
        node=one,
        message=f"0/2 nodes are available: 2 {_INSUFFICIENT_CPU}.",
    )


def test_lower_highest_victim_priority_wins_over_fewer_victims(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 2 cpu: "a-one" full with one 2-cpu pod of priority 20, "b-two" with two
    1-cpu pods of priority 10; the preemptor asks 2 cpu. The highest victim priority comes
    before the sum and the count: 10 on b-two against 20 on a-one, so b-two loses both its
    pods although a-one would lose only one."""
    one, two = nodes = _nodes(add_node, namespace, "a-one", "b-two")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            Occupant("one-20", one, 20, cpu="2"),
            Occupant("two-10-x", two, 10),
            Occupant("two-10-y", two, 10),
        ],
    )
    preemptor = _preemptor(scheduler, namespace, "2")
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=2, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"two-10-x", "two-10-y"},
        node=two,
        message=f"0/2 nodes are available: 2 {_INSUFFICIENT_CPU}.",
    )


def test_smaller_priority_sum_wins_when_the_highest_victims_tie(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 2 cpu, each with two 1-cpu pods; the preemptor asks 2 cpu, so both pods of
    the chosen node go. "a" holds priorities 20 and 15, "b" 20 and 5: the highest victim
    priority is 20 on both, the sums are 35 + 2 x 2^31 on a and 25 + 2 x 2^31 on b: b."""
    a, b = nodes = _nodes(add_node, namespace, "a", "b")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            Occupant("a-20", a, 20),
            Occupant("a-15", a, 15),
            Occupant("b-20", b, 20),
            Occupant("b-5", b, 5),
        ],
    )
    preemptor = _preemptor(scheduler, namespace, "2")
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=2, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"b-20", "b-5"},
        node=b,
        message=f"0/2 nodes are available: 2 {_INSUFFICIENT_CPU}.",
    )


def test_a_node_whose_victim_a_pdb_protects_is_avoided(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 2 cpu, each full with one 2-cpu pod: on "a" a pod of priority 10 that a
    PDB allowing no disruption covers, on "b" one of priority 20. By priority "a" would win
    (10 < 20), but PDB violations come first: 1 on a, 0 on b. So b's pod goes."""
    a, b = nodes = _nodes(add_node, namespace, "a", "b")
    _pdb(kube_client, namespace, "guarded", {"app": "guarded"})
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            Occupant("a-guarded-10", a, 10, cpu="2", labels={"app": "guarded"}),
            Occupant("b-20", b, 20, cpu="2", labels={"app": "plain"}),
        ],
    )
    preemptor = _preemptor(scheduler, namespace, "2")
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=1, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"b-20"},
        node=b,
        message=f"0/2 nodes are available: 2 {_INSUFFICIENT_CPU}.",
    )


def test_a_pdb_is_violated_when_there_is_no_other_way(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """One node of 3 cpu: a 2-cpu pod of priority 0 under a PDB allowing no disruption and a
    1-cpu pod of priority 2000 (above the preemptor, never a victim). The preemptor asks 2
    cpu: only the guarded pod's room will do, and a PDB does not stop the scheduler (it
    deletes; it does not evict). So the guarded pod goes, the priority-2000 one stays."""
    (node,) = nodes = _nodes(add_node, namespace, "n", cpu="3")
    _pdb(kube_client, namespace, "guarded", {"app": "guarded"})
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            Occupant("guarded", node, 0, cpu="2", labels={"app": "guarded"}),
            Occupant("high", node, HIGH, labels={"app": "guarded"}),
        ],
    )
    preemptor = _preemptor(scheduler, namespace, "2")
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=1, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"guarded"},
        node=node,
        message=f"0/1 nodes are available: 1 {_INSUFFICIENT_CPU}.",
    )


def test_reprieve_spares_the_pdb_protected_pod_first(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """One node of 2 cpu with two 1-cpu pods: "guarded" of priority 0 under a PDB allowing no
    disruption, "plain" of priority 5; the preemptor asks 1 cpu, so one pod must go. By
    importance alone reprieve would keep "plain" (5 > 0) and delete "guarded"; but the pods
    whose removal would violate a PDB are reprieved first: "guarded" comes back (1 cpu left,
    the preemptor fits), then "plain" cannot. So "plain" goes."""
    (node,) = nodes = _nodes(add_node, namespace, "n")
    _pdb(kube_client, namespace, "guarded", {"app": "guarded"})
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            Occupant("guarded", node, 0, labels={"app": "guarded"}),
            Occupant("plain", node, 5, labels={"app": "plain"}),
        ],
    )
    preemptor = _preemptor(scheduler, namespace, "1")
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=1, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"plain"},
        node=node,
        message=f"0/1 nodes are available: 1 {_INSUFFICIENT_CPU}.",
    )


def test_only_nodes_that_removing_pods_can_cure_are_searched(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Three nodes of 2 cpu labelled disk=ssd or hdd, each full with one 2-cpu pod: "a-taint"
    (ssd, tainted dedicated=x NoSchedule; its pod, priority 0, tolerates it), "b-hdd" (hdd, pod
    of priority 0) and "c-ssd" (ssd, pod of priority 10). The preemptor asks 2 cpu on
    disk=ssd without the toleration. The taint and the selector are UnschedulableAndUnresolvable:
    no deletion cures them, so only c-ssd is searched although its victim has the higher
    priority."""
    taint = add_node(
        builders.make_node(f"{namespace}-a-taint")
        .capacity(cpu="2")
        .label("disk", "ssd")
        .taint("dedicated", "x")
    )
    hdd = add_node(builders.make_node(f"{namespace}-b-hdd").capacity(cpu="2").label("disk", "hdd"))
    ssd = add_node(builders.make_node(f"{namespace}-c-ssd").capacity(cpu="2").label("disk", "ssd"))
    nodes = [taint, hdd, ssd]
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            scheduler.pod("taint-0", namespace)
            .req(cpu="2")
            .priority(0)
            .node_selector(HOSTNAME_LABEL, taint)
            .toleration("dedicated", value="x", effect="NoSchedule"),
            Occupant("hdd-0", hdd, 0, cpu="2"),
            Occupant("ssd-10", ssd, 10, cpu="2"),
        ],
        pin={"taint-0": taint},
    )
    preemptor = _preemptor(scheduler, namespace, "2").node_selector("disk", "ssd")
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=1, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"ssd-10"},
        node=ssd,
        message=f"0/3 nodes are available: 1 {_INSUFFICIENT_CPU}, 1 {_SELECTOR}, 1 {_TAINTS}.",
    )


def test_a_host_port_is_freed_by_deleting_the_pod_that_holds_it(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 4 cpu with room to spare, each with a 1-cpu pod holding host port 8080:
    priority 10 on "a", 0 on "b". The preemptor wants port 8080; only deleting a holder frees
    it, and b's holder has the lower priority: b."""
    a, b = nodes = _nodes(add_node, namespace, "a", "b", cpu="4")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            scheduler.pod(name, namespace)
            .req(cpu="1")
            .priority(priority)
            .node_selector(HOSTNAME_LABEL, node)
            .host_port(8080)
            for name, node, priority in (("a-port-10", a, 10), ("b-port-0", b, 0))
        ],
        pin={"a-port-10": a, "b-port-0": b},
    )
    preemptor = _preemptor(scheduler, namespace, "1").host_port(8080)
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=1, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"b-port-0"},
        node=b,
        message=f"0/2 nodes are available: 2 {_PORTS}.",
    )


def test_an_existing_pods_anti_affinity_is_cured_by_deleting_that_pod(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 2 cpu: on "a" a small pod "guard" (priority 0, 500m) whose required
    anti-affinity keeps app=web pods off its node; "b" full with a 2-cpu pod of priority 10.
    The preemptor (app=web, 1 cpu) fits neither; either can be cured by one deletion, and
    the guard's priority is the lower: the guard goes and the preemptor takes node a."""
    a, b = nodes = _nodes(add_node, namespace, "a", "b")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            scheduler.pod("guard", namespace)
            .req(cpu="500m")
            .priority(0)
            .label("app", "guard")
            .node_selector(HOSTNAME_LABEL, a)
            .affinity(HOSTNAME_LABEL, {"app": "web"}, anti=True),
            Occupant("b-10", b, 10, cpu="2"),
        ],
        pin={"guard": a},
    )
    preemptor = _preemptor(scheduler, namespace, "1").label("app", "web")
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=1, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"guard"},
        node=a,
        message=f"0/2 nodes are available: 1 {_INSUFFICIENT_CPU}, 1 {_EXISTING_ANTI_AFFINITY}.",
    )


def test_a_nominated_preemptor_waits_for_its_victims_and_preempts_no_more(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Nodes "a" and "b" of 2 cpu, each full with a 2-cpu pod (priority 0 on a, 10 on b), and
    "c" of 1 cpu full with a 1-cpu pod of priority 2000. The preemptor (2 cpu) is nominated to
    a, whose pod is deleted and, with no kubelet here, stays Terminating. Then c's pod is
    deleted, which wakes the preemptor: it fits nowhere yet (a still holds the terminating
    pod, b is full, c too small), and, a victim of its own still terminating on its nominated
    node, it may not preempt again, so b's pod stays. Once a's pod is gone it binds on a."""
    a, b, c = nodes = [
        *_nodes(add_node, namespace, "a", "b"),
        add_node(builders.make_node(f"{namespace}-c").capacity(cpu="1")),
    ]
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            Occupant("a-0", a, 0, cpu="2"),
            Occupant("b-10", b, 10, cpu="2"),
            Occupant("c-high", c, HIGH),
        ],
    )
    _create_pod(kube_client, _preemptor(scheduler, namespace, "2").obj())
    assert (
        kube.wait_for(
            "the preemptor to be nominated",
            lambda: _nominated(kube_client.pod(namespace, PREEMPTOR)),
            timeout=60,
        )
        == a
    )
    kube.wait_for(
        "a-0 to be deleted", lambda: _gone_or_terminating(kube_client, namespace, ["a-0"])
    )
    diagnosis = f"0/3 nodes are available: 3 {_INSUFFICIENT_CPU}."
    kube_client.core.delete_namespaced_pod("c-high", namespace, grace_period_seconds=0)
    waiting = _waiting(diagnosis)
    kube.wait_for(
        f"the preemptor to be tried again: {waiting!r}",
        lambda: waiting in _failed_scheduling_messages(kube_client, namespace, PREEMPTOR),
        timeout=60,
    )
    time.sleep(_QUIET_SECONDS)
    assert _gone_or_terminating(kube_client, namespace, occupants) == {"a-0", "c-high"}
    assert _nominated(kube_client.pod(namespace, PREEMPTOR)) == a
    assert not kube_client.pod(namespace, PREEMPTOR)["spec"].get("nodeName")
    _finish_terminating(kube_client, namespace)
    assert _bound(kube_client, namespace, PREEMPTOR) == a
    assert _failed_scheduling_messages(kube_client, namespace, PREEMPTOR) == (
        diagnosis,
        waiting,
    )


def test_the_room_freed_for_a_nominated_preemptor_is_kept_for_it(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """One node of 2 cpu full with a 2-cpu pod of priority 0. The preemptor (2 cpu) is
    nominated there and its victim Terminating when a pod of priority 0 asking 2 cpu
    ("latecomer") arrives. Once the victim is gone the node's room goes to the preemptor, not
    to the latecomer: a scheduler counts a nominated pod of higher priority on its node. The
    latecomer stays pending, with no victim of lower priority than its own anywhere."""
    (node,) = nodes = _nodes(add_node, namespace, "n")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client, scheduler, namespace, nodes, [Occupant("low", node, 0, cpu="2")]
    )
    _create_pod(kube_client, _preemptor(scheduler, namespace, "2").obj())
    kube.wait_for(
        "the preemptor to be nominated",
        lambda: _nominated(kube_client.pod(namespace, PREEMPTOR)),
        timeout=60,
    )
    kube.wait_for(
        "low to be deleted", lambda: _gone_or_terminating(kube_client, namespace, occupants)
    )
    _create_pod(kube_client, scheduler.pod("latecomer", namespace).req(cpu="2").priority(0).obj())
    assert schedulers.wait_settled(
        kube_client, namespace, ["latecomer"], cluster_nodes=len(nodes)
    ) == {"latecomer": None}
    _finish_terminating(kube_client, namespace)
    assert _bound(kube_client, namespace, PREEMPTOR) == node
    time.sleep(_QUIET_SECONDS)
    assert not kube_client.pod(namespace, "latecomer")["spec"].get("nodeName")
    no_victims = (
        f"0/1 nodes are available: 1 {_INSUFFICIENT_CPU}. {_NO_CLAIMS}, "
        f"preemption: 0/1 nodes are available: 1 {_NO_VICTIMS}."
    )
    assert set(_failed_scheduling_messages(kube_client, namespace, "latecomer")) == {no_victims}


def test_a_pod_already_terminating_is_the_cheapest_victim(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 2 cpu, each full with a 2-cpu pod: priority 0 on "a", 10 on "b". The pod on
    a is deleted by its owner before the preemptor comes; with no kubelet it stays Terminating,
    still holding its room. The preemptor (2 cpu) fits nowhere; a terminating pod is still a
    pod on its node for kube-scheduler, so a's victim (priority 0) beats b's (10): a is
    chosen, the terminating pod is "preempted" (condition, delete again, event) and b's pod
    is left alone. The preemptor binds on a once the pod is gone."""
    a, b = nodes = _nodes(add_node, namespace, "a", "b")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [Occupant("a-0", a, 0, cpu="2"), Occupant("b-10", b, 10, cpu="2")],
    )
    kube_client.core.delete_namespaced_pod("a-0", namespace)
    kube.wait_for(
        "a-0 to be Terminating", lambda: _gone_or_terminating(kube_client, namespace, ["a-0"])
    )
    _create_pod(kube_client, _preemptor(scheduler, namespace, "2").obj())
    nominated = kube.wait_for(
        "the preemptor to be nominated or bound",
        lambda: (
            _nominated(kube_client.pod(namespace, PREEMPTOR))
            or kube_client.pod(namespace, PREEMPTOR)["spec"].get("nodeName")
        ),
        timeout=60,
    )
    time.sleep(_QUIET_SECONDS)
    pods = {p["metadata"]["name"]: p for p in kube_client.pods(namespace)}
    uid = pods[PREEMPTOR]["metadata"]["uid"]
    # Everything observed, compared at once so that a failure shows every difference.
    seen_before = {
        "nominated": nominated,
        "deleted": _gone_or_terminating(kube_client, namespace, occupants),
        "a-0 condition": _disruption_target(pods["a-0"]),
        "a-0 Preempted events": _preempted_events(kube_client, namespace, "a-0"),
    }
    _finish_terminating(kube_client, namespace)
    node = _bound(kube_client, namespace, PREEMPTOR)
    diagnosis = f"0/2 nodes are available: 2 {_INSUFFICIENT_CPU}."
    messages = _failed_scheduling_messages(kube_client, namespace, PREEMPTOR)
    seen = {
        **seen_before,
        "bound": node,
        "first message": messages[:1],
        "later messages": set(messages[1:]) - {_waiting(diagnosis)},
    }
    assert seen == {
        "nominated": a,
        "deleted": {"a-0"},
        "a-0 condition": {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": f"{scheduler.scheduler_name}: preempting to accommodate a higher priority "
            "pod",
        },
        "a-0 Preempted events": (f"Preempted by pod {uid} on node {a}",),
        "bound": a,
        "first message": (diagnosis,),
        "later messages": set(),
    }


def test_a_pdb_s_allowance_goes_to_the_most_important_victims_first(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """One node of 3 cpu with three Ready 1-cpu pods of priority 1, 2 and 3, all under one PDB
    with minAvailable 2 (disruptionsAllowed 1). The preemptor asks 2 cpu: two pods must go.
    kube-scheduler hands the PDB's one allowed disruption to the potential victims in order
    of importance: p3 takes it (not violating), p2 and p1 would violate. Reprieve tries the
    violating ones first, most important first: p2 comes back (2 cpu free, fits), p1 cannot
    (a violating victim), then p3 cannot either. Victims: p1 and p3 (by importance alone they
    would be p1 and p2)."""
    (node,) = nodes = _nodes(add_node, namespace, "n", cpu="3")
    client = kube_client
    client.create_pdb(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded", "namespace": namespace},
            # minAvailable, not maxUnavailable: the disruption controller computes the latter
            # only for pods that a controller with a scale owns, and these have no owner.
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}},
        }
    )
    _in_view(client, scheduler, namespace, nodes)
    occupants = _occupy(
        client,
        scheduler,
        namespace,
        nodes,
        [Occupant(f"p{p}", node, p, labels={"app": "guarded"}) for p in (1, 2, 3)],
    )
    _make_ready(client, namespace, occupants)
    kube.wait_for(
        "the PDB to allow 1 disruption",
        lambda: (
            (client.pdb(namespace, "guarded").get("status") or {}).get("disruptionsAllowed") == 1
        ),
        timeout=30,
    )
    time.sleep(1.0)  # for the scheduler's PDB informer
    preemptor = _preemptor(scheduler, namespace, "2")
    outcome = _preempt(client, namespace, preemptor, occupants, victims=2, nodes=nodes)
    _assert_preempted(
        client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"p1", "p3"},
        node=node,
        message=f"0/1 nodes are available: 1 {_INSUFFICIENT_CPU}.",
    )


def test_start_times_decide_the_victims_and_the_node_when_all_else_ties(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 2 cpu, each with two running 1-cpu pods of priority 0, started (as their
    names say) in January and March on "a", February and April on "b". The preemptor asks
    1 cpu: one pod per node must go. Among equal priorities the earlier start is the more
    important, reprieved first: a keeps a-jan and loses a-mar, b keeps b-feb and loses b-apr.
    Then every criterion ties (no PDB, highest priority 0, equal sums, one victim each) but
    the last: the node whose most important victims started latest, b (April after March).
    A scheduler reprieving in the other order would compare January with February and still
    pick b, but delete b-feb."""
    a, b = nodes = _nodes(add_node, namespace, "a", "b")
    _in_view(kube_client, scheduler, namespace, nodes)
    starts = {
        "a-jan": (a, "2026-01-01T00:00:00Z"),
        "a-mar": (a, "2026-03-01T00:00:00Z"),
        "b-feb": (b, "2026-02-01T00:00:00Z"),
        "b-apr": (b, "2026-04-01T00:00:00Z"),
    }
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [Occupant(name, node, 0) for name, (node, _) in starts.items()],
    )
    for name, (_, started) in starts.items():
        _make_ready(kube_client, namespace, [name], started=started)
    kube.wait_for(
        "the start times to be written",
        lambda: all(
            (kube_client.pod(namespace, name).get("status") or {}).get("startTime")
            for name in starts
        ),
    )
    time.sleep(1.0)  # for the scheduler's pod informer
    preemptor = _preemptor(scheduler, namespace, "1")
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=1, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"b-apr"},
        node=b,
        message=f"0/2 nodes are available: 2 {_INSUFFICIENT_CPU}.",
    )


def test_a_spread_constraint_is_cured_by_deleting_pods_of_the_crowded_zone(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Zone "za" with node "a" (4 cpu) holding two app=web pods of priority 0 (1 cpu each);
    zone "zb" with node "b" (2 cpu) full with a 2-cpu pod of priority 10. The preemptor
    (app=web, 1 cpu) spreads over zones with maxSkew 1, DoNotSchedule: on a the skew would be
    3 - 0, on b there is no room. On a, with both web pods gone the skew is 1 - 0; reprieving
    either makes it 2 - 0, so both go (highest victim priority 0); on b its one pod goes
    (priority 10). Lower highest priority wins: a, both web pods."""
    a = add_node(builders.make_node(f"{namespace}-a").capacity(cpu="4").zone("za"))
    b = add_node(builders.make_node(f"{namespace}-b").capacity(cpu="2").zone("zb"))
    nodes = [a, b]
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            Occupant("web-1", a, 0, labels={"app": "web"}),
            Occupant("web-2", a, 0, labels={"app": "web"}),
            Occupant("b-10", b, 10, cpu="2"),
        ],
    )
    preemptor = (
        _preemptor(scheduler, namespace, "1")
        .label("app", "web")
        .spread(ZONE_LABEL, 1, selector={"app": "web"})
    )
    outcome = _preempt(kube_client, namespace, preemptor, occupants, victims=2, nodes=nodes)
    _assert_preempted(
        kube_client,
        scheduler,
        namespace,
        outcome,
        occupants,
        deleted={"web-1", "web-2"},
        node=a,
        message=f"0/2 nodes are available: 1 {_INSUFFICIENT_CPU}, 1 {_SPREAD}.",
    )


def test_a_nominated_preemptor_takes_a_node_that_frees_up_elsewhere(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Nodes "a" and "b" of 2 cpu, full with a 2-cpu pod each (priority 0 on a, 10 on b). The
    preemptor (2 cpu) is nominated to a, whose pod is deleted and stays Terminating (no
    kubelet). Then a node "c" of 4 cpu appears: the preemptor, tried again, does not fit on
    its nominated node yet but fits on c, and is bound there at once; the nomination is no
    reservation for the preemptor itself. Nothing more is deleted."""
    a, b = nodes = _nodes(add_node, namespace, "a", "b")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [Occupant("a-0", a, 0, cpu="2"), Occupant("b-10", b, 10, cpu="2")],
    )
    _create_pod(kube_client, _preemptor(scheduler, namespace, "2").obj())
    nominated = kube.wait_for(
        "the preemptor to be nominated",
        lambda: _nominated(kube_client.pod(namespace, PREEMPTOR)),
        timeout=60,
    )
    kube.wait_for(
        "a-0 to be deleted", lambda: _gone_or_terminating(kube_client, namespace, ["a-0"])
    )
    c = add_node(builders.make_node(f"{namespace}-c").capacity(cpu="4"))
    node = _bound(kube_client, namespace, PREEMPTOR)
    time.sleep(1.0)
    diagnosis = f"0/2 nodes are available: 2 {_INSUFFICIENT_CPU}."
    messages = _failed_scheduling_messages(kube_client, namespace, PREEMPTOR)
    seen = {
        "nominated": nominated,
        "bound": node,
        "deleted": _gone_or_terminating(kube_client, namespace, occupants),
        "nominated at the end": _nominated(kube_client.pod(namespace, PREEMPTOR)),
        "first message": messages[:1],
        "later messages": set(messages[1:]) - {_waiting(diagnosis)},
    }
    assert seen == {
        "nominated": a,
        "bound": c,
        "deleted": {"a-0"},
        "nominated at the end": a,
        "first message": (diagnosis,),
        "later messages": set(),
    }


def test_a_second_preemptor_counts_the_first_one_s_nomination(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """One node of 3 cpu with three 1-cpu pods of priority 1, 2 and 3. "first" (priority
    1500, 1 cpu) reprieves p3 and p2 and deletes p1, which stays Terminating (no kubelet),
    and is nominated. Then "second" (priority 1000, 1 cpu): the first, nominated with a
    priority not below its own, counts on the node as if bound (1 cpu), so with p1, p2 and p3
    removed 2 cpu are free; reprieve keeps p3 and deletes p2 (and p1, still there for
    kube-scheduler, again). Both are bound to the node once the victims are gone; p3 stays.

    The two are created one after the other: created together, kube-scheduler's result
    depends on which it pops first and on when it retries the other."""
    (node,) = nodes = _nodes(add_node, namespace, "n", cpu="3")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client, scheduler, namespace, nodes, [Occupant(f"p{p}", node, p) for p in (1, 2, 3)]
    )
    first, second = names = ("first", "second")
    nominated: dict[str, str | None] = {}
    for name, priority in ((first, 1500), (second, PREEMPTOR_PRIORITY)):
        _create_pod(
            kube_client, scheduler.pod(name, namespace).req(cpu="1").priority(priority).obj()
        )
        nominated[name] = _wait_nominated(kube_client, namespace, name)
        with contextlib.suppress(kube.WaitTimeout):
            kube.wait_for(
                f"a victim for {name}",
                lambda: (
                    len(_gone_or_terminating(kube_client, namespace, occupants)) >= len(nominated)
                ),
                timeout=10,
            )
    time.sleep(_QUIET_SECONDS)
    deleted = _gone_or_terminating(kube_client, namespace, occupants)
    _finish_terminating(kube_client, namespace)
    bound = {n: _bound(kube_client, namespace, n) for n in names}
    diagnosis = f"0/1 nodes are available: 1 {_INSUFFICIENT_CPU}."
    messages = {n: _failed_scheduling_messages(kube_client, namespace, n) for n in names}
    seen = {
        "nominated": nominated,
        "deleted": deleted,
        "bound": bound,
        "first messages": {n: m[:1] for n, m in messages.items()},
        "later messages": {n: set(m[1:]) - {_waiting(diagnosis)} for n, m in messages.items()},
    }
    assert seen == {
        "nominated": {first: node, second: node},
        "deleted": {"p1", "p2"},
        "bound": {first: node, second: node},
        "first messages": {first: (diagnosis,), second: (diagnosis,)},
        "later messages": {first: set(), second: set()},
    }


def test_a_higher_preemptor_takes_over_a_lower_one_s_nomination(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """One node of 2 cpu full with a 2-cpu pod of priority 0. "low" (priority 500, 2 cpu)
    preempts it and is nominated; the pod stays Terminating (no kubelet). Then "high"
    (priority 1000, 2 cpu) comes: a lower-priority nominated pod does not count against it,
    but the terminating pod still holds the room, and it is a victim again for kube-scheduler,
    so high is nominated to the node too and low's nomination is cleared. Once the pod is
    gone high is bound; low stays pending with no victim it may take (high outranks it)."""
    (node,) = nodes = _nodes(add_node, namespace, "n")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client, scheduler, namespace, nodes, [Occupant("victim", node, 0, cpu="2")]
    )
    _create_pod(kube_client, scheduler.pod("low", namespace).req(cpu="2").priority(500).obj())
    kube.wait_for(
        "low to be nominated",
        lambda: _nominated(kube_client.pod(namespace, "low")),
        timeout=60,
    )
    kube.wait_for(
        "the victim to be deleted",
        lambda: _gone_or_terminating(kube_client, namespace, occupants),
    )
    _create_pod(kube_client, _preemptor(scheduler, namespace, "2").obj())
    with contextlib.suppress(kube.WaitTimeout):
        kube.wait_for(
            "the preemptor to be nominated",
            lambda: _nominated(kube_client.pod(namespace, PREEMPTOR)),
            timeout=30,
        )
    time.sleep(_QUIET_SECONDS)
    victim = kube_client.pod(namespace, "victim")
    uid = kube_client.pod(namespace, PREEMPTOR)["metadata"]["uid"]
    seen_before = {
        "nominated": {n: _nominated(kube_client.pod(namespace, n)) for n in ("low", PREEMPTOR)},
        "victim Preempted by the preemptor": any(
            uid in e for e in _preempted_events(kube_client, namespace, "victim")
        ),
        "victim condition": _disruption_target(victim) is not None,
    }
    _finish_terminating(kube_client, namespace)
    bound = _bound(kube_client, namespace, PREEMPTOR)
    time.sleep(_QUIET_SECONDS)
    diagnosis = f"0/1 nodes are available: 1 {_INSUFFICIENT_CPU}."
    no_victims = f"{diagnosis} {_NO_CLAIMS}, preemption: 0/1 nodes are available: 1 {_NO_VICTIMS}."
    seen = {
        **seen_before,
        "bound": bound,
        "low bound": kube_client.pod(namespace, "low")["spec"].get("nodeName"),
        "low nominated at the end": _nominated(kube_client.pod(namespace, "low")),
        "preemptor messages": _failed_scheduling_messages(kube_client, namespace, PREEMPTOR),
        "low's newest message": schedulers.failed_scheduling(kube_client, namespace, "low"),
    }
    assert seen == {
        "nominated": {"low": None, PREEMPTOR: node},
        "victim Preempted by the preemptor": True,
        "victim condition": True,
        "bound": node,
        "low bound": None,
        "low nominated at the end": None,
        "preemptor messages": (diagnosis,),
        "low's newest message": no_victims,
    }


def test_a_terminating_pod_counts_with_its_priority_in_the_choice_of_node(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 2 cpu, each full with a 2-cpu pod: priority 50 on "a", 10 on "b". The pod
    on a is deleted by its owner before the preemptor comes and stays Terminating (no
    kubelet). For kube-scheduler it is still a potential victim of priority 50, so a's
    highest victim (50) loses to b's (10): b is chosen and b's pod is deleted too, although
    a would have needed no new deletion. (A scheduler that treats the terminating pod as gone
    sees a as needing no victim and picks a: fewer deletions, but another node than
    kube-scheduler's.)"""
    a, b = nodes = _nodes(add_node, namespace, "a", "b")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [Occupant("a-50", a, 50, cpu="2"), Occupant("b-10", b, 10, cpu="2")],
    )
    kube_client.core.delete_namespaced_pod("a-50", namespace)
    kube.wait_for(
        "a-50 to be Terminating", lambda: _gone_or_terminating(kube_client, namespace, ["a-50"])
    )
    _create_pod(kube_client, _preemptor(scheduler, namespace, "2").obj())
    nominated = _wait_nominated(kube_client, namespace, PREEMPTOR, timeout=60)
    time.sleep(_QUIET_SECONDS)
    deleted = _gone_or_terminating(kube_client, namespace, occupants)
    seen_before = {"nominated": nominated, "deleted": deleted}
    # The nominated node's victims finish first: were a's pod gone first, a retry could find
    # room on a before the nominated node b.
    if "b-10" in deleted:
        kube_client.core.delete_namespaced_pod("b-10", namespace, grace_period_seconds=0)
        _bound(kube_client, namespace, PREEMPTOR, timeout=30)
    _finish_terminating(kube_client, namespace)
    node = _bound(kube_client, namespace, PREEMPTOR)
    diagnosis = f"0/2 nodes are available: 2 {_INSUFFICIENT_CPU}."
    messages = _failed_scheduling_messages(kube_client, namespace, PREEMPTOR)
    seen = {
        **seen_before,
        "bound": node,
        "first message": messages[:1],
        "later messages": set(messages[1:]) - {_waiting(diagnosis)},
    }
    assert seen == {
        "nominated": b,
        "deleted": {"a-50", "b-10"},
        "bound": b,
        "first message": (diagnosis,),
        "later messages": set(),
    }


# --- scenarios: no preemption --------------------------------------------------------------------


def test_preemption_policy_never_deletes_nothing(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """One node of 2 cpu full with a 2-cpu pod of priority 0; the pod of priority 1000 with
    preemptionPolicy Never would fit were it gone, but may not preempt: it stays pending."""
    (node,) = nodes = _nodes(add_node, namespace, "n")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client, scheduler, namespace, nodes, [Occupant("low", node, 0, cpu="2")]
    )
    preemptor = (
        scheduler.pod(PREEMPTOR, namespace)
        .req(cpu="1")
        .priority(PREEMPTOR_PRIORITY, preemption_policy="Never")
    )
    _assert_not_preempted(
        kube_client,
        namespace,
        preemptor,
        occupants,
        nodes,
        f"0/1 nodes are available: 1 {_INSUFFICIENT_CPU}. {_NO_CLAIMS}, "
        "preemption: not eligible due to preemptionPolicy=Never.",
    )


def test_pods_of_equal_or_higher_priority_are_never_victims(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 1 cpu, each full with a 1-cpu pod: priority 1000 (the preemptor's own) on
    "a", 2000 on "b". The preemptor (1000, 1 cpu) has no victim anywhere."""
    a, b = nodes = _nodes(add_node, namespace, "a", "b", cpu="1")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [Occupant("equal", a, PREEMPTOR_PRIORITY), Occupant("higher", b, HIGH)],
    )
    _assert_not_preempted(
        kube_client,
        namespace,
        _preemptor(scheduler, namespace, "1"),
        occupants,
        nodes,
        f"0/2 nodes are available: 2 {_INSUFFICIENT_CPU}. {_NO_CLAIMS}, "
        f"preemption: 0/2 nodes are available: 2 {_NO_VICTIMS}.",
    )


def test_preemption_is_not_helpful_where_no_deletion_cures_a_node(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 2 cpu, each full with a 2-cpu pod of priority 0: "a-taint" tainted
    dedicated=x NoSchedule (its pod tolerates it), "b-hdd" labelled disk=hdd. The preemptor
    asks disk=ssd and does not tolerate the taint: neither node can be cured by deleting
    pods, so none is searched and nothing is deleted."""
    taint = add_node(
        builders.make_node(f"{namespace}-a-taint")
        .capacity(cpu="2")
        .label("disk", "ssd")
        .taint("dedicated", "x")
    )
    hdd = add_node(builders.make_node(f"{namespace}-b-hdd").capacity(cpu="2").label("disk", "hdd"))
    nodes = [taint, hdd]
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            scheduler.pod("taint-0", namespace)
            .req(cpu="2")
            .priority(0)
            .node_selector(HOSTNAME_LABEL, taint)
            .toleration("dedicated", value="x", effect="NoSchedule"),
            Occupant("hdd-0", hdd, 0, cpu="2"),
        ],
        pin={"taint-0": taint},
    )
    _assert_not_preempted(
        kube_client,
        namespace,
        _preemptor(scheduler, namespace, "2").node_selector("disk", "ssd"),
        occupants,
        nodes,
        f"0/2 nodes are available: 1 {_SELECTOR}, 1 {_TAINTS}. {_NO_CLAIMS}, "
        f"preemption: 0/2 nodes are available: 2 {_NOT_HELPFUL}.",
    )


def test_a_pod_too_big_even_without_the_lower_priority_pods_preempts_nothing(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Two nodes of 2 cpu, each with a 1-cpu pod of priority 0 and a 1-cpu pod of priority
    2000. The preemptor (1000) asks 2 cpu: deleting the priority-0 pod leaves 1 cpu, still
    too little, so no node is a candidate and the filters' reason is repeated inside the
    preemption sentence."""
    a, b = nodes = _nodes(add_node, namespace, "a", "b")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            Occupant("a-low", a, 0),
            Occupant("a-high", a, HIGH),
            Occupant("b-low", b, 0),
            Occupant("b-high", b, HIGH),
        ],
    )
    _assert_not_preempted(
        kube_client,
        namespace,
        _preemptor(scheduler, namespace, "2"),
        occupants,
        nodes,
        f"0/2 nodes are available: 2 {_INSUFFICIENT_CPU}. {_NO_CLAIMS}, "
        f"preemption: 0/2 nodes are available: 2 {_INSUFFICIENT_CPU}.",
    )


def test_the_preemptor_s_affinity_to_a_would_be_victim_is_not_preemption_s_business(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """One node of 2 cpu with two 1-cpu pods of priority 0, one labelled app=friend. The
    preemptor (1 cpu) requires pod affinity to app=friend on its node: it fails on cpu only.
    Preemption removes every lower-priority pod before it checks the preemptor fits, and then
    the friend is gone too, so the affinity fails and the node is no candidate (kube-scheduler
    deliberately does not try to keep a victim the preemptor has affinity to). Nothing is
    deleted; the affinity reason appears inside the preemption sentence."""
    (node,) = nodes = _nodes(add_node, namespace, "n")
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [Occupant("friend", node, 0, labels={"app": "friend"}), Occupant("other", node, 0)],
    )
    _assert_not_preempted(
        kube_client,
        namespace,
        _preemptor(scheduler, namespace, "1").affinity(HOSTNAME_LABEL, {"app": "friend"}),
        occupants,
        nodes,
        f"0/1 nodes are available: 1 {_INSUFFICIENT_CPU}. {_NO_CLAIMS}, "
        f"preemption: 0/1 nodes are available: 1 {_AFFINITY}.",
    )


def test_each_node_s_reason_for_no_preemption_is_counted(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: schedulers.Runner,
) -> None:
    """Three nodes of 2 cpu, three reasons: "a-taint" (untolerated taint: not searched),
    "b-equal" full with a 2-cpu pod of the preemptor's own priority (no victim), "c-big" with
    a 1-cpu pod of priority 0 and one of priority 2000 (the preemptor, 2 cpu, still does not
    fit without the first). Nothing is deleted; the preemption sentence counts one node per
    reason."""
    taint = add_node(builders.make_node(f"{namespace}-a-taint").capacity(cpu="2").taint("x", "y"))
    equal, big = _nodes(add_node, namespace, "b-equal", "c-big")
    nodes = [taint, equal, big]
    _in_view(kube_client, scheduler, namespace, nodes)
    occupants = _occupy(
        kube_client,
        scheduler,
        namespace,
        nodes,
        [
            Occupant("equal", equal, PREEMPTOR_PRIORITY, cpu="2"),
            Occupant("big-low", big, 0),
            Occupant("big-high", big, HIGH),
        ],
    )
    _assert_not_preempted(
        kube_client,
        namespace,
        _preemptor(scheduler, namespace, "2"),
        occupants,
        nodes,
        # The histogram is sorted as text, count included: "1 node(s)…" before "2 Insufficient…".
        f"0/3 nodes are available: 1 {_TAINTS}, 2 {_INSUFFICIENT_CPU}. {_NO_CLAIMS}, "
        f"preemption: 0/3 nodes are available: 1 {_INSUFFICIENT_CPU}, 1 {_NO_VICTIMS}, "
        f"1 {_NOT_HELPFUL}.",
    )
