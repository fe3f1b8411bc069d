"""``plumb run`` as a child process of an integration test: started against a kubeconfig with
its output in a log, waited on until it has synced, stopped; the free ports its endpoints take,
and its trace lines and ``plumb explain`` read back from that log."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from plumb.observability import trace
from plumb_dev.testing import kube


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for a plumb's metrics or debug endpoint."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Plumb:
    """A running ``plumb run`` child process and its log."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


PlumbFactory = Callable[..., Plumb]


def launch_plumb(kubeconfig: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """``plumb run`` against kubeconfig, its output in log; metrics and debug ports off unless
    extra names ports (a later flag wins)."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "plumb",
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--metrics-port",
                "0",
                "--debug-port",
                "0",
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def started_module(module: str, kubeconfig: Path, log: Path, *extra: str) -> Plumb:
    """``python -m module run --kubeconfig ...`` (a test's double of ``plumb run``: plumb with
    a plugin that raises, or sample plugins installed) from the repository's root, its output
    in ``log``, once it has synced; debug endpoint off (``extra`` is more of run's flags)."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                module,
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--debug-port",
                "0",
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            cwd=Path(__file__).parents[2],
        )
    plumb = Plumb(process, log)
    wait_synced(process, plumb.output)
    return plumb


def wait_synced(process: subprocess.Popen[bytes], output: Callable[[], str]) -> None:
    """Until plumb says it has synced with the API server; fails if it exits first."""
    kube.wait_for(
        "plumb to sync with the API server",
        lambda: "synced" in output() or process.poll() is not None,
        # The first start on a fresh machine compiles the kernel (about 30 s here).
        timeout=180,
    )
    assert process.poll() is None, f"plumb exited early:\n{output()}"


def all_traces(plumb: Plumb) -> list[trace.Trace]:
    """Every trace line in plumb's log, oldest first."""
    found = (trace.from_log_line(line) for line in plumb.output().splitlines())
    return [record for record in found if record is not None]


def traces(plumb: Plumb, pod: str) -> list[trace.Trace]:
    """The pod's trace lines in plumb's log, oldest first."""
    return [record for record in all_traces(plumb) if record.pod == pod]


def scheduled_traces(plumb: Plumb, pods: set[str]) -> list[trace.Trace]:
    """The Scheduled trace lines of these pods (namespace/name), oldest first, once each has
    one: the binding lands in the API server a moment before its line reaches the log, so a pod
    seen bound may not have its line yet."""

    def logged() -> list[trace.Trace] | None:
        records = [r for r in all_traces(plumb) if r.result == trace.SCHEDULED and r.pod in pods]
        return records if {r.pod for r in records} == pods else None

    return list(kube.wait_for(f"Scheduled trace lines of {len(pods)} pods", logged, timeout=15))


def last_trace(plumb: Plumb, pod: str, result: str) -> trace.Trace:
    """Waits until the pod's last trace line has this result, and returns it."""

    def last() -> trace.Trace | None:
        records = traces(plumb, pod)
        return records[-1] if records and records[-1].result == result else None

    return kube.wait_for(f"a {result} trace line for {pod}", last)


def explain(*args: str, stdin: str | None = None) -> str:
    """What ``plumb explain`` prints for these arguments (stdin piped when given)."""
    done = subprocess.run(
        [sys.executable, "-m", "plumb", "explain", *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def explained_alike(plumb: Plumb, port: int, pod: str) -> str:
    """``plumb explain`` from the endpoint, from the log file and from a pipe: one text."""
    live = subprocess.run(
        [sys.executable, "-m", "plumb", "explain", pod, "--endpoint", f"http://127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert live.returncode == 0, live.stderr
    assert explain(pod, "--from", str(plumb.log)) == live.stdout
    assert explain(pod, stdin=plumb.output()) == live.stdout
    return live.stdout
