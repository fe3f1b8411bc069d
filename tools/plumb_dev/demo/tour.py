"""``make demo``: a local cluster, six nodes in three zones, plumb, a Deployment and a Job to
place, and a SchedulingPolicy that deviates on its budget when a zone goes into maintenance.

Everything it starts it stops again, so it leaves nothing running (unless ``--keep-running``,
which keeps plumb in the foreground until Ctrl-C and then cleans up the same way).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from plumb import DEFAULT_SCHEDULER_NAME
from plumb_dev.cluster.controlplane import building
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.cluster.localnode import images
from plumb_dev.cluster.localnode import nodelifecycle as localnode
from plumb_dev.demo import preemptionact
from plumb_dev.testing import builders, crds, kube

ZONES = ("zone-a", "zone-b", "zone-c")
WEB_PODS = 12
API_PODS = 5


@contextlib.contextmanager
def plumb_process(
    kubeconfig: Path, log: Path | None, *, metrics: bool = False
) -> Iterator[subprocess.Popen[bytes]]:
    """``plumb run`` in a child process, stopped with SIGTERM on the way out; with its metrics
    and debug ports only when asked (a demo should not clash with another plumb)."""
    out = log.open("wb") if log else None
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "plumb",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--scheduler-name",
            DEFAULT_SCHEDULER_NAME,
            # In the foreground (make run) a person reads the log: plain lines, and the
            # metrics and debug ports on; a one-shot demo keeps its ports to itself.
            *(
                ("--log-format", "plain")
                if metrics
                else ("--metrics-port", "0", "--debug-port", "0")
            ),
        ],
        stdout=out,
        stderr=subprocess.STDOUT if out else None,
        # Its own session, so a Ctrl-C meant for the demo reaches plumb once, as our SIGTERM.
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if out:
            out.close()


def _policy_tour(client: kube.Kube, kubectl: crds.Kubectl, namespace: str) -> None:
    """Act two: a SchedulingPolicy spreads api pods over zones; zone-c goes into maintenance,
    two pods deviate on the policy's budget and the fifth waits, saying why."""
    kubectl.check("taint", "nodes", "node-2", "node-5", "maintenance=true:NoSchedule")
    print("\nzone-c goes into maintenance (its nodes tainted NoSchedule)")
    client.create_namespace(namespace)
    policy = {
        "apiVersion": "scheduling.plumb.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "api-spread", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "api"}},
            "topology": [{"topologyKey": builders.ZONE_LABEL, "maxSkew": 1}],
            "deviationBudget": {"maxViolations": 2, "window": "10m"},
        },
    }
    kubectl.check("apply", "-f", "-", stdin=json.dumps(policy))
    print(
        f"applied SchedulingPolicy {namespace}/api-spread: app=api spread over zones with "
        "maxSkew 1, at most 2 deviations per 10m"
    )
    _wait_for_policy(kubectl, namespace, "api-spread")
    for index in range(API_PODS):
        client.create_pod(
            builders.make_pod(f"api-{index}", namespace)
            .scheduler(DEFAULT_SCHEDULER_NAME)
            .label("app", "api")
            .req(cpu="250m", memory="256Mi")
            .obj()
        )
    print(f"submitted {API_PODS} api pods")

    def settled() -> list[dict[str, Any]] | None:
        pods = client.pods(namespace)
        placed = [p for p in pods if _node_of(p)]
        waiting = [p for p in pods if not _node_of(p)]
        said = waiting and all(_event(client, namespace, p, "FailedScheduling") for p in waiting)
        return pods if len(placed) == API_PODS - 1 and said else None

    pods = kube.wait_for("the api pods to settle", settled, timeout=60)
    for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        name = pod["metadata"]["name"]
        deviated = _event(client, namespace, pod, "PolicyDeviation")
        if _node_of(pod):
            mark = "  (deviation)" if deviated else ""
            print(f"  {namespace}/{name:<8} -> {_node_of(pod)}{mark}")
        else:
            reason = _event(client, namespace, pod, "FailedScheduling")
            print(f"  {namespace}/{name:<8} waits: {reason}")
    for pod in pods:
        note = _event(client, namespace, pod, "PolicyDeviation")
        if note:
            print(f"\nPolicyDeviation on {namespace}/{pod['metadata']['name']}: {note}")
            break
    table = kube.wait_for(
        "the policy's status",
        lambda: _policy_table(kubectl, namespace),
        timeout=30,
    )
    print(f"\nkubectl get spol -n {namespace}\n{table}")


