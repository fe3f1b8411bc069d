"""What a local control plane is made of: its directory, each part's flags, kubeconfigs, keys.

The flags that differ between Kubernetes releases come from the release's row in ``releases``.

No process is started here (``processes`` does that) and no state is kept (``lifecycle`` does);
``ControlPlaneError`` lives here, the bottom of the package but for ``releases``' table, and
``lifecycle`` re-exports it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path
from typing import Protocol

from plumb_dev.cluster.controlplane import releases

STATE_FILE = "state.json"
ETCD = "etcd"
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
# The trace store `plumb cluster up --tracing` runs beside them (tracestore).
JAEGER = "jaeger"
_CLUSTER = "plumb-local"
LOOPBACK = "127.0.0.1"
# The kubernetes Service's address: the first of the service range.
SERVICE_RANGE = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
# The API server's serving certificate covers every name a client may use for it: loopback on
# the host, the bridge gateway and the Service from pods on the real node.
SERVING_NAMES = (
    LOOPBACK,
    "localhost",
    SERVICE_IP,
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


class CertifiedKey(Protocol):
    """A certificate and its key (pki.Pair)."""

    @property
    def cert(self) -> Path: ...
    @property
    def key(self) -> Path: ...


class ControlPlaneError(RuntimeError):
    """The local control plane could not be started, found or stopped."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Layout:
    """Where everything of one control plane lives inside its directory."""

    directory: Path

    @property
    def state(self) -> Path:
        return self.directory / STATE_FILE

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def etcd_data(self) -> Path:
        return self.directory / "etcd"

    @property
    def cert_dir(self) -> Path:
        return self.directory / "certs"

    @property
    def pki(self) -> Path:
        return self.directory / "pki"

    @property
    def ca_file(self) -> Path:
        return self.pki / "ca.crt"

    def component_kubeconfig(self, binary: str) -> Path:
        return self.directory / f"{binary}.kubeconfig"

    @property
    def token_file(self) -> Path:
        return self.directory / "tokens.csv"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "service-account.key"

    @property
    def jaeger_config(self) -> Path:
        return self.directory / "jaeger.yaml"

    @property
    def tracing_config(self) -> Path:
        """kube-apiserver's --tracing-config-file."""
        return self.directory / "tracing.yaml"

    def log(self, binary: str) -> Path:
        return self.directory / f"{binary}.log"

    def identity_arg(self, binary: str) -> str:
        """A command-line argument only this directory's process of that binary carries."""
        if binary == ETCD:
            return f"--data-dir={self.etcd_data}"
        if binary == APISERVER:
            return f"--cert-dir={self.cert_dir}"
        if binary == JAEGER:
            return f"--config={self.jaeger_config}"
        return f"--kubeconfig={self.component_kubeconfig(binary)}"


