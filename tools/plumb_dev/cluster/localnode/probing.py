"""Reads the parts of the host's state the real node touches; reading only, nothing is changed.

Processes (with whether they run in a kubepods cgroup), mount points, network interfaces,
iptables and ip6tables tables (user chains, rules, non-ACCEPT policies), sysctls and the
kubelet's cgroups; ``hostrecord`` puts them together, ``restoring`` reads them to undo.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

_PROC = Path("/proc")
_SYS = Path("/proc/sys")

# A table's built-in chains exist as long as it does; what counts is whether the table exists,
# its user chains, its rules and any built-in chain's policy other than ACCEPT.
_BUILTIN_CHAINS = frozenset({"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Process:
    pid: int
    exe: str
    cmdline: str
    in_kubepods: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class Table:
    """One iptables table: user chains, rules (iptables-save lines), non-ACCEPT policies."""

    chains: tuple[str, ...]
    rules: tuple[str, ...]
    policies: tuple[str, ...] = ()


def parse_iptables_save(text: str) -> dict[str, Table]:
    """iptables-save output as tables of user chains, rules and non-ACCEPT built-in policies."""
    tables: dict[str, Table] = {}
    name = ""
    chains: list[str] = []
    rules: list[str] = []
    policies: list[str] = []
    for line in text.splitlines():
        if line.startswith("*"):
            name, chains, rules, policies = line[1:].strip(), [], [], []
        elif line.startswith(":") and name:
            chain, policy = [*line[1:].split(), "-"][:2]
            if chain not in _BUILTIN_CHAINS:
                chains.append(chain)
            elif policy not in ("ACCEPT", "-"):
                policies.append(f"{chain} {policy}")
        elif line.startswith("-A ") and name:
            rules.append(line.strip())
        elif line.strip() == "COMMIT" and name:
            tables[name] = Table(chains=tuple(chains), rules=tuple(rules), policies=tuple(policies))
            name = ""
    return tables


def iptables_save(family: str) -> str:
    """The output of iptables-save (family "iptables") or ip6tables-save; empty if absent."""
    try:
        result = subprocess.run(
            [f"{family}-save"], capture_output=True, text=True, check=False, timeout=30
        )
    except FileNotFoundError:
        return ""
    return result.stdout if result.returncode == 0 else ""


def iptables_tables(family: str) -> dict[str, Table]:
    return parse_iptables_save(iptables_save(family))


def mount_points() -> tuple[str, ...]:
    """Every mount point, as often as something is mounted on it (mounts stack)."""
    points: list[str] = []
    for line in (_PROC / "self" / "mountinfo").read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) > 4:
            points.append(unescape_mount_path(fields[4]))
    return tuple(points)


def unescape_mount_path(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes."""
    for escaped, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(escaped, char)
    return field


def cgroup_mounts() -> tuple[str, ...]:
    """Where each cgroup hierarchy (v1 controllers, the v2 unified one) is mounted."""
    found: list[str] = []
    for line in (_PROC / "self" / "mountinfo").read_text(encoding="utf-8").splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if right.split()[:1] in (["cgroup"], ["cgroup2"]) and len(fields) > 4:
            found.append(unescape_mount_path(fields[4]))
    return tuple(found)


def kubepods_cgroups() -> tuple[str, ...]:
    """The kubelet's top-level cgroups (kubepods, kubepods.slice) in every hierarchy."""
    found: list[str] = []
    for mount in cgroup_mounts():
        try:
            entries = sorted(os.listdir(mount))
        except OSError:
            continue
        found += [
            os.path.join(mount, entry)
            for entry in entries
            if entry.startswith("kubepods") and os.path.isdir(os.path.join(mount, entry))
        ]
    return tuple(found)


def network_interfaces() -> tuple[str, ...]:
    try:
        return tuple(sorted(os.listdir("/sys/class/net")))
    except OSError:
        return ()


def read_sysctl(key: str) -> str | None:
    try:
        return (_SYS / key).read_text(encoding="utf-8").strip()
    except OSError:
        return None


def processes() -> tuple[Process, ...]:
    found: list[Process] = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            exe = os.readlink(entry / "exe")
            raw = (entry / "cmdline").read_bytes()
            cgroups = (entry / "cgroup").read_text(encoding="utf-8")
        except OSError:
            # Gone meanwhile, or a kernel thread (no exe).
            continue
        cmdline = " ".join(os.fsdecode(arg) for arg in raw.split(b"\0") if arg)
        found.append(
            Process(
                pid=int(entry.name), exe=exe, cmdline=cmdline, in_kubepods="kubepods" in cgroups
            )
        )
    return tuple(sorted(found, key=lambda p: p.pid))
