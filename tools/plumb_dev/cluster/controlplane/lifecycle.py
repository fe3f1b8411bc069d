"""Starts, finds and stops a local control plane, recorded in a directory.

etcd and kube-apiserver always; kube-controller-manager (controllers) and kube-scheduler (the
cluster's default scheduler) unless asked not to; Jaeger, with kube-apiserver and etcd sending it
their spans, when asked to (``Parts.jaeger``, ``plumb cluster up --tracing``). Everything listens
on 127.0.0.1, or on the real node's bridge gateway when the cluster has one
(``plumb_dev.cluster.localnode`` asks for that); Jaeger always on 127.0.0.1.

The public face of the package: ``ControlPlane``, ``ControlPlaneError``, ``start``, ``load``,
``stop``, ``is_running``, ``env_lines``, ``release_of`` and ``check_feature_gates``, with the
state file that connects them. What the processes are given lives in ``config``, with what
differs between Kubernetes releases in ``releases`` and the feature gates in ``featuregates``;
how they are started, watched and stopped in ``processes``. The release is the binaries': start
asks their kube-apiserver (``--version``), so the flags always match them, and the ControlPlane
records it, with the feature gates it was started with.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from plumb_dev.cluster.controlplane import (
    config,
    featuregates,
    pki,
    processes,
    releases,
    tracestore,
)

STATE_FILE = config.STATE_FILE
ControlPlaneError = config.ControlPlaneError
_STATE_FORMAT = 3
# Format 2 did not record the release: it was written when the local cluster ran v1.34.4 only.
_FORMAT_2 = 2
_FORMAT_2_VERSION = "v1.34.4"

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ControlPlane:
    """A running (or recorded) local control plane and how to reach it."""

    directory: Path
    bin_dir: Path
    # The Kubernetes release of the binaries it runs ("v1.37.2"), a key of releases.RELEASES.
    kube_version: str
    kubeconfig: Path
    server: str
    token: str
    ca_file: Path
    etcd_pid: int
    apiserver_pid: int
    # 0 where the part was not started.
    controller_manager_pid: int = 0
    scheduler_pid: int = 0
    # The gates kube-apiserver, kube-controller-manager and kube-scheduler run with, over the
    # release's defaults ({"GenericWorkload": True}); a kube-scheduler or plumb started against
    # this plane later reads them here (plumb_dev.testing.kubescheduler passes them on).
    feature_gates: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    # The Jaeger that kube-apiserver and etcd send their spans to (its OTLP endpoints and query
    # URL), when the plane was started with one (Parts.jaeger); else None.
    jaeger: tracestore.Jaeger | None = None

    def processes(self) -> list[tuple[str, int]]:
        """(binary, pid) of every part started, in the order they are stopped: Jaeger last, so
        the others' last spans reach it."""
        parts = [
            (config.SCHEDULER, self.scheduler_pid),
            (config.CONTROLLER_MANAGER, self.controller_manager_pid),
            (config.APISERVER, self.apiserver_pid),
            (config.ETCD, self.etcd_pid),
            (config.JAEGER, self.jaeger.pid if self.jaeger is not None else 0),
        ]
        return [(name, pid) for name, pid in parts if pid]

    def binary(self, name: str) -> Path:
        """The binary a part runs: bin_dir's, or Jaeger's own (built apart)."""
        if name == config.JAEGER and self.jaeger is not None:
            return self.jaeger.binary
        return self.bin_dir / name


@dataclasses.dataclass(frozen=True, kw_only=True)
class Parts:
    """Which optional parts a control plane runs, and where the API server listens."""

    # kube-controller-manager: Deployments, Jobs, PDB status, PV binding, service-account
    # tokens, namespace deletion, garbage collection.
    controllers: bool = True
    # kube-scheduler as the cluster's default scheduler, for pods that do not ask for plumb; off
    # for the side-by-side tests and the benchmark, which run their own.
    scheduler: bool = False
    # ServiceAccount admission (a token volume in every pod); the benchmark turns it off, as
    # Kubernetes' scheduler performance tests do.
    service_accounts: bool = True
    address: str = config.LOOPBACK
    # Extra kube-apiserver flags, after plumb's own (a later flag wins): the chaos tests turn
    # the watch cache off so that a watch resumed after an etcd compaction gets 410 Gone.
    apiserver_flags: tuple[str, ...] = ()
    # Jaeger's binary (building.ensure_jaeger()): with one, Jaeger starts first and kube-apiserver
    # and etcd send it the spans of requests that carry a sampled traceparent from a
    # system:masters caller (tracestore).
    jaeger: Path | None = None


