"""Preemption side by side, while the victims terminate: the nominated preemptor waits and
preempts no more, its room is held, it may bind elsewhere, a second or higher preemptor counts
its nomination, and a pod already terminating is still a victim (preempted again up to v1.34,
left alone from v1.35); under plumb and under the real kube-scheduler of the session's release
(v1.34.4 to v1.37.2), as test_preemption_parity.py describes.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from plumb_dev.testing import builders, kube
from tests.support import preemption_steps, side_by_side
from tests.support.preemption_scenes import (
    Occupant,
    Scene,
    scene_fixture,  # noqa: F401
)
from tests.support.preemption_steps import (
    ABOVE_PREEMPTOR,
    INSUFFICIENT_CPU,
    PREEMPTOR,
    PREEMPTOR_PRIORITY,
    QUIET_SECONDS,
)
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

# The longer side-by-side suite: `make test-long` (test_preemption_parity.py stays in `make test`).
pytestmark = [pytest.mark.integration, pytest.mark.long]


def test_a_nominated_preemptor_waits_for_its_victims_and_preempts_no_more(scene: Scene) -> None:
    """Nodes "a" and "b" of 2 cpu, each full with a 2-cpu pod (priority 0 on a, 10 on b), and
    "c" of 1 cpu full with a 1-cpu pod of priority 2000. The preemptor (2 cpu) is nominated to
    a, whose pod is deleted and, with no kubelet here, stays Terminating. Then c's pod is
    deleted, which wakes the preemptor: it fits nowhere yet (a still holds the terminating
    pod, b is full, c too small), and, a victim of its own still terminating on its nominated
    node, it may not preempt again, so b's pod stays. Once a's pod is gone it binds on a."""
    a, b, c = [
        *scene.add_nodes("a", "b"),
        scene.add_node(builders.make_node(f"{scene.namespace}-c").capacity(cpu="1")),
    ]
    scene.stage(
        [
            Occupant("a-0", a, 0, cpu="2"),
            Occupant("b-10", b, 10, cpu="2"),
            Occupant("c-high", c, ABOVE_PREEMPTOR),
        ]
    )
    scene.create(scene.preemptor("2"))
    assert scene.wait_nominated() == a
    scene.wait_deleted("a-0")
    diagnosis = f"0/3 nodes are available: 3 {INSUFFICIENT_CPU}."
    scene.remove("c-high")
    waiting = scene.words.waiting(diagnosis)
    kube.wait_for(
        f"the preemptor to be tried again: {waiting!r}",
        lambda: waiting in scene.messages(),
        timeout=60,
    )
    time.sleep(QUIET_SECONDS)  # only to show that b's pod stays
    assert scene.deleted() == {"a-0", "c-high"}
    assert scene.nominated() == a
    assert scene.node_of(PREEMPTOR) is None
    scene.finish_terminating()
    assert scene.bound() == a
    assert scene.messages() == (scene.words.found(diagnosis, a, 1), waiting)


def test_the_room_freed_for_a_nominated_preemptor_is_kept_for_it(scene: Scene) -> None:
    """One node of 2 cpu full with a 2-cpu pod of priority 0. The preemptor (2 cpu) is
    nominated there and its victim Terminating when a pod of priority 0 asking 2 cpu
    ("latecomer") arrives. Once the victim is gone the node's room goes to the preemptor, not
    to the latecomer: a scheduler counts a nominated pod of higher priority on its node. The
    latecomer stays pending, with no victim of lower priority than its own anywhere."""
    (node,) = scene.add_nodes("n")
    scene.stage([Occupant("low", node, 0, cpu="2")])
    scene.create(scene.preemptor("2"))
    assert scene.wait_nominated() == node
    scene.wait_deleted("low")
    assert scene.settled(scene.pod("latecomer", "2", 0)) == {"latecomer": None}
    scene.finish_terminating()
    assert scene.bound() == node
    time.sleep(QUIET_SECONDS)  # only to show that the latecomer stays pending
    assert scene.node_of("latecomer") is None
    no_victims = scene.words.without_victims(
        f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}.", total=1, searched=1
    )
    assert set(scene.messages("latecomer")) == {no_victims}


def test_a_pod_already_terminating_is_the_cheapest_victim(scene: Scene) -> None:
    """Two nodes of 2 cpu, each full with a 2-cpu pod: priority 0 on "a", 10 on "b". The pod on
    a is deleted by its owner before the preemptor comes; with no kubelet it stays Terminating,
    still holding its room. The preemptor (2 cpu) fits nowhere; a terminating pod is still a
    pod on its node for kube-scheduler, so a's victim (priority 0) beats b's (10): a is
    chosen, and b's pod is left alone. Up to v1.34 the terminating pod is "preempted"
    (condition, delete again, event); from v1.35 kube-scheduler makes no call for a victim
    already being deleted, so it is told nothing. The preemptor binds on a once the pod is
    gone."""
    a, b = scene.add_nodes("a", "b")
    scene.stage([Occupant("a-0", a, 0, cpu="2"), Occupant("b-10", b, 10, cpu="2")])
    scene.delete("a-0")
    histogram = f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("2"), victims=1)
    assert outcome == scene.preempted(deleted={"a-0"}, node=a, histogram=histogram)


def test_a_nominated_preemptor_takes_a_node_that_frees_up_elsewhere(scene: Scene) -> None:
    """Nodes "a" and "b" of 2 cpu, full with a 2-cpu pod each (priority 0 on a, 10 on b). The
    preemptor (2 cpu) is nominated to a, whose pod is deleted and stays Terminating (no
    kubelet). Then a node "c" of 4 cpu appears: the preemptor, tried again, does not fit on
    its nominated node yet but fits on c, and is bound there at once; the nomination is no
    reservation for the preemptor itself. Nothing more is deleted. Up to v1.34 the pod keeps
    status.nominatedNodeName once bound; from v1.35 the API server clears it on binding
    (ClearingNominatedNodeNameAfterBinding, beta)."""
    a, b = scene.add_nodes("a", "b")
    scene.stage([Occupant("a-0", a, 0, cpu="2"), Occupant("b-10", b, 10, cpu="2")])
    scene.create(scene.preemptor("2"))
    nominated = scene.wait_nominated()
    scene.wait_deleted("a-0")
    c = scene.add_node(builders.make_node(f"{scene.namespace}-c").capacity(cpu="4"))
    node = scene.bound()
    time.sleep(QUIET_SECONDS)  # only to show that nothing more is deleted
    diagnosis = f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}."
    messages = scene.messages()
    seen = {
        "nominated": nominated,
        "bound": node,
        "deleted": scene.deleted(),
        "nominated at the end": scene.nominated(),
        "first message": messages[:1],
        "later messages": set(messages[1:]) - {scene.words.waiting(diagnosis)},
    }
    assert seen == {
        "nominated": a,
        "bound": c,
        "deleted": {"a-0"},
        "nominated at the end": a if scene.words.minor < 35 else None,
        "first message": (scene.words.found(diagnosis, a, 1),),
        "later messages": set(),
    }


def test_a_second_preemptor_counts_the_first_one_s_nomination(scene: Scene) -> None:
    """One node of 3 cpu with three 1-cpu pods of priority 1, 2 and 3. "first" (priority
    1500, 1 cpu) reprieves p3 and p2 and deletes p1, which stays Terminating (no kubelet),
    and is nominated. Then "second" (priority 1000, 1 cpu): the first, nominated with a
    priority not below its own, counts on the node as if bound (1 cpu), so with p1, p2 and p3
    removed 2 cpu are free; reprieve keeps p3, and p2 and p1 (still there for kube-scheduler)
    are its victims. Both are bound to the node once the victims are gone; p3 stays.

    The two are created one after the other: created together, kube-scheduler's result
    depends on which it pops first and on when it retries the other."""
    (node,) = scene.add_nodes("n", cpu="3")
    scene.stage([Occupant(f"p{p}", node, p) for p in (1, 2, 3)])
    first, second = names = ("first", "second")
    nominated: dict[str, str | None] = {}
    for name, priority in ((first, 1500), (second, PREEMPTOR_PRIORITY)):
        scene.create(scene.pod(name, "1", priority))
        nominated[name] = scene.wait_nominated(name, timeout=30)
        with contextlib.suppress(kube.WaitTimeout):
            kube.wait_for(
                f"a victim for {name}",
                lambda: len(scene.deleted()) >= len(nominated),
                timeout=10,
            )
    time.sleep(QUIET_SECONDS)  # only to show that p3 stays
    deleted = scene.deleted()
    scene.finish_terminating()
    bound = {n: scene.bound(n) for n in names}
    diagnosis = f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}."
    messages = {n: scene.messages(n) for n in names}
    seen = {
        "nominated": nominated,
        "deleted": deleted,
        "bound": bound,
        "first messages": {n: m[:1] for n, m in messages.items()},
        "later messages": {
            n: set(m[1:]) - {scene.words.waiting(diagnosis)} for n, m in messages.items()
        },
    }
    found = scene.words.found
    assert seen == {
        "nominated": {first: node, second: node},
        "deleted": {"p1", "p2"},
        "bound": {first: node, second: node},
        "first messages": {
            first: (found(diagnosis, node, 1),),
            second: (found(diagnosis, node, 2),),
        },
        "later messages": {first: set(), second: set()},
    }


def test_a_higher_preemptor_takes_over_a_lower_one_s_nomination(scene: Scene) -> None:
    """One node of 2 cpu full with a 2-cpu pod of priority 0. "low" (priority 500, 2 cpu)
    preempts it and is nominated; the pod stays Terminating (no kubelet). Then "high"
    (priority 1000, 2 cpu) comes: a lower-priority nominated pod does not count against it,
    but the terminating pod still holds the room, and it is a victim again for kube-scheduler,
    so high is nominated to the node too. Up to v1.34 the victim is preempted again (a
    Preempted event naming high) and low's nomination is cleared; from v1.35 a victim already
    being deleted gets no call, and with no other victim nothing more is done: low keeps its
    nomination until it is tried again. Once the pod is gone high is bound; low stays pending
    with no victim it may take (high outranks it), its nomination cleared then."""
    (node,) = scene.add_nodes("n")
    scene.stage([Occupant("victim", node, 0, cpu="2")])
    scene.create(scene.pod("low", "2", 500))
    assert scene.wait_nominated("low") == node
    scene.wait_deleted("victim")
    scene.create(scene.preemptor("2"))
    scene.wait_nominated(timeout=30)
    uid = scene.client.pod(scene.namespace, PREEMPTOR)["metadata"]["uid"]

    def taken_over() -> bool:
        events = scene.preempted_events("victim")
        return scene.nominated("low") is None and any(uid in e for e in events)

    again = scene.words.minor < 35  # the victim preempted again, low's nomination cleared
    if again:
        with contextlib.suppress(kube.WaitTimeout):
            kube.wait_for("low's nomination to go to the preemptor", taken_over, timeout=30)
    else:
        time.sleep(QUIET_SECONDS)  # only to show that low keeps its nomination
    seen_before = {
        "nominated": {n: scene.nominated(n) for n in ("low", PREEMPTOR)},
        "victim Preempted by the preemptor": any(
            uid in e for e in scene.preempted_events("victim")
        ),
        "victim condition": preemption_steps.disruption_target(
            scene.client.pod(scene.namespace, "victim")
        )
        is not None,
    }
    scene.finish_terminating()
    bound = scene.bound()
    diagnosis = f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}."
    no_victims = scene.words.without_victims(diagnosis, total=1, searched=1)
    with contextlib.suppress(kube.WaitTimeout):
        kube.wait_for(
            "low to be tried again",
            lambda: (
                side_by_side.failed_scheduling(scene.client, scene.namespace, "low") == no_victims
            ),
            timeout=30,
        )
    time.sleep(QUIET_SECONDS)  # only to show that low neither binds nor preempts
    seen = {
        **seen_before,
        "bound": bound,
        "low bound": scene.node_of("low"),
        "low nominated at the end": scene.nominated("low"),
        "preemptor messages": scene.messages(),
        "low's newest message": side_by_side.failed_scheduling(
            scene.client, scene.namespace, "low"
        ),
    }
    assert seen == {
        "nominated": {"low": None if again else node, PREEMPTOR: node},
        "victim Preempted by the preemptor": again,
        "victim condition": True,
        "bound": node,
        "low bound": None,
        "low nominated at the end": None,
        "preemptor messages": (scene.words.found(diagnosis, node, 1),),
        "low's newest message": no_victims,
    }


def test_a_terminating_pod_counts_with_its_priority_in_the_choice_of_node(scene: Scene) -> None:
    """Two nodes of 2 cpu, each full with a 2-cpu pod: priority 50 on "a", 10 on "b". The pod
    on a is deleted by its owner before the preemptor comes and stays Terminating (no
    kubelet). For kube-scheduler it is still a potential victim of priority 50, so a's
    highest victim (50) loses to b's (10): b is chosen and b's pod is deleted too, although
    a would have needed no new deletion. (A scheduler that treats the terminating pod as gone
    sees a as needing no victim and picks a: fewer deletions, but another node than
    kube-scheduler's.)"""
    a, b = scene.add_nodes("a", "b")
    scene.stage([Occupant("a-50", a, 50, cpu="2"), Occupant("b-10", b, 10, cpu="2")])
    scene.delete("a-50")
    scene.create(scene.preemptor("2"))
    nominated = scene.wait_nominated()
    with contextlib.suppress(kube.WaitTimeout):
        kube.wait_for("b-10 to be deleted", lambda: "b-10" in scene.deleted(), timeout=30)
    deleted = scene.deleted()
    seen_before = {"nominated": nominated, "deleted": deleted}
    # The nominated node's victims finish first: were a's pod gone first, a retry could find
    # room on a before the nominated node b.
    if "b-10" in deleted:
        scene.remove("b-10")
        scene.bound(timeout=30)
    scene.finish_terminating()
    node = scene.bound()
    diagnosis = f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}."
    messages = scene.messages()
    seen = {
        **seen_before,
        "bound": node,
        "first message": messages[:1],
        "later messages": set(messages[1:]) - {scene.words.waiting(diagnosis)},
    }
    assert seen == {
        "nominated": b,
        "deleted": {"a-50", "b-10"},
        "bound": b,
        "first message": (scene.words.found(diagnosis, b, 1),),
        "later messages": set(),
    }
