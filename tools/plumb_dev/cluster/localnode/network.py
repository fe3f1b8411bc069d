"""The node's network: the bridge, the CNI configuration, the guard, and undoing all of it.

Pods live on the bridge ``cni0`` (10.88.0.0/16, the host is 10.88.0.1). The bridge plugin turns
on forwarding and masquerading, so without a guard a pod's packet to anything that is neither a
pod nor the host would leave the machine. The guard is a chain of our own, ``PLUMB-GUARD``,
jumped to first from filter FORWARD and OUTPUT: it drops what comes from the bridge and would
leave by another interface, and what is addressed to the Service range but was not translated
by kube-proxy (a translated packet no longer carries a Service address when filter sees it). A
copy of the bridge rule in mangle FORWARD, which no Kubernetes part touches, holds even while
kube-proxy's own jumps sit above ours in filter. Pod to 10.0.0.1:443 is translated to the API
server on 10.88.0.1, a local address, so it goes to INPUT and never meets the guard.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterable
from pathlib import Path

from plumb_dev.cluster.controlplane import config as cpconfig
from plumb_dev.cluster.localnode import hostrecord, layout, netfilter, probing

BRIDGE = "cni0"
GATEWAY = "10.88.0.1"
POD_RANGE = "10.88.0.0/16"
SERVICE_RANGE = cpconfig.SERVICE_RANGE
SERVICE_IP = cpconfig.SERVICE_IP
GUARD = "PLUMB-GUARD"
NETWORK_NAME = "plumb"
CNI_BIN_DIR = Path("/usr/lib/cni")
# Chains the node's parts make: the kubelet and kube-proxy (KUBE-), the CNI plugins (CNI-), the
# guard. Cleanup removes those not in the host record, and nothing else.
CHAIN_PREFIXES = ("KUBE-", "CNI-", "PLUMB-")


def run(*args: str) -> str:
    result = subprocess.run(list(args), capture_output=True, text=True, check=False, timeout=60)
    if result.returncode != 0:
        raise layout.NodeError(
            f"'{shlex.join(args)}' failed with exit code {result.returncode}: "
            f"{result.stderr.strip()}; the node needs root and the iproute2 and iptables packages"
        )
    return result.stdout


# --- the bridge ----------------------------------------------------------------------------------


def create_bridge() -> None:
    """Creates cni0 with the gateway address and brings it up, for the API server to bind."""
    run("ip", "link", "add", BRIDGE, "type", "bridge")
    run("ip", "addr", "add", f"{GATEWAY}/16", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")


def bridge_exists() -> bool:
    return Path("/sys/class/net", BRIDGE).exists()


def remove_links(before: hostrecord.HostRecord) -> list[str]:
    """Deletes the bridge and the pods' veths that were not there before; returns their names."""
    new = sorted(set(probing.network_interfaces()) - set(before.interfaces))
    # Collected before any deletion: a veth stops naming the bridge as master once it is gone.
    doomed = [name for name in new if name == BRIDGE or _is_veth(name)]
    for name in doomed:
        subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
    return doomed


def _is_veth(name: str) -> bool:
    if Path("/sys/class/net", name, "master").resolve().name == BRIDGE:
        return True
    details = subprocess.run(
        ["ip", "-d", "-o", "link", "show", "dev", name], capture_output=True, text=True, check=False
    ).stdout
    return " veth " in details


# --- CNI -----------------------------------------------------------------------------------------


def conflist_text(*, ipam_dir: Path) -> str:
    """The CNI network the node's pods join: bridge + host-local, portmap, loopback."""
    conflist = {
        "cniVersion": "1.0.0",
        "name": NETWORK_NAME,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                # The plugin's default; the guard keeps masqueraded packets from leaving.
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_RANGE, "gateway": GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
            {"type": "loopback"},
        ],
    }
    return json.dumps(conflist, indent=2) + "\n"


# --- the guard -----------------------------------------------------------------------------------


def guard_rules() -> list[tuple[str, list[str]]]:
    """(iptables command, arguments) that install the guard, in order."""
    bridge_out = ["-i", BRIDGE, "!", "-o", BRIDGE, "-j", "DROP"]
    service = ["-d", SERVICE_RANGE, "-j", "DROP"]
    rules: list[tuple[str, list[str]]] = []
    for family, table, hooks, chain_rules in (
        ("iptables", "filter", ("FORWARD", "OUTPUT"), [bridge_out, service]),
        ("iptables", "mangle", ("FORWARD",), [bridge_out]),
        ("ip6tables", "filter", ("FORWARD",), [bridge_out]),
    ):
        rules.append((family, ["-t", table, "-N", GUARD]))
        for rule in chain_rules:
            comment = ["-m", "comment", "--comment", "plumb: nothing from pods leaves the machine"]
            rules.append((family, ["-t", table, "-A", GUARD, *comment, *rule]))
        rules += [(family, ["-t", table, "-I", hook, "1", "-j", GUARD]) for hook in hooks]
    return rules


