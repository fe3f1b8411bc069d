"""The kubelet and kube-proxy: their configuration files, credentials and command lines.

The kubelet serves on the bridge gateway only (the API server reaches it there, verifying its
certificate against the cluster's CA) and authenticates every caller: client certificates signed
by that CA, bearer tokens through the API server's TokenReview, decisions by SubjectAccessReview;
never anonymously. kube-proxy runs in iptables mode and is told to leave the host's conntrack
sysctls and route_localnet alone. Both files are JSON, which both programs read as YAML.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.cluster.controlplane import pki
from plumb_dev.cluster.localnode import layout, network

KUBELET = "kubelet"
KUBE_PROXY = "kube-proxy"
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
KUBE_PROXY_HEALTHZ_PORT = 10256
KUBE_PROXY_METRICS_PORT = 10249
CLUSTER_DOMAIN = "cluster.local"


def kubelet_config(paths: layout.NodeLayout, *, ca_file: Path, serving: pki.Pair) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": network.GATEWAY,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "tlsCertFile": str(serving.cert),
        "tlsPrivateKeyFile": str(serving.key),
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        # containerd 1.x lacks the CRI call that reports its cgroup driver, and there is no
        # systemd; cgroup v1 is in maintenance mode, which is a warning only.
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        # The kubelet would refuse to start on kernel defaults it dislikes; it sets them
        # instead, and down() puts back the values recorded before up().
        "protectKernelDefaults": False,
        # Nothing here may lower an oom_score_adj (no CAP_SYS_RESOURCE in this VM).
        "oomScoreAdj": 0,
        "resolvConf": str(paths.resolv_conf),
        "clusterDomain": CLUSTER_DOMAIN,
        "podLogsDir": str(paths.pod_logs),
        "volumePluginDir": str(paths.volume_plugins),
        # Loaded images cannot be pulled back (there is no registry), so image GC never runs,
        # and eviction waits until the disk or memory is really short.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "registerNode": True,
    }


def kubelet_args(paths: layout.NodeLayout) -> list[str]:
    return [
        paths.identity_arg(KUBELET),
        f"--kubeconfig={paths.kubelet_kubeconfig}",
        f"--hostname-override={layout.NODE_NAME}",
        # The address the API server reaches the kubelet on (logs, exec), over the bridge.
        f"--node-ip={network.GATEWAY}",
        f"--root-dir={paths.kubelet_root}",
        "--v=0",
    ]


def kube_proxy_config(paths: layout.NodeLayout) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "hostnameOverride": layout.NODE_NAME,
        "bindAddress": network.GATEWAY,
        "clientConnection": {"kubeconfig": str(paths.kube_proxy_kubeconfig)},
        "clusterCIDR": network.POD_RANGE,
        # Zeros mean "leave the host's value": kube-proxy would otherwise raise the conntrack
        # table size and shorten timeouts machine-wide.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
            "udpTimeout": "0s",
            "udpStreamTimeout": "0s",
        },
        # NodePorts on 127.0.0.1 would need net.ipv4.conf.all.route_localnet=1 machine-wide.
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
        # NodePorts only on the bridge gateway: nothing opens on the machine's own interface.
        "nodePortAddresses": [f"{network.GATEWAY}/32"],
        "healthzBindAddress": f"127.0.0.1:{KUBE_PROXY_HEALTHZ_PORT}",
        "metricsBindAddress": f"127.0.0.1:{KUBE_PROXY_METRICS_PORT}",
        "oomScoreAdj": 0,
    }


def kube_proxy_args(paths: layout.NodeLayout) -> list[str]:
    return [paths.identity_arg(KUBE_PROXY), "--v=0"]


def resolv_conf_text() -> str:
    # Pods get no name server: the host's would be reached through the bridge and out of the
    # machine, which the guard forbids anyway; an empty list fails fast inside the pod.
    return "# plumb's local node: no DNS for pods (all traffic stays on this machine)\n"


def write_files(cp: controlplane.ControlPlane, paths: layout.NodeLayout) -> None:
    """Writes both parts' credentials and configuration files."""
    authority = pki.Authority(directory=cp.directory / "pki")
    hostname = socket.gethostname()
    serving = authority.server(
        "kubelet-serving",
        common_name=layout.NODE_NAME,
        names=tuple(dict.fromkeys((network.GATEWAY, layout.NODE_NAME, hostname))),
    )
    controlplane.component_kubeconfig(
        cp, pki.kubelet_identity(layout.NODE_NAME), paths.kubelet_kubeconfig
    )
    controlplane.component_kubeconfig(cp, pki.KUBE_PROXY, paths.kube_proxy_kubeconfig)
    paths.resolv_conf.write_text(resolv_conf_text(), encoding="utf-8")
    for path, body in (
        (paths.kubelet_config, kubelet_config(paths, ca_file=cp.ca_file, serving=serving)),
        (paths.kube_proxy_config, kube_proxy_config(paths)),
    ):
        path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
