"""Volumes against the real control plane: plumb's PreBind binds a local PV to a
WaitForFirstConsumer claim and kube-controller-manager's PV controller completes the binding; and
the real kube-scheduler's FailedScheduling messages (the control plane's release) for volume
failures, held against what plumb's volume plugins say over the same objects."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plumb import prebind
from plumb.backend.cache import snapshot, volumes
from plumb.backend.records import objects
from plumb.framework.plugins import nodeaffinity
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, kubescheduler
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.storage import Storage, storage_fixture  # noqa: F401
from tests.support.volume_messages import (
    AFTER_PREFILTER,
    MISSING_CLAIM,
    NO_PV_LEFT,
    PINNED_ELSEWHERE,
    RWOP_IN_USE,
    UNBOUND_IMMEDIATE,
    not_helpful,
    rwop_suffix,
)
from tests.support.volume_objects import (
    pv_body,
    pvc_body,
    storage_class_body,
)

pytestmark = pytest.mark.integration

JSON = dict[str, Any]
DISK_LABEL = "plumb.test/disk"


def _statics(client: kube.Kube, names: list[str]) -> snapshot.NodeStatics:
    infos = sorted(
        (objects.parse_node(n) for n in client.nodes() if n["metadata"]["name"] in names),
        key=lambda info: info.name,
    )
    n = len(infos)
    return snapshot.NodeStatics(infos, np.zeros(n, np.uint64), np.zeros((n, 4), np.int64))


def _in_use(client: kube.Kube, namespace: str) -> volumes.InUse:
    return volumes.InUse.of(
        (p["spec"]["nodeName"], objects.parse_pod(p))
        for p in client.pods(namespace)
        if p["spec"].get("nodeName")
    )


def _plumb_message(
    pod: JSON,
    statics: snapshot.NodeStatics,
    store: volumes.Volumes,
    in_use: volumes.ClaimUse,
) -> str:
    """What plumb's plugins make of the pod, as kube-scheduler's message before PostFilter:
    NodeAffinity first (the pods here may carry a nodeSelector), then the volume plugins."""
    info = objects.parse_pod(pod)
    verdict = volume_plugins.verdicts(info, statics, store, in_use)
    total = len(statics)
    if verdict.prefilter is not None:
        return f"0/{total} nodes are available: {verdict.prefilter.message}."
    counts: dict[str, int] = {}
    affinity = nodeaffinity.filter(info, statics)
    if affinity.any():
        counts[nodeaffinity.MISMATCH] = int(affinity.sum())
    for filtered in verdict.filters:
        fails = int((filtered.fails & ~affinity).sum())
        if fails:
            counts[filtered.reason] = counts.get(filtered.reason, 0) + fails
    parts = sorted(f"{count} {reason}" for reason, count in counts.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


# make test-long; test_volume_placement.py binds claims through PreBind in make test.
@pytest.mark.long
async def test_prebind_binds_a_local_pv_and_the_pv_controller_completes_it(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    storage: Storage,
) -> None:
    node_a = add_node(builders.make_node(f"{namespace}-a"))
    node_b = add_node(builders.make_node(f"{namespace}-b"))
    local = storage.storage_class(storage_class_body(f"local-{namespace}"))
    pv = storage.pv(pv_body(f"{namespace}-pv", node=node_b, storage_class=local, size="5Gi"))
    storage.claim(pvc_body("data", namespace, storage_class=local, size="1Gi"))
    pod_body = builders.make_pod("web", namespace).scheduler("nobody").claims("data").obj()
    pod = objects.parse_pod(kube_client.create_pod(pod_body))
    # The PV controller leaves a WaitForFirstConsumer claim alone until a scheduler decides.
    assert (storage.claim_body("data").get("status") or {}).get("phase") == "Pending"

    statics = _statics(kube_client, [node_a, node_b])

    def available() -> volumes.Volumes | None:
        found = storage.store()
        record = found.pv(pv)
        return found if record is not None and record.phase == volumes.AVAILABLE else None

    store = kube.wait_for("the PV to be Available", available)
    verdict = volume_plugins.verdicts(pod, statics, store, volumes.NOTHING_IN_USE)
    assert verdict.needs_plan
    assert volume_plugins.histogram(verdict) == {
        "node(s) didn't find available persistent volumes to bind": 1
    }
    node = statics.nodes[statics.index[node_b]]
    plan = volume_plugins.plan(pod, node, store, verdict)
    assert [(b.claim.name, b.pv.name) for b in plan.bindings] == [("data", pv)]
    store.assume(plan)

    api = k8s_client.ApiClient(credentials.load(control_plane.kubeconfig))
    try:
        watched = prebind.Watched(pod_exists=lambda: True, node_labels=lambda: dict(node.labels))
        result = await prebind.prebind(api, plan, watched, bind_timeout=60)
    finally:
        await api.close()
    assert result == prebind.OK, result.message
    claim = storage.wait_bound("data")
    assert claim["spec"]["volumeName"] == pv
    assert volumes.BIND_COMPLETED in claim["metadata"]["annotations"]
    bound_pv = storage.pv_body(pv)
    assert bound_pv["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert bound_pv["metadata"]["annotations"][volumes.BOUND_BY_CONTROLLER] == "yes"
    assert bound_pv["status"]["phase"] == "Bound"
    # The store, fed the bound objects, now sees the claim bound and pinned to node b.
    store = storage.store()
    after = volume_plugins.verdicts(pod, statics, store, volumes.NOTHING_IN_USE)
    assert not after.needs_plan
    assert volume_plugins.histogram(after) == {
        "node(s) didn't match PersistentVolume's node affinity": 1
    }

    # A second PreBind of the same plan: its PV changed since, so the write is refused (409).
    api = k8s_client.ApiClient(credentials.load(control_plane.kubeconfig))
    try:
        stale = await prebind.prebind(api, plan, watched, bind_timeout=5)
    finally:
        await api.close()
    assert not stale.ok
    assert stale.message.startswith('running PreBind plugin "VolumeBinding": ')
    assert "the object has been modified" in stale.message


def _failure(client: kube.Kube, namespace: str, name: str) -> str:
    placed = side_by_side.wait_settled(client, namespace, [name], cluster_nodes=5)
    assert placed[name] is None, f"{name} was bound to {placed[name]}"
    message = side_by_side.failed_scheduling(client, namespace, name)
    assert message is not None
    return message


# make test-long; test_volume_placement.py holds the short version under both schedulers.
@pytest.mark.long
@pytest.mark.differential
def test_kube_scheduler_volume_messages(
    request: pytest.FixtureRequest,
    kube_minor: int,
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    storage: Storage,
    tmp_path: Any,
) -> None:
    # Five nodes; local PVs on b and d; c alone lacks the disk label some pods select on.
    nodes = []
    for letter in "abcde":
        node = builders.make_node(f"{namespace}-{letter}")
        if letter != "c":
            node = node.label(DISK_LABEL, "ssd")
        nodes.append(add_node(node))
    node_b, node_c, node_d = nodes[1], nodes[2], nodes[3]
    local = storage.storage_class(storage_class_body(f"local-{namespace}"))
    immediate = storage.storage_class(
        storage_class_body(f"immediate-{namespace}", mode=volumes.IMMEDIATE)
    )
    storage.pv(pv_body(f"{namespace}-pv-b", node=node_b, storage_class=local))
    storage.pv(pv_body(f"{namespace}-pv-d", node=node_d, storage_class=local))
    for i in range(3):
        storage.claim(pvc_body(f"data-web-{i}", namespace, storage_class=local))
    storage.claim(pvc_body("unbound-immediate", namespace, storage_class=immediate))
    # Bound claims (no class: pre-bound through volumeName) on PVs pinned to node c.
    pinned = storage.pv(pv_body(f"{namespace}-pv-c", node=node_c, storage_class=""))
    storage.claim(pvc_body("pinned", namespace, storage_class="", volume=pinned))
    rwop = storage.pv(
        pv_body(f"{namespace}-pv-rwop", node=node_c, storage_class="", modes=("ReadWriteOncePod",))
    )
    storage.claim(
        pvc_body("single", namespace, storage_class="", volume=rwop, modes=("ReadWriteOncePod",))
    )
    storage.wait_bound("pinned")
    storage.wait_bound("single")
    # A pod holding the ReadWriteOncePod claim, bound at creation.
    kube_client.create_pod(
        builders.make_pod("holder", namespace)
        .scheduler("nobody")
        .node(node_c)
        .claims("single")
        .obj()
    )

    process = kubescheduler.start(control_plane, tmp_path / "kube-scheduler")
    try:
        name = process.scheduler_name

        def pod(pod_name: str) -> builders.PodBuilder:
            return builders.make_pod(pod_name, namespace).scheduler(name)

        recorded: dict[str, tuple[str, str]] = {}

        def judge(pod_name: str, body: JSON) -> str:
            kube_client.create_pod(body)
            message = _failure(kube_client, namespace, pod_name)
            mine = _plumb_message(
                body,
                _statics(kube_client, nodes),
                storage.store(),
                _in_use(kube_client, namespace),
            )
            recorded[pod_name] = (message, mine)
            print(f"{pod_name}: kube-scheduler: {message}\n{pod_name}: plumb:          {mine}")
            return message

        missing = judge("lost", pod("lost").claims("data-missing").obj())
        waiting = judge("waiting", pod("waiting").claims("unbound-immediate").obj())

        # Each replica in turn: where plumb's plugins let it go, and the PV plumb's plan would
        # bind on the node kube-scheduler chose, against the PV the PV controller bound.
        placed: list[str] = []
        statics = _statics(kube_client, nodes)
        for i in range(2):
            body = pod(f"web-{i}").claims(f"data-web-{i}").obj()
            before = storage.store()
            info = objects.parse_pod(kube_client.create_pod(body))
            verdict = volume_plugins.verdicts(
                info, statics, before, _in_use(kube_client, namespace)
            )
            fitting = [n for n, f in zip(statics.names, verdict.failing(5), strict=True) if not f]
            bound = side_by_side.wait_settled(kube_client, namespace, [f"web-{i}"], cluster_nodes=5)
            chosen = bound[f"web-{i}"]
            assert chosen is not None
            assert chosen in fitting, (chosen, fitting)
            target = statics.nodes[statics.index[chosen]]
            plan = volume_plugins.plan(info, target, before, verdict)
            claim = storage.wait_bound(f"data-web-{i}")
            assert [b.pv.name for b in plan.bindings] == [claim["spec"]["volumeName"]]
            placed.append(chosen)
        # kube-scheduler takes the nodes with a PV, one replica each.
        assert sorted(placed) == [node_b, node_d]
        third = judge("web-2", pod("web-2").claims("data-web-2").obj())

        elsewhere = judge(
            "elsewhere", pod("elsewhere").node_selector(DISK_LABEL, "ssd").claims("pinned").obj()
        )
        contender = judge("contender", pod("contender").claims("single").obj())
    finally:
        process.stop()
        print(f"--- kube-scheduler log tail ---\n{process.tail(30)}")

    assert missing == MISSING_CLAIM + AFTER_PREFILTER
    assert waiting == UNBOUND_IMMEDIATE + AFTER_PREFILTER
    assert third == NO_PV_LEFT + not_helpful(kube_minor)
    assert elsewhere == PINNED_ELSEWHERE + not_helpful(kube_minor)
    assert contender == RWOP_IN_USE + rwop_suffix(kube_minor)
    for pod_name, (theirs, mine) in recorded.items():
        assert theirs.startswith(mine + " "), (pod_name, theirs, mine)
