"""``make demo``: a local control plane, six nodes in three zones, plumb, and pods to place.

Everything it starts it stops again, so it leaves nothing running (unless ``--keep-running``,
which keeps plumb in the foreground until Ctrl-C and then cleans up the same way).
"""

from __future__ import annotations

import collections
import contextlib
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from plumb import DEFAULT_SCHEDULER_NAME
from plumb.controlplane import building
from plumb.controlplane import running as controlplane
from plumb.testing import builders, kube

ZONES = ("zone-a", "zone-b", "zone-c")
WEB_PODS = 12


@contextlib.contextmanager
def plumb_process(kubeconfig: Path, log: Path | None) -> Iterator[subprocess.Popen[bytes]]:
    """``plumb run`` in a child process, stopped with SIGTERM on the way out."""
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


def _node_of(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


def _tour(client: kube.Kube, namespace: str) -> None:
    for index in range(6):
        zone = ZONES[index % 3]
        name = f"node-{index}"
        client.create_node(
            builders.make_node(name).zone(zone).capacity(cpu="4", memory="16Gi", pods="110").obj()
        )
    print(f"created 6 nodes (4 cpu, 16Gi) across {', '.join(ZONES)}")
    client.create_namespace(namespace)
    for index in range(WEB_PODS):
        client.create_pod(
            builders.make_pod(f"web-{index}", namespace)
            .scheduler(DEFAULT_SCHEDULER_NAME)
            .label("app", "web")
            .req(cpu="500m", memory="1Gi")
            .spread(builders.ZONE_LABEL, 1, selector={"app": "web"})
            .obj()
        )
    client.create_pod(
        builders.make_pod("too-big", namespace)
        .scheduler(DEFAULT_SCHEDULER_NAME)
        .req(cpu="64", memory="1Gi")
        .obj()
    )
    print(
        f"submitted {WEB_PODS} web pods (500m, 1Gi, spread over zones with maxSkew 1) "
        "and one pod asking for 64 cpu"
    )

    def all_bound() -> list[dict[str, Any]] | None:
        pods = [p for p in client.pods(namespace) if p["metadata"]["name"].startswith("web-")]
        return pods if all(_node_of(p) for p in pods) else None

    pods = kube.wait_for("the web pods to be bound", all_bound, timeout=60)
    zones = {
        n["metadata"]["name"]: n["metadata"]["labels"][builders.ZONE_LABEL] for n in client.nodes()
    }
    print("\nwhere each pod landed:")
    for pod in sorted(pods, key=lambda p: int(p["metadata"]["name"].split("-")[1])):
        node = _node_of(pod)
        print(f"  {namespace}/{pod['metadata']['name']:<8} -> {node} ({zones.get(node, '?')})")

    def failed_event() -> str | None:
        for event in client.events(namespace, "too-big"):
            if event.get("reason") == "FailedScheduling":
                return str(event.get("note") or event.get("message"))
        return None

    per_zone = collections.Counter(zones.get(_node_of(pod), "?") for pod in pods)
    print("pods per zone: " + ", ".join(f"{z} {n}" for z, n in sorted(per_zone.items())))

    message = kube.wait_for("a FailedScheduling event for too-big", failed_event, timeout=30)
    phase = client.pod(namespace, "too-big")["status"].get("phase")
    print(f"\n{namespace}/too-big stays {phase}: FailedScheduling: {message}")


def main(*, keep_running: bool = False) -> int:
    bin_dir = building.ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="plumb-demo-") as scratch:
        directory = Path(scratch) / "cluster"
        print("starting etcd and kube-apiserver on 127.0.0.1 ...")
        plane = controlplane.start(directory, bin_dir=bin_dir)
        try:
            client = kube.Kube(plane.kubeconfig)
            log = None if keep_running else Path(scratch) / "plumb.log"
            with plumb_process(plane.kubeconfig, log) as process:
                try:
                    _tour(client, "demo")
                except kube.WaitTimeout as error:
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
            controlplane.stop(directory)
    print("\nstopped plumb, kube-apiserver and etcd; nothing left running.")
    return 0
