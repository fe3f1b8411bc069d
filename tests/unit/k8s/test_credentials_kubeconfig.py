"""plumb's own kubeconfig loader: what the ``kubernetes`` package's loader gave for the same
files (server, CA, token, client certificate, basic login, TLS verification), and what it adds
or refuses: $KUBECONFIG merging, contexts, auth-provider, and exec plugins run as client-go runs
them (args, env, provideClusterInfo, interactiveMode, apiVersion, client certificates)."""

from __future__ import annotations

import base64
import json
import re
import ssl
import stat
import sys
from pathlib import Path

import pytest
from kubernetes import config as k8s_config
from kubernetes.client import Configuration

from plumb.k8s import credentials as credentials_module
from plumb_dev.cluster.controlplane import pki
from tests.support.scripted_plugin import ScriptedPlugin

CA = b"-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n"
CERT = b"client certificate"
KEY = b"client key"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _write(path: Path, document: dict[str, object]) -> Path:
    path.write_text(json.dumps(document))  # JSON is YAML
    return path


def _config(
    cluster: dict[str, object], user: dict[str, object], *, name: str = "x"
) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": f"{name}-cluster", "cluster": cluster}],
        "users": [{"name": f"{name}-user", "user": user}],
        "contexts": [
            {"name": name, "context": {"cluster": f"{name}-cluster", "user": f"{name}-user"}}
        ],
        "current-context": name,
    }


def _content(path: str | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


def _from_kubernetes(kubeconfig: Path) -> dict[str, object]:
    """What the ``kubernetes`` package's loader read, in Credentials' terms."""
    configuration = Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    # It keeps the whole header value, basic logins included, under one of these keys.
    header = configuration.api_key.get("authorization") or configuration.api_key.get("BearerToken")
    return {
        "server": str(configuration.host).rstrip("/"),
        "ca": _content(configuration.ssl_ca_cert),
        "authorization": header,
        "cert": _content(configuration.cert_file),
        "key": _content(configuration.key_file),
        "insecure": not configuration.verify_ssl,
    }


def _from_plumb(kubeconfig: Path) -> dict[str, object]:
    creds = credentials_module.load(kubeconfig)
    return {
        "server": creds.server,
        "ca": _content(creds.ca_file),
        "authorization": creds.headers().get("Authorization"),
        "cert": _content(creds.client_cert_file),
        "key": _content(creds.client_key_file),
        "insecure": creds.insecure,
    }


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({"server": "https://10.0.0.1:6443/", "certificate-authority": "ca.crt"}, {"token": "t"}),
        (
            {"server": "https://a:443", "certificate-authority-data": _b64(CA)},
            {"client-certificate-data": _b64(CERT), "client-key-data": _b64(KEY)},
        ),
        (
            {"server": "https://a:443", "insecure-skip-tls-verify": True},
            {"client-certificate": "client.crt", "client-key": "client.key"},
        ),
        ({"server": "https://a:443"}, {"username": "admin", "password": "hunter2"}),
        ({"server": "http://127.0.0.1:8080"}, {}),
    ],
    ids=["token-ca-file", "data", "files-insecure", "basic", "plain-http"],
)
def test_plumb_reads_what_the_kubernetes_package_reads(
    tmp_path: Path, cluster: dict[str, object], user: dict[str, object]
) -> None:
    (tmp_path / "ca.crt").write_bytes(CA)
    (tmp_path / "client.crt").write_bytes(CERT)
    (tmp_path / "client.key").write_bytes(KEY)
    kubeconfig = _write(tmp_path / "kubeconfig", _config(cluster, user))
    assert _from_plumb(kubeconfig) == _from_kubernetes(kubeconfig)


def test_embedded_data_lands_in_files_only_this_user_can_read(tmp_path: Path) -> None:
    kubeconfig = _write(
        tmp_path / "kubeconfig",
        _config(
            {"server": "https://a:443"},
            {"client-certificate-data": _b64(CERT), "client-key-data": _b64(KEY)},
        ),
    )
    creds = credentials_module.load(kubeconfig)
    assert creds.client_key_file is not None
    mode = Path(creds.client_key_file).stat().st_mode
    assert stat.S_IMODE(mode) == 0o600


