"""What changed between kube-scheduler v1.34 and v1.37 for pods with volumes, under plumb and
under the real kube-scheduler on the same control plane, with kube-controller-manager's PV
controller:

- VolumeBinding's storage-capacity score (StorageCapacityScoring, on by default in v1.37): a
  volume to provision goes where its CSI driver reports the most free capacity, a claim matched
  to a local PV where the PV chosen leaves the most room; before v1.37 neither counts.
- The capacity check itself (every release): a node where no CSIStorageCapacity holds the
  volume "did not have enough free storage".
- NodeVolumeLimits and CSIDriver.preventPodSchedulingIfMissing (VolumeLimitScaling, on in
  v1.37): a node without the driver is refused with kube-scheduler's words.
- nominatedNodeName (NominatedNodeNameForExpectation, on from v1.35): written before a PreBind
  with work to do, cleared by the API server at binding, and by the scheduler when the
  PreBind fails from v1.36 (left in v1.35), as a watch of the pod sees it.
- VolumeBindingArgs.shape: what each release's kube-scheduler and plumb's reader make of it.

No CSI driver runs here: the test plays the external provisioner, creating the PV for a claim
once a scheduler has written its selected node (and, to make a PreBind fail, dropping that
annotation as a provisioner that gives up does). The nodes are plain API objects; the
arithmetic that makes every placement free of ties is in each test, and each expectation is
keyed by the control plane's minor release.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from plumb.backend.cache import volumes
from plumb.framework import emulation, schedconfig
from plumb.framework.plugins import nodeaffinity, volumebinding
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, kubescheduler
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.pod_watches import NominationWatch
from tests.support.side_by_side import scheduler_fixture  # noqa: F401
from tests.support.storage import Storage, storage_fixture  # noqa: F401
from tests.support.volume_objects import (
    HOSTNAME,
    JSON,
    csidriver_body,
    csinode_body,
    pv_body,
    pvc_body,
    storage_capacity_body,
    storage_class_body,
)

pytestmark = pytest.mark.integration

GI = 2**30
# Every pod here asks for 1 cpu and 1Gi of the nodes' 16Gi. "roomy" (8 cpu) beats "small"
# (4 cpu) on resources: NodeResourcesFit 90 against 84 ((87 + 93) / 2, (75 + 93) / 2) and
# NodeResourcesBalancedAllocation 96 against 90 (v1.34, v1.35), 73 against 70 (v1.36+: the
# change the pod brings); every other score is alike on both. So without a volume score
# roomy wins by 12 (9 from v1.36).
CPU, MEMORY = "1", "1Gi"


def _nodes(
    client: kube.Kube, namespace: str, add_node: NodeFactory, scheduler: side_by_side.Runner
) -> tuple[str, str]:
    roomy = add_node(builders.make_node(f"{namespace}-roomy").capacity(cpu="8", memory="16Gi"))
    small = add_node(builders.make_node(f"{namespace}-small").capacity(cpu="4", memory="16Gi"))
    side_by_side.in_view(client, scheduler, namespace, [roomy, small])
    return roomy, small


class Csi:
    """CSIDrivers, CSINodes and CSIStorageCapacities for one test (cluster objects deleted
    afterwards), and the external provisioner's part: a PV for a claim on its selected node."""

    def __init__(self, client: kube.Kube, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.storage = k8s.StorageV1Api(client.api)
        self.driver = f"{namespace}.csi.example"
        self._drivers: list[str] = []
        self._csinodes: list[str] = []

    def create_driver(self, *, storage_capacity: bool = False, prevent: bool | None = None) -> JSON:
        """The test's CSIDriver; returns it as the API server kept it."""
        body = csidriver_body(
            self.driver, storage_capacity=storage_capacity, prevent_if_missing=prevent
        )
        self.storage.create_csi_driver(body)
        self._drivers.append(self.driver)
        return self.client._raw(self.storage.read_csi_driver(self.driver, _preload_content=False))

    def csinode(self, node: str, *drivers: str) -> None:
        # Read back raw: the client's model refuses a CSINode without drivers (null).
        self.storage.create_csi_node(csinode_body(node, *drivers), _preload_content=False)
        self._csinodes.append(node)

    def capacity(self, name: str, storage_class: str, node: str, capacity: str) -> None:
        body = storage_capacity_body(
            name, storage_class, capacity=capacity, node=node, namespace=self.namespace
        )
        self.storage.create_namespaced_csi_storage_capacity(self.namespace, body)

    def provision(self, storage: Storage, claim: str, node: str, size: str) -> str:
        """What the driver's external provisioner does for a claim whose selected node is
        ``node``: a PV of the claim's class on that node, bound to it by claimRef."""
        body = storage.claim_body(claim)
        pv = pv_body(
            f"pvc-{body['metadata']['uid']}",
            size=size,
            storage_class=body["spec"]["storageClassName"],
            csi=(self.driver, f"handle-{claim}"),
        )
        pv["metadata"]["annotations"] = {"pv.kubernetes.io/provisioned-by": self.driver}
        pv["spec"]["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": self.namespace,
            "name": claim,
            "uid": body["metadata"]["uid"],
        }
        pv["spec"]["persistentVolumeReclaimPolicy"] = "Delete"
        pv["spec"]["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                ]
            }
        }
        return storage.pv(pv)

    def close(self) -> None:
        for name in self._drivers:
            with contextlib.suppress(k8s.ApiException):
                self.storage.delete_csi_driver(name)
        for name in self._csinodes:
            with contextlib.suppress(k8s.ApiException):
                self.storage.delete_csi_node(name, _preload_content=False)


