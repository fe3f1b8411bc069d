"""The control plane's processes: spawning them, telling whether they live, waiting, stopping.

A process is recognised by its pid, its binary and the argument that names its directory
(``config.Layout.identity_arg``), so that a reused pid is never signalled by mistake.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import os
import signal
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path

from plumb_dev.cluster.controlplane import config

_LOG_TAIL_LINES = 20
_POLL_SECONDS = 0.1
_KILL_WAIT_SECONDS = 5.0
# Loopback answers in milliseconds; a longer wait only delays noticing a dead process.
_REQUEST_TIMEOUT_SECONDS = 2.0
_PROC = Path("/proc")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Child:
    """A process this call started, which only this process can reap and read the status of."""

    name: str
    pid: int
    log: Path
    binary: Path

    @classmethod
    def spawn(
        cls,
        name: str,
        bin_dir: Path,
        args: list[str],
        layout: config.Layout,
        *,
        append: bool = False,
    ) -> Child:
        binary = bin_dir / name
        log = layout.log(name)
        mode = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        pid = os.posix_spawn(
            binary,
            [str(binary), *args],
            dict(os.environ),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, str(log), mode, 0o644),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            # Its own session: a Ctrl-C meant for the CLI that started it does not reach it, and
            # stop() can signal the whole group. posix_spawn rather than subprocess.Popen since
            # a Popen object dropped while its process runs warns, and these are meant to outlive
            # any object here.
            setsid=True,
        )
        return cls(name=name, pid=pid, log=log, binary=binary)

    def exit_code(self) -> int | None:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return -1
        return None if pid == 0 else os.waitstatus_to_exitcode(status)


def check_binaries(bin_dir: Path, wanted: list[str]) -> None:
    missing = [b for b in wanted if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        raise config.ControlPlaneError(
            f"{_listed(missing)} missing (or not executable) in {bin_dir}; build the "
            f"binaries with hack/build-control-plane.sh (plumb_dev.cluster.controlplane.building."
            f"ensure_binaries()) and pass the directory it prints as bin_dir"
        )


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def alive(pid: int, binary: Path, identity_arg: str) -> bool:
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


def terminate(pid: int, binary: Path, identity_arg: str, timeout: float) -> None:
    if pid <= 1 or not alive(pid, binary, identity_arg):
        return
    _signal_group(pid, signal.SIGTERM)
    if _wait_gone(pid, binary, identity_arg, timeout):
        return
    _signal_group(pid, signal.SIGKILL)
    if not _wait_gone(pid, binary, identity_arg, _KILL_WAIT_SECONDS):
        raise config.ControlPlaneError(
            f"{binary.name} (pid {pid}) survived SIGKILL for {_KILL_WAIT_SECONDS} s; it is "
            f"probably stuck in the kernel (e.g. on a hung disk); look at it with ps"
        )


def signal_and_wait(
    pid: int, binary: Path, identity_arg: str, sig: signal.Signals, timeout: float
) -> None:
    """Sends sig to the process's group and waits until it is gone (a restart's first half)."""
    _signal_group(pid, sig)
    if not _wait_gone(pid, binary, identity_arg, timeout):
        raise config.ControlPlaneError(
            f"{binary.name} (pid {pid}) still runs {timeout} s after {sig.name}; look at it with ps"
        )


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # The process was started with its own session, so its pid is also its process group id.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _wait_gone(pid: int, binary: Path, identity_arg: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid, binary, identity_arg):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_SECONDS / 2)
    # alive() reaps only a child that had exited before its waitpid; one that exits just after
    # is a zombie by the time its command line reads empty. If it is our child, collect it now
    # (it is dead, so this returns at once); a process we did not start raises and is left be.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    return True


def wait_until(
    ready: Callable[[], bool], deadline: float, children: list[Child], what: str
) -> None:
    while True:
        for child in children:
            code = child.exit_code()
            if code is not None:
                raise config.ControlPlaneError(
                    f"{child.name} exited with code {code} while waiting for {what}; last lines "
                    f"of {child.log}:\n{_tail(child.log)}"
                )
        if ready():
            return
        if time.monotonic() >= deadline:
            newest = children[-1]
            raise config.ControlPlaneError(
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


def ports(etcd_port: int, apiserver_port: int) -> tuple[int, int, int]:
    """(etcd client, etcd peer, apiserver) ports: the requested ones, free ones for the zeros."""
    free = free_ports(3, taken={etcd_port, apiserver_port})
    return (etcd_port or free[0], free[1], apiserver_port or free[2])


def free_ports(count: int, *, taken: set[int] | None = None) -> list[int]:
    """count distinct free ports on 127.0.0.1, none of them in taken."""
    wanted = set(taken or ()) - {0}
    with contextlib.ExitStack() as stack:
        free: list[int] = []
        # Held open together so the kernel hands out distinct ports; they are released just
        # before the servers bind them, a small race a test cluster can live with.
        while len(free) < count:
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
            if port not in wanted:
                free.append(port)
    return free


def _get(
    port: int,
    path: str,
    *,
    context: ssl.SSLContext | None = None,
    token: str | None = None,
    host: str = config.LOOPBACK,
) -> int:
    """The HTTP status of GET host:port/path; 0 if the server gave no answer."""
    connection: http.client.HTTPConnection
    if context is None:
        connection = http.client.HTTPConnection(host, port, timeout=_REQUEST_TIMEOUT_SECONDS)
    else:
        connection = http.client.HTTPSConnection(
            host, port, timeout=_REQUEST_TIMEOUT_SECONDS, context=context
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


def etcd_healthy(port: int) -> bool:
    return _get(port, "/health") == 200


def jaeger_ready(query_port: int) -> bool:
    """Whether Jaeger's query API answers (it starts after its storage and receivers)."""
    return _get(query_port, "/api/services") == 200


def api_get(server: str, ca_file: Path, token: str, path: str) -> int:
    """The HTTP status of GET server/path with the admin token; 0 if there was no answer."""
    host, port = server.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca_file))
    return _get(int(port), path, context=context, token=token, host=host)


def apiserver_ready(server: str, ca_file: Path, token: str) -> bool:
    # /readyz alone can pass before the system namespaces exist; clients that create objects in
    # "default" right away would then fail.
    return (
        api_get(server, ca_file, token, "/readyz") == 200
        and api_get(server, ca_file, token, "/api/v1/namespaces/default") == 200
    )
