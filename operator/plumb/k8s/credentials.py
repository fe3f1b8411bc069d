"""How plumb reaches the API server: one set of credentials shared by kopf and the hot API path,
and the credential kept current when it rotates.

In a pod (``KUBERNETES_SERVICE_HOST`` and ``KUBERNETES_SERVICE_PORT`` set, and a service-account
token file present) plumb talks to the ``kubernetes`` Service with the projected token and the
cluster CA, as any in-cluster client does; elsewhere it reads a kubeconfig. Credentials rotate,
and ``Tokens`` is the one place that knows the current one and when to renew it: a token that
came from a file (in-cluster, or a kubeconfig ``tokenFile``; the kubelet rewrites projected
tokens about every hour) is read again every minute, as client-go's cached token source does;
an exec plugin (``k8s/execplugins.py``) is run again shortly before its credential's
``expirationTimestamp``, as client-go's exec authenticator does; both at once on a 401.
``$PLUMB_SERVICE_ACCOUNT_DIR`` (or the ``service_account_dir`` argument) points at another
directory holding ``token``, ``ca.crt`` and ``namespace``, for tests and odd mounts.

The kubeconfig is read here, by the bounded reader of k8s/documents.py (a hostile file is
refused, not expanded), rather than by the ``kubernetes`` package's loader, which imports the
whole generated client (every API and model: docs/performance.md#memory-peak-rss-vmhwm) that
plumb never uses. What client-go reads for a connection is covered: $KUBECONFIG's files merged
as kubectl merges them, relative paths against each file's directory, the cluster's server, CA
(file or data) and insecure-skip-tls-verify, and the user's token, tokenFile, client certificate
and key (files or data), basic login and exec credential plugin (its token, its client
certificate, or both). The legacy ``auth-provider`` plugins (gcp, oidc, azure; gone from kubectl
since 1.26) are refused with a message.
"""

from __future__ import annotations

import atexit
import base64
import dataclasses
import datetime
import functools
import logging
import os
import shutil
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from plumb.k8s import documents, execplugins