@pytest.fixture
def csi(kube_client: kube.Kube, namespace: str) -> Iterator[Csi]:
    made = Csi(kube_client, namespace)
    yield made
    made.close()


def _selected_node(storage: Storage, claim: str, timeout: float = 60.0) -> str:
    """The node a scheduler's PreBind asked the claim to be provisioned on."""

    def selected() -> str | None:
        annotations = storage.claim_body(claim)["metadata"].get("annotations") or {}
        node = annotations.get(volumes.SELECTED_NODE)
        return None if node is None else str(node)

    return kube.wait_for(f"claim {claim} to get a selected node", selected, timeout=timeout)


def _nominated(client: kube.Kube, namespace: str, pod: str) -> str | None:
    node = client.pod(namespace, pod)["status"].get("nominatedNodeName")
    return None if node is None else str(node)


def _bound(client: kube.Kube, namespace: str, pod: str, timeout: float = 60.0) -> str:
    def node() -> str | None:
        name = client.pod(namespace, pod)["spec"].get("nodeName")
        return None if name is None else str(name)

    return kube.wait_for(f"pod {pod} to be bound", node, timeout=timeout)


def _histogram(total: int, *reasons: str) -> str:
    return f"0/{total} nodes are available: {', '.join(sorted(f'1 {r}' for r in reasons))}."


def _claim(name: str, namespace: str, storage_class: str, size: str) -> JSON:
    # An annotation of our own keeps the claim's annotations non-empty once the selected node
    # is dropped (kube-scheduler words an empty map "selectedNode annotation reset").
    return pvc_body(
        name,
        namespace,
        size=size,
        storage_class=storage_class,
        annotations={"plumb.test/kept": "yes"},
    )


# --- storage-capacity scoring: dynamic provisioning ---------------------------------------------


def test_a_volume_to_provision_goes_where_its_driver_reports_more_free_capacity(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    storage: Storage,
    csi: Csi,
    scheduler: side_by_side.Runner,
) -> None:
    minor = kube_minor
    # The storage first: the scheduler's watches of it have the nodes' probes to catch up.
    csi.create_driver(storage_capacity=True)
    fast = storage.storage_class(storage_class_body(f"fast-{namespace}", provisioner=csi.driver))
    roomy = f"{namespace}-roomy"
    small = f"{namespace}-small"
    # 5Gi of roomy's 10Gi: utilization 50, score 50; of small's 100Gi: 5, score 95.
    csi.capacity("roomy", fast, roomy, "10Gi")
    csi.capacity("small", fast, small, "100Gi")
    storage.claim(_claim("data", namespace, fast, "5Gi"))
    assert _nodes(kube_client, namespace, add_node, scheduler) == (roomy, small)
    kube_client.create_pod(
        scheduler.pod("web", namespace).req(cpu=CPU, memory=MEMORY).claims("data").obj()
    )
    # v1.37: roomy 90 + 73 + 50 = 213, small 84 + 70 + 95 = 249. Before: no volume score.
    expected = small if minor >= 37 else roomy
    assert _selected_node(storage, "data") == expected
    # The PreBind now waits for the provisioner. From v1.35 the pod says where it is going
    # (written before the PreBind's first write); not in v1.34.
    assert _nominated(kube_client, namespace, "web") == (expected if minor >= 35 else None)
    csi.provision(storage, "data", expected, "5Gi")
    assert _bound(kube_client, namespace, "web") == expected
    # The API server clears the nomination at binding from v1.35
    # (ClearingNominatedNodeNameAfterBinding).
    assert _nominated(kube_client, namespace, "web") is None


