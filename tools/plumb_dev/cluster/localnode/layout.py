"""Where the real node keeps its state: everything under the cluster directory's node/ folder.

containerd's root, state, socket, runc state and CDI specs, the CNI configuration and address
store, the kubelet's root directory (with the plugin sockets of DRA drivers), pod logs and
volume plugins, kube-proxy's configuration, the logs and the state and host-record files all
live here, so ``down`` knows what to unmount and nothing of the node is scattered over the host
where the tools allow it. ``NodeError`` lives here, at the bottom of the package.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from plumb_dev.cluster.controlplane import config as cpconfig

NODE_NAME = "plumb-node"
# A unix socket's path must fit in sun_path (108 bytes); containerd adds ".ttrpc" for its
# second socket, and a few bytes stay spare.
MAX_SOCKET_PATH = 100


class NodeError(cpconfig.ControlPlaneError):
    """The real node could not be started, found or stopped (a ControlPlaneError, so callers
    that handle the control plane's failures handle the node's too)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeLayout:
    """The node's paths inside one cluster directory."""

    directory: Path

    @property
    def node(self) -> Path:
        return self.directory / "node"

    @property
    def state(self) -> Path:
        return self.node / "state.json"

    @property
    def host_record(self) -> Path:
        return self.node / "host-record.json"

    def log(self, name: str) -> Path:
        return self.node / f"{name}.log"

    # containerd ----------------------------------------------------------------------------------

    @property
    def containerd(self) -> Path:
        return self.node / "containerd"

    @property
    def containerd_config(self) -> Path:
        return self.node / "containerd.toml"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def cdi_dir(self) -> Path:
        """Where DRA drivers write CDI specs and containerd reads them (``cdi_spec_dirs``)."""
        return self.node / "cdi"

    # CNI ------------------------------------------------------------------------------------------

    @property
    def cni_conf_dir(self) -> Path:
        return self.node / "cni" / "net.d"

    @property
    def ipam_dir(self) -> Path:
        return self.node / "cni" / "ipam"

    # kubelet and kube-proxy ---------------------------------------------------------------------

    @property
    def kubelet_root(self) -> Path:
        return self.node / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.node / "pod-logs"

    @property
    def volume_plugins(self) -> Path:
        return self.node / "volume-plugins"

    @property
    def resolv_conf(self) -> Path:
        return self.node / "resolv.conf"

    @property
    def kubelet_config(self) -> Path:
        return self.node / "kubelet.json"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.node / "kubelet.kubeconfig"

    @property
    def kube_proxy_config(self) -> Path:
        return self.node / "kube-proxy.json"

    @property
    def kube_proxy_kubeconfig(self) -> Path:
        return self.node / "kube-proxy.kubeconfig"

    def identity_arg(self, name: str) -> str:
        """The argument only this directory's process of that name carries (its config file)."""
        configs = {
            "containerd": self.containerd_config,
            "kubelet": self.kubelet_config,
            "kube-proxy": self.kube_proxy_config,
        }
        return f"--config={configs[name]}"