def etcd_args(layout: Layout, client_port: int, peer_port: int) -> list[str]:
    client = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    return [
        "--name=plumb",
        layout.identity_arg(ETCD),
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=plumb={peer}",
        # A throwaway test cluster: losing it in a power cut costs nothing, while fsync on every
        # write would make the benchmark measure the disk rather than the scheduler.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApiserverTls:
    """The certificates kube-apiserver serves with and presents to kubelets."""

    serving_cert: Path
    serving_key: Path
    kubelet_client_cert: Path
    kubelet_client_key: Path


def apiserver_args(
    layout: Layout,
    port: int,
    etcd_port: int,
    *,
    address: str,
    tls: ApiserverTls,
    service_accounts: bool,
) -> list[str]:
    # As Kubernetes' own scheduler performance tests: nodes get no not-ready taints on creation
    # (the scale nodes have no kubelet to lift them). Priority admission is on, as in a user's
    # cluster: a pod's priority and preemptionPolicy come from its PriorityClass.
    disabled = ["TaintNodesByCondition"]
    if not service_accounts:
        disabled.append("ServiceAccount")
    return [
        f"--bind-address={address}",
        f"--advertise-address={address}",
        f"--secure-port={port}",
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        layout.identity_arg(APISERVER),
        f"--tls-cert-file={tls.serving_cert}",
        f"--tls-private-key-file={tls.serving_key}",
        # Client certificates signed by the cluster's CA authenticate the controllers, the
        # kubelet and kube-proxy; people and plumb use the admin token.
        f"--client-ca-file={layout.ca_file}",
        f"--token-auth-file={layout.token_file}",
        # The API server proves itself to kubelets with a certificate they trust (logs, exec)
        # and checks theirs against the same CA.
        f"--kubelet-client-certificate={tls.kubelet_client_cert}",
        f"--kubelet-client-key={tls.kubelet_client_key}",
        f"--kubelet-certificate-authority={layout.ca_file}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--authorization-mode=Node,RBAC",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={layout.service_account_key}",
        f"--service-account-signing-key-file={layout.service_account_key}",
        f"--service-cluster-ip-range={SERVICE_RANGE}",
        f"--disable-admission-plugins={','.join(disabled)}",
        # The kubernetes Service's endpoints follow the API server's advertised address, so pods
        # on the real node reach it through kube-proxy as in-cluster clients do; a loopback
        # address is no endpoint a pod can reach, so then there are none.
        f"--endpoint-reconciler-type={'none' if address == LOOPBACK else 'lease'}",
        "--profiling=false",
        "--v=0",
    ]


def controller_manager_args(
    layout: Layout, *, cluster_signing: CertifiedKey, release: releases.KubeRelease
) -> list[str]:
    kubeconfig = layout.component_kubeconfig(CONTROLLER_MANAGER)
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        # Each controller acts as its own service account, as kubeadm sets it up, so RBAC
        # denials name the controller that was refused.
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={layout.service_account_key}",
        f"--root-ca-file={layout.ca_file}",
        f"--cluster-signing-cert-file={cluster_signing.cert}",
        f"--cluster-signing-key-file={cluster_signing.key}",
        # Which controllers are off, and their names, depend on the release (releases.py).
        "--controllers=*," + ",".join(f"-{name}" for name in release.controllers_off),
        "--leader-elect=false",
        "--secure-port=0",
        "--v=0",
    ]


def scheduler_args(layout: Layout) -> list[str]:
    kubeconfig = layout.component_kubeconfig(SCHEDULER)
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--secure-port=0",
        "--v=0",
    ]


def generate_rsa_key(openssl: str, path: Path) -> None:
    result = subprocess.run(
        [openssl, "genrsa", "-out", str(path), "2048"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise ControlPlaneError(
            f"'openssl genrsa' failed with exit code {result.returncode} writing {path}: "
            f"{result.stderr.strip()}; check that the directory is writable"
        )


def write_private(path: Path, text: str) -> None:
    """Writes atomically with owner-only permissions: these files hold the admin token."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(text)
    os.replace(temporary, path)


def kubeconfig_text(
    *, server: str, ca_file: Path, token: str | None = None, client: CertifiedKey | None = None
) -> str:
    """A kubeconfig that reaches server with the admin token or a client certificate."""

    # JSON strings are valid YAML double-quoted scalars, which spares a YAML dependency.
    def q(value: object) -> str:
        return json.dumps(str(value))

    return "\n".join(
        [
            "apiVersion: v1",
            "kind: Config",
            "clusters:",
            f"- name: {q(_CLUSTER)}",
            "  cluster:",
            f"    server: {q(server)}",
            f"    certificate-authority: {q(ca_file)}",
            "users:",
            "- name: admin",
            "  user:",
            *([f"    token: {q(token)}"] if token is not None else []),
            *(
                [
                    f"    client-certificate: {q(client.cert)}",
                    f"    client-key: {q(client.key)}",
                ]
                if client is not None
                else []
            ),
            "contexts:",
            f"- name: {q(_CLUSTER)}",
            "  context:",
            f"    cluster: {q(_CLUSTER)}",
            "    user: admin",
            f"current-context: {q(_CLUSTER)}",
            "",
        ]
    )
