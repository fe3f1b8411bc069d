"""Scenario 1b: plumb SIGKILLed during a burst of pods whose devices come from a claim template.

The resourceclaim controller (kube-controller-manager running that controller alone, as the
chaos plane runs no controllers) makes each pod's ResourceClaim; plumb allocates it in Reserve,
writes its allocation and reservedFor in PreBind, then binds the pod. A SIGKILL can land
between any two of these: a claim allocated and reserved for a pod that was never bound, an
allocation assumed in memory and never written, a binding sent and its answer lost. The next
run starts from a LIST of claims as of pods, so the invariant must hold after the kill, its
item 6 above all: no device in two claims, and every bound pod's claims allocated on devices
its node reaches and reserved for it. There are a few more pods than devices, so a device
given twice would leave no pod pending, and the pods left over must say why.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, draclient, kube
from plumb_dev.testing import drabuilders as dra
from tests.chaos import harness, invariant
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

OVER = 4  # pods beyond the devices: they must wait, saying why
CLAIM_CONTROLLER = "resourceclaim-controller"


@pytest.fixture
def claim_controller(plane: controlplane.ControlPlane, tmp_path: Path) -> Iterator[Path]:
    """kube-controller-manager with only the resourceclaim controller: it makes each pod's
    claim from its template and records it in the pod's status. Yields its log."""
    log = tmp_path / "kube-controller-manager.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(plane.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={plane.kubeconfig}",
                f"--controllers={CLAIM_CONTROLLER}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                "--secure-port=0",
                # Its defaults (20/s, bursts of 30) would pace a 400-pod burst to 40 s.
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "--v=1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield log
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def devices(client: kube.Kube) -> Iterator[draclient.Dra]:
    api = draclient.Dra(client)
    yield api
    api.close()


def test_sigkill_during_a_burst_of_claim_pods_gives_no_device_twice_and_loses_none(
    client: kube.Kube,
    namespace: str,
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    claim_controller: Path,
    devices: draclient.Dra,
) -> None:
    per_node = harness.size(4, 8)
    nodes = harness.create_nodes(client, harness.nodes(harness.size(8, 50), prefix=node_prefix))
    total = per_node * len(nodes)
    pods = total + OVER
    kills = harness.size(1, 3)
    driver = f"gpu-{node_prefix}.example.com"
    gpu = devices.create_class(dra.make_class(f"gpu-{node_prefix}").driver(driver).obj())
    for node in nodes:
        body = dra.make_slice(f"{node}-gpus", driver).pool(node).node(node)
        body.devices(*(dra.device(f"gpu-{i}") for i in range(per_node)))
        devices.create_slice(body.obj())
    template = dra.make_template("one-gpu", namespace).request("gpu", gpu["metadata"]["name"])
    devices.create_template(template.obj())
    bodies = [
        builders.make_pod(f"p-{i}", namespace)
        .scheduler(harness.SCHEDULER)
        .req(cpu="100m", memory="64Mi")
        .resource_claim("gpu", template="one-gpu")
        .obj()
        for i in range(pods)
    ]

    plumb = start_plumb()
    rng = random.Random(27)
    burst = harness.Burst(plumb.kubeconfig, namespace, bodies).start()
    restarts = []
    for kill in range(kills):
        # A random moment while claim pods still arrive or wait: 5-60 % of the devices taken.
        target = int(total * (kill + rng.random()) / (kills + 1) * 0.9) + 1
        harness.wait_until(f"{target} claim pods bound", _at_least(client, namespace, target), 300)
        assert plumb.kill() == -9
        began = time.monotonic()
        plumb.start()
        restarts.append(round(time.monotonic() - began, 1))
    burst.join()
    harness.wait_all_bound(client, namespace, plumb, total)
    verdict = invariant.check(client, [namespace], plumb)
    allocated = devices.in_use(namespace)
    harness.record(
        "sigkill-dra",
        pods=pods,
        nodes=len(nodes),
        devices=total,
        faults=f"{kills} SIGKILL",
        violations=len(verdict.violations),
        recovery_s=verdict.cache_matched_after,
        restart_s=restarts,
    )
    assert not verdict.violations, verdict.summary()
    assert verdict.bound == total, verdict.summary()
    assert verdict.pending == OVER, verdict.summary()
    # Each device once, and only claims of bound pods hold one (one claim per pod).
    taken = [device for held in allocated.values() for device in held]
    assert len(taken) == len(set(taken)) == total, sorted(allocated)
    assert "Traceback" not in claim_controller.read_text(errors="replace")


def _at_least(client: kube.Kube, namespace: str, count: int) -> Callable[[], bool]:
    return lambda: harness.bound(client, namespace) >= count
