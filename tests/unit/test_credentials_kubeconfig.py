"""plumb's own kubeconfig loader: what the ``kubernetes`` package's loader gave for the same
files (server, CA, token, client certificate, basic login, TLS verification), and what it adds
or refuses: $KUBECONFIG merging, contexts, exec plugins, auth-provider."""

from __future__ import annotations

import base64
import json
import stat
import sys
from pathlib import Path

import pytest
from kubernetes import config as k8s_config
from kubernetes.client import Configuration

from plumb.k8s import credentials as credentials_module

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
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, os, sys\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "assert info['spec']['interactive'] is False\n"
        "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',\n"
        "                  'status': {'token': os.environ['GREETING'] + '-' + sys.argv[1]}}))\n"
    )
    exec_spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": ["plugin.py", "tok"],  # relative to the kubeconfig's directory
        "env": [{"name": "GREETING", "value": "hello"}],
    }
    kubeconfig = _write(
        tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": exec_spec})
    )
    creds = credentials_module.load(kubeconfig)
    assert creds.token == "hello-tok"
    assert creds.token_file is None


def test_a_failing_exec_plugin_is_reported(tmp_path: Path) -> None:
    exec_spec = {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no login')"]}
    kubeconfig = _write(
        tmp_path / "kubeconfig", _config({"server": "https://a"}, {"exec": exec_spec})
    )
    with pytest.raises(credentials_module.CredentialsError, match="no login"):
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