def _wait_for_policy(kubectl: crds.Kubectl, namespace: str, name: str) -> None:
    """Until plumb has read the policy (its status says which generation it observed)."""

    def observed() -> bool:
        found = json.loads(kubectl.check("get", "spol", name, "-n", namespace, "-o", "json"))
        return bool((found.get("status") or {}).get("observedGeneration"))

    kube.wait_for(f"plumb to read SchedulingPolicy {namespace}/{name}", observed, timeout=30)


def _policy_table(kubectl: crds.Kubectl, namespace: str) -> str | None:
    table = kubectl.check("get", "spol", "-n", namespace).rstrip()
    rows = table.splitlines()
    # Filled in once the status counts the placed pods and the spent budget.
    return table if len(rows) == 2 and f" {API_PODS - 1} " in rows[1] else None


def _event(client: kube.Kube, namespace: str, pod: dict[str, Any], reason: str) -> str:
    for event in client.events(namespace, pod["metadata"]["name"]):
        if event.get("reason") == reason:
            return str(event.get("note") or event.get("message"))
    return ""


def _node_of(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


def deployment(
    namespace: str,
    name: str,
    *,
    replicas: int,
    cpu: str,
    memory: str,
    spread: bool = False,
) -> dict[str, Any]:
    """A Deployment whose pods ask for plumb (a container image nothing will ever pull: the
    scale nodes have no kubelet)."""
    template = (
        builders.make_pod(name, namespace)
        .scheduler(DEFAULT_SCHEDULER_NAME)
        .label("app", name)
        .req(cpu=cpu, memory=memory)
    )
    if spread:
        template = template.spread(builders.ZONE_LABEL, 1, selector={"app": name})
    pod = template.obj()
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]},
        },
    }


def job(namespace: str, name: str, *, completions: int, parallelism: int) -> dict[str, Any]:
    """A Job for the scale nodes (those with a zone), whose pods ask for plumb."""
    pod = (
        builders.make_pod(name, namespace)
        .scheduler(DEFAULT_SCHEDULER_NAME)
        .req(cpu="250m", memory="128Mi")
        .node_affinity(builders.expr(builders.ZONE_LABEL, "Exists"))
        .obj()
    )
    pod["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "template": {"spec": pod["spec"]},
        },
    }


def _owner(pod: dict[str, Any]) -> str:
    owners = pod["metadata"].get("ownerReferences") or [{}]
    return f"{owners[0].get('kind', '-')}/{owners[0].get('name', '-')}"


def _tour(client: kube.Kube, namespace: str) -> None:
    for index in range(6):
        zone = ZONES[index % 3]
        name = f"node-{index}"
        client.create_node(
            builders.make_node(name).zone(zone).capacity(cpu="4", memory="16Gi", pods="110").obj()
        )
    print(f"created 6 nodes (4 cpu, 16Gi) across {', '.join(ZONES)}: API objects, no kubelet")
    client.create_namespace(namespace)
    client.create_deployment(
        deployment(namespace, "web", replicas=WEB_PODS, cpu="500m", memory="1Gi", spread=True)
    )
    client.create_job(job(namespace, "batch", completions=4, parallelism=2))
    client.create_deployment(deployment(namespace, "too-big", replicas=1, cpu="64", memory="1Gi"))
    print(
        f"applied Deployment web ({WEB_PODS} replicas, 500m, 1Gi, spread over zones with "
        "maxSkew 1), Job batch (4 completions, 2 at a time) and Deployment too-big (one "
        "replica asking for 64 cpu), all with schedulerName plumb"
    )

    def all_bound() -> list[dict[str, Any]] | None:
        pods = [p for p in client.pods(namespace) if not _owner(p).startswith("ReplicaSet/too")]
        placed = [p for p in pods if _node_of(p)]
        return placed if len(pods) == WEB_PODS + 2 and len(placed) == len(pods) else None

    pods = kube.wait_for("the web and batch pods to be bound", all_bound, timeout=60)
    zones = {
        n["metadata"]["name"]: n["metadata"]["labels"].get(builders.ZONE_LABEL, "-")
        for n in client.nodes()
    }
    print("\nwhere each pod landed (made by the ReplicaSet and Job controllers, placed by plumb):")
    for pod in sorted(pods, key=lambda p: (_owner(p), str(p["metadata"]["name"]))):
        node = _node_of(pod)
        print(
            f"  {_owner(pod):<22} {pod['metadata']['name']:<22} -> {node} ({zones.get(node, '?')})"
        )
    web = [p for p in pods if _owner(p).startswith("ReplicaSet/web")]
    per_zone = collections.Counter(zones.get(_node_of(pod), "?") for pod in web)
    print("web pods per zone: " + ", ".join(f"{z} {n}" for z, n in sorted(per_zone.items())))

    def too_big() -> tuple[str, str] | None:
        for pod in client.pods(namespace):
            if _owner(pod).startswith("ReplicaSet/too-big"):
                message = _event(client, namespace, pod, "FailedScheduling")
                return (str(pod["metadata"]["name"]), message) if message else None
        return None

    name, message = kube.wait_for("a FailedScheduling event for too-big", too_big, timeout=30)
    phase = client.pod(namespace, name)["status"].get("phase")
    print(f"\n{namespace}/{name} stays {phase}: FailedScheduling: {message}")


