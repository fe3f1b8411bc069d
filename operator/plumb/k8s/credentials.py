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

The kubeconfig is read here, with pyyaml, rather than by the ``kubernetes`` package's loader,
which imports the whole generated client (every API and model, ~20 MiB resident) that plumb
never uses. What client-go reads for a connection is covered: $KUBECONFIG's files merged as
kubectl merges them, relative paths against each file's directory, the cluster's server, CA
(file or data) and insecure-skip-tls-verify, and the user's token, tokenFile, client
certificate and key (files or data), basic login and exec credential plugin (run once, at
start). The legacy ``auth-provider`` plugins (gcp, oidc, azure; gone from kubectl since 1.26)
are refused with a message.
"""

from __future__ import annotations

import atexit
import base64
import dataclasses
import functools
import json
import logging
import os
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs in the dev dependencies

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
    (its files merged as kubectl merges them) and ~/.kube/config, the order kubectl and client-go
    use.
    """
    env = os.environ if environ is None else environ
    if kubeconfig is None:
        found = in_cluster(env, service_account_dir)
        if found is not None:
            return found
    paths = [kubeconfig] if kubeconfig is not None else kubeconfig_paths(env)
    try:
        return kubeconfig_credentials(_merged(paths, required=kubeconfig is not None), context, env)
    except (CredentialsError, OSError, yaml.YAMLError) as error:
        where = str(kubeconfig) if kubeconfig else "the in-cluster service account or $KUBECONFIG"
        raise CredentialsError(
            f"cannot load Kubernetes credentials from {where}: {error}; "
            "pass --kubeconfig PATH or run inside a cluster"
        ) from error


