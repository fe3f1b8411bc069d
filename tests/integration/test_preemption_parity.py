"""Preemption side by side, which node and which victims: reprieve, fewest victims, priorities,
PDBs, start times; each scenario runs once under plumb and once under the real kube-scheduler
of the session's release (v1.34.4 to v1.37.2; plumb follows the API server's release) on the
same control plane (the harness of test_plugin_parity.py).

test_preemption_parity_filters.py (which nodes are searched) and
test_preemption_parity_nomination.py (what happens while the victims terminate) run more
scenarios the same way; the harness and what kube-scheduler does are described here once.

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

What kube-scheduler does, as these tests pin down (``side_by_side.Words`` has each release's
words):
- a pod that fits nowhere gets FailedScheduling; its message is the node histogram (sorted as
  text, counts included) followed by the PostFilter plugins' messages joined by ", ":
  DynamicResources' "no new claims to deallocate" (up to v1.36; nothing from v1.37), then
  DefaultPreemption's "preemption: …", which is "not eligible due to preemptionPolicy=Never."
  or a histogram of its own over all nodes: the reason each searched node failed after its
  lower-priority pods were removed ("No preemption victims found for incoming pod" where there
  were none), "Preemption is not helpful for scheduling" for the nodes not searched
  (UnschedulableAndUnresolvable);
- when preemption finds a node, the message is the histogram alone up to v1.36 and, from
  v1.37, the histogram then "preemption: found a potential placement for pod on node <node>,
  preempting <n> victims"; the preemptor gets status.nominatedNodeName (kept after it is
  bound, even bound elsewhere, up to v1.34; from v1.35 the API server clears it on binding),
  and each victim gets the condition DisruptionTarget (True,
  PreemptionByScheduler, "<schedulerName>: preempting to accommodate a higher priority pod"),
  a graceful delete and a Preempted event ("Preempted by pod <preemptor uid> on node <node>");
- a graceful delete of a pod bound to a node leaves it Terminating until its kubelet confirms;
  these nodes have none, so the tests do the kubelet's last step (``Scene.finish_terminating``),
  after which the preemptor binds on the nominated node. Tried again meanwhile (which depends
  on timing), the preemptor gets "… preemption: not eligible due to a terminating pod on the
  nominated node." and deletes nothing more;
- a pod already Terminating is still a pod on its node: it can be chosen as a victim again;
  up to v1.34 it is preempted once more (condition, delete, event), from v1.35 it is left
  alone (no API call for a victim already being deleted).
"""

from __future__ import annotations

import time

import pytest

from plumb_dev.testing import kube
from tests.support import preemption_steps
from tests.support.preemption_scenes import (
    Occupant,
    Scene,
    scene_fixture,  # noqa: F401
)
from tests.support.preemption_steps import (
    ABOVE_PREEMPTOR,
    INSUFFICIENT_CPU,
)
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

# make test-long: test_preemption.py and test_preemption_qos.py are the short version in make test.
pytestmark = [pytest.mark.integration, pytest.mark.long]


def test_reprieve_leaves_all_but_the_least_important_pod(scene: Scene) -> None:
    """One node of 3 cpu, full with three 1-cpu pods of priority 1, 2 and 3; the preemptor
    (priority 1000) asks 1 cpu. With all three removed it fits; reprieve puts them back most
    important first: priority 3 (2 cpu left), priority 2 (1 left), priority 1 (0 left: does
    not fit, a victim). So exactly one pod goes, the priority-1 one."""
    (node,) = scene.add_nodes("n", cpu="3")
    scene.stage([Occupant(f"p{p}", node, p) for p in (1, 2, 3)])
    histogram = f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("1"), victims=1)
    assert outcome == scene.preempted(deleted={"p1"}, node=node, histogram=histogram)


def test_fewer_victims_of_equal_priority_win(scene: Scene) -> None:
    """Two nodes of 2 cpu, each full with priority-0 pods: "a-two" with two pods of 1 cpu,
    "b-one" with one pod of 2 cpu; the preemptor asks 2 cpu, so every pod of the chosen node
    goes. No PDBs; the highest victim priority is 0 on both; the priority sums (each victim's
    priority plus 2^31) are 2^32 on a-two and 2^31 on b-one: b-one, the later name."""
    two, one = scene.add_nodes("a-two", "b-one")
    scene.stage(
        [
            Occupant("two-x", two, 0),
            Occupant("two-y", two, 0),
            Occupant("one", one, 0, cpu="2"),
        ]
    )
    histogram = f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("2"), victims=1)
    assert outcome == scene.preempted(deleted={"one"}, node=one, histogram=histogram)