def test_kubeconfig_files_merge_first_one_wins(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    first = _write(tmp_path / "one" / "config", _config({"server": "https://first"}, {}))
    second = _config(
        {"server": "https://second", "certificate-authority": "ca.crt"}, {"token": "t2"}, name="y"
    )
    second["current-context"] = "y"
    second_path = _write(tmp_path / "config2", second)
    env = {"KUBECONFIG": f"{first}:{tmp_path / 'missing'}:{second_path}"}
    creds = credentials_module.load(environ=env, service_account_dir=tmp_path / "no-sa")
    assert creds.server == "https://first"  # the first file's current-context
    other = credentials_module.load(
        context="y", environ=env, service_account_dir=tmp_path / "no-sa"
    )
    assert other.server == "https://second"
    assert other.token == "t2"
    assert other.ca_file == str(tmp_path / "ca.crt")  # relative to its own file


def test_an_exec_plugin_supplies_the_token(tmp_path: Path) -> None:
    plugin = ScriptedPlugin(tmp_path / "plugin")
    kubeconfig = _write(
        tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": plugin.spec()})
    )
    creds = credentials_module.load(kubeconfig)
    assert creds.token == "tok-1"
    assert creds.headers() == {"Authorization": "Bearer tok-1"}
    assert creds.token_file is None
    assert creds.exec_plugin is not None  # and so it is run again when the token goes stale


def test_an_exec_plugin_gets_its_args_its_env_and_the_cluster_it_asked_for(
    tmp_path: Path,
) -> None:
    (tmp_path / "ca.crt").write_bytes(CA)
    plugin = ScriptedPlugin(tmp_path / "plugin", names=("GREETING", "HOME"))
    spec = plugin.spec(
        apiVersion="client.authentication.k8s.io/v1beta1",  # interactiveMode defaults then
        provideClusterInfo=True,
        env=[{"name": "GREETING", "value": "hello"}],
    )
    spec["args"] += ["--region", "eu-west-1"]
    cluster: dict[str, object] = {
        "server": "https://a:443",
        "certificate-authority": "ca.crt",
        "tls-server-name": "api.internal",
        "extensions": [
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "plumb"}}
        ],
    }
    kubeconfig = _write(tmp_path / "kubeconfig", _config(cluster, {"exec": spec}))
    credentials_module.load(kubeconfig, environ={"HOME": "/home/plumb"})
    (run,) = plugin.runs
    assert run["args"] == ["--region", "eu-west-1"]
    assert run["env"] == {"GREETING": "hello", "HOME": "/home/plumb"}
    assert run["info"] == {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "spec": {
            "interactive": False,
            "cluster": {
                "server": "https://a:443",
                "tls-server-name": "api.internal",
                "certificate-authority-data": _b64(CA),
                "config": {"audience": "plumb"},
            },
        },
    }


def test_without_provide_cluster_info_the_plugin_is_told_nothing_of_the_cluster(
    tmp_path: Path,
) -> None:
    plugin = ScriptedPlugin(tmp_path / "plugin")
    kubeconfig = _write(
        tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": plugin.spec()})
    )
    credentials_module.load(kubeconfig)
    (run,) = plugin.runs
    assert run["info"] == {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }


