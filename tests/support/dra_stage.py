"""The DRA stage of one side-by-side test: its two nodes, a driver of its own, DeviceClasses and
ResourceSlices published as API objects (no driver runs, as the scale nodes have no kubelet),
deleted afterwards, and its claims and claim pods: made, scheduled and read back.

A test module takes the ``dra`` fixture by importing it::

    from tests.support.dra_stage import Stage, dra_fixture  # noqa: F401

Each test gets a driver name of its own, so devices that earlier tests' claims still hold
(their allocations outlive the pods, as on a cluster whose driver is gone) never collide with
its devices.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pytest

from plumb_dev.testing import builders, draclient, kube
from plumb_dev.testing import drabuilders as dra
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory

JSON = draclient.JSON
STILL = "still not schedulable"
DEALLOCATED = "deallocation of ResourceClaim completed"
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
BOTH_CANNOT_ALLOCATE = f"0/2 nodes are available: 2 {CANNOT_ALLOCATE}."
"""The filters' histogram of a claim pod neither of two nodes has the devices for."""
_PROBE = "dra-probe-"


def post_filter(minor: int, histogram: str, preemption: str, dynamic: str = STILL) -> str:
    """The FailedScheduling message of a pod with claims that no node fits: the filters'
    histogram, then the PostFilter plugins' words joined by ", ": DynamicResources' ``dynamic``
    (by default "still not schedulable": no claim of the pod could be deallocated; "no new
    claims to deallocate" when PreFilter refused the pod before it kept its claims; v1.37
    says nothing in either case), DefaultPreemption's "preemption: ``preemption``"."""
    silent = minor >= 37 and dynamic in (STILL, side_by_side.NO_CLAIMS)
    words = [] if silent else [dynamic]
    words.append(f"preemption: {preemption}")
    return f"{histogram} {', '.join(words)}"


def without_victims(
    minor: int, histogram: str, total: int, searched: int, dynamic: str = STILL
) -> str:
    """``post_filter`` of a pod preemption searched ``searched`` nodes for (those a filter
    rejected for reasons evicting pods could cure) and found no pod of lower priority on."""
    reasons = sorted(
        f"{count} {reason}"
        for reason, count in (
            (side_by_side.NO_VICTIMS, searched),
            (side_by_side.NOT_HELPFUL, total - searched),
        )
        if count
    )
    preemption = f"0/{total} nodes are available: {', '.join(reasons)}."
    return post_filter(minor, histogram, preemption, dynamic)


def not_helpful(minor: int, histogram: str, total: int, dynamic: str = STILL) -> str:
    """``post_filter`` of a pod every node rejected for reasons preemption cannot cure (the
    DynamicResources filter's verdicts are all unresolvable)."""
    preemption = f"0/{total} nodes are available: {total} {side_by_side.NOT_HELPFUL}."
    return post_filter(minor, histogram, preemption, dynamic)


def model(name: str) -> dra.DeviceBuilder:
    """Device "gpu-0" whose "model" attribute is ``name`` (the one GPU of a node)."""
    return dra.device("gpu-0").attr("model", name)


