"""The real node's configuration texts, the guard's rules and what down removes, as computed."""

from __future__ import annotations

import json
import socket
import struct
import tomllib
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import pki
from plumb_dev.cluster.localnode import (
    containerd,
    kubelet,
    layout,
    netfilter,
    network,
    nodes,
    probing,
)

PATHS = layout.NodeLayout(directory=Path("/c"))


def test_containerd_keeps_its_state_in_the_node_directory() -> None:
    config = tomllib.loads(containerd.config_text(PATHS, sandbox_image="localhost/plumb/pause:1"))
    assert config["root"] == "/c/node/containerd/root"
    assert config["state"] == "/c/node/containerd/state"
    assert config["grpc"]["address"] == "/c/node/containerd/containerd.sock"
    assert config["plugins"]["io.containerd.internal.v1.opt"]["path"] == "/c/node/containerd/opt"
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "localhost/plumb/pause:1"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["netns_mounts_under_state_dir"] is True
    # DRA drivers' CDI specs are read from the node's directory, and applied.
    assert (cri["enable_cdi"], cri["cdi_spec_dirs"]) == (True, ["/c/node/cdi"])
    assert cri["cni"] == {
        "bin_dir": "/usr/lib/cni",
        "conf_dir": "/c/node/cni/net.d",
        "max_conf_num": 1,
    }
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    assert runc == {"SystemdCgroup": False, "Root": "/c/node/containerd/runc"}


def test_the_kubelet_authenticates_every_caller_and_serves_on_the_bridge_only() -> None:
    serving = pki.Pair(cert=Path("/c/pki/kubelet-serving.crt"), key=Path("/c/pki/k.key"))
    config = kubelet.kubelet_config(PATHS, ca_file=Path("/c/pki/ca.crt"), serving=serving)
    assert config["authentication"] == {
        "anonymous": {"enabled": False},
        "webhook": {"enabled": True},
        "x509": {"clientCAFile": "/c/pki/ca.crt"},
    }
    assert config["authorization"] == {"mode": "Webhook"}
    assert (config["address"], config["port"], config["readOnlyPort"]) == ("10.88.0.1", 10250, 0)
    assert config["healthzBindAddress"] == "127.0.0.1"
    assert config["containerRuntimeEndpoint"] == "unix:///c/node/containerd/containerd.sock"
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["failCgroupV1"] is False
    assert "--node-ip=10.88.0.1" in kubelet.kubelet_args(PATHS)
    assert "--root-dir=/c/node/kubelet" in kubelet.kubelet_args(PATHS)


def test_kube_proxy_leaves_the_hosts_conntrack_and_route_localnet_alone() -> None:
    config = kubelet.kube_proxy_config(PATHS)
    assert config["mode"] == "iptables"
    assert config["hostnameOverride"] == layout.NODE_NAME
    assert config["iptables"]["localhostNodePorts"] is False
    assert config["conntrack"]["maxPerCore"] == 0
    assert config["conntrack"]["min"] == 0
    assert config["nodePortAddresses"] == ["10.88.0.1/32"]


def test_the_cni_network_is_the_bridge_with_addresses_kept_in_the_node_directory() -> None:
    conflist = json.loads(network.conflist_text(ipam_dir=PATHS.ipam_dir))
    assert [plugin["type"] for plugin in conflist["plugins"]] == ["bridge", "portmap", "loopback"]
    bridge = conflist["plugins"][0]
    assert (bridge["bridge"], bridge["isGateway"]) == ("cni0", True)
    assert bridge["ipam"]["dataDir"] == "/c/node/cni/ipam"
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.88.0.0/16", "gateway": "10.88.0.1"}]]


def test_the_guard_is_jumped_to_first_and_drops_what_would_leave() -> None:
    rules = [(family, " ".join(args)) for family, args in network.guard_rules()]
    assert ("iptables", "-t filter -I FORWARD 1 -j PLUMB-GUARD") in rules
    assert ("iptables", "-t filter -I OUTPUT 1 -j PLUMB-GUARD") in rules
    chain = [args for family, args in rules if "-A PLUMB-GUARD" in args and "filter" in args]
    assert any("-i cni0 ! -o cni0" in r and r.endswith("-j DROP") for r in chain)
    assert any("-d 10.0.0.0/24" in r and r.endswith("-j DROP") for r in chain)
    # Each chain is made before anything jumps to it.
    for family, args in rules:
        if args.endswith("-j PLUMB-GUARD"):
            table = args.split()[1]
            assert rules.index((family, f"-t {table} -N PLUMB-GUARD")) < rules.index((family, args))


