"""What a local control plane is made of: its directory, the flags, the kubeconfig and the keys.

No process is started here (``processes`` does that) and no state is kept (``running`` does);
``ControlPlaneError`` lives here, the bottom of the package, and ``running`` re-exports it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

STATE_FILE = "state.json"
ETCD = "etcd"
APISERVER = "kube-apiserver"
_CLUSTER = "plumb-local"


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
    def ca_file(self) -> Path:
        # kube-apiserver writes its self-generated serving certificate followed by the CA that
        # signed it, so the file doubles as a CA bundle that verifies the server.
        return self.cert_dir / "apiserver.crt"

    @property
    def token_file(self) -> Path:
        return self.directory / "tokens.csv"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "service-account.key"

    def log(self, binary: str) -> Path:
        return self.directory / f"{binary}.log"

    def identity_arg(self, binary: str) -> str:
        """A command-line argument only this directory's process of that binary carries."""
        if binary == ETCD:
            return f"--data-dir={self.etcd_data}"
        return f"--cert-dir={self.cert_dir}"


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


def apiserver_args(layout: Layout, port: int, etcd_port: int) -> list[str]:
    return [
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        # No --tls-cert-file: kube-apiserver then generates a CA and a serving certificate for
        # 127.0.0.1 here itself, which saves us a certificate authority of our own.
        layout.identity_arg(APISERVER),
        f"--token-auth-file={layout.token_file}",
        "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={layout.service_account_key}",
        f"--service-account-signing-key-file={layout.service_account_key}",
        "--service-cluster-ip-range=10.0.0.0/24",
        # As Kubernetes' own scheduler performance tests: pods need no service account, nodes
        # get no not-ready taints (there is no kubelet to lift them), and pods need no
        # PriorityClass objects to exist.
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition,Priority",
        # There is no kubelet or network behind the 'kubernetes' service to point endpoints at.
        "--endpoint-reconciler-type=none",
        "--profiling=false",
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


def kubeconfig_text(*, server: str, ca_file: Path, token: str) -> str:
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
            f"    token: {q(token)}",
            "contexts:",
            f"- name: {q(_CLUSTER)}",
            "  context:",
            f"    cluster: {q(_CLUSTER)}",
            "    user: admin",
            f"current-context: {q(_CLUSTER)}",
            "",
        ]
    )
