"""Exec credential plugins (``client.authentication.k8s.io``): what a kubeconfig's ``exec``
entry asks to run, and one run of it, as client-go's exec authenticator makes it.

The plugin (EKS's ``aws eks get-token``, ``gke-gcloud-auth-plugin``, kubelogin) gets plumb's
environment plus the entry's ``env``, the entry's ``args``, and ``KUBERNETES_EXEC_INFO``: an
ExecCredential of the entry's apiVersion whose spec says whether it may talk to a user and, with
``provideClusterInfo``, which cluster it is for. It prints an ExecCredential of that same
apiVersion whose status holds a token, a client certificate and key, or both, and maybe when
they expire. plumb is a daemon and lends the plugin no terminal, so it decides as client-go does
with no terminal: ``Never`` and ``IfAvailable`` run non-interactively, ``Always`` is refused.

When to run the plugin again (before the expiry, after a 401) is ``credentials.Tokens``'
business, not this module's; this one never keeps a credential.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import logging
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
EXEC_INFO = "KUBERNETES_EXEC_INFO"
CLUSTER_EXTENSION = "client.authentication.k8s.io/exec"  # a cluster's data for its exec plugin
TIMEOUT = 60.0  # seconds a plugin may take (client-go waits for ever; a daemon should not)


class ExecPluginError(RuntimeError):
    """The exec entry cannot be used, or a run of the plugin gave no credential."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Issued:
    """What one run of a plugin gave: a token, a PEM client certificate and key, or both, and
    when they expire (None: the plugin did not say, so they are good until a 401)."""

    token: str | None = dataclasses.field(default=None, repr=False)
    certificate: bytes | None = dataclasses.field(default=None, repr=False)
    key: bytes | None = dataclasses.field(default=None, repr=False)
    expires: datetime.datetime | None = None

    def pem(self) -> bytes | None:
        """The client certificate and key as one PEM document (None without them): one file
        renamed into place changes both at once for whoever loads it next."""
        if self.certificate is None or self.key is None:
            return None
        return self.certificate.rstrip(b"\n") + b"\n" + self.key


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExecPlugin:
    """A kubeconfig user's ``exec`` entry, checked as clientcmd checks it."""

    command: str
    args: tuple[str, ...] = ()
    # The entry's variables, added to plumb's environment (kept out of repr: they may be keys).
    env: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False)
    api_version: str = API_VERSIONS[0]
    interactive_mode: str = "Never"
    # spec.cluster of KUBERNETES_EXEC_INFO when the entry has provideClusterInfo, else None.
    cluster: Mapping[str, Any] | None = dataclasses.field(default=None, repr=False, compare=False)
    install_hint: str = ""
    # The environment the plugin starts from; None: plumb's own at the time of each run.
    environ: Mapping[str, str] | None = dataclasses.field(default=None, repr=False, compare=False)

    @classmethod
    def from_kubeconfig(
        cls,
        spec: Any,
        *,
        directory: Path,
        cluster: Mapping[str, Any] | None,
        environ: Mapping[str, str] | None = None,
    ) -> ExecPlugin:
        """The plugin of an ``exec`` entry from a kubeconfig in ``directory``; ``cluster``:
        the cluster information to give it (``cluster_info``), given only if it asks for it."""
        if not isinstance(spec, Mapping) or not spec.get("command"):
            raise ExecPluginError("the exec entry has no command; name the plugin to run")
        command = str(spec["command"])
        if os.sep in command and not os.path.isabs(command):
            # kubectl resolves a command with a path (not a bare name looked up on PATH)
            # against the kubeconfig's directory; the arguments are left as they are.
            command = str(directory / command)
        api_version = str(spec.get("apiVersion") or "")
        if api_version not in API_VERSIONS:
            raise ExecPluginError(
                f"the exec plugin {command!r} has apiVersion {api_version or None!r}; "
                f"set one of {', '.join(API_VERSIONS)}"
            )
        mode = str(spec.get("interactiveMode") or "")
        if not mode and api_version.endswith("/v1beta1"):
            mode = "IfAvailable"  # v1beta1's default, kept by clientcmd for old kubeconfigs
        if mode not in INTERACTIVE_MODES:
            raise ExecPluginError(
                f"the exec plugin {command!r} has interactiveMode {mode or None!r}; "
                f"set one of {', '.join(INTERACTIVE_MODES)} (apiVersion v1 requires it)"
            )
        if mode == "Always":
            raise ExecPluginError(
                f"the exec plugin {command!r} has interactiveMode Always, but plumb runs "
                "without a terminal to lend it; use a plugin that can log in "
                "non-interactively, with interactiveMode Never or IfAvailable"
            )
        env: list[tuple[str, str]] = []
        for variable in spec.get("env") or []:
            if not isinstance(variable, Mapping) or not variable.get("name"):
                raise ExecPluginError(
                    f"the exec plugin {command!r} has an env entry {variable!r} with no name; "
                    "each entry needs a name and a value"
                )
            env.append((str(variable["name"]), str(variable.get("value") or "")))
        return cls(
            command=command,
            args=tuple(str(arg) for arg in spec.get("args") or []),
            env=tuple(env),
            api_version=api_version,
            interactive_mode=mode,
            cluster=cluster if spec.get("provideClusterInfo") else None,
            install_hint=str(spec.get("installHint") or ""),
            environ=environ,
        )

    def request(self) -> dict[str, Any]:
        """The ExecCredential put in KUBERNETES_EXEC_INFO."""
        spec: dict[str, Any] = {"interactive": False}  # no terminal: see the module docstring
        if self.cluster is not None:
            spec["cluster"] = dict(self.cluster)
        return {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}

    def run(self) -> Issued:
        """Runs the plugin once; raises ExecPluginError, naming the plugin and what it said,
        when it gives no usable credential."""
        env = dict(os.environ if self.environ is None else self.environ)
        env.update(self.env)
        env[EXEC_INFO] = json.dumps(self.request())
        try:
            done = subprocess.run(
                [self.command, *self.args],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=TIMEOUT,
                check=False,
            )
        except FileNotFoundError as error:
            hint = f" ({self.install_hint.strip()})" if self.install_hint.strip() else ""
            raise ExecPluginError(
                f"the exec plugin {self.command!r} was not found{hint}; install it, or put "
                "its directory on PATH"
            ) from error
        except subprocess.TimeoutExpired as error:
            raise ExecPluginError(
                f"the exec plugin {self.command!r} did not finish within {TIMEOUT:g} s"
            ) from error
        except OSError as error:
            raise ExecPluginError(
                f"the exec plugin {self.command!r} could not start: {error}"
            ) from error
        said = done.stderr.decode(errors="replace").strip()
        if done.returncode != 0:
            raise ExecPluginError(
                f"the exec plugin {self.command!r} failed with exit code {done.returncode}"
                + (f": {said}" if said else " and wrote nothing to stderr")
            )
        if said:
            logger.info("the exec plugin %r wrote to stderr: %s", self.command, said)
        return self._issued(done.stdout)

    def _issued(self, stdout: bytes) -> Issued:
        """The credential in the plugin's output, checked as client-go checks it."""
        name = repr(self.command)
        try:
            document = json.loads(stdout)
        except ValueError as error:
            # The output is not repeated: it may hold a token.
            raise ExecPluginError(f"the exec plugin {name} printed no JSON: {error}") from error
        if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
            raise ExecPluginError(f"the exec plugin {name} printed no ExecCredential")
        if document.get("apiVersion") != self.api_version:
            raise ExecPluginError(
                f"the exec plugin {name} is configured to use API version {self.api_version}, "
                f"but returned {document.get('apiVersion')!r}; set the kubeconfig's apiVersion "
                "to the one the plugin speaks"
            )
        status = document.get("status")
        if not isinstance(status, dict):
            raise ExecPluginError(f"the exec plugin {name} returned no status")
        token = str(status.get("token") or "") or None
        certificate = str(status.get("clientCertificateData") or "").encode() or None
        key = str(status.get("clientKeyData") or "").encode() or None
        if token is None and certificate is None and key is None:
            raise ExecPluginError(f"the exec plugin {name} returned no token or certificate")
        if (certificate is None) != (key is None):
            raise ExecPluginError(
                f"the exec plugin {name} returned only a client certificate or key, not both"
            )
        return Issued(
            token=token,
            certificate=certificate,
            key=key,
            expires=_timestamp(status.get("expirationTimestamp"), name),
        )


