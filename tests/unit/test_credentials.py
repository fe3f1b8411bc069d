"""Credentials: the bearer scheme in any case, in-cluster loading from a directory of our own,
a kubeconfig tokenFile, and a rotated token picked up every minute or at once on a 401."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module
from tests.unit import loopback


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ("bearer abc.def", "abc.def"),  # kubernetes-client's in-cluster config writes this
        ("Bearer abc.def", "abc.def"),
        ("BEARER  abc.def ", "abc.def"),
        ("abc.def", "abc.def"),  # a bare token stays as it is
        ("", None),
        (None, None),
    ],
)
def test_the_bearer_scheme_is_stripped_whatever_its_case(value: str | None, token: str) -> None:
    assert credentials_module.bearer_token(value) == token


def _service_account(directory: Path, token: str = "jwt-1") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token + "\n")
    (directory / "ca.crt").write_text("not a real CA")
    (directory / "namespace").write_text("plumb-system")
    return directory


def test_in_a_pod_the_service_account_and_the_kubernetes_service_are_used(tmp_path: Path) -> None:
    directory = _service_account(tmp_path / "sa")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    creds = credentials_module.load(environ=env, service_account_dir=directory)
    assert creds.server == "https://10.0.0.1:443"
    assert creds.token == "jwt-1"  # no "bearer " left in it
    assert creds.headers() == {"Authorization": "Bearer jwt-1"}
    assert creds.token_file == str(directory / "token")
    assert creds.ca_file == str(directory / "ca.crt")
    assert credentials_module.pod_namespace(env, directory) == "plumb-system"


def test_the_service_account_directory_can_come_from_the_environment(tmp_path: Path) -> None:
    directory = _service_account(tmp_path / "elsewhere")
    env = {
        "KUBERNETES_SERVICE_HOST": "fd00::1",
        "KUBERNETES_SERVICE_PORT": "6443",
        credentials_module.SERVICE_ACCOUNT_ENV: str(directory),
    }
    creds = credentials_module.in_cluster(env)
    assert creds is not None
    assert creds.server == "https://[fd00::1]:6443"


def test_outside_a_pod_there_are_no_in_cluster_credentials(tmp_path: Path) -> None:
    directory = _service_account(tmp_path / "sa")
    assert credentials_module.in_cluster({}, directory) is None
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert credentials_module.in_cluster(env, tmp_path / "missing") is None


def test_a_kubeconfig_token_file_is_followed(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {tokenFile: token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
    )
    creds = credentials_module.load(kubeconfig)
    assert creds.token == "from-file"
    assert creds.token_file == str(tmp_path / "token")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_token_file_is_read_again_each_minute_and_on_demand(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one")
    clock = Clock()
    creds = credentials_module.Credentials(server="https://x", token="one", token_file=str(token))
    tokens = credentials_module.Tokens(creds, clock=clock)
    token.write_text("two")
    clock.now = 59.0
    assert tokens.current() == "one"  # not yet a minute
    clock.now = 60.0
    assert tokens.current() == "two"
    token.write_text("three")
    assert tokens.refresh() is True  # a 401 does not wait for the minute
    assert tokens.headers() == {"Authorization": "Bearer three"}
    assert tokens.refresh() is False
    token.unlink()  # mid-rotation: keep the last token rather than none
    assert tokens.refresh() is False
    assert tokens.current() == "three"


def test_a_literal_token_never_changes() -> None:
    creds = credentials_module.Credentials(server="https://x", token="fixed")
    tokens = credentials_module.Tokens(creds)
    assert not tokens.rotating
    assert tokens.refresh() is False
    assert tokens.current() == "fixed"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[int, list[str]]]:
    """An API server that accepts only the token "new", and records what it was sent."""
    seen: list[str] = []

    async def nodes(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response({"message": "Unauthorized"}, status=401)
        return web.json_response({"items": [], "metadata": {"resourceVersion": "7"}})

    app = web.Application()
    app.router.add_get("/api/v1/nodes", nodes)
    async with loopback.serving(app) as port:
        yield port, seen


async def test_a_401_reads_the_rotated_token_and_sends_the_request_again(
    server: tuple[int, list[str]], tmp_path: Path
) -> None:
    port, seen = server
    token = tmp_path / "token"
    token.write_text("old")
    creds = credentials_module.Credentials(
        server=f"http://127.0.0.1:{port}", token="old", token_file=str(token)
    )
    api = k8s_client.ApiClient(creds)
    try:
        token.write_text("new")  # the kubelet rotated it; the old one is dead
        response = await api.request("GET", "/api/v1/nodes")
        assert response.status == 200
        assert seen == ["Bearer old", "Bearer new"]
        token.write_text("revoked")
        response = await api.request("GET", "/api/v1/nodes")
        assert response.status == 200  # still "new" until a 401 says otherwise
    finally:
        await api.close()


def test_the_credentials_never_print_their_secrets() -> None:
    creds = credentials_module.Credentials(
        server="https://10.0.0.1:6443", token="s3cr3t-token", password="hunter2"
    )
    assert "s3cr3t-token" not in repr(creds)
    assert "hunter2" not in repr(creds)
    assert "s3cr3t-token" not in str(creds)
