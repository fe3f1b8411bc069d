"""Starts, finds and stops a local etcd + kube-apiserver on 127.0.0.1, recorded in a directory."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

STATE_FILE = "state.json"
_STATE_FORMAT = 1
_ETCD = "etcd"
_APISERVER = "kube-apiserver"
_CLUSTER = "plumb-local"
_LOG_TAIL_LINES = 20
_POLL_SECONDS = 0.1
_KILL_WAIT_SECONDS = 5.0
# Loopback answers in milliseconds; a longer wait only delays noticing a dead process.
_REQUEST_TIMEOUT_SECONDS = 2.0
_PROC = Path("/proc")

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


class ControlPlaneError(RuntimeError):
    """The local control plane could not be started, found or stopped."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Layout:
    """Where everything of one control plane lives inside its directory."""

    directory: Path

    @property
    def state(self) -> Path:
        return self.directory / STATE_FILE

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def etcd_data(self) -> Path:
        return self.directory / "etcd"

    @property
    def cert_dir(self) -> Path:
        return self.directory / "certs"

    @property
    def ca_file(self) -> Path:
        # kube-apiserver writes its self-generated serving certificate followed by the CA that
        # signed it, so the file doubles as a CA bundle that verifies the server.
        return self.cert_dir / "apiserver.crt"

    @property
    def token_file(self) -> Path:
        return self.directory / "tokens.csv"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "service-account.key"

    def log(self, binary: str) -> Path:
        return self.directory / f"{binary}.log"

    def identity_arg(self, binary: str) -> str:
        """A command-line argument only this directory's process of that binary carries."""
        if binary == _ETCD:
            return f"--data-dir={self.etcd_data}"
        return f"--cert-dir={self.cert_dir}"


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
    _check_binaries(bin_dir)
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ControlPlaneError(
            "the 'openssl' command is not on PATH; it generates the service account signing key; "
            "install it (e.g. apt-get install openssl)"
        )

    directory.mkdir(parents=True, exist_ok=True)
    layout = _Layout(directory=directory.resolve())
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
        _generate_rsa_key(openssl, layout.service_account_key)
    token = secrets.token_hex(32)
    _write_private(layout.token_file, f'{token},admin,admin,"system:masters"\n')

    etcd_client, etcd_peer, apiserver = _ports(etcd_port, apiserver_port)
    server = f"https://127.0.0.1:{apiserver}"
    started: list[_Child] = []
    try:
        etcd = _Child.spawn(_ETCD, bin_dir, _etcd_args(layout, etcd_client, etcd_peer), layout)
        started.append(etcd)
        _wait_until(lambda: _etcd_healthy(etcd_client), deadline, started, "etcd to report healthy")
        api = _Child.spawn(
            _APISERVER, bin_dir, _apiserver_args(layout, apiserver, etcd_client), layout
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
        _write_private(layout.kubeconfig, _kubeconfig_text(cp))
        _wait_until(
            lambda: _apiserver_ready(cp), deadline, started, "kube-apiserver to answer /readyz"
        )
        return cp
    except BaseException:
        for child in reversed(started):
            _terminate(child.pid, bin_dir / child.name, layout.identity_arg(child.name), 5.0)
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
    layout = _Layout(directory=cp.directory)
    for name, pid in ((_APISERVER, cp.apiserver_pid), (_ETCD, cp.etcd_pid)):
        _terminate(pid, cp.bin_dir / name, layout.identity_arg(name), timeout)
    (directory / STATE_FILE).unlink(missing_ok=True)


def is_running(cp: ControlPlane) -> bool:
    """Whether both recorded processes are still alive (a zombie counts as gone)."""
    layout = _Layout(directory=cp.directory)
    return all(
        _alive(pid, cp.bin_dir / name, layout.identity_arg(name))
        for name, pid in ((_ETCD, cp.etcd_pid), (_APISERVER, cp.apiserver_pid))
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


# --- processes -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Child:
    """A process this call started, which only this process can reap and read the status of."""

    name: str
    pid: int
    log: Path

    @classmethod
    def spawn(cls, name: str, bin_dir: Path, args: list[str], layout: _Layout) -> _Child:
        binary = bin_dir / name
        log = layout.log(name)
        pid = os.posix_spawn(
            binary,
            [str(binary), *args],
            dict(os.environ),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            # Its own session: a Ctrl-C meant for the CLI that started it does not reach it, and
            # stop() can signal the whole group. posix_spawn rather than subprocess.Popen since
            # a Popen object dropped while its process runs warns, and these are meant to outlive
            # any object here.
            setsid=True,
        )
        return cls(name=name, pid=pid, log=log)

    def exit_code(self) -> int | None:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return -1
        return None if pid == 0 else os.waitstatus_to_exitcode(status)


def _check_binaries(bin_dir: Path) -> None:
    missing = [b for b in (_ETCD, _APISERVER) if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        raise ControlPlaneError(
            f"{' and '.join(missing)} missing (or not executable) in {bin_dir}; build the "
            f"binaries with hack/build-control-plane.sh (plumb.controlplane.building."
            f"ensure_binaries()) and pass the directory it prints as bin_dir"
        )


def _generate_rsa_key(openssl: str, path: Path) -> None:
    result = subprocess.run(
        [openssl, "genrsa", "-out", str(path), "2048"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise ControlPlaneError(
            f"'openssl genrsa' failed with exit code {result.returncode} writing {path}: "
            f"{result.stderr.strip()}; check that the directory is writable"
        )


def _etcd_args(layout: _Layout, client_port: int, peer_port: int) -> list[str]:
    client = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    return [
        "--name=plumb",
        layout.identity_arg(_ETCD),
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=plumb={peer}",
        # A throwaway test cluster: losing it in a power cut costs nothing, while fsync on every
        # write would make the benchmark measure the disk rather than the scheduler.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def _apiserver_args(layout: _Layout, port: int, etcd_port: int) -> list[str]:
    return [
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        # No --tls-cert-file: kube-apiserver then generates a CA and a serving certificate for
        # 127.0.0.1 here itself, which saves us a certificate authority of our own.
        layout.identity_arg(_APISERVER),
        f"--token-auth-file={layout.token_file}",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={layout.service_account_key}",
        f"--service-account-signing-key-file={layout.service_account_key}",
        "--service-cluster-ip-range=10.0.0.0/24",
        # As Kubernetes' own scheduler performance tests: pods need no service account, nodes
        # get no not-ready taints (there is no kubelet to lift them), and pods need no
        # PriorityClass objects to exist.
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition,Priority",
        # There is no kubelet or network behind the 'kubernetes' service to point endpoints at.
        "--endpoint-reconciler-type=none",
        "--profiling=false",
        "--v=0",
    ]


def _alive(pid: int, binary: Path, identity_arg: str) -> bool:
    """Whether pid is still the process we started (not a zombie, not a reused pid)."""
    with contextlib.suppress(ChildProcessError):
        # Reaps it if it is our child and has exited, so it does not linger as a zombie.
        os.waitpid(pid, os.WNOHANG)
    if not _PROC.joinpath("self").exists():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        raw = _PROC.joinpath(str(pid), "cmdline").read_bytes()
    except OSError:
        return False
    # A zombie's command line is empty, and a reused pid runs something else.
    args = raw.split(b"\0")
    return args[0] == os.fsencode(binary) and os.fsencode(identity_arg) in args


def _terminate(pid: int, binary: Path, identity_arg: str, timeout: float) -> None:
    if pid <= 1 or not _alive(pid, binary, identity_arg):
        return
    _signal_group(pid, signal.SIGTERM)
    if _wait_gone(pid, binary, identity_arg, timeout):
        return
    _signal_group(pid, signal.SIGKILL)
    if not _wait_gone(pid, binary, identity_arg, _KILL_WAIT_SECONDS):
        raise ControlPlaneError(
            f"{binary.name} (pid {pid}) survived SIGKILL for {_KILL_WAIT_SECONDS} s; it is "
            f"probably stuck in the kernel (e.g. on a hung disk); look at it with ps"
        )


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # The process was started with its own session, so its pid is also its process group id.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _wait_gone(pid: int, binary: Path, identity_arg: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid, binary, identity_arg):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_SECONDS / 2)
    return True


def _wait_until(
    ready: Callable[[], bool], deadline: float, children: list[_Child], what: str
) -> None:
    while True:
        for child in children:
            code = child.exit_code()
            if code is not None:
                raise ControlPlaneError(
                    f"{child.name} exited with code {code} while waiting for {what}; last lines "
                    f"of {child.log}:\n{_tail(child.log)}"
                )
        if ready():
            return
        if time.monotonic() >= deadline:
            newest = children[-1]
            raise ControlPlaneError(
                f"timed out waiting for {what}; raise the timeout if the machine is slow; last "
                f"lines of {newest.log}:\n{_tail(newest.log)}"
            )
        time.sleep(_POLL_SECONDS)


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as error:
        return f"(could not read it: {error})"
    return "\n".join(lines[-_LOG_TAIL_LINES:]) or "(empty)"


# --- network -------------------------------------------------------------------------------------


def _ports(etcd_port: int, apiserver_port: int) -> tuple[int, int, int]:
    """(etcd client, etcd peer, apiserver) ports: the requested ones, free ones for the zeros."""
    wanted = {etcd_port, apiserver_port} - {0}
    with contextlib.ExitStack() as stack:
        free: list[int] = []
        # Held open together so the kernel hands out distinct ports; they are released just
        # before the servers bind them, a small race a test cluster can live with.
        while len(free) < 3:
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
            if port not in wanted:
                free.append(port)
    return (etcd_port or free[0], free[1], apiserver_port or free[2])


def _get(
    port: int, path: str, *, context: ssl.SSLContext | None = None, token: str | None = None
) -> int:
    """The HTTP status of GET 127.0.0.1:port/path; 0 if the server gave no answer."""
    connection: http.client.HTTPConnection
    if context is None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=_REQUEST_TIMEOUT_SECONDS)
    else:
        connection = http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=_REQUEST_TIMEOUT_SECONDS, context=context
        )
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        connection.close()


def _etcd_healthy(port: int) -> bool:
    return _get(port, "/health") == 200


def _apiserver_ready(cp: ControlPlane) -> bool:
    port = int(cp.server.rsplit(":", 1)[1])
    try:
        # kube-apiserver writes the certificate during start-up, so it may be missing or half
        # written the first few times round.
        context = ssl.create_default_context(cafile=str(cp.ca_file))
    except (OSError, ssl.SSLError):
        return False
    # /readyz alone can pass before the system namespaces exist; clients that create objects in
    # "default" right away would then fail.
    return (
        _get(port, "/readyz", context=context, token=cp.token) == 200
        and _get(port, "/api/v1/namespaces/default", context=context, token=cp.token) == 200
    )


# --- files ---------------------------------------------------------------------------------------


def _write_private(path: Path, text: str) -> None:
    """Writes atomically with owner-only permissions: these files hold the admin token."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(text)
    os.replace(temporary, path)


def _write_state(layout: _Layout, cp: ControlPlane, *, etcd_port: int, etcd_peer_port: int) -> None:
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
        "logs": {name: str(layout.log(name)) for name in (_ETCD, _APISERVER)},
    }
    _write_private(layout.state, json.dumps(state, indent=2) + "\n")


def _field(data: dict[str, Any], name: str, kind: type[_T]) -> _T:
    value = data.get(name)
    # bool is an int in Python but never a valid pid.
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"field {name!r} should be a {kind.__name__}, found {value!r}")
    return value


def _kubeconfig_text(cp: ControlPlane) -> str:
    # JSON strings are valid YAML double-quoted scalars, which spares a YAML dependency.
    def q(value: object) -> str:
        return json.dumps(str(value))

    return "\n".join(
        [
            "apiVersion: v1",
            "kind: Config",
            "clusters:",
            f"- name: {q(_CLUSTER)}",
            "  cluster:",
            f"    server: {q(cp.server)}",
            f"    certificate-authority: {q(cp.ca_file)}",
            "users:",
            "- name: admin",
            "  user:",
            f"    token: {q(cp.token)}",
            "contexts:",
            f"- name: {q(_CLUSTER)}",
            "  context:",
            f"    cluster: {q(_CLUSTER)}",
            "    user: admin",
            f"current-context: {q(_CLUSTER)}",
            "",
        ]
    )