def cluster_info(cluster: Mapping[str, Any], *, server: str, directory: Path) -> dict[str, Any]:
    """spec.cluster for a plugin with provideClusterInfo, from a kubeconfig's cluster entry
    (relative paths against ``directory``): its server, TLS settings, CA (from its data or its
    file) and the plugin's own data (the ``client.authentication.k8s.io/exec`` extension), empty
    fields left out as client-go leaves them out."""
    info: dict[str, Any] = {"server": server}
    if cluster.get("tls-server-name"):
        info["tls-server-name"] = str(cluster["tls-server-name"])
    if cluster.get("insecure-skip-tls-verify"):
        info["insecure-skip-tls-verify"] = True
    if cluster.get("certificate-authority-data"):
        info["certificate-authority-data"] = str(cluster["certificate-authority-data"])
    elif cluster.get("certificate-authority"):
        path = directory / os.path.expanduser(str(cluster["certificate-authority"]))
        info["certificate-authority-data"] = base64.b64encode(path.read_bytes()).decode()
    if cluster.get("proxy-url"):
        info["proxy-url"] = str(cluster["proxy-url"])
    if cluster.get("disable-compression"):
        info["disable-compression"] = True
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, Mapping) and extension.get("name") == CLUSTER_EXTENSION:
            info["config"] = extension.get("extension")
    return info


def _timestamp(value: Any, name: str) -> datetime.datetime | None:
    """An RFC 3339 expirationTimestamp, as an aware datetime."""
    if value in (None, ""):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise ExecPluginError(
            f"the exec plugin {name} returned expirationTimestamp {value!r}, which is not an "
            "RFC 3339 time with a zone (e.g. 2025-01-01T00:00:00Z)"
        )
    return parsed
