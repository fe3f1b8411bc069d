"""How plumb reaches the API server: one set of credentials shared by kopf and the hot API path,
and the bearer token kept current when its file rotates.

In a pod (``KUBERNETES_SERVICE_HOST`` and ``KUBERNETES_SERVICE_PORT`` set, and a service-account
token file present) plumb talks to the ``kubernetes`` Service with the projected token and the
cluster CA, as any in-cluster client does; elsewhere it reads a kubeconfig. Projected tokens
rotate (the kubelet rewrites the file about every hour, and the old token dies with its pod or
its expiry), so a token that came from a file (in-cluster, or a kubeconfig ``tokenFile``) is
read again every minute, as client-go's cached token source does, and at once on a 401.
``$PLUMB_SERVICE_ACCOUNT_DIR`` (or the ``service_account_dir`` argument) points at another
directory holding ``token``, ``ca.crt`` and ``namespace``, for tests and odd mounts.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import os
import ssl
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs in the dev dependencies
from kubernetes import config as k8s_config
from kubernetes.client import Configuration

logger = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_ACCOUNT_ENV = "PLUMB_SERVICE_ACCOUNT_DIR"
TOKEN_REREAD_SECONDS = 60.0  # client-go's cachingTokenSource re-reads a token file every minute


class CredentialsError(RuntimeError):
    """The kubeconfig or in-cluster configuration could not be loaded."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Credentials:
    """Where the API server is and how to authenticate to it."""

    server: str
    ca_file: str | None = None
    # Secrets stay out of repr (a log line or a traceback printing the record).
    token: str | None = dataclasses.field(
        default=None, repr=False
    )  # ``Tokens`` keeps the current one
    token_file: str | None = None  # where ``token`` came from, when it may rotate
    client_cert_file: str | None = None
    client_key_file: str | None = None
    username: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)
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
        return authorization(self.token, self)


def authorization(token: str | None, creds: Credentials) -> dict[str, str]:
    """The Authorization header for ``token`` (or ``creds``' basic login when there is none)."""
    if token:
        return {"Authorization": f"Bearer {token}"}
    if creds.username is not None and creds.password is not None:
        raw = f"{creds.username}:{creds.password}".encode()
        return {"Authorization": f"Basic {base64.b64encode(raw).decode()}"}
    return {}


def bearer_token(value: str | None) -> str | None:
    """The token in an Authorization value: the scheme is case-insensitive (RFC 7235), and
    kubernetes-client writes it as ``bearer`` for in-cluster config but ``Bearer`` elsewhere."""
    if not value:
        return None
    text = value.strip()
    scheme, _, rest = text.partition(" ")
    if rest and scheme.lower() == "bearer":
        text = rest.strip()
    return text or None


def read_token(path: str | Path) -> str:
    """The token in a file (whitespace around it dropped); raises OSError or CredentialsError."""
    token = Path(path).read_text(encoding="utf-8").strip()
    if not token:
        raise CredentialsError(
            f"the token file {path} is empty; is the service-account token mounted?"
        )
    return token


