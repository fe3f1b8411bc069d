"""One side-by-side preemption scenario: a ``Scene`` (nodes, occupants placed by the scheduler
under test) and the ``PreemptionOutcome`` of its preemptor, collected by ``Scene.preempt`` or
``Scene.refused`` and compared whole with what the scenario expects.

The side-by-side scenarios (test_preemption_parity*.py) place their occupants through the
scheduler under test (``Scene.stage``), so its cache holds them, and finish a victim's deletion
as a kubelet would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import time
from collections.abc import Iterable, Mapping

import pytest

from plumb_dev.testing import builders, kube
from plumb_dev.testing.builders import HOSTNAME_LABEL
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.preemption_steps import (
    PREEMPTOR,
    PREEMPTOR_PRIORITY,
    QUIET_SECONDS,
    bound,
    deleted,
    disruption_target,
    event_text,
    first_seen,
    nominated,
    preempted_by,
    preempted_condition,
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


@dataclasses.dataclass(frozen=True)
class Mark:
    """What a victim was told: its DisruptionTarget condition as seen while it was Terminating
    (None if it was gone before it could be read) and its Preempted events, the preemptor's
    uid written ``{uid}``."""

    condition: Mapping[str, str] | None
    events: tuple[str, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PreemptionOutcome:
    """What a scheduler did with a preemptor, compared whole with what the scenario expects."""

    deleted: frozenset[str] = frozenset()
    """The occupants it deleted (Terminating or gone)."""
    outranking: frozenset[str] = frozenset()
    """Those of them of the preemptor's priority or more: never any."""
    nominated: str | None = None
    """status.nominatedNodeName as first seen, None if it never had one."""
    node: str | None = None
    """Where the preemptor was bound in the end, None if it stayed pending."""
    message: str | None
    """The preemptor's first FailedScheduling message, None if it had none."""
    later_messages: frozenset[str] = frozenset()
    """Its other FailedScheduling messages but ``Words.waiting``'s: a retry while the victims
    are still Terminating does not preempt again, and whether kube-scheduler retries then (a
    victim's update wakes the pod) depends on timing."""
    marks: Mapping[str, Mark] = dataclasses.field(default_factory=dict)
    """Each deleted occupant's Mark."""


