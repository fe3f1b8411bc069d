"""Starts, finds and stops a local etcd + kube-apiserver on 127.0.0.1, recorded in a directory.

The public face of the package: ``ControlPlane``, ``ControlPlaneError``, ``start``, ``load``,
``stop``, ``is_running`` and ``env_lines``, with the state file that connects them. What the
processes are given lives in ``config``; how they are started, watched and stopped in
``processes``.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import shlex
import shutil
import time
from pathlib import Path
from typing import Any, TypeVar

from plumb.controlplane import config, processes

STATE_FILE = config.STATE_FILE
ControlPlaneError = config.ControlPlaneError
_STATE_FORMAT = 1

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControlPlane:
    """A running (or recorded) local control plane and how to reach it."""

    directory: Path
    bin_dir: Path
    kubeconfig: Path
    server: str
    token: str
    ca_file: Path
    etcd_pid: int
    apiserver_pid: int


def start(
    directory: Path,
    *,
    bin_dir: Path,
    apiserver_port: int = 0,
    etcd_port: int = 0,
    timeout: float = 90.0,
) -> ControlPlane:
    """Starts etcd and kube-apiserver on 127.0.0.1 and waits until the API server is ready.

    A port of 0 picks a free one. Each start begins with an empty etcd, so no run sees objects
    left by an earlier one. The processes run in their own sessions and outlive the caller; the
    pids go to directory/state.json, from which stop() finds them again.
    """
    for name, port in (("apiserver_port", apiserver_port), ("etcd_port", etcd_port)):
        if not 0 <= port <= 65535:
            raise ValueError(f"{name}={port} is not a TCP port; pass 1-65535, or 0 for a free one")
    if timeout <= 0:
        raise ValueError(f"timeout={timeout} must be positive (seconds to wait for readiness)")
    deadline = time.monotonic() + timeout
    bin_dir = bin_dir.resolve()
    processes.check_binaries(bin_dir)
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ControlPlaneError(
            "the 'openssl' command is not on PATH; it generates the service account signing key; "
            "install it (e.g. apt-get install openssl)"
        )

    directory.mkdir(parents=True, exist_ok=True)
    layout = config.Layout(directory=directory.resolve())
    existing = load(layout.directory)
    if existing is not None:
        if is_running(existing):
            raise ControlPlaneError(
                f"a control plane is already running from {layout.directory} (server "
                f"{existing.server}, etcd pid {existing.etcd_pid}, kube-apiserver pid "
                f"{existing.apiserver_pid}); stop it first, or start in another directory"
            )
        # A half-dead leftover: clear whichever process survived before reusing its files.
        stop(layout.directory)

    shutil.rmtree(layout.etcd_data, ignore_errors=True)
    layout.cert_dir.mkdir(exist_ok=True)
    if not layout.service_account_key.exists():
        config.generate_rsa_key(openssl, layout.service_account_key)
    token = secrets.token_hex(32)
    config.write_private(layout.token_file, f'{token},admin,admin,"system:masters"\n')

    etcd_client, etcd_peer, apiserver = processes.ports(etcd_port, apiserver_port)
    server = f"https://127.0.0.1:{apiserver}"
    started: list[processes.Child] = []
    try:
        etcd = processes.Child.spawn(
            config.ETCD, bin_dir, config.etcd_args(layout, etcd_client, etcd_peer), layout
        )
        started.append(etcd)
        processes.wait_until(
            lambda: processes.etcd_healthy(etcd_client), deadline, started, "etcd to report healthy"
        )
        api = processes.Child.spawn(
            config.APISERVER, bin_dir, config.apiserver_args(layout, apiserver, etcd_client), layout
        )
        started.append(api)
        cp = ControlPlane(
            directory=layout.directory,
            bin_dir=bin_dir,
            kubeconfig=layout.kubeconfig,
            server=server,
            token=token,
            ca_file=layout.ca_file,
            etcd_pid=etcd.pid,
            apiserver_pid=api.pid,
        )
        # Recorded before the readiness wait, so a caller killed meanwhile leaves enough
        # behind for stop() to clean up.
        _write_state(layout, cp, etcd_port=etcd_client, etcd_peer_port=etcd_peer)
        config.write_private(
            layout.kubeconfig,
            config.kubeconfig_text(server=cp.server, ca_file=cp.ca_file, token=cp.token),
        )
        processes.wait_until(
            lambda: processes.apiserver_ready(cp.server, cp.ca_file, cp.token),
            deadline,
            started,
            "kube-apiserver to answer /readyz",
        )
        return cp
    except BaseException:
        for child in reversed(started):
            processes.terminate(
                child.pid, bin_dir / child.name, layout.identity_arg(child.name), 5.0
            )
        layout.state.unlink(missing_ok=True)
        raise


def load(directory: Path) -> ControlPlane | None:
    """The control plane recorded in directory, running or not; None if none is recorded."""
    path = directory / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != _STATE_FORMAT:
            raise ValueError(f"expected an object with format {_STATE_FORMAT}")
        cp = ControlPlane(
            directory=Path(_field(data, "directory", str)),
            bin_dir=Path(_field(data, "bin_dir", str)),
            kubeconfig=Path(_field(data, "kubeconfig", str)),
            server=_field(data, "server", str),
            token=_field(data, "token", str),
            ca_file=Path(_field(data, "ca_file", str)),
            etcd_pid=_field(data, "etcd_pid", int),
            apiserver_pid=_field(data, "apiserver_pid", int),
        )
    except ValueError as error:
        raise ControlPlaneError(
            f"{path} is not a control plane state file plumb can read ({error}); if no etcd or "
            f"kube-apiserver from it still runs, delete it"
        ) from error
    for name, pid in (("etcd_pid", cp.etcd_pid), ("apiserver_pid", cp.apiserver_pid)):
        # 0 and 1 would make a process-group signal hit the caller's group or everything.
        if pid <= 1:
            raise ControlPlaneError(f"{path} records {name}={pid}, which cannot be ours; delete it")
    return cp


def stop(directory: Path, *, timeout: float = 20.0) -> None:
    """Stops the control plane recorded in directory, if any, and forgets it.

    kube-apiserver goes first so it does not spend its shutdown retrying a vanished etcd. Each
    process group gets SIGTERM, then SIGKILL if it is still there after timeout seconds.
    """
    cp = load(directory)
    if cp is None:
        return
    layout = config.Layout(directory=cp.directory)
    for name, pid in ((config.APISERVER, cp.apiserver_pid), (config.ETCD, cp.etcd_pid)):
        processes.terminate(pid, cp.bin_dir / name, layout.identity_arg(name), timeout)
    (directory / STATE_FILE).unlink(missing_ok=True)


def is_running(cp: ControlPlane) -> bool:
    """Whether both recorded processes are still alive (a zombie counts as gone)."""
    layout = config.Layout(directory=cp.directory)
    return all(
        processes.alive(pid, cp.bin_dir / name, layout.identity_arg(name))
        for name, pid in ((config.ETCD, cp.etcd_pid), (config.APISERVER, cp.apiserver_pid))
    )


def env_lines(cp: ControlPlane) -> list[str]:
    """Shell lines that point kubectl (the matching one from bin_dir) at this control plane."""
    bin_dir = str(cp.bin_dir)
    for special in ("\\", '"', "$", "`"):
        bin_dir = bin_dir.replace(special, "\\" + special)
    return [
        f"export KUBECONFIG={shlex.quote(str(cp.kubeconfig))}",
        f'export PATH="{bin_dir}:$PATH"',
    ]


def _write_state(
    layout: config.Layout, cp: ControlPlane, *, etcd_port: int, etcd_peer_port: int
) -> None:
    state = {
        "format": _STATE_FORMAT,
        "directory": str(cp.directory),
        "bin_dir": str(cp.bin_dir),
        "kubeconfig": str(cp.kubeconfig),
        "server": cp.server,
        "token": cp.token,
        "ca_file": str(cp.ca_file),
        "etcd_pid": cp.etcd_pid,
        "apiserver_pid": cp.apiserver_pid,
        "etcd_url": f"http://127.0.0.1:{etcd_port}",
        "etcd_port": etcd_port,
        "etcd_peer_port": etcd_peer_port,
        "apiserver_port": int(cp.server.rsplit(":", 1)[1]),
        "logs": {name: str(layout.log(name)) for name in (config.ETCD, config.APISERVER)},
    }
    config.write_private(layout.state, json.dumps(state, indent=2) + "\n")


def _field(data: dict[str, Any], name: str, kind: type[_T]) -> _T:
    value = data.get(name)
    # bool is an int in Python but never a valid pid.
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"field {name!r} should be a {kind.__name__}, found {value!r}")
    return value
