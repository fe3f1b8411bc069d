"""How plumb reaches the API server: one set of credentials shared by kopf and the hot API path."""

from __future__ import annotations

import base64
import dataclasses
import ssl
from pathlib import Path

from kubernetes import config as k8s_config
from kubernetes.client import Configuration


class CredentialsError(RuntimeError):
    """The kubeconfig or in-cluster configuration could not be loaded."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Credentials:
    """Where the API server is and how to authenticate to it."""

    server: str
    ca_file: str | None = None
    token: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    username: str | None = None
    password: str | None = None
    insecure: bool = False

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The TLS settings for aiohttp: a context, or False for plain http / skipped verify."""
        if self.server.startswith("http://"):
            return False
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert_file:
            context.load_cert_chain(self.client_cert_file, self.client_key_file)
        return context

    def headers(self) -> dict[str, str]:
        """The Authorization header, if the credentials carry a token or a basic login."""
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.username is not None and self.password is not None:
            raw = f"{self.username}:{self.password}".encode()
            return {"Authorization": f"Basic {base64.b64encode(raw).decode()}"}
        return {}


def load(kubeconfig: Path | None = None, *, context: str | None = None) -> Credentials:
    """Credentials from a kubeconfig file, or from the pod's service account when in a cluster.

    With no kubeconfig given, the in-cluster service account is tried first, then $KUBECONFIG
    and ~/.kube/config, the order kubectl and client-go use.
    """
    configuration = Configuration()
    try:
        if kubeconfig is None:
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)
            except k8s_config.ConfigException:
                k8s_config.load_kube_config(context=context, client_configuration=configuration)
        else:
            k8s_config.load_kube_config(
                config_file=str(kubeconfig), context=context, client_configuration=configuration
            )
    except (k8s_config.ConfigException, OSError) as error:
        where = str(kubeconfig) if kubeconfig else "the in-cluster service account or $KUBECONFIG"
        raise CredentialsError(
            f"cannot load Kubernetes credentials from {where}: {error}; "
            "pass --kubeconfig PATH or run inside a cluster"
        ) from error
    bearer = configuration.api_key.get("authorization") or configuration.api_key.get("BearerToken")
    token = bearer.removeprefix("Bearer ").strip() if bearer else None
    return Credentials(
        server=str(configuration.host).rstrip("/"),
        ca_file=configuration.ssl_ca_cert or None,
        token=token or None,
        client_cert_file=configuration.cert_file or None,
        client_key_file=configuration.key_file or None,
        username=configuration.username or None,
        password=configuration.password or None,
        insecure=not configuration.verify_ssl,
    )