def test_lower_highest_victim_priority_wins_over_fewer_victims(scene: Scene) -> None:
    """Two nodes of 2 cpu: "a-one" full with one 2-cpu pod of priority 20, "b-two" with two
    1-cpu pods of priority 10; the preemptor asks 2 cpu. The highest victim priority comes
    before the sum and the count: 10 on b-two against 20 on a-one, so b-two loses both its
    pods although a-one would lose only one."""
    one, two = scene.add_nodes("a-one", "b-two")
    scene.stage(
        [
            Occupant("one-20", one, 20, cpu="2"),
            Occupant("two-10-x", two, 10),
            Occupant("two-10-y", two, 10),
        ]
    )
    histogram = f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("2"), victims=2)
    assert outcome == scene.preempted(
        deleted={"two-10-x", "two-10-y"}, node=two, histogram=histogram
    )


def test_smaller_priority_sum_wins_when_the_highest_victims_tie(scene: Scene) -> None:
    """Two nodes of 2 cpu, each with two 1-cpu pods; the preemptor asks 2 cpu, so both pods of
    the chosen node go. "a" holds priorities 20 and 15, "b" 20 and 5: the highest victim
    priority is 20 on both, the sums are 35 + 2 x 2^31 on a and 25 + 2 x 2^31 on b: b."""
    a, b = scene.add_nodes("a", "b")
    scene.stage(
        [
            Occupant("a-20", a, 20),
            Occupant("a-15", a, 15),
            Occupant("b-20", b, 20),
            Occupant("b-5", b, 5),
        ]
    )
    histogram = f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("2"), victims=2)
    assert outcome == scene.preempted(deleted={"b-20", "b-5"}, node=b, histogram=histogram)


def test_a_node_whose_victim_a_pdb_protects_is_avoided(scene: Scene) -> None:
    """Two nodes of 2 cpu, each full with one 2-cpu pod: on "a" a pod of priority 10 that a
    PDB allowing no disruption covers, on "b" one of priority 20. By priority "a" would win
    (10 < 20), but PDB violations come first: 1 on a, 0 on b. So b's pod goes."""
    a, b = scene.add_nodes("a", "b")
    scene.client.create_pdb(preemption_steps.pdb(scene.namespace, "guarded", {"app": "guarded"}))
    scene.stage(
        [
            Occupant("a-guarded-10", a, 10, cpu="2", labels={"app": "guarded"}),
            Occupant("b-20", b, 20, cpu="2", labels={"app": "plain"}),
        ]
    )
    histogram = f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("2"), victims=1)
    assert outcome == scene.preempted(deleted={"b-20"}, node=b, histogram=histogram)


def test_a_pdb_is_violated_when_there_is_no_other_way(scene: Scene) -> None:
    """One node of 3 cpu: a 2-cpu pod of priority 0 under a PDB allowing no disruption and a
    1-cpu pod of priority 2000 (above the preemptor, never a victim). The preemptor asks 2
    cpu: only the guarded pod's room will do, and a PDB does not stop the scheduler (it
    deletes; it does not evict). So the guarded pod goes, the priority-2000 one stays."""
    (node,) = scene.add_nodes("n", cpu="3")
    scene.client.create_pdb(preemption_steps.pdb(scene.namespace, "guarded", {"app": "guarded"}))
    scene.stage(
        [
            Occupant("guarded", node, 0, cpu="2", labels={"app": "guarded"}),
            Occupant("high", node, ABOVE_PREEMPTOR, labels={"app": "guarded"}),
        ]
    )
    histogram = f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("2"), victims=1)
    assert outcome == scene.preempted(deleted={"guarded"}, node=node, histogram=histogram)


