"""A record of the host state a real node changes, taken before ``up`` and compared after ``down``.

``take()`` reads what the node's parts are known to touch (processes, mounts, network interfaces,
iptables chains and rules, nfacct counters, a list of sysctls, ``kubepods`` cgroups, a few
well-known paths);
``left_behind(before, after)`` says in words what differs, so an empty list means the host is as
it was. ``down`` also reads the record saved at ``up`` to know what to undo: only what was not
there before is ever removed. Reading only; nothing here changes the host.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from plumb_dev.cluster.localnode import netfilter, probing

# The sysctls the node's parts set (kubelet's kernel defaults, the bridge plugin's forwarding,
# kube-proxy's route_localnet and conntrack tunables), as paths under /proc/sys. Per-interface
# forwarding is added for the interfaces present, since writing ip_forward rewrites them all.
SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/forwarding",
    "net/ipv4/conf/default/forwarding",
    "net/ipv4/conf/all/route_localnet",
    "net/ipv6/conf/all/forwarding",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
    "net/bridge/bridge-nf-call-arptables",
    "net/netfilter/nf_conntrack_max",
    "net/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
    "net/netfilter/nf_conntrack_tcp_be_liberal",
    "net/netfilter/nf_conntrack_udp_timeout",
    "net/netfilter/nf_conntrack_udp_timeout_stream",
)

# Where containerd, the kubelet and the CNI plugins write when a path is not (or cannot be)
# pointed into the cluster directory; one that appears during a run was made by the node.
WELL_KNOWN_PATHS = (
    "/run/containerd",
    "/var/lib/containerd",
    "/opt/containerd",
    "/etc/containerd",
    "/var/lib/cni",
    "/etc/cni",
    "/opt/cni",
    "/run/netns",
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/etc/kubernetes",
    "/usr/libexec/kubernetes",
)

# Executables of the node: a new process running one of them, or any new process in a kubepods
# cgroup (a container), is left behind; only one node runs per machine (it owns cni0). Other
# clusters' control planes may run beside it, so a control plane process counts only when its
# command line names the cluster directory given to left_behind.
_NODE_BINARIES = frozenset(
    {"containerd", "containerd-shim", "containerd-shim-runc-v2", "runc", "kubelet", "kube-proxy"}
)
_CONTROL_PLANE_BINARIES = frozenset(
    {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class HostRecord:
    processes: tuple[probing.Process, ...]
    mounts: tuple[str, ...]
    interfaces: tuple[str, ...]
    # "iptables" / "ip6tables" -> table name -> Table
    iptables: dict[str, dict[str, probing.Table]]
    counters: tuple[str, ...]
    sysctls: dict[str, str]
    cgroups: tuple[str, ...]
    paths: tuple[str, ...]


def take() -> HostRecord:
    """Reads the host's current state (as root, to see every process and iptables)."""
    interfaces = probing.network_interfaces()
    keys = [*SYSCTLS, *(f"net/ipv4/conf/{name}/forwarding" for name in interfaces)]
    return HostRecord(
        processes=probing.processes(),
        mounts=probing.mount_points(),
        interfaces=interfaces,
        iptables={family: probing.iptables_tables(family) for family in ("iptables", "ip6tables")},
        counters=netfilter.counters(),
        sysctls={key: value for key in keys if (value := probing.read_sysctl(key)) is not None},
        cgroups=probing.kubepods_cgroups(),
        paths=tuple(path for path in WELL_KNOWN_PATHS if os.path.lexists(path)),
    )


def left_behind(before: HostRecord, after: HostRecord, *, cluster: Path | None = None) -> list[str]:
    """What differs between two records, one line each; empty if the host is as it was.

    With cluster (its directory), that cluster's control plane processes count too.
    """
    found: list[str] = []
    known = {(p.pid, p.exe) for p in before.processes}
    for process in after.processes:
        if (process.pid, process.exe) in known:
            continue
        binary = Path(process.exe).name
        theirs = binary in _CONTROL_PLANE_BINARIES and cluster is not None
        if (
            process.in_kubepods
            or binary in _NODE_BINARIES
            or (theirs and str(cluster) in process.cmdline)
        ):
            found.append(f"process {process.pid} still running: {process.cmdline}")
    extra_mounts = collections.Counter(after.mounts) - collections.Counter(before.mounts)
    found += [f"mount {path} still mounted" for path in sorted(extra_mounts)]
    found += _set_changes("network interface", before.interfaces, after.interfaces)
    for family in ("iptables", "ip6tables"):
        old, new = before.iptables.get(family, {}), after.iptables.get(family, {})
        found += [f"{family} table {name} was added" for name in sorted(set(new) - set(old))]
        found += [f"{family} table {name} was removed" for name in sorted(set(old) - set(new))]
        for name in sorted(set(old) | set(new)):
            empty = probing.Table(chains=(), rules=())
            found += _table_changes(family, name, old.get(name, empty), new.get(name, empty))
    found += _set_changes("nfacct counter", before.counters, after.counters)
    for key in sorted(set(before.sysctls) | set(after.sysctls)):
        was, now = before.sysctls.get(key), after.sysctls.get(key)
        # A key that vanished with its interface (or appeared with one) is no setting changed.
        if was is not None and now is not None and was != now:
            found.append(f"sysctl {key.replace('/', '.')} is {now!r}, was {was!r}")
    found += _set_changes("cgroup", before.cgroups, after.cgroups)
    found += _set_changes("path", before.paths, after.paths)
    return found


def _set_changes(what: str, before: tuple[str, ...], after: tuple[str, ...]) -> list[str]:
    added = [f"{what} {name} was added" for name in sorted(set(after) - set(before))]
    return added + [f"{what} {name} was removed" for name in sorted(set(before) - set(after))]


def _table_changes(family: str, table: str, old: probing.Table, new: probing.Table) -> list[str]:
    where = f"{family} table {table}:"
    found = [f"{where} chain {c} was added" for c in new.chains if c not in old.chains]
    found += [f"{where} chain {c} was removed" for c in old.chains if c not in new.chains]
    extra = collections.Counter(new.rules) - collections.Counter(old.rules)
    missing = collections.Counter(old.rules) - collections.Counter(new.rules)
    found += [f"{where} rule added: {rule}" for rule in sorted(extra)]
    found += [f"{where} rule removed: {rule}" for rule in sorted(missing)]
    if set(new.policies) != set(old.policies):
        found.append(f"{where} policies are {sorted(new.policies)}, were {sorted(old.policies)}")
    return found


# --- saving --------------------------------------------------------------------------------------


def save(record: HostRecord, path: Path) -> None:
    path.write_text(json.dumps(dataclasses.asdict(record), indent=1) + "\n", encoding="utf-8")


def load(path: Path) -> HostRecord:
    """The record saved at path; raises ValueError naming the problem if it is not one."""
    data: Any = json.loads(path.read_text(encoding="utf-8"))
    try:
        return HostRecord(
            processes=tuple(probing.Process(**p) for p in data["processes"]),
            mounts=tuple(data["mounts"]),
            interfaces=tuple(data["interfaces"]),
            iptables={
                family: {
                    name: probing.Table(
                        chains=tuple(t["chains"]),
                        rules=tuple(t["rules"]),
                        policies=tuple(t["policies"]),
                    )
                    for name, t in tables.items()
                }
                for family, tables in data["iptables"].items()
            },
            counters=tuple(data["counters"]),
            sysctls=dict(data["sysctls"]),
            cgroups=tuple(data["cgroups"]),
            paths=tuple(data["paths"]),
        )
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path} is not a host record ({error!r})") from error
