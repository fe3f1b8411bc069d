"""What every chaos scenario drives: plumb as a child process that can be killed and started
again, pods created in bursts from a background thread, and the sizes of the short and full runs.

The short run is the one ``make test`` includes; ``make test-chaos`` sets PLUMB_CHAOS=full for
the sizes the issue names (a 2,000-pod burst, three kills, a 3-minute soak, 1,000 fuzzed
objects of each kind). Each scenario writes its figures with ``record``;
tests/chaos/reliabilityreport.py turns them into the table of docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from plumb.k8s import client as k8s_client
from plumb.k8s import credentials
from plumb_dev.bench import populating
from plumb_dev.testing import builders, kube
from tests.support import plumb_process

JSON = dict[str, Any]
SCHEDULER = "plumb"
FULL = os.environ.get("PLUMB_CHAOS", "") == "full"
RESULTS = Path(os.environ.get("PLUMB_CHAOS_RESULTS", "build/chaos"))


def size(short: int, full: int) -> int:
    """The short figure in ``make test``, the full one in ``make test-chaos``."""
    return full if FULL else short


def record(scenario: str, **figures: Any) -> None:
    """Keeps a scenario's figures (pods, faults, violations, recovery) for docs/reliability.md."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    figures = {"scenario": scenario, "full": FULL, "at": time.strftime("%Y-%m-%d"), **figures}
    (RESULTS / f"{scenario}.json").write_text(json.dumps(figures, indent=2) + "\n")


class RestartablePlumb:
    """``plumb run`` as a child process: started, SIGKILLed and started again on one log each
    time, with its debug endpoint on a fixed port so that a restart answers at the same place."""

    def __init__(self, kubeconfig: Path, directory: Path, *extra: str) -> None:
        self.kubeconfig = kubeconfig
        self.directory = directory
        self.extra = extra
        self.debug_port = plumb_process.free_port()
        self.metrics_port = plumb_process.free_port()
        self.logs: list[Path] = []
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, wait: bool = True) -> None:
        log = self.directory / f"plumb-{len(self.logs)}.log"
        self.logs.append(log)
        self.process = plumb_process.launch_plumb(
            self.kubeconfig,
            log,
            "--debug-port",
            str(self.debug_port),
            "--metrics-port",
            str(self.metrics_port),
            *self.extra,
        )
        if wait:
            plumb_process.wait_synced(self.process, lambda: log.read_text(errors="replace"))

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> int:
        """Stops the process with sig (SIGKILL: no shutdown of any kind) and returns its code."""
        assert self.process is not None, "plumb was never started"
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return int(self.process.returncode)

    def output(self) -> str:
        """Every run's log, in order."""
        return "".join(log.read_text(errors="replace") for log in self.logs if log.exists())

    def lines(self) -> list[JSON]:
        """The JSON log lines (trace lines among them) of every run."""
        parsed = []
        for line in self.output().splitlines():
            if line.startswith("{"):
                try:
                    parsed.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut by SIGKILL
        return parsed

    def get(self, port: int, path: str, *, timeout: float = 10.0) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
                return int(r.status), r.read()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read()

    def snapshot(self) -> JSON | None:
        """The debug endpoint's snapshot of plumb's cache; None while it does not answer."""
        try:
            status, body = self.get(self.debug_port, "/debug/snapshot", timeout=30.0)
        except OSError:
            return None
        if status != 200:
            return None
        document: JSON = json.loads(body)
        return document

    def rss_bytes(self) -> int:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS in /proc status")

    def open_sockets(self) -> int:
        assert self.process is not None
        fds = Path(f"/proc/{self.process.pid}/fd")
        count = 0
        for fd in fds.iterdir():
            try:
                count += os.readlink(fd).startswith("socket:")
            except OSError:
                continue
        return count

    def stop(self) -> int:
        """SIGTERM, as a rollout stops it; the exit code (0 when it shut down cleanly)."""
        if self.process is None:
            return 0
        return self.kill(signal.SIGTERM)


RestartablePlumbFactory = Callable[..., RestartablePlumb]
"""The ``start_plumb`` fixture: starts a ``RestartablePlumb`` (``kubeconfig=`` another than the
plane's)."""