logger = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_ACCOUNT_ENV = "PLUMB_SERVICE_ACCOUNT_DIR"
TOKEN_REREAD_SECONDS = 60.0  # client-go's cachingTokenSource re-reads a token file every minute
# An exec credential is renewed this many seconds before its expirationTimestamp (or a tenth of
# its lifetime, if shorter), so that no request arrives carrying a token that died on the way.
EXEC_RENEW_EARLY = 10.0
EXEC_RETRY_SECONDS = 5.0  # a plugin that failed is not run again sooner
# Nor, on time alone, this soon after a run that succeeded: a plugin that gives a credential
# already expired (a clock set wrong) would otherwise be run before every request.
EXEC_MIN_INTERVAL = 1.0


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
    # The exec plugin that issued ``token`` (and the client certificate, if it gave one: then
    # both files are one private file holding the certificate and the key, rewritten in place
    # when the plugin gives a new one), and when what it issued expires (None: it did not say).
    exec_plugin: execplugins.ExecPlugin | None = None
    expires: datetime.datetime | None = None
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
    """The credential to send now, and when to renew it: the one place that knows both.

    A literal token never changes. A token file is read again once ``every`` seconds have
    passed. An exec plugin is run again ``EXEC_RENEW_EARLY`` seconds before its credential's
    expirationTimestamp (client-go runs it once the timestamp has passed; a 401 in between then
    costs a request), and never on time alone when the plugin gave no timestamp. ``refresh``
    renews at once, after a 401, unless the credential changed since the refused one was sent.
    A plugin that fails is logged and the last credential kept (it may still be good: EKS's
    tokens outlive their timestamp by a minute), and it is not run again for
    ``EXEC_RETRY_SECONDS``; nor on time alone sooner than ``EXEC_MIN_INTERVAL`` after a run.

    ``generation`` counts the changes of the credential, ``certificate_generation`` those of
    the client certificate (connections made with the old one keep its identity: the API client
    closes them, as client-go does). Safe from several threads: kopf's login handler runs in
    one, and the API client runs plugins in one, so that the event loop never waits for them.
    """

    def __init__(
        self,
        creds: Credentials,
        *,
        every: float = TOKEN_REREAD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._creds = creds
        self._token = creds.token
        self._every = every
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()  # one renewal at a time, as client-go's mutex
        self._read_at = clock()
        self._not_before = clock() + EXEC_MIN_INTERVAL  # no renewal on time alone before
        self._failed_until = clock()  # no run at all before (after a failed run)
        self._renew_at: float | None = None  # wall-clock seconds; exec plugins only
        self._certificate: bytes | None = None
        self.generation = 0
        self.certificate_generation = 0
        if creds.exec_plugin is not None:
            self._schedule(creds.expires)
            if creds.client_cert_file is not None:
                self._certificate = Path(creds.client_cert_file).read_bytes()

    @property
    def rotating(self) -> bool:
        """Whether the credential may change under plumb (a token file or an exec plugin)."""
        return self._creds.token_file is not None or self._creds.exec_plugin is not None

    def due(self) -> bool:
        """Whether the credential is to be renewed before the next request is sent."""
        if self._creds.exec_plugin is not None:
            return (
                self._renew_at is not None
                and self._wall_clock() >= self._renew_at
                and self._clock() >= max(self._not_before, self._failed_until)
            )
        if self._creds.token_file is not None:
            return self._clock() - self._read_at >= self._every
        return False

    def current(self) -> str | None:
        """The token to send, renewed first when it is due (which may run the plugin)."""
        if self.due():
            with self._lock:
                if self.due():  # not renewed by another thread meanwhile
                    self._renew()
        return self._token

    def refresh(self, since: int | None = None) -> bool:
        """Renew the credential now (the server refused it); True when the one in hand now
        differs from the one of generation ``since`` (default: the current one), so that a
        request refused with it is worth sending again. A credential that changed since
        ``since`` is not renewed again, as client-go's maybeRefreshCreds."""
        with self._lock:
            if since is not None and since != self.generation:
                return True
            if self._creds.exec_plugin is not None and self._clock() < self._failed_until:
                return False
            before = self.generation
            self._renew()
            return self.generation != before

    def headers(self) -> dict[str, str]:
        """The Authorization header of the credential in hand (``current`` renews it)."""
        return authorization(self._token, self._creds)

    def _renew(self) -> None:
        """Called with the lock held."""
        if self._creds.exec_plugin is not None:
            self._run(self._creds.exec_plugin)
        elif self._creds.token_file is not None:
            self._reread(self._creds.token_file)

    def _reread(self, path: str) -> None:
        """A file that cannot be read keeps the last token (the kubelet replaces it by
        rename, so this is rare)."""
        self._read_at = self._clock()
        try:
            token = read_token(path)
        except (OSError, CredentialsError) as error:
            logger.warning(
                "cannot read the token file %s again (%s); keeping the last", path, error
            )
            return
        if token != self._token:
            logger.info("the token in %s changed; using the new one", path)
            self._token = token
            self.generation += 1

    def _run(self, plugin: execplugins.ExecPlugin) -> None:
        try:
            issued = plugin.run()
            certificate = issued.pem()
            target = self._creds.client_cert_file
            if certificate != self._certificate and certificate is not None and target:
                _write_certificate(certificate, plugin.command, target=target)
        except (execplugins.ExecPluginError, CredentialsError, OSError) as error:
            self._failed_until = self._clock() + EXEC_RETRY_SECONDS
            logger.warning(
                "%s; keeping the last credential, and running the plugin again in %g s at "
                "the soonest",
                error,
                EXEC_RETRY_SECONDS,
            )
            return
        self._not_before = self._clock() + EXEC_MIN_INTERVAL
        self._schedule(issued.expires)
        changed = issued.token != self._token
        self._token = issued.token
        # A plugin that stops giving a certificate leaves the last one in place: the token
        # carries the identity then.
        if certificate is not None and certificate != self._certificate:
            if self._creds.client_cert_file is None:
                logger.warning(
                    "the exec plugin %r now gives a client certificate, which plumb takes only "
                    "at its start; restart plumb to use it",
                    plugin.command,
                )
            else:
                self._certificate = certificate
                self.certificate_generation += 1
                changed = True
        if changed:
            self.generation += 1
        until = issued.expires.isoformat() if issued.expires else "no expiry given"
        logger.info(
            "ran the exec plugin %r again: %s credential (%s)",
            plugin.command,
            "a new" if changed else "the same",
            until,
        )

    def _schedule(self, expires: datetime.datetime | None) -> None:
        if expires is None:
            self._renew_at = None
            return
        end = expires.timestamp()
        lifetime = max(0.0, end - self._wall_clock())
        self._renew_at = end - min(EXEC_RENEW_EARLY, lifetime / 10)


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
    except (CredentialsError, OSError) as error:
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
        try:
            document: Any = documents.load(path.read_text(encoding="utf-8"))[0]
        except (documents.DocumentError, UnicodeDecodeError) as error:
            raise CredentialsError(f"{path} is not a readable kubeconfig: {error}") from None
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
    token = bearer_token(str(token)) if token else None
    plugin, expires = None, None
    if user.get("exec") and (token or cert or user.get("username") or user.get("password")):
        # client-go's exec authenticator stands aside for a token, a basic login or a client
        # certificate given beside it (kubectl --token works with any kubeconfig so).
        logger.info("user %r has its own credentials; its exec plugin is not run", user_name)
    elif user.get("exec"):
        # Run once now, so that a plugin that cannot log in stops plumb at its start with the
        # plugin's own words; ``Tokens`` runs it again later.
        spec = user["exec"]
        wants_cluster = isinstance(spec, Mapping) and spec.get("provideClusterInfo")
        try:
            info = (
                execplugins.cluster_info(cluster, server=server, directory=cluster_dir)
                if wants_cluster
                else None
            )
            plugin = execplugins.ExecPlugin.from_kubeconfig(
                spec, directory=user_dir, cluster=info, environ=environ
            )
            issued = plugin.run()
        except execplugins.ExecPluginError as error:
            raise CredentialsError(f"user {user_name!r}: {error}") from error
        token, expires, certificate = issued.token, issued.expires, issued.pem()
        if certificate is not None:
            cert = key = _write_certificate(certificate, plugin.command)
    return Credentials(
        server=server,
        ca_file=_file_or_data(cluster, "certificate-authority", cluster_dir),
        token=token,
        token_file=token_file,
        exec_plugin=plugin,
        expires=expires,
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


def _write_certificate(pem: bytes, command: str, *, target: str | None = None) -> str:
    """``pem`` checked (it must load as a certificate with its key, as client-go checks the
    pair) and put in a private file: ``target``, replaced whole, or a new one."""
    staged = _private_file(pem)
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(staged)
    except ssl.SSLError as error:
        os.unlink(staged)
        raise CredentialsError(
            f"the exec plugin {command!r} returned a client certificate and key that do not "
            f"load as a pair: {error}"
        ) from error
    if target is None:
        return staged
    os.replace(staged, target)
    return target