@dataclasses.dataclass
class Scene:
    """A side-by-side scenario's cluster: its nodes, the scheduler under test, the words of the
    session's release, and the occupants that scheduler has placed ({name: priority}), those
    the test deleted itself in ``deleted_by_owner``. The fixture ``scene`` makes one per test
    and scheduler."""

    client: kube.Kube
    scheduler: side_by_side.Runner
    namespace: str
    add: NodeFactory
    words: side_by_side.Words
    nodes: list[str] = dataclasses.field(default_factory=list)
    occupants: dict[str, int] = dataclasses.field(default_factory=dict)
    deleted_by_owner: set[str] = dataclasses.field(default_factory=set)

    def add_node(self, node: builders.NodeBuilder) -> str:
        """Adds the node to the cluster; returns its name."""
        name = self.add(node)
        self.nodes.append(name)
        return name

    def add_nodes(self, *names: str, cpu: str = "2") -> list[str]:
        """Adds nodes called ``<namespace>-<name>`` with this much cpu; returns their names."""
        return [
            self.add_node(builders.make_node(f"{self.namespace}-{n}").capacity(cpu=cpu))
            for n in names
        ]

    def in_view(self) -> None:
        """Waits until the scheduler has seen every node, and every pod change made so far."""
        side_by_side.in_view(self.client, self.scheduler, self.namespace, self.nodes)

    def stage(self, occupants: Iterable[Occupant | builders.PodBuilder]) -> None:
        """Waits until the scheduler has the nodes in view, then has it place the occupants,
        each pinned to its node by a hostname nodeSelector (so its cache holds them before the
        preemptor arrives). A PodBuilder is taken as it is, with its own hostname selector."""
        self.in_view()
        expected: dict[str, str] = {}
        for occupant in occupants:
            if isinstance(occupant, Occupant):
                pod = self.pod(occupant.name, occupant.cpu, occupant.priority)
                pod.node_selector(HOSTNAME_LABEL, occupant.node)
                for key, value in occupant.labels.items():
                    pod.label(key, value)
            else:
                pod = occupant
            body = pod.obj()
            name = self.create(pod)
            self.occupants[name] = int(body["spec"].get("priority") or 0)
            expected[name] = body["spec"]["nodeSelector"][HOSTNAME_LABEL]
        placed = side_by_side.wait_settled(
            self.client, self.namespace, expected, cluster_nodes=len(self.nodes)
        )
        assert placed == expected, "the occupants did not land where the scenario puts them"

    def pod(self, name: str, cpu: str, priority: int) -> builders.PodBuilder:
        """A pod for the scheduler under test."""
        return self.scheduler.pod(name, self.namespace).req(cpu=cpu).priority(priority)

    def preemptor(self, cpu: str) -> builders.PodBuilder:
        """The pod called PREEMPTOR, of PREEMPTOR_PRIORITY, asking ``cpu``."""
        return self.pod(PREEMPTOR, cpu, PREEMPTOR_PRIORITY)

    def create(self, pod: builders.PodBuilder) -> str:
        """Creates the pod; returns its name."""
        body = pod.obj()
        self.client.create_pod(body)
        return str(body["metadata"]["name"])

    def settled(self, pod: builders.PodBuilder) -> dict[str, str | None]:
        """Creates the pod and waits until it is bound or failed with every node in view."""
        name = self.create(pod)
        return side_by_side.wait_settled(
            self.client, self.namespace, [name], cluster_nodes=len(self.nodes)
        )

    def deleted(self) -> set[str]:
        """The occupants Terminating or gone."""
        return deleted(self.client, self.namespace, self.occupants)

    def wait_deleted(self, *names: str) -> None:
        """Waits until the named pods are Terminating or gone."""
        kube.wait_for(
            f"{', '.join(names)} to be deleted",
            lambda: deleted(self.client, self.namespace, names) == set(names),
        )

    def delete(self, name: str) -> None:
        """Deletes the pod as its owner would: gracefully, so it stays Terminating (no kubelet)."""
        self.client.core.delete_namespaced_pod(name, self.namespace)
        self.deleted_by_owner.add(name)
        self.wait_deleted(name)

    def told(self, victims: Iterable[str]) -> set[str]:
        """Those of ``victims`` a preemption writes to (condition, deletion, event): all of
        them up to v1.34; from v1.35 not those already being deleted (executor.go)."""
        if self.words.minor < 35:
            return set(victims)
        return set(victims) - self.deleted_by_owner

    def remove(self, name: str) -> None:
        """Deletes the pod at once (grace period 0)."""
        self.client.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)

    def nominated(self, name: str = PREEMPTOR) -> str | None:
        """The pod's nominatedNodeName now."""
        return nominated(self.client.pod(self.namespace, name))

    def wait_nominated(self, name: str = PREEMPTOR, timeout: float = 60.0) -> str | None:
        """The pod's nominatedNodeName once it has one, None if not within timeout."""
        with contextlib.suppress(kube.WaitTimeout):
            return kube.wait_for(
                f"{name} to be nominated", lambda: self.nominated(name), timeout=timeout
            )
        return None

    def bound(self, name: str = PREEMPTOR, timeout: float = 60.0) -> str | None:
        """Where the pod is bound once it is, None if not within timeout."""
        return bound(self.client, self.namespace, name, timeout)

    def node_of(self, name: str) -> str | None:
        """Where the pod is bound now, None if it is not."""
        node = self.client.pod(self.namespace, name)["spec"].get("nodeName")
        return None if node is None else str(node)

    def messages(self, name: str = PREEMPTOR) -> tuple[str, ...]:
        """The pod's FailedScheduling messages, distinct, in the order they were first posted."""
        uid = self.client.pod(self.namespace, name)["metadata"]["uid"]
        first: dict[str, datetime.datetime] = {}
        for event in self.client.events(self.namespace, name):
            if event.get("reason") != side_by_side.FAILED_SCHEDULING:
                continue
            if (event.get("involvedObject") or {}).get("uid") != uid:
                continue
            message = event_text(event)
            when = first_seen(event)
            if message not in first or when < first[message]:
                first[message] = when
        return tuple(sorted(first, key=lambda message: first[message]))

    def preempted_events(self, name: str) -> tuple[str, ...]:
        """The messages of the pod's Preempted events, sorted."""
        return tuple(
            sorted(
                event_text(e)
                for e in self.client.events(self.namespace, name)
                if e.get("reason") == "Preempted"
            )
        )

    def finish_terminating(self) -> None:
        """The kubelet's last step for the Terminating pods (these nodes have no kubelet)."""
        self.client.force_delete_terminating(self.namespace)

    def preempt(self, preemptor: builders.PodBuilder, *, victims: int) -> PreemptionOutcome:
        """Creates the preemptor and follows a preemption that should delete ``victims`` pods.

        Waits for the nomination, for that many occupants to be Terminating or gone and for
        their Preempted events, then a moment more (so that a scheduler deleting too many is
        caught), reads the victims' marks, finishes their deletion as a kubelet would, and
        waits for the preemptor to be bound. A wait that times out returns what was seen so
        far, for the comparison to tell.
        """
        client, namespace = self.client, self.namespace
        name = self.create(preemptor)
        prefix = f"0/{len(self.nodes)} nodes are available"

        def nominated_or_failed() -> str | None:
            pod = client.pod(namespace, name)
            if nominee := nominated(pod):
                return nominee
            if pod["spec"].get("nodeName"):
                return "(bound without nomination)"
            messages = self.messages(name)
            # v1.37's "preemption: found ..." is posted before the nomination is written.
            if any(
                m.startswith(prefix) and "preemption: " in m and not self.words.says_found(m)
                for m in messages
            ):
                return "(failed without nomination)"
            return None

        with contextlib.suppress(kube.WaitTimeout):
            kube.wait_for(f"{name} to be nominated", nominated_or_failed, timeout=60)
        nominee = nominated(client.pod(namespace, name))
        with contextlib.suppress(kube.WaitTimeout):
            kube.wait_for(
                f"{victims} of {sorted(self.occupants)} to be deleted",
                lambda: len(self.deleted()) >= victims,
                timeout=60 if nominee else QUIET_SECONDS,
            )
        with contextlib.suppress(kube.WaitTimeout):
            kube.wait_for(
                "each victim's Preempted event",
                lambda: all(self.preempted_events(v) for v in self.told(self.deleted())),
                timeout=30,
            )
        time.sleep(1.0)  # only to catch a victim too many: nothing more should be deleted
        pods = {p["metadata"]["name"]: p for p in client.pods(namespace)}
        gone = frozenset(self.deleted())
        conditions = {v: disruption_target(pods[v]) if v in pods else None for v in gone}
        self.finish_terminating()
        if nominee:
            node = bound(client, namespace, name)
        else:
            node = client.pod(namespace, name)["spec"].get("nodeName")
        return self._outcome(name, gone, nominee, node, conditions, retried=True)

    def refused(self, preemptor: builders.PodBuilder) -> PreemptionOutcome:
        """Creates a preemptor that should preempt nothing and, once it has failed, watches a
        quiet period (the only way to show that nothing more happens) before reading it all."""
        name = self.create(preemptor)
        side_by_side.wait_settled(
            self.client, self.namespace, [name], cluster_nodes=len(self.nodes)
        )
        time.sleep(QUIET_SECONDS)
        gone = frozenset(self.deleted())
        pod = self.client.pod(self.namespace, name)
        node = pod["spec"].get("nodeName")
        return self._outcome(name, gone, nominated(pod), node, {}, retried=False)

    def _outcome(
        self,
        name: str,
        gone: frozenset[str],
        nominee: str | None,
        node: str | None,
        conditions: Mapping[str, Mapping[str, str] | None],
        *,
        retried: bool,
    ) -> PreemptionOutcome:
        """The PreemptionOutcome; ``retried``: whether ``Words.waiting``'s message (of the
        first message's histogram) may be among the messages."""
        client, namespace = self.client, self.namespace
        uid = str(client.pod(namespace, name)["metadata"]["uid"])
        messages = self.messages(name)
        first = messages[0] if messages else None
        priority = int(client.pod(namespace, name)["spec"].get("priority") or 0)
        return PreemptionOutcome(
            deleted=gone,
            outranking=frozenset(v for v in gone if self.occupants[v] >= priority),
            nominated=nominee,
            node=node,
            message=first,
            later_messages=frozenset(messages[1:])
            - {self.words.waiting(self.words.histogram(first or ""))}
            if retried
            else frozenset(messages[1:]),
            marks={
                v: Mark(
                    conditions.get(v),
                    tuple(e.replace(uid, "{uid}") for e in self.preempted_events(v)),
                )
                for v in gone
            },
        )

    def preempted(self, *, deleted: set[str], node: str, histogram: str) -> PreemptionOutcome:
        """The PreemptionOutcome of a preemption whose victims are the pods ``deleted``, each
        told so (``told``), and that binds the preemptor on the node it was nominated to, after
        one FailedScheduling message: the filters' ``histogram``, and from v1.37 the sentence
        naming the node and the victims."""
        told = Mark(
            preempted_condition(self.scheduler.scheduler_name),
            (preempted_by("{uid}", node),),
        )
        untold = Mark(None, ())  # deleted by its owner: no DisruptionTarget condition
        marks = {v: told if v in self.told(deleted) else untold for v in deleted}
        return PreemptionOutcome(
            deleted=frozenset(deleted),
            nominated=node,
            node=node,
            message=self.words.found(histogram, node, len(deleted)),
            marks=marks,
        )

    def pending(self, histogram: str, preemption: str) -> PreemptionOutcome:
        """The PreemptionOutcome of a preemptor that deletes nothing, is nominated nowhere and
        waits with one FailedScheduling message: the filters' ``histogram``, then the PostFilter
        part, DefaultPreemption's ending with ``preemption`` (``Words.post_filter``)."""
        return PreemptionOutcome(message=self.words.post_filter(histogram, preemption))


@pytest.fixture(name="scene")
def scene_fixture(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
    words: side_by_side.Words,
) -> Scene:
    """An empty Scene for each scheduler (a test module imports ``scheduler_fixture`` too)."""
    return Scene(kube_client, scheduler, namespace, add_node, words)