class Burst:
    """Creates pods through the API from a background thread, many requests at a time, so a test
    can inject faults while the burst goes on. Creates that fail (the API server restarting) are
    retried until they succeed or the pod turns out to exist; ``join`` waits for the end."""

    def __init__(self, cp_kubeconfig: Path, namespace: str, bodies: Sequence[JSON]) -> None:
        self.namespace = namespace
        self.bodies = list(bodies)
        self.created = 0
        self.errors: list[str] = []
        self._creds = credentials.load(kubeconfig=cp_kubeconfig)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Burst:
        self._thread.start()
        return self

    def join(self, timeout: float = 600.0) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the burst did not end in {timeout} s"

    def _run(self) -> None:
        asyncio.run(self._create_all())

    async def _create_all(self) -> None:
        api = k8s_client.ApiClient(self._creds, timeout=20.0)
        try:
            path = f"/api/v1/namespaces/{self.namespace}/pods"

            async def create(index: int) -> None:
                body = self.bodies[index]
                for _ in range(120):
                    try:
                        response = await api.request("POST", path, body=body)
                    except Exception as error:
                        self.errors.append(f"{type(error).__name__}: {error}")
                        await asyncio.sleep(0.5)
                        continue
                    if response.ok or response.status == 409:  # 409: created before a cut
                        self.created += 1
                        return
                    self.errors.append(f"HTTP {response.status}")
                    await asyncio.sleep(0.5)
                raise AssertionError(f"pod {body['metadata']['name']} could not be created")

            await populating.many(len(self.bodies), create, concurrency=8)
        finally:
            await api.close()


def pods(namespace: str, count: int, *, prefix: str = "p", cpu: str = "100m") -> list[JSON]:
    """count small pods for plumb, named prefix-0..."""
    return [
        builders.make_pod(f"{prefix}-{i}", namespace)
        .scheduler(SCHEDULER)
        .req(cpu=cpu, memory="64Mi")
        .obj()
        for i in range(count)
    ]


def nodes(count: int, *, prefix: str, cpu: str = "4", pods: int = 110) -> list[JSON]:
    """count scale nodes (API objects only), in three zones, labelled for the test."""
    return [
        builders.make_node(f"{prefix}-{i}")
        .capacity(cpu=cpu, memory="16Gi", pods=pods)
        .zone(f"zone-{i % 3}")
        .label("plumb.test/chaos", prefix)
        .obj()
        for i in range(count)
    ]


def create_nodes(client: kube.Kube, bodies: Sequence[JSON]) -> list[str]:
    for body in bodies:
        client.create_node(body)
    return [str(body["metadata"]["name"]) for body in bodies]


def wait_until(what: str, probe: Callable[[], bool], timeout: float = 120.0) -> float:
    """Waits for probe, returning the seconds it took."""
    began = time.monotonic()
    kube.wait_for(what, lambda: probe() or None, timeout=timeout, interval=0.25)
    return time.monotonic() - began


def bound(client: kube.Kube, namespace: str) -> int:
    """How many of namespace's pods are bound; 0 while the API server does not answer (a
    scenario may have stopped it)."""
    try:
        return sum(bool(p["spec"].get("nodeName")) for p in client.pods(namespace))
    except Exception:  # the API server restarting: nothing to count yet
        return 0


def wait_traced(plumb: RestartablePlumb, pods: set[str]) -> dict[str, JSON]:
    """Waits for a Scheduled trace line for each of pods (namespace/name) and returns them by
    pod. plumb writes the line once the binding is answered, so the API server may show a pod
    bound a moment before its line is in the log."""

    def traced() -> dict[str, JSON]:
        return {
            str(line["pod"]): line
            for line in plumb.lines()
            if line.get("result") == "Scheduled" and line.get("pod") in pods
        }

    wait_until(f"a Scheduled trace line for {len(pods)} pods", lambda: traced().keys() == pods, 60)
    return traced()


def wait_all_bound(client: kube.Kube, namespace: str, plumb: RestartablePlumb, count: int) -> None:
    """Waits until count pods of namespace are bound; on a timeout, says which are not and what
    plumb last traced for each."""
    try:
        wait_until(
            f"{count} pods bound",
            lambda: bound(client, namespace) >= count,
            timeout=300,
        )
    except kube.WaitTimeout as error:
        last = {line.get("pod"): line for line in plumb.lines() if line.get("result")}
        unbound = [
            f"{namespace}/{p['metadata']['name']}"
            for p in client.pods(namespace)
            if not p["spec"].get("nodeName")
        ]
        detail = "\n  ".join(
            f"{name}: {last.get(name, {}).get('result')} {last.get(name, {}).get('message', '')}"
            for name in unbound[:20]
        )
        raise kube.WaitTimeout(f"{error}; {len(unbound)} unbound:\n  {detail}") from None