def kubeconfig_paths(environ: Mapping[str, str]) -> list[Path]:
    """The kubeconfig files to read: $KUBECONFIG's (a path list), else ~/.kube/config."""
    listed = [Path(part) for part in environ.get("KUBECONFIG", "").split(os.pathsep) if part]
    return listed or [Path.home() / ".kube" / "config"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Kubeconfig:
    """The named entries of one or more kubeconfig files, merged, each with the directory its
    relative paths are resolved against (the directory of the file it came from)."""

    current_context: str | None
    contexts: Mapping[str, tuple[dict[str, Any], Path]]
    clusters: Mapping[str, tuple[dict[str, Any], Path]]
    users: Mapping[str, tuple[dict[str, Any], Path]]


def _merged(paths: list[Path], *, required: bool) -> Kubeconfig:
    """kubectl's merge: the first file to name an entry (or the current context) wins; a
    missing file of $KUBECONFIG is skipped, a missing --kubeconfig is an error."""
    current: str | None = None
    named: dict[str, dict[str, tuple[dict[str, Any], Path]]] = {
        "contexts": {},
        "clusters": {},
        "users": {},
    }
    found = False
    for path in paths:
        if not required and not path.exists():
            continue
        document: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
        found = True
        if document is None:
            continue
        if not isinstance(document, dict):
            raise CredentialsError(f"{path} is not a kubeconfig (not a YAML mapping)")
        current = current or document.get("current-context") or None
        for kind, entries in named.items():
            singular = kind[:-1]
            for entry in document.get(kind) or []:
                if isinstance(entry, dict) and isinstance(entry.get(singular), dict):
                    entries.setdefault(str(entry.get("name")), (entry[singular], path.parent))
    if not found:
        raise CredentialsError(
            f"no kubeconfig file found (looked for {', '.join(map(str, paths))})"
        )
    return Kubeconfig(
        current_context=current,
        contexts=named["contexts"],
        clusters=named["clusters"],
        users=named["users"],
    )


def kubeconfig_credentials(
    config: Kubeconfig, context: str | None = None, environ: Mapping[str, str] | None = None
) -> Credentials:
    """The credentials of ``context`` (default: the current context) of a merged kubeconfig:
    its cluster's server and CA, and its user's token, token file, client certificate, basic
    login or exec plugin. Raises CredentialsError for what is missing or unsupported."""
    name = context or config.current_context
    if not name:
        raise CredentialsError("no context given and no current-context set")
    if name not in config.contexts:
        raise CredentialsError(f"no context named {name!r}")
    ctx, _ = config.contexts[name]
    cluster_name, user_name = str(ctx.get("cluster")), str(ctx.get("user"))
    if cluster_name not in config.clusters:
        raise CredentialsError(f"context {name!r}: no cluster named {cluster_name!r}")
    cluster, cluster_dir = config.clusters[cluster_name]
    server = str(cluster.get("server") or "").rstrip("/")
    if not server:
        raise CredentialsError(f"cluster {cluster_name!r} has no server")
    user, user_dir = config.users.get(user_name, ({}, cluster_dir))
    if user.get("auth-provider"):
        provider = (
            user["auth-provider"].get("name") if isinstance(user["auth-provider"], dict) else None
        )
        raise CredentialsError(
            f"user {user_name!r}: auth-provider {provider!r} is not supported "
            "(kubectl dropped them too); use an exec credential plugin"
        )
    token, token_file = user.get("token") or None, None
    if token is None and user.get("tokenFile"):
        token_file = str(_resolved(user["tokenFile"], user_dir))
        token = read_token(token_file)
    cert = _file_or_data(user, "client-certificate", user_dir)
    key = _file_or_data(user, "client-key", user_dir)
    if user.get("exec"):
        issued = _exec_credential(user["exec"], user_dir, server, cluster, environ)
        token = issued.get("token") or token
        if issued.get("clientCertificateData") and issued.get("clientKeyData"):
            cert = _private_file(str(issued["clientCertificateData"]).encode())
            key = _private_file(str(issued["clientKeyData"]).encode())
    return Credentials(
        server=server,
        ca_file=_file_or_data(cluster, "certificate-authority", cluster_dir),
        token=bearer_token(str(token)) if token else None,
        token_file=token_file,
        client_cert_file=cert,
        client_key_file=key,
        username=user.get("username"),
        password=user.get("password"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )


def _resolved(path: Any, directory: Path) -> Path:
    """A kubeconfig path: relative ones are relative to the file's directory."""
    given = Path(os.path.expanduser(str(path)))
    return given if given.is_absolute() else directory / given


def _file_or_data(entry: Mapping[str, Any], field: str, directory: Path) -> str | None:
    """``field``'s file, or ``field-data``'s base64 content written to a private file."""
    data = entry.get(f"{field}-data")
    if data:
        try:
            return _private_file(base64.b64decode(str(data), validate=True))
        except ValueError as error:
            raise CredentialsError(f"{field}-data is not valid base64: {error}") from error
    if entry.get(field):
        return str(_resolved(entry[field], directory))
    return None


@functools.cache
def _private_dir() -> Path:
    """A directory of this process's own, removed when it exits."""
    directory = Path(tempfile.mkdtemp(prefix="plumb-credentials-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def _private_file(content: bytes) -> str:
    """``content`` in a file only this user can read (mkstemp makes it 0600), removed when the
    process exits: ssl loads client certificates and keys from files only."""
    handle, name = tempfile.mkstemp(dir=_private_dir())
    with os.fdopen(handle, "wb") as out:
        out.write(content)
    return name


EXEC_TIMEOUT = 60.0  # seconds an exec credential plugin may take
EXEC_EXTENSION = "client.authentication.k8s.io/exec"  # a cluster's data for its exec plugin


def _exec_credential(
    spec: Any,
    directory: Path,
    server: str,
    cluster: Mapping[str, Any],
    environ: Mapping[str, str] | None,
) -> dict[str, Any]:
    """Run a kubeconfig's exec credential plugin (client.authentication.k8s.io), as client-go
    does, non-interactively; the ``status`` of the ExecCredential it prints."""
    if not isinstance(spec, dict) or not spec.get("command"):
        raise CredentialsError("the exec plugin has no command")
    api_version = str(spec.get("apiVersion") or "client.authentication.k8s.io/v1beta1")
    request: dict[str, Any] = {"interactive": False}
    if spec.get("provideClusterInfo"):
        request["cluster"] = {
            "server": server,
            "certificate-authority-data": cluster.get("certificate-authority-data"),
            "insecure-skip-tls-verify": bool(cluster.get("insecure-skip-tls-verify")),
        }
        for extension in cluster.get("extensions") or []:
            if isinstance(extension, dict) and extension.get("name") == EXEC_EXTENSION:
                request["cluster"]["config"] = extension.get("extension")
    env = dict(os.environ if environ is None else environ)
    for variable in spec.get("env") or []:
        env[str(variable["name"])] = str(variable["value"])
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": api_version, "kind": "ExecCredential", "spec": request}
    )
    command = [str(spec["command"]), *(str(arg) for arg in spec.get("args") or [])]
    try:
        # The kubeconfig's own plugin, run as kubectl runs it.
        done = subprocess.run(
            command,
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=EXEC_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CredentialsError(f"the exec plugin {command[0]!r} did not run: {error}") from error
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip()
        raise CredentialsError(
            f"the exec plugin {command[0]!r} exited with {done.returncode}: {stderr}"
        )
    try:
        status = json.loads(done.stdout)["status"]
    except (ValueError, KeyError, TypeError) as error:
        raise CredentialsError(
            f"the exec plugin {command[0]!r} printed no ExecCredential status: {error}"
        ) from error
    if not isinstance(status, dict):
        raise CredentialsError(f"the exec plugin {command[0]!r} printed a malformed status")
    return status
