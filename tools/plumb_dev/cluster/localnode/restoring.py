"""Puts the host back as the record taken before ``up`` found it, once the node's processes ended.

Kills what still runs in the kubelet's cgroups, unmounts everything under the node's directory
(container root filesystems, network namespaces, volumes, the kubelet's self bind-mount),
removes the kubepods cgroups and kube-proxy's nfacct counters, restores the recorded sysctls and
removes the well-known paths the parts created outside the directory. Only what the record says
was not there is touched. Each step returns what it could not do, in words, instead of stopping
the others.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from plumb_dev.cluster.localnode import hostrecord, netfilter, probing

_KILL_WAIT_SECONDS = 10.0
_POLL_SECONDS = 0.1


def _cgroup_dirs(before: hostrecord.HostRecord) -> list[Path]:
    """Every cgroup directory under the kubepods cgroups made since the record, deepest first."""
    found: list[Path] = []
    for top in sorted(set(probing.kubepods_cgroups()) - set(before.cgroups)):
        for root, dirs, _ in os.walk(top):
            found += [Path(root, d) for d in dirs]
        found.append(Path(top))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def kill_pod_processes(before: hostrecord.HostRecord) -> list[str]:
    """SIGKILLs every process in the node's cgroups and waits until they are gone."""
    deadline = time.monotonic() + _KILL_WAIT_SECONDS
    while True:
        pids = {pid for d in _cgroup_dirs(before) for pid in _procs(d)}
        if not pids:
            return []
        if time.monotonic() >= deadline:
            return [f"processes {sorted(pids)} in kubepods cgroups survived SIGKILL"]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(_POLL_SECONDS)


def _procs(directory: Path) -> list[int]:
    try:
        text = (directory / "cgroup.procs").read_text(encoding="utf-8")
    except OSError:
        return []
    return [int(line) for line in text.split()]


def remove_cgroups(before: hostrecord.HostRecord) -> list[str]:
    failures: list[str] = []
    for directory in _cgroup_dirs(before):
        try:
            directory.rmdir()
        except FileNotFoundError:
            pass
        except OSError as error:
            failures.append(f"could not remove cgroup {directory}: {error.strerror}")
    return failures


def unmount_under(directory: Path) -> list[str]:
    """Unmounts every mount at or below directory, deepest first, lazily if busy."""
    failures: list[str] = []
    prefix = str(directory.resolve())
    # A mount point can carry several stacked mounts; each umount takes off the top one.
    for _ in range(20):
        points = [p for p in probing.mount_points() if p == prefix or p.startswith(prefix + "/")]
        if not points:
            return failures
        for point in sorted(set(points), key=lambda p: p.count("/"), reverse=True):
            result = subprocess.run(["umount", point], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                lazy = subprocess.run(
                    ["umount", "-l", point], capture_output=True, text=True, check=False
                )
                if lazy.returncode != 0:
                    failures.append(f"could not unmount {point}: {lazy.stderr.strip()}")
        if failures:
            return failures
    return [f"mounts under {prefix} kept coming back after 20 rounds of unmounting"]


def restore_sysctls(before: hostrecord.HostRecord) -> list[str]:
    failures: list[str] = []
    # ip_forward first: writing it resets every interface's forwarding, which the per-interface
    # keys after it then put back.
    keys = sorted(before.sysctls, key=lambda k: (k != "net/ipv4/ip_forward", k))
    for key in keys:
        path = Path("/proc/sys", key)
        try:
            if path.read_text(encoding="utf-8").strip() != before.sysctls[key]:
                path.write_text(before.sysctls[key] + "\n", encoding="utf-8")
        except FileNotFoundError:
            continue  # went with its interface or module
        except OSError as error:
            failures.append(
                f"could not set {key.replace('/', '.')} back to {before.sysctls[key]}: {error}"
            )
    return failures


def remove_paths(before: hostrecord.HostRecord) -> list[str]:
    """Removes the well-known paths that did not exist before (made by containerd or CNI)."""
    failures: list[str] = []
    for path in hostrecord.WELL_KNOWN_PATHS:
        if path in before.paths or not os.path.lexists(path):
            continue
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError as error:
            failures.append(f"could not remove {path}: {error}")
    return failures


def remove_counters(before: hostrecord.HostRecord) -> list[str]:
    """Deletes the nfacct counters made since the record (after the rules that used them)."""
    failures = [
        netfilter.delete_counter(name) for name in set(netfilter.counters()) - set(before.counters)
    ]
    return [failure for failure in failures if failure is not None]
