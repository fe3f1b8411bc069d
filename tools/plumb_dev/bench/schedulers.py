"""The schedulers under test as child processes: ``plumb run`` and kube-scheduler, each started
against the bench's control plane, checked for liveness during a run, and stopped with a summary
of what its log said."""

from __future__ import annotations

import abc
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plumb.observability import metrics
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import kubescheduler

PLUMB = "plumb"
KUBE_SCHEDULER = "kube-scheduler"
KUBE_SCHEDULER_NAME = "kube-scheduler-bench"
SYNC_TIMEOUT = 180.0
_EXPECTED = (
    # kube-scheduler's normal exit without leader election, logged as an error.
    "finished without leader elect",
    # Its start-up notes about delegated authn/authz, which a local control plane does not use.
    "No authentication-kubeconfig provided",
    "No authorization-kubeconfig provided",
)
"""Log lines that say nothing about how a run went."""
_SYNCED = re.compile(r"synced (\d+) nodes and (\d+) pods")
PROFILE_ENV = "PLUMB_BENCH_PROFILE"
"""Names a directory: py-spy records plumb from its sync to its stop into
``<directory>/<run directory's name>.raw`` (collapsed stacks, one ``frame;frame;... count`` a
line, to aggregate from a shell)."""
PROFILE_RATE = 100
"""Samples per second: py-spy's default, light enough beside a run on 2 shared CPUs."""


class SchedulerProcess(abc.ABC):
    """A scheduler child process: its pid, a liveness check, and stop() returning a log summary."""

    def __init__(self, name: str, pid: int, log: Path) -> None:
        self.name = name
        self.pid = pid
        self.log = log

    @abc.abstractmethod
    def check(self) -> None:
        """Raises, with the log's tail, if the process has exited."""

    @abc.abstractmethod
    def stop(self) -> dict[str, Any]:
        """Stops the process (SIGTERM, then SIGKILL) and summarises its log."""


class PlumbProcess(SchedulerProcess):
    def __init__(self, popen: subprocess.Popen[bytes], log: Path) -> None:
        super().__init__(PLUMB, popen.pid, log)
        self.popen = popen
        self.profiler: subprocess.Popen[bytes] | None = None

    def check(self) -> None:
        if self.popen.poll() is not None:
            raise RuntimeError(
                f"plumb exited with code {self.popen.returncode} during the run; last lines of "
                f"{self.log}:\n{_tail(self.log)}"
            )

    def stop(self) -> dict[str, Any]:
        if self.profiler is not None:
            stop_profiler(self.profiler)
            self.profiler = None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return summarise_log(self.log.read_text(errors="replace"), PLUMB)


class KubeSchedulerProcess(SchedulerProcess):
    def __init__(self, scheduler: kubescheduler.KubeScheduler) -> None:
        super().__init__(KUBE_SCHEDULER, scheduler.pid, scheduler.log)
        self.scheduler = scheduler

    def check(self) -> None:
        if not self.scheduler.running():
            raise RuntimeError(
                f"kube-scheduler exited during the run; last lines of {self.log}:\n"
                f"{self.scheduler.tail()}"
            )

    def stop(self) -> dict[str, Any]:
        self.scheduler.stop()
        return summarise_log(self.scheduler.output(), KUBE_SCHEDULER)


