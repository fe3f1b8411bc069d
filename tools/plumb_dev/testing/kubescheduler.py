"""Runs the real kube-scheduler from the control plane's bin_dir against that control plane, so
tests can hold plumb's decisions against the reference implementation's.

It takes only pods whose schedulerName is its one profile's name, so it never competes with
plumb, nor with anything else that schedules pods on the same API server. A test helper: the
scheduler never imports it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from plumb_dev.cluster.controlplane import featuregates
from plumb_dev.cluster.controlplane import lifecycle as controlplane

BINARY = "kube-scheduler"
DEFAULT_SCHEDULER_NAME = "kube-scheduler-test"
CONFIG_FILE = "kube-scheduler-config.json"
LOG_FILE = "kube-scheduler.log"
CERT_DIR = "kube-scheduler-certs"
# kube-scheduler writes its self-signed serving certificate and the CA that signed it here, from
# its --cert-dir and its component name.
_SERVING_CERT = "kube-scheduler.crt"
# kube-scheduler's /readyz passes once its informers have synced and its event handlers have
# seen every object they list (the "sched-handler-sync" check); before that a pod created by a
# test could be judged against a half-filled cache.
_READY_PATH = "/readyz"
_PORT_TAKEN = "address already in use"
# The free port is released before kube-scheduler binds it; another process may take it first.
_PORT_ATTEMPTS = 3
_LOG_TAIL_LINES = 30
_POLL_SECONDS = 0.05
_REQUEST_TIMEOUT_SECONDS = 2.0
_KILL_WAIT_SECONDS = 5.0


class KubeSchedulerError(RuntimeError):
    """kube-scheduler could not be started or stopped."""


class KubeScheduler:
    """A kube-scheduler child process, its configuration and its log.

    stop() it when done, or use it as a context manager: a Popen object dropped while its
    process runs warns, and pytest turns that warning into an error.
    """

    def __init__(
        self,
        *,
        process: subprocess.Popen[bytes],
        scheduler_name: str,
        config: Path,
        log: Path,
        port: int,
    ) -> None:
        self.process = process
        self.scheduler_name = scheduler_name
        self.config = config
        self.log = log
        self.port = port

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return "\n".join(self.output().splitlines()[-lines:]) or "(empty)"

    def stop(self, *, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL if it is still there after timeout seconds; returns its exit code.

        Without leader election v1.34 answers SIGTERM with a clean shutdown and exit code 1
        ("finished without leader elect"), so the code says little; the log says more.
        Stopping a stopped scheduler only returns its code again.
        """
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.process.pid, signal.SIGKILL)
                try:
                    self.process.wait(timeout=_KILL_WAIT_SECONDS)
                except subprocess.TimeoutExpired:
                    raise KubeSchedulerError(
                        f"kube-scheduler (pid {self.process.pid}) survived SIGKILL for "
                        f"{_KILL_WAIT_SECONDS} s; it is probably stuck in the kernel; look at it "
                        f"with ps"
                    ) from None
        return self.process.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def configuration(
    plane: controlplane.ControlPlane,
    *,
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    qps: int = 5000,
    burst: int = 5000,
    profiles: Sequence[Mapping[str, Any]] | None = None,
    extenders: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The KubeSchedulerConfiguration start() writes: one profile (or ``profiles``), no leader
    election, the HTTP ``extenders`` if given (v1 Extender objects, as the file's top-level
    ``extenders``). plumb reads the same file (``plumb run --config``), ignoring the client
    connection and leader election it does not use."""
    body: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(plane.kubeconfig), "qps": qps, "burst": burst},
        # A single instance: waiting for a lease would only delay the start by seconds.
        "leaderElection": {"leaderElect": False},
        # percentageOfNodesToScore stays at its default, as a real cluster would run it.
        "profiles": (
            [{"schedulerName": scheduler_name}] if profiles is None else [*map(dict, profiles)]
        ),
    }
    if extenders is not None:
        body["extenders"] = [*map(dict, extenders)]
    return body


def start(
    plane: controlplane.ControlPlane,
    directory: Path,
    *,
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    qps: int = 5000,
    burst: int = 5000,
    timeout: float = 60.0,
    profiles: Sequence[Mapping[str, Any]] | None = None,
    extenders: Sequence[Mapping[str, Any]] | None = None,
    verbosity: int = 2,
    feature_gates: Mapping[str, bool] | None = None,
    binary: Path | None = None,
) -> KubeScheduler:
    """Starts kube-scheduler against plane and waits until it has synced with the API server.

    It runs with ``feature_gates`` as its --feature-gates, by default the plane's own
    (``plane.feature_gates``, those its API server and controllers run with; ``{}`` for none),
    as a cluster's scheduler runs with the cluster's gates: GenericWorkload makes it watch
    PodGroups and place a group's pods together.

    Its configuration (with ``profiles`` instead of one named ``scheduler_name`` if given, and
    ``extenders``: configuration()),
    serving certificate and log (klog ``--v=verbosity``) go to directory. ``binary`` runs
    another build of the command instead of the control plane's own (scheduler-plugins' kube-
    scheduler: ``schedulerplugins.start``). The client limits default
    to 5000, as in Kubernetes' own scheduler_perf, so the defaults of 50/100 requests per
    second do not make it look slow. It serves /readyz on a free loopback port, and nothing
    else is reachable without credentials.
    """
    if not scheduler_name:
        raise ValueError(
            "scheduler_name is empty; pass the schedulerName the pods for this kube-scheduler "
            f"carry (e.g. {DEFAULT_SCHEDULER_NAME!r})"
        )
    for name, value in (("qps", qps), ("burst", burst)):
        if value <= 0:
            raise ValueError(f"{name}={value} must be positive (requests per second to the API)")
    if timeout <= 0:
        raise ValueError(f"timeout={timeout} must be positive (seconds to wait for readiness)")
    if binary is not None:
        if not os.access(binary, os.X_OK):
            raise KubeSchedulerError(
                f"{binary} is missing or not executable; pass the path its build script printed"
            )
    else:
        binary = plane.bin_dir / BINARY
        if not os.access(binary, os.X_OK):
            raise KubeSchedulerError(
                f"{binary} is missing or not executable; build it with "
                f"hack/build-control-plane.sh (plumb_dev.cluster.controlplane.building."
                f"ensure_binaries()), which builds it beside kube-apiserver"
            )
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / CONFIG_FILE
    body = configuration(
        plane,
        scheduler_name=scheduler_name,
        qps=qps,
        burst=burst,
        profiles=profiles,
        extenders=extenders,
    )
    # kube-scheduler reads JSON as well as YAML, which spares a YAML dependency.
    config.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    cert_dir = directory / CERT_DIR
    cert_dir.mkdir(exist_ok=True)
    log = directory / LOG_FILE
    gates = plane.feature_gates if feature_gates is None else feature_gates

    deadline = time.monotonic() + timeout
    for _ in range(_PORT_ATTEMPTS):
        port = _free_port()
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    str(binary),
                    f"--config={config}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={cert_dir}",
                    f"--v={verbosity}",
                    *featuregates.flags(gates),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                # Its own process group, so stop() reaches anything it might spawn.
                start_new_session=True,
            )
        scheduler = KubeScheduler(
            process=process, scheduler_name=scheduler_name, config=config, log=log, port=port
        )
        try:
            if _wait_ready(scheduler, cert_dir / _SERVING_CERT, deadline):
                return scheduler
        except BaseException:
            scheduler.stop()
            raise
        scheduler.stop()
    raise KubeSchedulerError(
        f"kube-scheduler found its port taken {_PORT_ATTEMPTS} times in a row; something is "
        f"grabbing free loopback ports quickly; last lines of {log}:\n{scheduler.tail()}"
    )


def _wait_ready(scheduler: KubeScheduler, cert: Path, deadline: float) -> bool:
    """True once it is ready, False if it exited because its port was taken; raises otherwise."""
    while True:
        code = scheduler.process.poll()
        if code is not None:
            if _PORT_TAKEN in scheduler.output():
                return False
            raise KubeSchedulerError(
                f"kube-scheduler exited with code {code} before it was ready; last lines of "
                f"{scheduler.log}:\n{scheduler.tail()}"
            )
        if _ready(scheduler.port, cert):
            return True
        if time.monotonic() >= deadline:
            raise KubeSchedulerError(
                f"timed out waiting for kube-scheduler to pass {_READY_PATH} on port "
                f"{scheduler.port}; raise the timeout if the machine is slow; last lines of "
                f"{scheduler.log}:\n{scheduler.tail()}"
            )
        time.sleep(_POLL_SECONDS)


def _ready(port: int, cert: Path) -> bool:
    try:
        # Written during start-up, so missing or half written the first few times round. It
        # holds the serving certificate followed by its CA, valid for 127.0.0.1.
        context = ssl.create_default_context(cafile=str(cert))
    except (OSError, ssl.SSLError):
        return False
    connection = http.client.HTTPSConnection(
        "127.0.0.1", port, timeout=_REQUEST_TIMEOUT_SECONDS, context=context
    )
    try:
        connection.request("GET", _READY_PATH)
        response = connection.getresponse()
        response.read()
        return response.status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # Started with its own session, so its pid is also its process group id; only signalled
    # before it is reaped, so the id cannot have been reused yet.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
