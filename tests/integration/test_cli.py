"""The commands a person types: ``plumb cluster up/env/down`` and ``plumb demo``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import building
from plumb_dev.cluster.controlplane import lifecycle as controlplane

pytestmark = pytest.mark.integration


def _plumb(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plumb", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.long  # ~12 s: in make test-long, so that make test stays within 15 minutes
def test_cluster_up_env_down(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    up = _plumb("cluster", "up", "--dir", str(directory))
    assert up.returncode == 0, up.stderr
    plane = controlplane.load(directory)
    assert plane is not None
    try:
        assert _alive(plane.etcd_pid)
        assert _alive(plane.apiserver_pid)
        again = _plumb("cluster", "up", "--dir", str(directory))
        assert again.returncode == 0
        assert "already running" in again.stderr
        status = _plumb("cluster", "status", "--dir", str(directory))
        assert status.returncode == 0, status.stdout + status.stderr
        states = dict(line.split() for line in status.stdout.splitlines()[1:])
        assert states == {
            "etcd": "running",
            "kube-apiserver": "running",
            "kube-controller-manager": "running",
            "kube-scheduler": "running",
        }

        env = _plumb("cluster", "env", "--dir", str(directory))
        assert env.returncode == 0, env.stderr
        # The printed lines work in a shell: kubectl from the built binaries reaches the server.
        script = f"{env.stdout}\nkubectl version -o json"
        shell = subprocess.run(
            ["bash", "-c", script],
            capture_output=True,
            text=True,
            check=False,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        )
        assert shell.returncode == 0, shell.stderr
        versions = json.loads(shell.stdout)
        assert versions["serverVersion"]["gitVersion"] == building.chosen_release().version
        assert versions["clientVersion"]["gitVersion"] == building.chosen_release().version
    finally:
        down = _plumb("cluster", "down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    for name, pid in plane.processes():
        assert not _alive(pid), f"{name} (pid {pid}) still runs after down"
    gone = _plumb("cluster", "env", "--dir", str(directory))
    assert gone.returncode == 1
    assert "plumb cluster up" in gone.stderr


@pytest.mark.long  # in make test-long: make demo itself, 17 s
def test_demo_places_pods_reports_the_misfit_and_leaves_nothing_running() -> None:
    parts = ("kube-apiserver", "etcd", "kube-controller-manager")
    before = _processes(*parts)
    demo = _plumb("demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    landed = [line for line in demo.stdout.splitlines() if line.lstrip().startswith("ReplicaSet/")]
    assert len(landed) == 12
    assert all(re.search(r" -> node-\d \(zone-[abc]\)$", line) for line in landed), landed
    batch = [line for line in demo.stdout.splitlines() if line.lstrip().startswith("Job/batch")]
    assert len(batch) == 2, "the Job runs two pods at a time"
    assert "web pods per zone: zone-a 4, zone-b 4, zone-c 4" in demo.stdout
    assert re.search(
        r"demo/too-big-[a-z0-9]+-[a-z0-9]+ stays Pending: FailedScheduling: "
        r"0/6 nodes are available: 6 Insufficient cpu\.",
        demo.stdout,
    ), demo.stdout
    # Act two: zone-c in maintenance, two api pods deviate on the policy's budget, one waits.
    assert demo.stdout.count("(deviation)") == 2
    assert "PolicyDeviation on shop/api-" in demo.stdout
    assert "shop/api-spread's deviation budget: 2 of 2 used, 0 left" in demo.stdout
    table = demo.stdout.split("kubectl get spol -n shop\n", 1)[1].splitlines()
    assert table[0].split() == ["NAME", "READY", "MATCHED", "SKEW", "BUDGET", "AGE"]
    assert table[1].split()[:5] == ["api-spread", "True", "4", "2/1", "0"]
    # Act three: a priority-1000 pod preempts two of four pods on a full node and lands there.
    preempted = re.findall(
        r"urgent/filler-\d: Preempted: Preempted by pod \S+ on node (\S+)", demo.stdout
    )
    assert preempted == ["node-urgent", "node-urgent"], demo.stdout
    assert "urgent/critical -> node-urgent, after 2 of 4 pods were preempted" in demo.stdout
    assert _processes(*parts) == before


def _processes(*names: str) -> set[int]:
    """Pids of live processes whose executable is one of ``names``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        if Path(argv0).name in names and _alive(int(entry.name)):
            found.add(int(entry.name))
    return found
