"""What changed between kube-scheduler v1.34 and v1.37 in preemption and nominations, under plumb
and under the real kube-scheduler of the session's release on the same control plane: the
sentence a preemption that found a node adds to FailedScheduling and PodScheduled (v1.37),
DynamicResources' PostFilter words (up to v1.36), budgets spent only up to a pod's first
violation (v1.37), and the room a gated pod's nomination holds (v1.37). Victims already being
deleted (left alone from v1.35) are in test_preemption_parity_nomination.py.

Each expectation is keyed by the release (``kube_minor``, ``words``), so the same test passes on
v1.34.4 and v1.37.2 and shows where they differ.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, kubescheduler
from plumb_dev.testing.builders import HOSTNAME_LABEL
from tests.support import preemption_steps, side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import PlumbFactory
from tests.support.preemption_scenes import (
    Occupant,
    Scene,
    scene_fixture,  # noqa: F401
)
from tests.support.preemption_steps import INSUFFICIENT_CPU, PREEMPTOR, QUIET_SECONDS
from tests.support.schedconfig_files import HEADER
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = pytest.mark.integration


def _pod_scheduled(client: kube.Kube, namespace: str, name: str) -> str | None:
    """The message of the pod's PodScheduled condition while it is False, else None."""
    for condition in (client.pod(namespace, name).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return None


def test_a_preemption_that_finds_a_node_says_so_from_v1_37(scene: Scene) -> None:
    """One node of 2 cpu full with a 2-cpu pod of priority 0; the preemptor (2 cpu) evicts it.
    Up to v1.36 its FailedScheduling message and PodScheduled condition are the filters'
    histogram alone; from v1.37 both go on with "preemption: found a potential placement for
    pod on node <n>, preempting 1 victims"."""
    (node,) = scene.add_nodes("n")
    scene.stage([Occupant("low", node, 0, cpu="2")])
    scene.create(scene.preemptor("2"))
    assert scene.wait_nominated() == node
    scene.wait_deleted("low")
    expected = scene.words.found(f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}.", node, 1)
    condition = kube.wait_for(
        "the preemptor's PodScheduled condition",
        lambda: _pod_scheduled(scene.client, scene.namespace, PREEMPTOR),
    )
    assert (scene.messages(), condition) == ((expected,), expected)
    scene.finish_terminating()
    assert scene.bound() == node


def test_a_pod_overdrawing_one_budget_leaves_the_next_unspent_from_v1_37(
    scene: Scene, kube_minor: int
) -> None:
    """One node of 3 cpu with three Ready 1-cpu pods: "both" (priority 3) under the budgets
    "a-none" (no disruption allowed) and "b-one" (one allowed: minAvailable 1 of 2), "keep"
    (2) under none, "second" (1) under b-one. The preemptor (1 cpu) needs one gone. Budgets
    are spent most important pod first. Up to v1.36 "both" spends every budget it is under:
    it overdraws a-none and takes b-one's disruption, so "second" violates b-one; the
    violators are reprieved first ("both", then "second") and "keep" goes. From v1.37 "both"
    stops at the first budget it overdraws: taken a-none first, b-one's disruption is left
    for "second", which then does not violate, and reprieve by importance keeps "keep":
    "second" goes. kube-scheduler takes the budgets in its informer's order, which is random,
    so its v1.37 takes b-one first about half the time and deletes "keep" as before; plumb
    takes them in name order, a-none first."""
    (node,) = scene.add_nodes("n", cpu="3")
    ns = scene.namespace
    scene.client.create_pdb(preemption_steps.pdb(ns, "a-none", {"a": "x"}))
    scene.client.create_pdb(preemption_steps.pdb(ns, "b-one", {"b": "y"}, min_available=1))
    scene.stage(
        [
            Occupant("both", node, 3, labels={"a": "x", "b": "y"}),
            Occupant("keep", node, 2, labels={"app": "keep"}),
            Occupant("second", node, 1, labels={"b": "y"}),
        ]
    )
    preemption_steps.make_ready(scene.client, ns, scene.occupants)
    kube.wait_for(
        "b-one to allow 1 disruption and a-none none",
        lambda: (
            preemption_steps.disruptions_allowed(scene.client, ns, "b-one") == 1
            and preemption_steps.disruptions_allowed(scene.client, ns, "a-none") == 0
        ),
        timeout=30,
    )
    # A scheduler shows no sign of having read the budgets' new status: a second for its
    # PDB informer, as test_preemption_parity.py gives it.
    time.sleep(1.0)
    histogram = f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("1"), victims=1)
    if kube_minor < 37:
        expected = [{"keep"}]
    elif scene.scheduler.name == side_by_side.PLUMB:
        expected = [{"second"}]
    else:
        expected = [{"second"}, {"keep"}]
    assert outcome in [scene.preempted(deleted=d, node=node, histogram=histogram) for d in expected]


# --- a gated pod's nomination ----------------------------------------------------------------


def _names(which: str) -> str:
    """The schedulerName the pods of the scheduler called ``which`` carry."""
    if which == side_by_side.PLUMB:
        return side_by_side.PLUMB_SCHEDULER_NAME
    return kubescheduler.DEFAULT_SCHEDULER_NAME