# The benchmark's control plane, as Kubernetes' scheduler performance tests run it: etcd and the
# API server only, pods without service-account tokens, so that both schedulers are measured
# against the same bare API server.
BENCHMARK = Parts(controllers=False, service_accounts=False)


def start(
    directory: Path,
    *,
    bin_dir: Path,
    apiserver_port: int = 0,
    etcd_port: int = 0,
    timeout: float = 90.0,
    parts: Parts | None = None,
    feature_gates: Mapping[str, bool] | None = None,
) -> ControlPlane:
    """Starts the control plane and waits until the API server is ready.

    ``feature_gates`` ({"GenericWorkload": True}) go to kube-apiserver, kube-controller-manager
    and kube-scheduler as their --feature-gates (GenericWorkload also has kube-apiserver serve
    its API version: featuregates); a gate the binaries do not know is refused before anything
    starts.

    A port of 0 picks a free one. Each start begins with an empty etcd, so no run sees objects
    left by an earlier one. The processes run in their own sessions and outlive the caller; the
    pids go to directory/state.json, from which stop() finds them again. With controllers, it
    also waits until the service-account controller has made the default namespace's account,
    so pods can be created at once.
    """
    for name, port in (("apiserver_port", apiserver_port), ("etcd_port", etcd_port)):
        if not 0 <= port <= 65535:
            raise ValueError(f"{name}={port} is not a TCP port; pass 1-65535, or 0 for a free one")
    if timeout <= 0:
        raise ValueError(f"timeout={timeout} must be positive (seconds to wait for readiness)")
    parts = parts or Parts()
    gates = dict(feature_gates or {})
    deadline = time.monotonic() + timeout
    bin_dir = bin_dir.resolve()
    processes.check_binaries(bin_dir, _binaries(parts))
    if parts.jaeger is not None:
        processes.check_binaries(parts.jaeger.parent, [parts.jaeger.name])
    release = release_of(bin_dir)
    check_feature_gates(bin_dir, gates, parts=parts, release=release)
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
    tls = _certificates(layout, parts.address)

    etcd_client, etcd_peer, apiserver = processes.ports(etcd_port, apiserver_port)
    server = f"https://{parts.address}:{apiserver}"
    started: list[processes.Child] = []
    jaeger: tracestore.Jaeger | None = None
    try:
        etcd_args = config.etcd_args(layout, etcd_client, etcd_peer)
        if parts.jaeger is not None:
            jaeger = _start_jaeger(
                layout, parts.jaeger, {etcd_client, etcd_peer, apiserver}, deadline, started
            )
            etcd_args += tracestore.etcd_flags(jaeger)
        etcd = processes.Child.spawn(config.ETCD, bin_dir, etcd_args, layout)
        started.append(etcd)
        processes.wait_until(
            lambda: processes.etcd_healthy(etcd_client), deadline, started, "etcd to report healthy"
        )
        api_args = config.apiserver_args(
            layout,
            apiserver,
            etcd_client,
            address=parts.address,
            tls=tls,
            service_accounts=parts.service_accounts,
        )
        if jaeger is not None:
            api_args += tracestore.apiserver_flags(layout)
        api_args += featuregates.apiserver_flags(gates, release) + list(parts.apiserver_flags)
        api = processes.Child.spawn(config.APISERVER, bin_dir, api_args, layout)
        started.append(api)
        cp = ControlPlane(
            directory=layout.directory,
            bin_dir=bin_dir,
            kube_version=release.version,
            kubeconfig=layout.kubeconfig,
            server=server,
            token=token,
            ca_file=layout.ca_file,
            etcd_pid=etcd.pid,
            apiserver_pid=api.pid,
            feature_gates=gates,
            jaeger=jaeger,
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
        cp = _start_components(cp, layout, parts, release, started)
        _write_state(layout, cp, etcd_port=etcd_client, etcd_peer_port=etcd_peer)
        if parts.controllers:
            processes.wait_until(
                lambda: processes.api_get(cp.server, cp.ca_file, cp.token, _DEFAULT_ACCOUNT) == 200,
                deadline,
                started,
                "kube-controller-manager to create the default service account",
            )
        return cp
    except BaseException:
        for child in reversed(started):
            processes.terminate(child.pid, child.binary, layout.identity_arg(child.name), 5.0)
        layout.state.unlink(missing_ok=True)
        raise


def _start_jaeger(
    layout: config.Layout,
    binary: Path,
    taken: set[int],
    deadline: float,
    started: list[processes.Child],
) -> tracestore.Jaeger:
    """Starts Jaeger on free ports (none of taken) and waits until its query API answers."""
    grpc, http, query, query_grpc = processes.free_ports(4, taken=taken)
    jaeger = tracestore.Jaeger(
        binary=binary,
        pid=0,
        otlp_grpc_port=grpc,
        otlp_http_port=http,
        query_port=query,
        query_grpc_port=query_grpc,
    )
    tracestore.write(layout, jaeger)
    child = processes.Child.spawn(
        config.JAEGER, binary.parent, tracestore.jaeger_args(layout), layout
    )
    started.append(child)
    processes.wait_until(
        lambda: processes.jaeger_ready(query), deadline, started, "Jaeger to answer /api/services"
    )
    return dataclasses.replace(jaeger, pid=child.pid)


_DEFAULT_ACCOUNT = "/api/v1/namespaces/default/serviceaccounts/default"


def release_of(bin_dir: Path) -> releases.KubeRelease:
    """The release of the binaries in bin_dir, as their kube-apiserver reports it ("Kubernetes
    v1.37.2": the build script sets the version), if the local cluster knows its flags."""
    apiserver = bin_dir / config.APISERVER
    try:
        result = subprocess.run(
            [str(apiserver), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ControlPlaneError(f"could not ask {apiserver} for its version: {error}") from error
    answer = (result.stdout or result.stderr).strip()
    release = releases.RELEASES.get(answer.removeprefix("Kubernetes "))
    if result.returncode != 0 or release is None:
        raise ControlPlaneError(
            f"{apiserver} --version answered {answer!r} (exit code {result.returncode}); the "
            f"local cluster knows the flags of {', '.join(releases.RELEASES)} only: build one "
            f"of them with hack/build-control-plane.sh <release> and pass its directory"
        )
    return release


def check_feature_gates(
    bin_dir: Path,
    feature_gates: Mapping[str, bool],
    *,
    parts: Parts | None = None,
    release: releases.KubeRelease | None = None,
) -> None:
    """Refuses a gate that a binary start would give it to does not list in its --help, naming
    the gate, the binaries and the closest name; asks nothing when there are no gates."""
    if not feature_gates:
        return
    release = release or release_of(bin_dir)
    gated = [b for b in _binaries(parts or Parts()) if b != config.ETCD]
    known_by = {binary: featuregates.known(bin_dir / binary) for binary in gated}
    featuregates.check(feature_gates, known_by, release.version)


def _binaries(parts: Parts) -> list[str]:
    wanted = [config.ETCD, config.APISERVER]
    if parts.controllers:
        wanted.append(config.CONTROLLER_MANAGER)
    if parts.scheduler:
        wanted.append(config.SCHEDULER)
    return wanted


def _certificates(layout: config.Layout, address: str) -> config.ApiserverTls:
    """The CA (kept across restarts) and every certificate the control plane's parts use."""
    authority = pki.Authority(directory=layout.pki)
    authority.ensure_ca()
    names = tuple(dict.fromkeys((*config.SERVING_NAMES, address)))
    serving = authority.server("apiserver", common_name="kube-apiserver", names=names)
    kubelet_client = authority.client(pki.APISERVER_KUBELET_CLIENT)
    return config.ApiserverTls(
        serving_cert=serving.cert,
        serving_key=serving.key,
        kubelet_client_cert=kubelet_client.cert,
        kubelet_client_key=kubelet_client.key,
    )


def component_kubeconfig(cp: ControlPlane, identity: pki.Identity, path: Path) -> Path:
    """Writes a kubeconfig at path that reaches cp as identity, with a client certificate."""
    authority = pki.Authority(directory=config.Layout(directory=cp.directory).pki)
    client = authority.client(identity)
    config.write_private(
        path, config.kubeconfig_text(server=cp.server, ca_file=cp.ca_file, client=client)
    )
    return path


def _start_components(
    cp: ControlPlane,
    layout: config.Layout,
    parts: Parts,
    release: releases.KubeRelease,
    started: list[processes.Child],
) -> ControlPlane:
    """Starts kube-controller-manager and kube-scheduler as parts asks; returns cp with pids."""
    authority = pki.Authority(directory=layout.pki)
    pids: dict[str, int] = {}
    wanted = [
        (config.CONTROLLER_MANAGER, pki.CONTROLLER_MANAGER, parts.controllers),
        (config.SCHEDULER, pki.SCHEDULER, parts.scheduler),
    ]
    for binary, identity, on in wanted:
        if not on:
            continue
        component_kubeconfig(cp, identity, layout.component_kubeconfig(binary))
        if binary == config.CONTROLLER_MANAGER:
            args = config.controller_manager_args(
                layout, cluster_signing=authority.ca, release=release
            )
        else:
            args = config.scheduler_args(layout)
        args += featuregates.flags(cp.feature_gates)
        child = processes.Child.spawn(binary, cp.bin_dir, args, layout)
        started.append(child)
        pids[binary] = child.pid
    return dataclasses.replace(
        cp,
        controller_manager_pid=pids.get(config.CONTROLLER_MANAGER, 0),
        scheduler_pid=pids.get(config.SCHEDULER, 0),
    )


def load(directory: Path) -> ControlPlane | None:
    """The control plane recorded in directory, running or not; None if none is recorded."""
    path = directory / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") not in (_STATE_FORMAT, _FORMAT_2):
            raise ValueError(f"expected an object with format {_STATE_FORMAT}")
        if data["format"] == _FORMAT_2:
            data["kube_version"] = _FORMAT_2_VERSION
        cp = ControlPlane(
            directory=Path(_field(data, "directory", str)),
            bin_dir=Path(_field(data, "bin_dir", str)),
            kube_version=_field(data, "kube_version", str),
            kubeconfig=Path(_field(data, "kubeconfig", str)),
            server=_field(data, "server", str),
            token=_field(data, "token", str),
            ca_file=Path(_field(data, "ca_file", str)),
            etcd_pid=_field(data, "etcd_pid", int),
            apiserver_pid=_field(data, "apiserver_pid", int),
            controller_manager_pid=_field(data, "controller_manager_pid", int),
            scheduler_pid=_field(data, "scheduler_pid", int),
            feature_gates=_gates(data),
            jaeger=tracestore.from_record(data["jaeger"]) if "jaeger" in data else None,
        )
    except ValueError as error:
        raise ControlPlaneError(
            f"{path} is not a control plane state file plumb can read ({error}); if no etcd or "
            f"kube-apiserver from it still runs, delete it"
        ) from error
    for name, pid in cp.processes():
        # 0 and 1 would make a process-group signal hit the caller's group or everything.
        if pid <= 1:
            raise ControlPlaneError(f"{path} records {name}={pid}, which cannot be ours; delete it")
    return cp


def stop(directory: Path, *, timeout: float = 20.0) -> None:
    """Stops the control plane recorded in directory, if any, and forgets it.

    The API server's clients go first (it takes a minute to stop while they are connected),
    then kube-apiserver, so it does not spend its shutdown retrying a vanished etcd. Each
    process group gets SIGTERM, then SIGKILL if it is still there after timeout seconds.
    """
    cp = load(directory)
    if cp is None:
        return
    layout = config.Layout(directory=cp.directory)
    for name, pid in cp.processes():
        processes.terminate(pid, cp.binary(name), layout.identity_arg(name), timeout)
    (directory / STATE_FILE).unlink(missing_ok=True)


def stop_part(
    directory: Path, part: str, *, sig: signal.Signals = signal.SIGKILL, timeout: float = 60.0
) -> None:
    """Stops one part (etcd or kube-apiserver) with ``sig`` and keeps its command line, so that
    ``start_part`` starts it again with the same flags and data: the chaos tests' fault."""
    cp = load(directory)
    if cp is None:
        raise ControlPlaneError(f"no control plane is recorded in {directory}")
    layout = config.Layout(directory=cp.directory)
    pid = _pid_of(cp, part)
    argv = [os.fsdecode(a) for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:-1]]
    config.write_private(_argv_file(layout, part), json.dumps(argv) + "\n")
    processes.signal_and_wait(pid, cp.bin_dir / part, layout.identity_arg(part), sig, timeout)


def start_part(directory: Path, part: str, *, timeout: float = 60.0) -> ControlPlane:
    """Starts a part ``stop_part`` stopped, its log going on in the same file, and waits until
    the API server is ready again; returns the control plane with the new pid recorded."""
    cp = load(directory)
    if cp is None:
        raise ControlPlaneError(f"no control plane is recorded in {directory}")
    layout = config.Layout(directory=cp.directory)
    _pid_of(cp, part)
    argv: list[str] = json.loads(_argv_file(layout, part).read_text(encoding="utf-8"))
    child = processes.Child.spawn(part, cp.bin_dir, argv, layout, append=True)
    deadline = time.monotonic() + timeout
    if part == config.ETCD:
        cp = dataclasses.replace(cp, etcd_pid=child.pid)
        port = int(_state(layout)["etcd_port"])
        processes.wait_until(
            lambda: processes.etcd_healthy(port), deadline, [child], "etcd to report healthy"
        )
    else:
        cp = dataclasses.replace(cp, apiserver_pid=child.pid)
    _rewrite_state(layout, cp)
    processes.wait_until(
        lambda: processes.apiserver_ready(cp.server, cp.ca_file, cp.token),
        deadline,
        [child],
        "kube-apiserver to answer /readyz",
    )
    return cp


def restart(
    directory: Path, part: str, *, sig: signal.Signals = signal.SIGKILL, timeout: float = 60.0
) -> ControlPlane:
    """``stop_part`` then ``start_part``."""
    stop_part(directory, part, sig=sig, timeout=timeout)
    return start_part(directory, part, timeout=timeout)


def _pid_of(cp: ControlPlane, part: str) -> int:
    if part == config.ETCD:
        return cp.etcd_pid
    if part == config.APISERVER:
        return cp.apiserver_pid
    raise ValueError(f"cannot stop or start {part!r}; choose {config.ETCD} or {config.APISERVER}")


def _argv_file(layout: config.Layout, part: str) -> Path:
    return layout.directory / f"{part}.argv.json"


def _state(layout: config.Layout) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(layout.state.read_text(encoding="utf-8"))
    return data


def _rewrite_state(layout: config.Layout, cp: ControlPlane) -> None:
    old = _state(layout)
    _write_state(layout, cp, etcd_port=old["etcd_port"], etcd_peer_port=old["etcd_peer_port"])


def is_running(cp: ControlPlane) -> bool:
    """Whether every recorded process is still alive (a zombie counts as gone)."""
    return all(status(cp).values())


def status(cp: ControlPlane) -> dict[str, bool]:
    """Each recorded part and whether its process is alive."""
    layout = config.Layout(directory=cp.directory)
    return {
        name: processes.alive(pid, cp.binary(name), layout.identity_arg(name))
        for name, pid in reversed(cp.processes())
    }


def env_lines(cp: ControlPlane) -> list[str]:
    """Shell lines that point kubectl (the matching one from bin_dir) at this control plane."""
    bin_dir = str(cp.bin_dir)
    for special in ("\\", '"', "$", "`"):
        bin_dir = bin_dir.replace(special, "\\" + special)
    lines = [
        f"export KUBECONFIG={shlex.quote(str(cp.kubeconfig))}",
        f'export PATH="{bin_dir}:$PATH"',
    ]
    if cp.jaeger is not None:
        lines += tracestore.env_lines(cp.jaeger)
    return lines


def _write_state(
    layout: config.Layout, cp: ControlPlane, *, etcd_port: int, etcd_peer_port: int
) -> None:
    state = {
        "format": _STATE_FORMAT,
        "directory": str(cp.directory),
        "bin_dir": str(cp.bin_dir),
        "kube_version": cp.kube_version,
        "kubeconfig": str(cp.kubeconfig),
        "server": cp.server,
        "token": cp.token,
        "ca_file": str(cp.ca_file),
        "etcd_pid": cp.etcd_pid,
        "apiserver_pid": cp.apiserver_pid,
        "controller_manager_pid": cp.controller_manager_pid,
        "scheduler_pid": cp.scheduler_pid,
        "feature_gates": dict(cp.feature_gates),
        "etcd_url": f"http://127.0.0.1:{etcd_port}",
        "etcd_port": etcd_port,
        "etcd_peer_port": etcd_peer_port,
        "apiserver_port": int(cp.server.rsplit(":", 1)[1]),
        "logs": {name: str(layout.log(name)) for name, _ in cp.processes()},
    }
    if cp.jaeger is not None:
        state["jaeger"] = tracestore.record(cp.jaeger)
    config.write_private(layout.state, json.dumps(state, indent=2) + "\n")


def _gates(data: dict[str, Any]) -> dict[str, bool]:
    # Absent from files written before the gates were recorded: those planes ran with none.
    gates = data.get("feature_gates", {})
    if not isinstance(gates, dict) or not all(
        isinstance(name, str) and isinstance(on, bool) for name, on in gates.items()
    ):
        raise ValueError(f"field 'feature_gates' should map names to booleans, found {gates!r}")
    return gates


def _field(data: dict[str, Any], name: str, kind: type[_T]) -> _T:
    value = data.get(name)
    # bool is an int in Python but never a valid pid.
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"field {name!r} should be a {kind.__name__}, found {value!r}")
    return value
