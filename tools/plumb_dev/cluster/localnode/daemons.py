"""The node's long-running processes: started detached with a log, found again by pid and config.

Like the control plane's (``plumb_dev.cluster.controlplane.processes``, whose ``alive`` and
``terminate`` are used as they are): each runs in its own session, so a Ctrl-C meant for the
caller does not reach it and stopping it signals its whole group; a pid counts as ours only
while it still runs our binary with our ``--config=`` argument, so a reused pid is never
signalled.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from plumb_dev.cluster.controlplane import processes


@dataclasses.dataclass(frozen=True, kw_only=True)
class Daemon:
    """One started process: its name, binary, pid, the argument that identifies it, its log."""

    name: str
    binary: Path
    pid: int
    identity_arg: str
    log: Path

    def alive(self) -> bool:
        return processes.alive(self.pid, self.binary, self.identity_arg)

    def stop(self, timeout: float) -> None:
        processes.terminate(self.pid, self.binary, self.identity_arg, timeout)

    def exit_code(self) -> int | None:
        """The exit code if this process (our child) has ended, else None."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return None if self.alive() else -1
        return None if pid == 0 else os.waitstatus_to_exitcode(status)

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as error:
            return f"(could not read {self.log}: {error})"
        return "\n".join(text[-lines:]) or "(empty)"


def spawn(
    name: str,
    binary: Path,
    args: list[str],
    *,
    identity_arg: str,
    log: Path,
    env: Mapping[str, str] | None = None,
) -> Daemon:
    """Starts binary with args (identity_arg among them), output appended to log."""
    if identity_arg not in args:
        raise ValueError(f"{identity_arg!r} is not among {name}'s arguments {args}")
    environment = {**os.environ, **(env or {})}
    # The node's parts call iptables, mount, runc and the CNI plugins by name.
    environment["PATH"] = ":".join(
        dict.fromkeys([*environment.get("PATH", "").split(":"), "/usr/sbin", "/usr/bin", "/sbin"])
    ).strip(":")
    pid = os.posix_spawn(
        binary,
        [str(binary), *args],
        environment,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ],
        setsid=True,
    )
    return Daemon(name=name, binary=binary, pid=pid, identity_arg=identity_arg, log=log)
