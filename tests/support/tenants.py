"""The tenants of a quota scenario on the session's control plane: the scheduler under test,
namespaces with and without an ElasticQuota, nodes, and the waits and reads the quota tests
share (tests/integration/test_quotas_capacity.py, test_quota_slo.py)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from plumb_dev.testing import builders, kube, quotaclient
from tests.support import preemption_steps, side_by_side
from tests.support.live_cluster import NodeFactory

# An extended resource no node has and no quota names: a pod asking for it is refused by the
# sum-of-mins rule in a namespace whose quota the scheduler has seen (its min is 0), and fails
# the filters elsewhere, so the first refusal that names ElasticQuota proves the quota is in view.
_PROBE_RESOURCE = "plumb.test/quota-probe"
_QUOTA_PROBES = 20
# A pod deleted every 2 s wakes a pod a stale quota refused (Tenants.bound_after_change).
_NUDGE_SECONDS = 2.0
_NUDGE_LIMIT = 10
# How long a quota left by another test may take to go (deleted at its end; seconds).
_LEFTOVER_TIMEOUT = 30.0


class Tenants:
    """The scenario's scheduler, its namespaces with and without quotas, and its nodes."""

    def __init__(
        self, client: kube.Kube, runner: side_by_side.Runner, namespace: str, add_node: NodeFactory
    ) -> None:
        self.client = client
        self.runner = runner
        self.namespace = namespace
        self.quotas = quotaclient.ElasticQuotaClient(client)
        self._add_node = add_node
        self.made: list[str] = []

    def nodes(self, *capacities: Mapping[str, str]) -> list[str]:
        """Nodes of these capacities (110 pods each), in the scheduler's view."""
        nodes = [
            self._add_node(builders.make_node(f"{self.namespace}-n{i}").capacity(**capacity))
            for i, capacity in enumerate(capacities)
        ]
        side_by_side.in_view(self.client, self.runner, self.namespace, nodes)
        return nodes

    def tenant(
        self,
        suffix: str,
        *,
        minimum: Mapping[str, str] | None = None,
        maximum: Mapping[str, str] | None = None,
        quota: bool = True,
    ) -> str:
        """A namespace beside the test's, with an ElasticQuota of ``minimum`` and ``maximum``
        the scheduler has seen (or, with ``quota=False``, none)."""
        name = f"{self.namespace}-{suffix}"
        self.client.create_namespace(name)
        self.made.append(name)
        if quota:
            body = quotaclient.elastic_quota(name, minimum=minimum, maximum=maximum)
            self.quotas.create(body)
            self.quota_in_view(name)
        return name

    def quota_in_view(self, namespace: str) -> None:
        """Waits until the scheduler refuses a probe for the quota of ``namespace``; each probe
        is a new pod, deleted once judged (``side_by_side.in_view`` says why)."""
        said = []
        for _ in range(_QUOTA_PROBES):
            name = f"quota-probe-{uuid.uuid4().hex[:6]}"
            probe = self.runner.pod(name, namespace).req(**{_PROBE_RESOURCE: "1"}).grace(0)
            self.client.create_pod(probe.node_selector("plumb.test/probe", "nowhere").obj())
            side_by_side.wait_settled(self.client, namespace, [name])
            message = side_by_side.failed_scheduling(self.client, namespace, name)
            self.client.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
            if message is not None and "ElasticQuota" in message:
                return
            said.append(message)
        raise AssertionError(
            f"{self.runner.name} never judged a pod by the quota of {namespace}: {said}"
        )

    def pod(
        self, name: str, namespace: str, *, priority: int | None = None, **requests: str
    ) -> builders.PodBuilder:
        """A pod for the scheduler under test asking ``requests``, gone as soon as deleted."""
        return self.asking(name, namespace, requests, priority=priority)

    def asking(
        self,
        name: str,
        namespace: str,
        requests: Mapping[str, str],
        *,
        priority: int | None = None,
    ) -> builders.PodBuilder:
        """``pod`` for requests whose names are no Python keywords (``example.com/gpu``)."""
        pod = self.runner.pod(name, namespace).req(**requests).grace(0)
        return pod if priority is None else pod.priority(priority)

    def create(self, *pods: builders.PodBuilder) -> list[str]:
        """Creates the pods at once, in order; their names."""
        names = []
        for pod in pods:
            body = pod.obj()
            self.client.create_pod(body)
            names.append(str(body["metadata"]["name"]))
        return names

    def settle(self, namespace: str, *pods: builders.PodBuilder) -> dict[str, str | None]:
        """Creates the pods at once and waits until each is bound or FailedScheduling."""
        return side_by_side.wait_settled(self.client, namespace, self.create(*pods))

    def said(self, namespace: str, name: str) -> str | None:
        """The pod's newest FailedScheduling text."""
        return side_by_side.failed_scheduling(self.client, namespace, name)

    def node_of(self, namespace: str, name: str) -> str | None:
        node = self.client.pod(namespace, name)["spec"].get("nodeName")
        return None if node is None else str(node)

    def bound(self, namespace: str, name: str, timeout: float = 60.0) -> str | None:
        """Where the pod is bound once it is, None if not within timeout (an earlier
        FailedScheduling does not end the wait)."""
        return preemption_steps.bound(self.client, namespace, name, timeout)

    def bound_after_change(self, namespace: str, name: str, node: str) -> tuple[str | None, int]:
        """Where a pod a quota refused is bound after the quota changed, and how many nudges
        it took: each a pod bound to ``node`` in the test's namespace (no quota) and deleted,
        every ``_NUDGE_SECONDS`` until it is bound (or ``_NUDGE_LIMIT`` of them).

        scheduler-plugins wakes the pods CapacityScheduling refused on an ElasticQuota event
        as its framework's informer sees it, while the plugin reads the quota from an informer
        of its own: a pod tried in between is refused by the old quota again and waits for the
        next event (a pod deleted, another quota change) or the 5-minute flush of
        unschedulable pods. A deleted pod is such an event, so the nudges keep the test from
        timing that race; plumb should need none (the count is printed).
        """
        for nudges in range(_NUDGE_LIMIT + 1):
            if where := self.bound(namespace, name, timeout=_NUDGE_SECONDS):
                return where, nudges
            nudge = f"nudge-{uuid.uuid4().hex[:6]}"
            body = builders.make_pod(nudge, self.namespace).node(node).grace(0).obj()
            self.client.create_pod(body)
            self.client.core.delete_namespaced_pod(nudge, self.namespace, grace_period_seconds=0)
        return None, _NUDGE_LIMIT

    def gone(self, namespace: str, names: list[str]) -> set[str]:
        """Those of the named pods that are deleted (or being deleted)."""
        return preemption_steps.deleted(self.client, namespace, names)

    def preempted(self, namespace: str, name: str) -> list[str]:
        """The texts of the Preempted events of the pod (they outlive it)."""
        return sorted(
            preemption_steps.event_text(e)
            for e in self.client.events(namespace, name)
            if e.get("reason") == "Preempted"
        )

    def transcript(self) -> str:
        """Every event of the tenants' namespaces, oldest first: what the scheduler said."""
        lines = []
        for namespace in self.made:
            events = sorted(self.client.events(namespace), key=preemption_steps.first_seen)
            for event in events:
                regarding = (event.get("involvedObject") or {}).get("name")
                text = preemption_steps.event_text(event)
                count = event.get("count") or (event.get("series") or {}).get("count") or 1
                lines.append(f"{namespace} {regarding} {event.get('reason')} x{count}: {text}")
        return "\n".join(lines)

    def clean(self) -> None:
        """Prints the transcript, then deletes the tenants' quotas and pods (the namespaces
        stay, as the test's does)."""
        print(f"--- events of {self.runner.name}'s tenants ---\n{self.transcript()}")
        for name in self.made:
            self.quotas.delete(name)
            self.client.delete_workloads(name)


def no_quota_left(quotas: quotaclient.ElasticQuotaClient) -> None:
    kube.wait_for(
        "no ElasticQuota left by another test",
        lambda: not quotas.everywhere(),
        timeout=_LEFTOVER_TIMEOUT,
    )