def spawn_plumb(
    plane: controlplane.ControlPlane,
    log: Path,
    scheduler_name: str,
    metrics_port: int = 0,
    extra: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """``plumb run`` as a child in a session of its own, logging to ``log``; its debug port
    off and its metrics on 127.0.0.1:``metrics_port`` (0: off), so that it clashes with no
    plumb running beside it; ``extra``: more flags of ``plumb run``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "plumb",
                "run",
                "--kubeconfig",
                str(plane.kubeconfig),
                "--scheduler-name",
                scheduler_name,
                "--metrics-port",
                str(metrics_port),
                "--metrics-address",
                "127.0.0.1",
                "--debug-port",
                "0",
                *extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )


def tracing_flags(endpoint: str, ratio: float) -> list[str]:
    """``plumb run``'s flags for tracing on: spans over OTLP/HTTP to ``endpoint`` (a base URL),
    at head sampling ``ratio``."""
    return ["--otlp-endpoint", endpoint, "--trace-sampling-ratio", f"{ratio:g}"]


async def start_plumb(
    plane: controlplane.ControlPlane,
    directory: Path,
    scheduler_name: str,
    nodes: int,
    *,
    metrics_port: int = 0,
    extra: Sequence[str] = (),
) -> PlumbProcess:
    """``plumb run`` (``spawn_plumb``'s), once its log says it has synced exactly ``nodes``."""
    log = directory / "plumb.log"
    popen = await asyncio.to_thread(spawn_plumb, plane, log, scheduler_name, metrics_port, extra)
    plumb = PlumbProcess(popen, log)
    deadline = time.monotonic() + SYNC_TIMEOUT
    while True:
        plumb.check()
        synced = _SYNCED.search(log.read_text(errors="replace"))
        if synced:
            if int(synced.group(1)) != nodes:
                plumb.stop()
                raise RuntimeError(
                    f"plumb synced {synced.group(1)} nodes, expected only this run's {nodes}; "
                    f"nodes of an earlier run are still there"
                )
            profile = os.environ.get(PROFILE_ENV)
            if profile:
                plumb.profiler = await asyncio.to_thread(
                    start_profiler, plumb.pid, Path(profile), directory.name
                )
            return plumb
        if time.monotonic() > deadline:
            plumb.stop()
            raise RuntimeError(
                f"plumb did not log 'synced' within {SYNC_TIMEOUT:.0f} s; last lines of {log}:\n"
                f"{_tail(log)}"
            )
        await asyncio.sleep(0.1)


async def start_kube_scheduler(
    plane: controlplane.ControlPlane,
    directory: Path,
    *,
    feature_gates: Mapping[str, bool] | None = None,
) -> KubeSchedulerProcess:
    """kube-scheduler with ``feature_gates`` (None: the plane's own)."""
    # client QPS and burst 5000 and no leader election, as scheduler_perf runs it.
    started = await asyncio.to_thread(
        kubescheduler.start,
        plane,
        directory,
        scheduler_name=KUBE_SCHEDULER_NAME,
        qps=5000,
        burst=5000,
        timeout=SYNC_TIMEOUT,
        feature_gates=feature_gates,
    )
    return KubeSchedulerProcess(started)


def profiler_command(pid: int, output: Path) -> list[str]:
    """The ``py-spy record`` command line that samples ``pid`` into ``output`` as collapsed
    stacks, until it is interrupted (SIGINT writes the file)."""
    beside = Path(sys.executable).with_name("py-spy")
    return [
        str(beside) if beside.exists() else "py-spy",
        "record",
        "--pid",
        str(pid),
        "--rate",
        str(PROFILE_RATE),
        "--format",
        "raw",
        # Don't pause plumb for each sample: the CPU seconds the bench reports stay plumb's own.
        "--nonblocking",
        "--output",
        str(output),
    ]


def start_profiler(pid: int, directory: Path, name: str) -> subprocess.Popen[bytes]:
    """py-spy attached to ``pid``, writing ``<directory>/<name>.raw``; its own messages go to
    ``<name>.py-spy.log`` beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"{name}.py-spy.log").open("wb") as out:
        profiler = subprocess.Popen(
            profiler_command(pid, directory / f"{name}.raw"),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    time.sleep(0.5)
    if profiler.poll() is not None:
        raise RuntimeError(
            f"py-spy could not attach to plumb (pid {pid}); see {directory / name}.py-spy.log "
            f"(is py-spy installed in the venv: `pip install py-spy`, and may this user ptrace?)"
        )
    return profiler


def stop_profiler(profiler: subprocess.Popen[bytes]) -> None:
    """Interrupts py-spy, which then writes its file, and waits for it."""
    if profiler.poll() is None:
        profiler.send_signal(signal.SIGINT)
        try:
            profiler.wait(timeout=60)
        except subprocess.TimeoutExpired:
            profiler.kill()
            profiler.wait()


def summarise_log(text: str, scheduler: str) -> dict[str, Any]:
    """Counts of warning and error lines in a scheduler's log, and the first few distinct ones.

    plumb logs a JSON object per line (or, with --log-format=plain, "<time> LEVEL logger:
    message"); kube-scheduler logs klog lines, whose first letter is the severity (W, E).
    """
    warnings: list[str] = []
    errors: list[str] = []
    for line in text.splitlines():
        if any(expected in line for expected in _EXPECTED):
            continue
        if scheduler == PLUMB:
            level, message = _plumb_line(line)
            bucket = {"WARNING": warnings, "ERROR": errors, "CRITICAL": errors}.get(level)
        else:
            bucket = {"W": warnings, "E": errors}.get(line[:1]) if line[1:5].isdigit() else None
            message = line.split("]", 1)[-1].strip()
        if bucket is not None:
            bucket.append(message)
    return {
        "warnings": len(warnings),
        "errors": len(errors),
        "tracebacks": text.count("Traceback"),
        "samples": list(dict.fromkeys(errors + warnings))[:5],
    }


def _plumb_line(line: str) -> tuple[str, str]:
    """(level, message) of one line of plumb's log, JSON or plain."""
    if line.startswith("{"):
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if isinstance(entry, dict):
            return str(entry.get("level", "")), f"{entry.get('logger')}: {entry.get('msg')}"
    parts = line.split(" ", 3)
    if len(parts) > 3:
        return parts[2], parts[3]
    return "", line


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"


def spans_dropped(metrics_port: int) -> float | None:
    """plumb's ``plumb_trace_spans_dropped_total`` (every reason) from its /metrics on
    127.0.0.1:``metrics_port``; None if the page could not be read."""
    from prometheus_client import parser

    url = f"http://127.0.0.1:{metrics_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode("utf-8")
    except OSError:
        return None
    return sum(
        sample.value
        for family in parser.text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == metrics.SPANS_DROPPED
    )
