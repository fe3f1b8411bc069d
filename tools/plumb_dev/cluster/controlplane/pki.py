"""The local cluster's certificate authority and the certificates each part presents.

One CA made for the purpose signs everything: the API server's serving certificate (valid for
127.0.0.1, the bridge gateway, the ``kubernetes`` Service IP and its DNS names), the client
certificates of kube-controller-manager, kube-scheduler, the kubelet and kube-proxy (each with the
user and group Kubernetes' bootstrap RBAC expects), the API server's client certificate towards
the kubelet, and the kubelet's serving certificate. The API server trusts the CA for client
certificates and the kubelet trusts it too, so no part is ever anonymous.

Keys are ECDSA P-256 (fast to make, accepted by every part); everything is made with the
``openssl`` command so that plumb needs no cryptography library.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

from plumb_dev.cluster.controlplane import config

_DAYS = "3650"
_CURVE = "prime256v1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Pair:
    """A certificate and its key."""

    cert: Path
    key: Path


@dataclasses.dataclass(frozen=True, kw_only=True)
class Identity:
    """Who a client certificate says it is: the user (CN) and its groups (O)."""

    name: str
    user: str
    groups: tuple[str, ...] = ()


# The users and groups the API server's bootstrap RBAC already binds to the right roles.
CONTROLLER_MANAGER = Identity(name="kube-controller-manager", user="system:kube-controller-manager")
SCHEDULER = Identity(name="kube-scheduler", user="system:kube-scheduler")
KUBE_PROXY = Identity(name="kube-proxy", user="system:kube-proxy")
# The API server's identity towards the kubelet (logs, exec, port-forward): system:masters may
# do anything on the kubelet API under its webhook authorization.
APISERVER_KUBELET_CLIENT = Identity(
    name="apiserver-kubelet-client",
    user="kube-apiserver-kubelet-client",
    groups=("system:masters",),
)


def kubelet_identity(node_name: str) -> Identity:
    """The node's own identity, which the Node authorizer and NodeRestriction admission know."""
    return Identity(name="kubelet", user=f"system:node:{node_name}", groups=("system:nodes",))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Authority:
    """The CA of one local cluster, kept in its directory's pki/ folder."""

    directory: Path

    @property
    def ca(self) -> Pair:
        return Pair(cert=self.directory / "ca.crt", key=self.directory / "ca.key")

    def pair(self, name: str) -> Pair:
        return Pair(cert=self.directory / f"{name}.crt", key=self.directory / f"{name}.key")

    def ensure_ca(self) -> Pair:
        """Makes the CA once; a cluster directory keeps it across restarts."""
        ca = self.ca
        if ca.cert.exists() and ca.key.exists():
            return ca
        self.directory.mkdir(parents=True, exist_ok=True)
        _openssl(
            "req", "-x509", "-new", "-nodes", "-newkey", "ec",
            "-pkeyopt", f"ec_paramgen_curve:{_CURVE}",
            "-keyout", str(ca.key), "-out", str(ca.cert),
            "-days", _DAYS, "-subj", "/CN=plumb-local-ca",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        )  # fmt: skip
        ca.key.chmod(0o600)
        return ca

    def client(self, identity: Identity) -> Pair:
        """A client certificate for identity (CN=user, one O per group)."""
        subject = "".join(f"/O={group}" for group in identity.groups) + f"/CN={identity.user}"
        return self._issue(identity.name, subject, usage="clientAuth", names=())

    def server(self, name: str, *, common_name: str, names: tuple[str, ...]) -> Pair:
        """A serving certificate valid for names (IP addresses and DNS names mixed)."""
        return self._issue(name, f"/CN={common_name}", usage="serverAuth", names=names)

    def _issue(self, name: str, subject: str, *, usage: str, names: tuple[str, ...]) -> Pair:
        ca = self.ensure_ca()
        pair = self.pair(name)
        request = self.directory / f"{name}.csr"
        extensions = self.directory / f"{name}.ext"
        lines = [
            "basicConstraints=critical,CA:FALSE",
            "keyUsage=critical,digitalSignature,keyEncipherment",
            f"extendedKeyUsage={usage}",
        ]
        if names:
            lines.append("subjectAltName=" + ",".join(_san(n) for n in names))
        extensions.write_text("\n".join(lines) + "\n", encoding="utf-8")
        _openssl(
            "req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{_CURVE}",
            "-keyout", str(pair.key), "-out", str(request), "-subj", subject,
        )  # fmt: skip
        pair.key.chmod(0o600)
        _openssl(
            "x509", "-req", "-in", str(request), "-CA", str(ca.cert), "-CAkey", str(ca.key),
            "-CAcreateserial", "-out", str(pair.cert), "-days", _DAYS,
            "-extfile", str(extensions),
        )  # fmt: skip
        request.unlink()
        extensions.unlink()
        return pair


def _san(name: str) -> str:
    is_ip = all(part.isdigit() for part in name.split(".")) and name.count(".") == 3
    return f"IP:{name}" if is_ip else f"DNS:{name}"


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise config.ControlPlaneError(
            "the 'openssl' command is not on PATH; it makes the local cluster's certificates; "
            "install it (e.g. apt-get install openssl)"
        )
    result = subprocess.run([openssl, *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise config.ControlPlaneError(
            f"'openssl {args[0]}' failed with exit code {result.returncode}: "
            f"{result.stderr.strip()[-600:]}; check that the cluster directory is writable"
        )