@pytest.mark.parametrize(
    ("fields", "refusal"),
    [
        ({"interactiveMode": "Never"}, None),
        ({"interactiveMode": "IfAvailable"}, None),  # plumb has no terminal: not interactive
        ({"apiVersion": "client.authentication.k8s.io/v1beta1", "interactiveMode": None}, None),
        ({"interactiveMode": "Always"}, "interactiveMode Always, but plumb runs without a"),
        ({"interactiveMode": None}, "interactiveMode None; set one of Never, IfAvailable"),
        ({"interactiveMode": "Sometimes"}, "interactiveMode 'Sometimes'"),
        ({"apiVersion": None}, "apiVersion None; set one of client.authentication.k8s.io/v1,"),
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "apiVersion 'client.auth"),
    ],
    ids=[
        "never",
        "if-available",
        "v1beta1-default",
        "always",
        "v1-unset",
        "unknown",
        "none",
        "old",
    ],
)
def test_interactive_mode_and_api_version_are_decided_as_client_go_decides_without_a_terminal(
    tmp_path: Path, fields: dict[str, object], refusal: str | None
) -> None:
    plugin = ScriptedPlugin(tmp_path / "plugin")
    spec = {k: v for k, v in {**plugin.spec(), **fields}.items() if v is not None}
    kubeconfig = _write(tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": spec}))
    if refusal is None:
        assert credentials_module.load(kubeconfig).token == "tok-1"
        assert plugin.runs[0]["info"]["spec"]["interactive"] is False
        assert plugin.runs[0]["info"]["apiVersion"] == spec["apiVersion"]
    else:
        with pytest.raises(credentials_module.CredentialsError, match=re.escape(refusal)):
            credentials_module.load(kubeconfig)
        assert plugin.runs == []  # refused before it could prompt anyone


def test_a_plugin_answering_in_another_api_version_is_refused(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1',\n"
        "                  'kind': 'ExecCredential', 'status': {'token': 't'}}))\n"
    )
    spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "interactiveMode": "Never",
        "command": sys.executable,
        "args": [str(plugin)],
    }
    kubeconfig = _write(tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": spec}))
    with pytest.raises(
        credentials_module.CredentialsError,
        match=re.escape(
            "configured to use API version client.authentication.k8s.io/v1, but returned "
            "'client.authentication.k8s.io/v1beta1'"
        ),
    ):
        credentials_module.load(kubeconfig)


def test_a_plugin_command_with_a_path_is_found_beside_the_kubeconfig(tmp_path: Path) -> None:
    plugin = ScriptedPlugin(tmp_path / "plugin")
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "get-token"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    spec = plugin.spec(command="bin/get-token")  # relative: to the kubeconfig, as kubectl
    kubeconfig = _write(tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": spec}))
    assert credentials_module.load(kubeconfig).token == "tok-1"


def test_a_failing_exec_plugin_is_reported(tmp_path: Path) -> None:
    plugin = ScriptedPlugin(tmp_path / "plugin", plan=[{"fail": "no login: run aws sso login"}])
    kubeconfig = _write(
        tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": plugin.spec()})
    )
    with pytest.raises(credentials_module.CredentialsError) as raised:
        credentials_module.load(kubeconfig)
    message = str(raised.value)
    assert f"user 'x-user': the exec plugin {sys.executable!r} failed with exit code 1" in message
    assert "no login: run aws sso login" in message


def test_a_missing_exec_plugin_says_how_to_install_it(tmp_path: Path) -> None:
    spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "interactiveMode": "Never",
        "command": "plumb-test-no-such-plugin",
        "installHint": "pip install plumb-test-no-such-plugin",
    }
    kubeconfig = _write(tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": spec}))
    with pytest.raises(
        credentials_module.CredentialsError,
        match=re.escape(
            "the exec plugin 'plumb-test-no-such-plugin' was not found "
            "(pip install plumb-test-no-such-plugin); install it"
        ),
    ):
        credentials_module.load(kubeconfig)


def test_a_token_beside_an_exec_plugin_is_used_and_the_plugin_never_run(tmp_path: Path) -> None:
    plugin = ScriptedPlugin(tmp_path / "plugin")
    user: dict[str, object] = {"token": "given", "exec": plugin.spec()}
    kubeconfig = _write(tmp_path / "kubeconfig", _config({"server": "https://a"}, user))
    creds = credentials_module.load(kubeconfig)
    assert creds.token == "given"  # as client-go: the exec authenticator stands aside
    assert creds.exec_plugin is None
    assert plugin.runs == []


def test_a_client_certificate_from_an_exec_plugin_lands_in_one_private_file(
    tmp_path: Path,
) -> None:
    authority = pki.Authority(directory=tmp_path / "pki")
    pair = authority.client(pki.Identity(name="alice", user="alice"))
    plugin = ScriptedPlugin(
        tmp_path / "plugin", plan=[{"token": False, "cert": str(pair.cert), "key": str(pair.key)}]
    )
    kubeconfig = _write(
        tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": plugin.spec()})
    )
    creds = credentials_module.load(kubeconfig)
    assert creds.token is None
    assert creds.client_cert_file is not None
    assert creds.client_key_file == creds.client_cert_file  # one file: renamed whole on renewal
    held = Path(creds.client_cert_file)
    assert stat.S_IMODE(held.stat().st_mode) == 0o600
    assert pair.cert.read_bytes().strip() in held.read_bytes()
    assert pair.key.read_bytes().strip() in held.read_bytes()
    assert isinstance(creds.ssl_context(), ssl.SSLContext)  # loads as a pair


def test_a_client_certificate_without_its_key_is_refused(tmp_path: Path) -> None:
    authority = pki.Authority(directory=tmp_path / "pki")
    pair = authority.client(pki.Identity(name="alice", user="alice"))
    other = authority.client(pki.Identity(name="bob", user="bob"))
    for plan, message in (
        ({"cert": str(pair.cert)}, "returned only a client certificate or key, not both"),
        (
            {"cert": str(pair.cert), "key": str(other.key)},
            "returned a client certificate and key that do not load as a pair",
        ),
    ):
        plugin = ScriptedPlugin(tmp_path / "plugin", plan=[plan])
        kubeconfig = _write(
            tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": plugin.spec()})
        )
        with pytest.raises(credentials_module.CredentialsError, match=message):
            credentials_module.load(kubeconfig)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_config({"server": "https://a"}, {"auth-provider": {"name": "gcp"}}), "auth-provider"),
        ({**_config({"server": "https://a"}, {}), "current-context": "nope"}, "no context"),
        (_config({}, {}), "has no server"),
    ],
    ids=["auth-provider", "unknown-context", "no-server"],
)
def test_what_cannot_be_used_is_a_credentials_error(
    tmp_path: Path, document: dict[str, object], message: str
) -> None:
    kubeconfig = _write(tmp_path / "kubeconfig", document)
    with pytest.raises(credentials_module.CredentialsError, match=message):
        credentials_module.load(kubeconfig)