def install_guard() -> None:
    for family, args in guard_rules():
        run(family, "-w", *args)


def guard_first() -> dict[str, bool]:
    """For filter FORWARD and OUTPUT: whether their first rule jumps to the guard."""
    return {hook: first_rule("filter", hook) == f"-A {hook} -j {GUARD}" for hook in _HOOKS}


_HOOKS = ("FORWARD", "OUTPUT")
# Where the guard must stay first: kube-proxy prepends to these in both families.
_FIRST = (("iptables", "FORWARD"), ("iptables", "OUTPUT"), ("ip6tables", "FORWARD"))


def first_rule(table: str, chain: str, family: str = "iptables") -> str | None:
    result = subprocess.run(
        [family, "-w", "-t", table, "-S", chain], capture_output=True, text=True, check=False
    )
    rules = [line for line in result.stdout.splitlines() if line.startswith("-A ")]
    return rules[0] if rules else None


def keep_guard_first() -> None:
    """Moves the guard's jumps back to the top after kube-proxy prepended its own.

    The new jump goes in before the old one is deleted, so there is no moment without it.
    """
    jump = ["-j", GUARD]
    for family, hook in _FIRST:
        if first_rule("filter", hook, family) == f"-A {hook} -j {GUARD}":
            continue
        run(family, "-w", "-t", "filter", "-I", hook, "1", *jump)
        rules = _rules(run(family, "-w", "-t", "filter", "-S", hook))
        # Rule numbers count from 1; delete from the bottom so the earlier numbers stay valid.
        for number in reversed([i + 1 for i, rule in enumerate(rules) if rule == jump][1:]):
            run(family, "-w", "-t", "filter", "-D", hook, str(number))


def _rules(listing: str) -> list[list[str]]:
    """The rules of an iptables -S listing, each as its words after "-A CHAIN"."""
    return [shlex.split(line)[2:] for line in listing.splitlines() if line.startswith("-A ")]


# --- undoing -------------------------------------------------------------------------------------


def removal_commands(
    before: dict[str, probing.Table], now: dict[str, probing.Table]
) -> list[list[str]]:
    """iptables arguments that take the node's chains out of now, and every jump to them.

    A chain is the node's if it was not in before and carries one of CHAIN_PREFIXES. Jumps to
    them from other chains are deleted by rule number, bottom up, then the node's chains are
    flushed (which drops their jumps to each other) and deleted. Purely computational.
    """
    commands: list[list[str]] = []
    for table, current in sorted(now.items()):
        old = before.get(table, probing.Table(chains=(), rules=()))
        ours = {c for c in current.chains if c not in old.chains and c.startswith(CHAIN_PREFIXES)}
        numbered: dict[str, list[int]] = {}
        for line in current.rules:
            words = shlex.split(line)
            chain = words[1]
            numbered.setdefault(chain, []).append(0)
            if chain not in ours and _jumps_to(words, ours):
                numbered[chain][-1] = len(numbered[chain])
        for chain, numbers in numbered.items():
            commands += [["-t", table, "-D", chain, str(n)] for n in reversed(numbers) if n]
        commands += [["-t", table, "-F", chain] for chain in sorted(ours)]
        commands += [["-t", table, "-X", chain] for chain in sorted(ours)]
    return commands


def _jumps_to(words: list[str], chains: Iterable[str]) -> bool:
    targets = {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-j", "-g", "--jump")}
    return bool(targets & set(chains))


def remove_chains(before: hostrecord.HostRecord) -> list[str]:
    """Removes the node's iptables and ip6tables chains and the jumps to them; returns failures."""
    failures: list[str] = []
    for family in ("iptables", "ip6tables"):
        now = probing.iptables_tables(family)
        for args in removal_commands(before.iptables.get(family, {}), now):
            result = subprocess.run(
                [family, "-w", *args], capture_output=True, text=True, check=False
            )
            if result.returncode != 0:
                failures.append(f"{family} {shlex.join(args)}: {result.stderr.strip()}")
        if _nf_tables(family):
            # iptables-nft made these tables on first use and has no command to delete them.
            old = before.iptables.get(family, {})
            for name, table in probing.iptables_tables(family).items():
                if name not in old and not (table.chains or table.rules or table.policies):
                    failure = netfilter.delete_table(family, name)
                    failures += [failure] if failure else []
    return failures


def _nf_tables(family: str) -> bool:
    result = subprocess.run([family, "-V"], capture_output=True, text=True, check=False)
    return "nf_tables" in result.stdout


def service_programmed(address: str) -> bool:
    """Whether kube-proxy has translated the Service at address (it synced at least once)."""
    result = subprocess.run(
        ["iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES"],
        capture_output=True,
        text=True,
        check=False,
    )
    return f"-d {address}/32" in result.stdout


def guard_installed() -> bool:
    result = subprocess.run(
        ["iptables", "-w", "-t", "filter", "-S", GUARD], capture_output=True, check=False
    )
    return result.returncode == 0