@pytest.mark.parametrize("which", side_by_side.SCHEDULERS)
def test_a_gated_pod_seen_nominated_holds_its_room_from_v1_37(
    request: pytest.FixtureRequest,
    which: str,
    kube_minor: int,
    words: side_by_side.Words,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    """A node of 4 cpu, and a gated pod "held" (priority 1000, 4 cpu) whose
    status.nominatedNodeName names it, written before the scheduler starts (as a restart finds
    it). From v1.37 kube-scheduler's queue records the nomination of every pod it is given,
    gated or not, so the room is held and a priority-0 pod asking 1 cpu fits nowhere; up to
    v1.36 only a pod let into the queue was nominated, so the small pod takes the node. An
    update of the gated pod (a label here) is followed in every release: then a second small
    pod fits nowhere either way."""
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4"))
    scheduler_name = _names(which)

    def pod(name: str, cpu: str, priority: int) -> builders.PodBuilder:
        built = builders.make_pod(name, namespace).scheduler(scheduler_name).req(cpu=cpu)
        return built.priority(priority)

    held = pod("held", "4", 1000).gate("plumb.test/wait")
    kube_client.create_pod(held.obj())
    kube_client.core.patch_namespaced_pod_status(
        "held", namespace, {"status": {"nominatedNodeName": node}}
    )
    assert preemption_steps.nominated(kube_client.pod(namespace, "held")) == node
    with side_by_side.scheduler_runner(request, which) as runner:
        assert runner.scheduler_name == scheduler_name
        side_by_side.in_view(kube_client, runner, namespace, [node])
        kube_client.create_pod(pod("small", "1", 0).obj())
        placed = side_by_side.wait_settled(kube_client, namespace, ["small"], cluster_nodes=1)
        # The gated pod is touched: every release follows its status from now on.
        kube_client.core.patch_namespaced_pod(
            "held", namespace, {"metadata": {"labels": {"touched": "yes"}}}
        )
        side_by_side.in_view(kube_client, runner, namespace, [node])
        kube_client.create_pod(pod("small-after", "1", 0).obj())
        after = side_by_side.wait_settled(kube_client, namespace, ["small-after"], cluster_nodes=1)
        histogram = f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}."
        no_victims = words.without_victims(histogram, total=1, searched=1)
        messages = {
            name: side_by_side.failed_scheduling(kube_client, namespace, name)
            for name in ("small", "small-after")
        }
    if kube_minor < 37:
        assert (placed, after) == ({"small": node}, {"small-after": None})
        assert messages == {"small": None, "small-after": no_victims}
    else:
        assert (placed, after) == ({"small": None}, {"small-after": None})
        assert messages == {"small": no_victims, "small-after": no_victims}
    assert kube_client.pod(namespace, "held")["spec"].get("nodeName") is None


# --- DefaultPreemption disabled: DynamicResources' words alone ---------------------------------

NO_PREEMPTION = "no-preemption"
_PROFILE = {
    "schedulerName": NO_PREEMPTION,
    "plugins": {"multiPoint": {"disabled": [{"name": "DefaultPreemption"}]}},
}


@pytest.fixture(params=side_by_side.SCHEDULERS)
def without_preemption(
    request: pytest.FixtureRequest,
    control_plane: controlplane.ControlPlane,
    tmp_path: Path,
) -> Iterator[side_by_side.Runner]:
    """A scheduler whose one profile, NO_PREEMPTION, disables DefaultPreemption."""
    if request.param == side_by_side.KUBE_SCHEDULER:
        process = kubescheduler.start(
            control_plane, tmp_path / "kube-scheduler", profiles=[_PROFILE]
        )
        try:
            yield side_by_side.Runner(
                name=side_by_side.KUBE_SCHEDULER, scheduler_name=NO_PREEMPTION, log=process.log
            )
        finally:
            died = not process.running()
            process.stop()
            print(f"--- kube-scheduler log tail ---\n{process.tail()}")
        assert not died, "kube-scheduler exited during the test; see its log above"
        return
    config = tmp_path / "no-preemption.yaml"
    config.write_text(
        HEADER
        + "profiles:\n- schedulerName: no-preemption\n  plugins:\n    multiPoint:\n"
        + "      disabled: [{name: DefaultPreemption}]\n"
    )
    start_plumb: PlumbFactory = request.getfixturevalue("start_plumb")
    plumb = start_plumb("--config", str(config))
    yield side_by_side.Runner(name=side_by_side.PLUMB, scheduler_name=NO_PREEMPTION, log=plumb.log)


def test_without_default_preemption_dynamic_resources_speaks_alone_up_to_v1_36(
    without_preemption: side_by_side.Runner,
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    """One node of 2 cpu full with a 2-cpu pod of priority 0, and a pod of priority 1000 asking
    2 cpu under a profile without DefaultPreemption: nothing is evicted, and after the
    filters' histogram comes DynamicResources' "no new claims to deallocate" up to v1.36 (no
    period: the message ends as the plugin's status), nothing from v1.37."""
    runner = without_preemption
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="2"))
    side_by_side.in_view(kube_client, runner, namespace, [node])
    occupant = runner.pod("low", namespace).req(cpu="2").node_selector(HOSTNAME_LABEL, node)
    kube_client.create_pod(occupant.obj())
    assert side_by_side.wait_settled(kube_client, namespace, ["low"]) == {"low": node}
    vip = runner.pod("vip", namespace).req(cpu="2").priority(1000)
    kube_client.create_pod(vip.obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["vip"], cluster_nodes=1)
    time.sleep(QUIET_SECONDS)  # only to show that nothing is evicted
    histogram = f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}."
    words = f" {side_by_side.NO_CLAIMS}" if kube_minor < 37 else ""
    seen = {
        "placed": placed,
        "message": side_by_side.failed_scheduling(kube_client, namespace, "vip"),
        "nominated": preemption_steps.nominated(kube_client.pod(namespace, "vip")),
        "deleted": preemption_steps.deleted(kube_client, namespace, ["low"]),
    }
    assert seen == {
        "placed": {"vip": None},
        "message": histogram + words,
        "nominated": None,
        "deleted": set(),
    }
