"""kube-controller-manager running the resourceclaim controller alone, beside a scheduler on a
workload whose pods claim devices through templates: it makes each pod's ResourceClaim from its
template and records it in the pod's status, as on a real cluster; both schedulers wait for it
alike. Kubernetes' scheduler_perf runs the same controller, in process.

The bench's control plane has no kube-controller-manager (``BENCHMARK``: etcd and the API server,
as scheduler_perf runs them), so this one is started for such a run only, with the client limits
the schedulers get (5000 requests per second: its default of 20 would make the claims, not the
scheduler, the limit) and the admin's credentials (no service-account tokens here).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from plumb_dev.bench import schedulers
from plumb_dev.cluster.controlplane import lifecycle as controlplane

BINARY = "kube-controller-manager"
CONTROLLER = "resourceclaim-controller"
LOG_FILE = "resourceclaim-controller.log"
QPS = 5000
_STARTED = "Starting resource claim controller"
_SYNCED = "Caches are synced"
SYNC_TIMEOUT = 60.0


def command(plane: controlplane.ControlPlane) -> list[str]:
    """The command line: the one controller, no leader election, nothing served."""
    return [
        str(plane.bin_dir / BINARY),
        f"--kubeconfig={plane.kubeconfig}",
        f"--controllers={CONTROLLER}",
        "--use-service-account-credentials=false",
        f"--kube-api-qps={QPS}",
        f"--kube-api-burst={QPS}",
        "--leader-elect=false",
        "--secure-port=0",
        "--v=0",
    ]


def synced(log: str) -> bool:
    """Whether the log says the controller's informers have synced (it acts from then on)."""
    started = log.find(_STARTED)
    return started >= 0 and log.find(_SYNCED, started) >= 0


class ClaimController:
    """The running controller: its pid (for its CPU), a liveness check, stop()."""

    def __init__(self, popen: subprocess.Popen[bytes], log: Path) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.log = log

    def check(self) -> None:
        if self.popen.poll() is not None:
            raise RuntimeError(
                f"the resourceclaim controller exited with code {self.popen.returncode}; last "
                f"lines of {self.log}:\n{self.tail()}"
            )

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:]) or "(empty)"

    def stop(self) -> dict[str, Any]:
        """SIGTERM (SIGKILL after 10 s); a summary of its log's warnings and errors."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        # klog lines, as kube-scheduler's.
        return schedulers.summarise_log(
            self.log.read_text(errors="replace"), schedulers.KUBE_SCHEDULER
        )


def spawn(plane: controlplane.ControlPlane, log: Path) -> subprocess.Popen[bytes]:
    """The controller as a child in a session of its own, logging to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            command(plane),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def start(plane: controlplane.ControlPlane, directory: Path) -> ClaimController:
    """Starts the controller and waits until its informers have synced."""
    log = directory / LOG_FILE
    controller = ClaimController(await asyncio.to_thread(spawn, plane, log), log)
    deadline = time.monotonic() + SYNC_TIMEOUT
    while not synced(log.read_text(errors="replace")):
        controller.check()
        if time.monotonic() > deadline:
            controller.stop()
            raise RuntimeError(
                f"the resourceclaim controller did not sync within {SYNC_TIMEOUT:.0f} s; last "
                f"lines of {log}:\n{controller.tail()}"
            )
        await asyncio.sleep(0.1)
    return controller