def test_a_node_without_capacity_for_the_volume_has_not_enough_free_storage(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    storage: Storage,
    csi: Csi,
    scheduler: side_by_side.Runner,
) -> None:
    csi.create_driver(storage_capacity=True)
    fast = storage.storage_class(storage_class_body(f"fast-{namespace}", provisioner=csi.driver))
    roomy, small = f"{namespace}-roomy", f"{namespace}-small"
    csi.capacity("roomy", fast, roomy, "10Gi")
    csi.capacity("small", fast, small, "100Gi")
    storage.claim(_claim("big", namespace, fast, "50Gi"))
    _nodes(kube_client, namespace, add_node, scheduler)
    # Pinned to roomy, which has room for 10Gi only: VolumeBinding rejects roomy (no capacity
    # holds 50Gi there), NodeAffinity small; both unresolvable, preemption looks nowhere.
    pinned = (
        scheduler.pod("pinned", namespace)
        .req(cpu=CPU, memory=MEMORY)
        .claims("big")
        .node_selector(HOSTNAME, roomy)
    )
    kube_client.create_pod(pinned.obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["pinned"], cluster_nodes=2)
    assert placed == {"pinned": None}
    histogram = _histogram(2, volumebinding.NOT_ENOUGH_SPACE, nodeaffinity.MISMATCH)
    assert side_by_side.failed_scheduling(
        kube_client, namespace, "pinned"
    ) == side_by_side.without_victims(minor=kube_minor, histogram=histogram, total=2, searched=0)


# --- storage-capacity scoring: static PV matching -----------------------------------------------


def test_a_claim_matched_to_local_pvs_goes_where_the_pv_leaves_more_room(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    storage: Storage,
    scheduler: side_by_side.Runner,
) -> None:
    local = storage.storage_class(storage_class_body(f"local-{namespace}"))
    roomy, small = f"{namespace}-roomy", f"{namespace}-small"
    # The claim asks 5Gi; the PV chosen on roomy holds 10Gi (score 50), on small 20Gi (75).
    pvs = {
        roomy: storage.pv(pv_body(f"{roomy}-pv", node=roomy, storage_class=local, size="10Gi")),
        small: storage.pv(pv_body(f"{small}-pv", node=small, storage_class=local, size="20Gi")),
    }
    storage.claim(pvc_body("data", namespace, size="5Gi", storage_class=local))
    _nodes(kube_client, namespace, add_node, scheduler)
    kube_client.create_pod(
        scheduler.pod("web", namespace).req(cpu=CPU, memory=MEMORY).claims("data").obj()
    )
    # v1.37: roomy 90 + 73 + 50 = 213, small 84 + 70 + 75 = 229.
    expected = small if kube_minor >= 37 else roomy
    assert _bound(kube_client, namespace, "web") == expected
    claim = storage.wait_bound("data")
    assert claim["spec"]["volumeName"] == pvs[expected]


# --- NodeVolumeLimits: a CSI driver that asks to be installed -----------------------------------


def test_a_node_without_a_csi_driver_that_opts_in_is_refused(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    storage: Storage,
    csi: Csi,
    scheduler: side_by_side.Runner,
) -> None:
    minor = kube_minor
    driver = csi.create_driver(prevent=True)
    # The API server keeps the field where its VolumeLimitScaling gate is on (v1.37; v1.36 has
    # the field, alpha and off; v1.34 and v1.35 have none).
    assert ("preventPodSchedulingIfMissing" in driver["spec"]) == (minor >= 37)
    roomy, small = f"{namespace}-roomy", f"{namespace}-small"
    csi.csinode(small, csi.driver)
    csi.csinode(roomy)  # registered, without the driver
    pv = storage.pv(pv_body(f"{namespace}-pv", storage_class="", csi=(csi.driver, "h1")))
    storage.claim(pvc_body("data", namespace, storage_class="", volume=pv))
    storage.wait_bound("data")
    _nodes(kube_client, namespace, add_node, scheduler)
    kube_client.create_pod(
        scheduler.pod("web", namespace).req(cpu=CPU, memory=MEMORY).claims("data").obj()
    )
    placed = side_by_side.wait_settled(kube_client, namespace, ["web"], cluster_nodes=2)
    # roomy wins on resources unless the driver check refuses it (v1.37).
    assert placed == {"web": small if minor >= 37 else roomy}
    pinned = (
        scheduler.pod("pinned", namespace)
        .req(cpu=CPU, memory=MEMORY)
        .claims("data")
        .node_selector(HOSTNAME, roomy)
    )
    kube_client.create_pod(pinned.obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["pinned"], cluster_nodes=2)
    if minor < 37:
        assert placed == {"pinned": roomy}
        return
    assert placed == {"pinned": None}
    # The missing driver is Unschedulable, not unresolvable: preemption searches roomy (and
    # finds no pod of lower priority there); NodeAffinity's verdict on small is unresolvable.
    missing = f"{csi.driver} CSI driver is not installed on the node"
    histogram = _histogram(2, missing, nodeaffinity.MISMATCH)
    assert side_by_side.failed_scheduling(
        kube_client, namespace, "pinned"
    ) == side_by_side.without_victims(minor=minor, histogram=histogram, total=2, searched=1)