def _real_node_act(client: kube.Kube, kubectl: crds.Kubectl, real: RealNode) -> None:
    """With --node: a Job that plumb places on the real node, where it really runs."""
    node, image = real.name, real.image
    namespace = "hello"
    client.create_namespace(namespace)
    script = 'import os; print(f"hello from {os.uname().nodename}, placed by plumb")'
    body = job(namespace, "hello", completions=2, parallelism=2)
    spec = body["spec"]["template"]["spec"]
    spec.pop("affinity")
    spec["nodeSelector"] = {builders.HOSTNAME_LABEL: node}
    spec["containers"][0].update(
        image=image, imagePullPolicy="Never", command=["python3", "-c", script]
    )
    client.create_job(body)
    print(f"\napplied Job {namespace}/hello (2 pods) for the real node {node}, image {image}")

    def done() -> bool:
        return (client.job(namespace, "hello").get("status") or {}).get("succeeded") == 2

    kube.wait_for("Job hello to complete on the real node", done, timeout=120)
    for pod in sorted(client.pods(namespace), key=lambda p: str(p["metadata"]["name"])):
        name = pod["metadata"]["name"]
        print(f"  {namespace}/{name} -> {_node_of(pod)}: {pod['status'].get('phase')}")
        print(f"  $ kubectl logs -n {namespace} {name}")
        print("    " + kubectl.check("logs", "-n", namespace, name).strip())


@dataclasses.dataclass(frozen=True, kw_only=True)
class RealNode:
    """The real node's name and the test image loaded into its containerd."""

    name: str
    image: str


def _start(
    directory: Path, bin_dir: Path, node: bool
) -> tuple[controlplane.ControlPlane, RealNode | None]:
    """The cluster, and with node its real node."""
    if not node:
        print("starting etcd, kube-apiserver and kube-controller-manager on 127.0.0.1 ...")
        plane = controlplane.start(directory, bin_dir=bin_dir)
        print(f"Kubernetes {plane.kube_version}: plumb decides as its kube-scheduler release")
        return plane, None
    problem = localnode.preflight()
    if problem is not None:
        raise controlplane.ControlPlaneError(f"this machine cannot run the real node: {problem}")
    print("building the test image (cached after the first time) ...")
    image = images.ensure_test_image()
    print("starting the control plane and a real node (containerd, kubelet, kube-proxy) ...")
    plane, real = localnode.up(directory, bin_dir=bin_dir, parts=controlplane.Parts(scheduler=True))
    print(f"Kubernetes {plane.kube_version}: plumb decides as its kube-scheduler release")
    images.load(image, containerd_address=real.containerd_address)
    return plane, RealNode(name=real.name, image=image.ref)


def main(*, keep_running: bool = False, node: bool = False) -> int:
    bin_dir = building.ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="plumb-demo-") as scratch:
        directory = Path(scratch) / "cluster"
        try:
            plane, real = _start(directory, bin_dir, node)
            client = kube.Kube(plane.kubeconfig)
            kubectl = crds.Kubectl.of(plane, cache_dir=Path(scratch) / "kubectl-cache")
            crds.install(kubectl)
            log = None if keep_running else Path(scratch) / "plumb.log"
            with plumb_process(plane.kubeconfig, log, metrics=keep_running) as process:
                try:
                    _tour(client, "demo")
                    _policy_tour(client, kubectl, "shop")
                    preemptionact.act(client, "urgent")
                    if real is not None:
                        _real_node_act(client, kubectl, real)
                except (kube.WaitTimeout, crds.KubectlError) as error:
                    print(f"demo failed: {error}", file=sys.stderr)
                    if log is not None:
                        print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
                    return 1
                if keep_running:
                    print("\nplumb keeps running; in another shell:")
                    for line in controlplane.env_lines(plane):
                        print(f"  {line}")
                    print("  kubectl get pods -n demo -o wide\nCtrl-C stops plumb and the cluster.")
                    with contextlib.suppress(KeyboardInterrupt):
                        process.wait()
            client.close()
        finally:
            if localnode.recorded(directory):
                localnode.down(directory)
            else:
                controlplane.stop(directory)
    print("\nstopped plumb and the cluster; nothing left running.")
    return 0
