"""The real node's record: its name, directory, binaries and process ids, and its state file.

``node/state.json`` is written after every process start during ``up`` (so a caller killed
halfway leaves enough for ``down``) and removed by a ``down`` that undid everything.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from plumb_dev.cluster.localnode import containerd, daemons, kubelet, layout

# 2 adds containerd_binary (the node's containerd is no longer the installed one); a format 1
# file, from a node started before, ran bookworm's.
_STATE_FORMAT = 2
_FORMAT_1_CONTAINERD = Path("/usr/bin/containerd")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Node:
    """The real node of one cluster directory and its processes (0 where not started)."""

    name: str
    directory: Path
    bin_dir: Path
    containerd_address: Path
    # The containerd binary started (trixie's, unpacked into the cache): a pid counts as the
    # node's only while it runs this binary.
    containerd_binary: Path
    containerd_pid: int = 0
    kubelet_pid: int = 0
    kube_proxy_pid: int = 0

    def processes(self) -> list[daemons.Daemon]:
        """Every started process, in the order they are stopped."""
        paths = layout.NodeLayout(directory=self.directory)
        binaries = {
            kubelet.KUBE_PROXY: (self.kube_proxy_pid, self.bin_dir / kubelet.KUBE_PROXY),
            kubelet.KUBELET: (self.kubelet_pid, self.bin_dir / kubelet.KUBELET),
            containerd.BINARY: (self.containerd_pid, self.containerd_binary),
        }
        return [
            daemons.Daemon(
                name=name,
                binary=binary,
                pid=pid,
                identity_arg=paths.identity_arg(name),
                log=paths.log(name),
            )
            for name, (pid, binary) in binaries.items()
            if pid > 1
        ]


def load(directory: Path) -> Node | None:
    """The node recorded in directory, running or not; None if none is recorded."""
    path = layout.NodeLayout(directory=directory).state
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as error:
        raise layout.NodeError(
            f"{path} is not a node state file plumb can read ({error}); if no containerd, "
            f"kubelet or kube-proxy from it still runs, delete it"
        ) from error
    try:
        if data.get("format") not in (1, _STATE_FORMAT):
            raise ValueError(f"format {data.get('format')!r}, expected {_STATE_FORMAT}")
        return Node(
            name=str(data["name"]),
            directory=Path(data["directory"]),
            bin_dir=Path(data["bin_dir"]),
            containerd_address=Path(data["containerd_address"]),
            containerd_binary=Path(data.get("containerd_binary", _FORMAT_1_CONTAINERD)),
            containerd_pid=int(data["containerd_pid"]),
            kubelet_pid=int(data["kubelet_pid"]),
            kube_proxy_pid=int(data["kube_proxy_pid"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise layout.NodeError(
            f"{path} is not a node state file plumb can read ({error!r}); if no containerd, "
            f"kubelet or kube-proxy from it still runs, delete it"
        ) from error


def write_state(paths: layout.NodeLayout, node: Node) -> None:
    state = {
        "format": _STATE_FORMAT,
        "name": node.name,
        "directory": str(node.directory),
        "bin_dir": str(node.bin_dir),
        "containerd_address": str(node.containerd_address),
        "containerd_binary": str(node.containerd_binary),
        "containerd_pid": node.containerd_pid,
        "kubelet_pid": node.kubelet_pid,
        "kube_proxy_pid": node.kube_proxy_pid,
        "logs": {name: str(paths.log(name)) for name in ("containerd", "kubelet", "kube-proxy")},
    }
    temporary = paths.state.with_name(paths.state.name + ".tmp")
    temporary.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, paths.state)