def test_a_missing_kubeconfig_is_a_credentials_error(tmp_path: Path) -> None:
    with pytest.raises(credentials_module.CredentialsError, match="pass --kubeconfig"):
        credentials_module.load(tmp_path / "absent")
    with pytest.raises(credentials_module.CredentialsError, match="no kubeconfig file found"):
        credentials_module.load(
            environ={"KUBECONFIG": str(tmp_path / "absent")},
            service_account_dir=tmp_path / "no-sa",
        )


def _laughs() -> str:
    """A "billion laughs" under a cluster's server: ~500 bytes that stand for 10^9 strings."""
    lines = ["lol0: &lol0 [" + ", ".join(["lol"] * 10) + "]"]
    lines += [f"lol{i}: &lol{i} [" + ", ".join([f"*lol{i - 1}"] * 10) + "]" for i in range(1, 9)]
    return "\n".join(lines) + "\nclusters:\n- name: c\n  cluster: {server: *lol8}\n"


# Kubeconfigs a tool or a hand got wrong, or a hostile one: each refused with its problem.
BAD_KUBECONFIGS = {
    "int-abc": (
        "clusters:\n- name: c\n  cluster: {insecure-skip-tls-verify: !!int abc}\n",
        "cannot decode !!str `abc` as a !!int",
    ),
    "timestamp-month-13": (
        "current-context: !!timestamp 2020-13-45\n",
        "cannot decode !!str `2020-13-45` as a !!timestamp",
    ),
    "2000-nested-brackets": ("users: " + "[" * 2000 + "]" * 2000 + "\n", "max depth of 100"),
    "billion-laughs": (_laughs(), "document contains excessive aliasing"),
}


@pytest.mark.parametrize(("text", "says"), BAD_KUBECONFIGS.values(), ids=list(BAD_KUBECONFIGS))
def test_a_bad_kubeconfig_is_refused_naming_its_problem(
    tmp_path: Path, text: str, says: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(text)
    with pytest.raises(credentials_module.CredentialsError) as raised:
        credentials_module.load(kubeconfig)
    assert f"{kubeconfig} is not a readable kubeconfig: yaml: " in str(raised.value)
    assert says in str(raised.value)