def test_down_removes_the_nodes_chains_and_jumps_but_keeps_the_hosts() -> None:
    before = probing.parse_iptables_save(
        "*filter\n:INPUT ACCEPT [0:0]\n:HOST-CHAIN - [0:0]\n-A INPUT -j HOST-CHAIN\nCOMMIT\n"
    )
    now = probing.parse_iptables_save(
        "*filter\n:INPUT ACCEPT [0:0]\n:HOST-CHAIN - [0:0]\n:KUBE-FIREWALL - [0:0]\n"
        ":OTHER-NEW - [0:0]\n"
        "-A INPUT -j KUBE-FIREWALL\n-A INPUT -j HOST-CHAIN\n-A INPUT -j OTHER-NEW\n"
        "-A INPUT -m comment --comment x -j KUBE-FIREWALL\n"
        "-A KUBE-FIREWALL -j DROP\nCOMMIT\n"
        "*nat\n:POSTROUTING ACCEPT [0:0]\n:CNI-abc - [0:0]\n-A POSTROUTING -s 10.88.0.2/32 "
        '-m comment --comment "name: \\"plumb\\"" -j CNI-abc\n-A CNI-abc -j MASQUERADE\nCOMMIT\n'
    )
    assert network.removal_commands(before, now) == [
        # Rule numbers count from 1 and go bottom up, so each deletion leaves the others' valid.
        ["-t", "filter", "-D", "INPUT", "4"],
        ["-t", "filter", "-D", "INPUT", "1"],
        ["-t", "filter", "-F", "KUBE-FIREWALL"],
        ["-t", "filter", "-X", "KUBE-FIREWALL"],
        ["-t", "nat", "-D", "POSTROUTING", "1"],
        ["-t", "nat", "-F", "CNI-abc"],
        ["-t", "nat", "-X", "CNI-abc"],
    ]


def test_nfacct_names_are_read_from_a_netlink_dump() -> None:
    def reply(name: bytes) -> bytes:
        attribute = struct.pack("=HH", 4 + len(name) + 1, 1) + name + b"\0"
        attribute += b"\0" * (-len(attribute) % 4)
        body = struct.pack("=BBH", 0, 0, 0) + attribute
        return struct.pack("=LHHLL", 16 + len(body), 0x700, 2, 1, 0) + body

    done = struct.pack("=LHHLL", 20, 3, 2, 1, 0) + b"\0" * 4
    assert netfilter.parse_names(reply(b"first") + reply(b"second-one")) == (
        ["first", "second-one"],
        False,
    )
    assert netfilter.parse_names(reply(b"last") + done) == (["last"], True)


def test_a_table_is_deleted_in_one_nf_tables_batch() -> None:
    message = netfilter.delete_table_message("ip6tables", "filter")
    kinds = []
    offset = 0
    while offset < len(message):
        length, kind = struct.unpack_from("=LH", message, offset)
        kinds.append(kind)
        offset += (length + 3) & ~3
    assert kinds == [0x10, (10 << 8) | 2, 0x11]
    # The batch start is 20 bytes (header and nfgenmsg); the delete's nfgenmsg follows its header.
    family = message[20 + 16]
    assert family == 10
    assert b"filter\0" in message
    assert socket.ntohs(struct.unpack_from("=H", message, 18)[0]) == 10


def test_the_node_state_file_round_trips(tmp_path: Path) -> None:
    paths = layout.NodeLayout(directory=tmp_path)
    paths.node.mkdir()
    node = nodes.Node(
        name="plumb-node",
        directory=tmp_path,
        bin_dir=Path("/bin"),
        containerd_address=paths.containerd_socket,
        containerd_binary=Path("/cache/containerd-deb/1.7.24/usr/bin/containerd"),
        containerd_pid=10,
        kubelet_pid=11,
    )
    nodes.write_state(paths, node)
    assert nodes.load(tmp_path) == node
    assert [d.name for d in node.processes()] == ["kubelet", "containerd"]
    assert node.processes()[0].identity_arg == f"--config={paths.kubelet_config}"


def test_a_state_file_written_before_the_unpacked_containerd_names_bookworms(
    tmp_path: Path,
) -> None:
    paths = layout.NodeLayout(directory=tmp_path)
    paths.node.mkdir()
    paths.state.write_text(
        json.dumps(
            {
                "format": 1,
                "name": "plumb-node",
                "directory": str(tmp_path),
                "bin_dir": "/bin",
                "containerd_address": str(paths.containerd_socket),
                "containerd_pid": 10,
                "kubelet_pid": 0,
                "kube_proxy_pid": 0,
            }
        )
    )
    node = nodes.load(tmp_path)
    assert node is not None
    # down then stops the containerd such a node started, and no other.
    assert [(d.name, d.binary) for d in node.processes()] == [
        ("containerd", Path("/usr/bin/containerd"))
    ]


def test_an_unreadable_state_file_says_what_to_do(tmp_path: Path) -> None:
    paths = layout.NodeLayout(directory=tmp_path)
    paths.node.mkdir()
    paths.state.write_text('{"format": 1}')
    with pytest.raises(layout.NodeError, match="delete it"):
        nodes.load(tmp_path)