class Stage:
    """The test's nodes, driver, classes and slices (cluster objects: the slices and classes
    deleted by close, the nodes by the ``add_node`` fixture), and its claims and claim pods:
    made, scheduled and read back."""

    def __init__(self, client: kube.Kube, namespace: str, add_node: NodeFactory) -> None:
        self.client = client
        self.namespace = namespace
        self.add_node = add_node
        self.api = draclient.Dra(client)
        # The namespace ends in six random hex digits (conftest's namespace fixture).
        self.tag = namespace.rsplit("-", 1)[-1]
        self.driver = f"gpu-{self.tag}.example.com"

    def roomy_and_small(self, plugin: Mapping[str, str] | None = None) -> tuple[str, str]:
        """Two nodes alike but for cpu: "roomy" (8) and "small" (4), 16Gi each. For a pod of
        1 cpu and 1Gi roomy scores 12 more (NodeResourcesFit 90 against 84, BalancedAllocation
        96 against 90; from v1.36 9 more, BalancedAllocation 73 against 70): a scheduler that
        ignores claims sends such a pod to roomy. ``plugin``: extended resources roomy has
        through a device plugin (in its capacity and allocatable)."""
        roomy = self.add_node(
            builders.make_node(f"{self.namespace}-roomy").capacity(
                cpu="8", memory="16Gi", **(plugin or {})
            )
        )
        small = self.add_node(
            builders.make_node(f"{self.namespace}-small").capacity(cpu="4", memory="16Gi")
        )
        return roomy, small

    def two_nodes(
        self,
        scheduler: side_by_side.Runner,
        *,
        roomy: Sequence[dra.DeviceBuilder] = (),
        small: Sequence[dra.DeviceBuilder] = (),
    ) -> tuple[str, str]:
        """``roomy_and_small``, each node's ``roomy`` or ``small`` devices published (a node
        given none publishes no slice), then everything made so far in the scheduler's view
        (``in_view``). Returns the names of roomy and small."""
        nodes = self.roomy_and_small()
        for node, devices in zip(nodes, (roomy, small), strict=True):
            if devices:
                self.publish(node, *devices)
        self.in_view(scheduler, nodes)
        return nodes

    def class_name(self, name: str) -> str:
        return f"{name}-{self.tag}"

    def device_class(self, name: str = "gpu", *selectors: str) -> str:
        """A class of the test's driver's devices (and ``selectors``); returns its name."""
        body = dra.make_class(self.class_name(name)).driver(self.driver)
        for expression in selectors:
            body.selector(expression)
        return str(self.api.create_class(body.obj())["metadata"]["name"])

    def publish(self, node: str, *devices: dra.DeviceBuilder) -> JSON:
        """The node's devices as the driver's kubelet plugin publishes them: one slice, a pool
        named after the node. Returns the slice as the API server kept it."""
        body = dra.make_slice(self._slice_name(node), self.driver).pool(node).node(node)
        return self.api.create_slice(body.devices(*devices).obj())

    def slice(self, node: str) -> JSON:
        """The slice ``publish`` made for the node, as the API server keeps it."""
        return self.api.slice(self._slice_name(node))

    def _slice_name(self, node: str) -> str:
        """The name of the slice ``publish`` makes for the node."""
        return f"{node}-{self.tag}"

    def attribute(self, name: str) -> str:
        """The fully qualified name of one of the driver's attributes (for constraints)."""
        return f"{self.driver}/{name}"

    def cel(self, name: str) -> str:
        """A selector's view of one of the driver's attributes: device.attributes[...].name."""
        return f'device.attributes["{self.driver}"].{name}'

    def capacity_cel(self, name: str) -> str:
        return f'device.capacity["{self.driver}"].{name}'

    def model_is(self, name: str) -> str:
        """A selector of the devices whose "model" attribute is ``name``."""
        return f'{self.cel("model")} == "{name}"'

    def make_claim(self, name: str) -> dra.ClaimBuilder:
        """A builder of claim ``name`` in the test's namespace."""
        return dra.make_claim(name, self.namespace)

    def new_claim(
        self,
        name: str,
        device_class: str,
        *selectors: str,
        count: int | None = None,
        all_devices: bool = False,
    ) -> str:
        """Creates claim ``name`` of one request, "gpu", for devices of the class that
        ``selectors`` select (``count``, ``all_devices``: as ``ClaimBuilder.request`` takes
        them); returns its name."""
        claim = self.make_claim(name).request(
            "gpu", device_class, selectors=selectors, count=count, all_devices=all_devices
        )
        return str(self.api.create_claim(claim.obj())["metadata"]["name"])

    def make_pod(
        self,
        scheduler: side_by_side.Runner,
        name: str,
        cpu: str = "1",
        extended: Mapping[str, int] | None = None,
    ) -> builders.PodBuilder:
        """A pod for the scheduler in the test's namespace that asks for ``cpu``, 1Gi and
        the ``extended`` resources (``{"example.com/gpu": 1}``)."""
        resources: dict[str, str | int] = {"cpu": cpu, "memory": "1Gi", **(extended or {})}
        return scheduler.pod(name, self.namespace).req(**resources)

    def claim_pod(
        self, scheduler: side_by_side.Runner, name: str, claim: str, cpu: str = "1"
    ) -> builders.PodBuilder:
        """``make_pod`` that takes ``claim`` as its claim "gpu"."""
        return self.make_pod(scheduler, name, cpu).resource_claim("gpu", claim=claim)

    def create(self, pod: builders.PodBuilder) -> str:
        """Creates the pod, without waiting for the scheduler; returns its name."""
        return str(self.client.create_pod(pod.obj())["metadata"]["name"])

    def schedule(self, pod: builders.PodBuilder, cluster_nodes: int | None = 2) -> str | None:
        """Creates the pod and waits until it is bound or failed, a failure counting once it
        was decided with ``cluster_nodes`` nodes in view (``side_by_side.wait_settled``; None:
        any failure): its node, None if it failed."""
        return self.settled(self.create(pod), cluster_nodes)

    def run(
        self, scheduler: side_by_side.Runner, name: str, claim: str, cpu: str = "1"
    ) -> str | None:
        """``schedule`` of ``claim_pod``: the pod's node, None if it failed."""
        return self.schedule(self.claim_pod(scheduler, name, claim, cpu))

    def settled(self, pod: str, cluster_nodes: int | None = 2) -> str | None:
        """Waits until the pod is bound or failed, as ``schedule`` does: its node, None if it
        failed."""
        placed = side_by_side.wait_settled(
            self.client, self.namespace, [pod], cluster_nodes=cluster_nodes
        )
        return placed[pod]

    def bound(self, pod: str) -> str:
        """Waits until the pod is bound (a failure is waited through): its node."""
        node: str = kube.wait_for(
            f"{pod} to be bound", lambda: self.pod(pod)["spec"].get("nodeName")
        )
        return node

    def pod(self, name: str) -> JSON:
        """The pod as the API server has it."""
        return self.client.pod(self.namespace, name)

    def failed(self, pod: str) -> str | None:
        """The message of the pod's newest FailedScheduling event, None if there is none."""
        return side_by_side.failed_scheduling(self.client, self.namespace, pod)

    def claim(self, name: str) -> JSON:
        return self.api.claim(self.namespace, name)

    def devices(self, name: str) -> list[tuple[str, str, str]]:
        """(driver, pool, device) of each device the claim's allocation holds."""
        return [(a.driver, a.pool, a.device) for a in draclient.allocated(self.claim(name))]

    def requests(self, name: str) -> list[tuple[str, str]]:
        """(request, device) of each result of the claim's allocation."""
        return [(a.request, a.device) for a in draclient.allocated(self.claim(name))]

    def in_view(self, scheduler: side_by_side.Runner, nodes: Sequence[str]) -> None:
        """Waits until the scheduler has every node, class, slice and claim made so far in
        view. Nodes: ``side_by_side.in_view``. The rest are streams of their own, each ordered:
        a probe pod, pinned to the last node, claims a device of a probe driver published
        after everything else, so once it is bound the scheduler has seen every class, slice
        and claim made before the probe's. The probe is then deleted at once; the pod stream
        being ordered too, the scheduler forgets it before it sees any pod created later. Its
        claim stays allocated, on the probe driver's device, which no test claim asks for."""
        side_by_side.in_view(self.client, scheduler, self.namespace, list(nodes))
        taken = sum(
            c["metadata"]["name"].startswith(_PROBE) for c in self.api.claims(self.namespace)
        )
        name = f"{_PROBE}{taken}"
        driver = f"probe-{self.tag}.example.com"
        if not taken:
            self.api.create_class(dra.make_class(self.class_name("probe")).driver(driver).obj())
        node = nodes[-1]
        body = dra.make_slice(f"{name}-{self.tag}", driver).node(node)
        self.api.create_slice(body.devices(dra.device("probe")).obj())
        claim = dra.make_claim(name, self.namespace).request("probe", self.class_name("probe"))
        self.api.create_claim(claim.obj())
        pod = (
            scheduler.pod(name, self.namespace)
            .node_selector(builders.HOSTNAME_LABEL, node)
            .resource_claim("probe", claim=name)
            .grace(0)
        )
        self.client.create_pod(pod.obj())
        kube.wait_for(
            f"{scheduler.name} to bind the DRA probe {name} to {node}",
            lambda: self.client.pod(self.namespace, name)["spec"].get("nodeName"),
            timeout=60,
        )
        self.client.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)

    def close(self) -> None:
        self.api.close()


@pytest.fixture(name="dra")
def dra_fixture(kube_client: kube.Kube, namespace: str, add_node: NodeFactory) -> Iterator[Stage]:
    stage = Stage(kube_client, namespace, add_node)
    yield stage
    stage.close()