class Tokens:
    """The bearer token now: the one loaded, or, when it came from a file, the file's content
    read again once ``every`` seconds have passed or when ``refresh`` is called (after a 401)."""

    def __init__(
        self,
        creds: Credentials,
        *,
        every: float = TOKEN_REREAD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._creds = creds
        self._token = creds.token
        self._every = every
        self._clock = clock
        self._read_at = clock()

    @property
    def rotating(self) -> bool:
        """Whether the token comes from a file that may change under it."""
        return self._creds.token_file is not None

    def current(self) -> str | None:
        if self.rotating and self._clock() - self._read_at >= self._every:
            self.refresh()
        return self._token

    def refresh(self) -> bool:
        """Read the token file again now; True when the token changed. A file that cannot be
        read keeps the last token (the kubelet replaces it by rename, so this is rare)."""
        path = self._creds.token_file
        if path is None:
            return False
        self._read_at = self._clock()
        try:
            token = read_token(path)
        except (OSError, CredentialsError) as error:
            logger.warning(
                "cannot read the token file %s again (%s); keeping the last", path, error
            )
            return False
        changed = token != self._token
        if changed:
            logger.info("the token in %s changed; using the new one", path)
        self._token = token
        return changed

    def headers(self) -> dict[str, str]:
        return authorization(self.current(), self._creds)


def in_cluster(
    environ: Mapping[str, str] | None = None, service_account_dir: Path | None = None
) -> Credentials | None:
    """The pod's service-account credentials, or None when not in a cluster (no
    ``KUBERNETES_SERVICE_HOST``/``PORT``, or no token file)."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    directory = service_account_dir or Path(env.get(SERVICE_ACCOUNT_ENV) or SERVICE_ACCOUNT_DIR)
    token_file = directory / "token"
    if not host or not port or not token_file.exists():
        return None
    try:
        token = read_token(token_file)
    except OSError as error:
        raise CredentialsError(
            f"cannot read the service-account token {token_file}: {error}; "
            "check the pod's automountServiceAccountToken and the volume mount"
        ) from error
    ca_file = directory / "ca.crt"
    if ":" in host:  # an IPv6 address needs brackets in a URL
        host = f"[{host}]"
    return Credentials(
        server=f"https://{host}:{port}",
        ca_file=str(ca_file) if ca_file.exists() else None,
        token=token,
        token_file=str(token_file),
    )


def pod_namespace(
    environ: Mapping[str, str] | None = None, service_account_dir: Path | None = None
) -> str | None:
    """The namespace of the pod plumb runs in (its service account's), None outside a pod."""
    env = os.environ if environ is None else environ
    directory = service_account_dir or Path(env.get(SERVICE_ACCOUNT_ENV) or SERVICE_ACCOUNT_DIR)
    try:
        return (directory / "namespace").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def load(
    kubeconfig: Path | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path | None = None,
) -> Credentials:
    """Credentials from a kubeconfig file, or from the pod's service account when in a cluster.

    With no kubeconfig given, the in-cluster service account is tried first, then $KUBECONFIG
    and ~/.kube/config, the order kubectl and client-go use.
    """
    if kubeconfig is None:
        found = in_cluster(environ, service_account_dir)
        if found is not None:
            return found
    configuration = Configuration()
    try:
        k8s_config.load_kube_config(
            config_file=str(kubeconfig) if kubeconfig else None,
            context=context,
            client_configuration=configuration,
        )
    except (k8s_config.ConfigException, OSError) as error:
        where = str(kubeconfig) if kubeconfig else "the in-cluster service account or $KUBECONFIG"
        raise CredentialsError(
            f"cannot load Kubernetes credentials from {where}: {error}; "
            "pass --kubeconfig PATH or run inside a cluster"
        ) from error
    bearer = configuration.api_key.get("authorization") or configuration.api_key.get("BearerToken")
    return Credentials(
        server=str(configuration.host).rstrip("/"),
        ca_file=configuration.ssl_ca_cert or None,
        token=bearer_token(bearer),
        token_file=_token_file(kubeconfig, context),
        client_cert_file=configuration.cert_file or None,
        client_key_file=configuration.key_file or None,
        username=configuration.username or None,
        password=configuration.password or None,
        insecure=not configuration.verify_ssl,
    )


def _token_file(kubeconfig: Path | None, context: str | None) -> str | None:
    """The ``tokenFile`` of the kubeconfig user in use, resolved against the file's directory
    (None when it has a literal token, or the file cannot be read here)."""
    path = kubeconfig
    if path is None:
        first = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
        path = Path(first) if first else Path.home() / ".kube" / "config"
    try:
        document: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(document, dict):
        return None
    name = context or document.get("current-context")
    ctx = _named(document.get("contexts"), name).get("context")
    user_name = ctx.get("user") if isinstance(ctx, dict) else None
    user = _named(document.get("users"), user_name).get("user")
    if not isinstance(user, dict) or user.get("token") or not user.get("tokenFile"):
        return None
    token_file = Path(str(user["tokenFile"]))
    return str(token_file if token_file.is_absolute() else path.parent / token_file)


def _named(entries: Any, name: Any) -> dict[str, Any]:
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return dict(entry)
    return {}