# --- nominatedNodeName through a PreBind that fails ---------------------------------------------


def test_the_nomination_through_a_failed_prebind_and_the_binding(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    storage: Storage,
    csi: Csi,
    scheduler: side_by_side.Runner,
) -> None:
    minor = kube_minor
    csi.create_driver()
    fast = storage.storage_class(storage_class_body(f"fast-{namespace}", provisioner=csi.driver))
    storage.claim(_claim("data", namespace, fast, "5Gi"))
    roomy, _small = _nodes(kube_client, namespace, add_node, scheduler)
    with NominationWatch(kube_client, namespace, "web") as watched:
        kube_client.create_pod(
            scheduler.pod("web", namespace).req(cpu=CPU, memory=MEMORY).claims("data").obj()
        )
        assert _selected_node(storage, "data") == roomy
        # The provisioner gives up: it drops the selected node, and the PreBind fails.
        kube_client.core.patch_namespaced_persistent_volume_claim(
            "data", namespace, {"metadata": {"annotations": {volumes.SELECTED_NODE: None}}}
        )
        failed = (
            'running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for '
            'PVC "data"'
        )

        def reported() -> bool:
            return side_by_side.failed_scheduling(kube_client, namespace, "web") == failed

        kube.wait_for("the PreBind failure's FailedScheduling event", reported)
        # Retried after its backoff, it goes to roomy again; this time the volume comes.
        assert _selected_node(storage, "data") == roomy
        csi.provision(storage, "data", roomy, "5Gi")
        assert _bound(kube_client, namespace, "web") == roomy
        assert watched.bound.wait(timeout=30)
    expected: dict[int, list[str | None]] = {
        34: [None],
        # handleSchedulingFailure compares with the pod as it was queued: nothing to clear.
        35: [None, roomy, None],
        36: [None, roomy, None, roomy, None],
        37: [None, roomy, None, roomy, None],
    }
    assert watched.seen == expected[minor]


# --- VolumeBindingArgs.shape ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "kube_words", "field"),
    [
        ([{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}], None, None),
        (
            [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 11}],
            "shape[1].score: Invalid value: 11: not in valid range [0, 10]",
            "profiles[0].pluginConfig[0].args.shape[1].score",
        ),
    ],
    ids=["packing", "score-out-of-range"],
)
def test_volume_binding_args_shape_as_each_release_reads_it(
    kube_minor: int,
    control_plane: controlplane.ControlPlane,
    tmp_path: Path,
    shape: list[dict[str, int]],
    kube_words: str | None,
    field: str | None,
) -> None:
    profiles = [
        {
            "schedulerName": "volumes",
            "pluginConfig": [{"name": "VolumeBinding", "args": {"shape": shape}}],
        }
    ]
    if kube_minor < 37:
        # The gate off: any shape is refused, in these words.
        kube_words = (
            "profiles[0].pluginConfig[0].args.shape: Invalid value: "
            '[{"Utilization":0,"Score":0},{"Utilization":100,"Score":'
            f"{shape[1]['score']}"
            "}]: unexpected field `shape`, remove it or turn on the feature gate "
            "StorageCapacityScoring"
        )
        field = "profiles[0].pluginConfig[0].args.shape"
    body = kubescheduler.configuration(control_plane, profiles=profiles)
    refusal = _kube_scheduler_refusal(control_plane, tmp_path, profiles)
    kube = emulation.emulate(kube_minor)
    text = json.dumps(body)
    if kube_words is None:
        assert refusal is None
        parsed = schedconfig.parse(text, kube=kube)
        assert parsed.profiles[0].capacity_shape == ((0, 0), (100, 10))
        return
    assert refusal is not None
    # klog quotes the error: its double quotes come escaped.
    assert kube_words in refusal.replace('\\"', '"'), refusal
    with pytest.raises(schedconfig.ConfigError) as raised:
        schedconfig.parse(text, kube=kube)
    assert raised.value.field == field
    assert kube_words.split(": ", 1)[1] in str(raised.value)


def _kube_scheduler_refusal(
    plane: controlplane.ControlPlane, tmp_path: Path, profiles: list[dict[str, Any]]
) -> str | None:
    """None when kube-scheduler starts with these profiles, else its log (it exits at once)."""
    try:
        process = kubescheduler.start(plane, tmp_path / "kube-scheduler", profiles=profiles)
    except kubescheduler.KubeSchedulerError as error:
        return str(error)
    process.stop()
    return None