def test_reprieve_spares_the_pdb_protected_pod_first(scene: Scene) -> None:
    """One node of 2 cpu with two 1-cpu pods: "guarded" of priority 0 under a PDB allowing no
    disruption, "plain" of priority 5; the preemptor asks 1 cpu, so one pod must go. By
    importance alone reprieve would keep "plain" (5 > 0) and delete "guarded"; but the pods
    whose removal would violate a PDB are reprieved first: "guarded" comes back (1 cpu left,
    the preemptor fits), then "plain" cannot. So "plain" goes."""
    (node,) = scene.add_nodes("n")
    scene.client.create_pdb(preemption_steps.pdb(scene.namespace, "guarded", {"app": "guarded"}))
    scene.stage(
        [
            Occupant("guarded", node, 0, labels={"app": "guarded"}),
            Occupant("plain", node, 5, labels={"app": "plain"}),
        ]
    )
    histogram = f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("1"), victims=1)
    assert outcome == scene.preempted(deleted={"plain"}, node=node, histogram=histogram)


def test_a_pdb_s_allowance_goes_to_the_most_important_victims_first(scene: Scene) -> None:
    """One node of 3 cpu with three Ready 1-cpu pods of priority 1, 2 and 3, all under one PDB
    with minAvailable 2 (disruptionsAllowed 1). The preemptor asks 2 cpu: two pods must go.
    kube-scheduler hands the PDB's one allowed disruption to the potential victims in order
    of importance: p3 takes it (not violating), p2 and p1 would violate. Reprieve tries the
    violating ones first, most important first: p2 comes back (2 cpu free, fits), p1 cannot
    (a violating victim), then p3 cannot either. Victims: p1 and p3 (by importance alone they
    would be p1 and p2)."""
    (node,) = scene.add_nodes("n", cpu="3")
    scene.client.create_pdb(
        preemption_steps.pdb(scene.namespace, "guarded", {"app": "guarded"}, min_available=2)
    )
    scene.stage([Occupant(f"p{p}", node, p, labels={"app": "guarded"}) for p in (1, 2, 3)])
    preemption_steps.make_ready(scene.client, scene.namespace, scene.occupants)
    kube.wait_for(
        "the PDB to allow 1 disruption",
        lambda: preemption_steps.disruptions_allowed(scene.client, scene.namespace, "guarded") == 1,
        timeout=30,
    )
    # The one wait on timing: a scheduler shows no sign of having read the PDB's new status,
    # so it is given a second for its PDB informer.
    time.sleep(1.0)
    histogram = f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("2"), victims=2)
    assert outcome == scene.preempted(deleted={"p1", "p3"}, node=node, histogram=histogram)


def test_start_times_decide_the_victims_and_the_node_when_all_else_ties(scene: Scene) -> None:
    """Two nodes of 2 cpu, each with two running 1-cpu pods of priority 0, started (as their
    names say) in January and March on "a", February and April on "b". The preemptor asks
    1 cpu: one pod per node must go. Among equal priorities the earlier start is the more
    important, reprieved first: a keeps a-jan and loses a-mar, b keeps b-feb and loses b-apr.
    Then every criterion ties (no PDB, highest priority 0, equal sums, one victim each) but
    the last: the node whose most important victims started latest, b (April after March).
    A scheduler reprieving in the other order would compare January with February and still
    pick b, but delete b-feb."""
    a, b = scene.add_nodes("a", "b")
    starts = {
        "a-jan": (a, "2026-01-01T00:00:00Z"),
        "a-mar": (a, "2026-03-01T00:00:00Z"),
        "b-feb": (b, "2026-02-01T00:00:00Z"),
        "b-apr": (b, "2026-04-01T00:00:00Z"),
    }
    scene.stage([Occupant(name, node, 0) for name, (node, _) in starts.items()])
    for name, (_, started) in starts.items():
        preemption_steps.make_ready(scene.client, scene.namespace, [name], started=started)
    kube.wait_for(
        "the start times to be written",
        lambda: all(
            (scene.client.pod(scene.namespace, name).get("status") or {}).get("startTime")
            for name in starts
        ),
    )
    # Pods come in one ordered watch: a probe judged now proves the scheduler has the times.
    scene.in_view()
    histogram = f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("1"), victims=1)
    assert outcome == scene.preempted(deleted={"b-apr"}, node=b, histogram=histogram)
