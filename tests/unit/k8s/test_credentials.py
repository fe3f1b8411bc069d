"""Credentials: the bearer scheme in any case, in-cluster loading from a directory of our own,
a kubeconfig tokenFile, and a rotated token picked up every minute or at once on a 401; an exec
plugin's credential renewed before it expires and on a 401, its client certificate too."""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module
from plumb_dev.cluster.controlplane import pki
from tests.support import loopback
from tests.support.fakes import ManualClock
from tests.support.scripted_plugin import ScriptedPlugin


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


def test_a_token_file_is_read_again_each_minute_and_on_demand(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one")
    clock = ManualClock(0.0)
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


BASE = 1_700_000_000.0  # the fake wall clock's start


def _at(seconds: float) -> str:
    """The RFC 3339 time ``seconds`` after BASE."""
    moment = datetime.datetime.fromtimestamp(BASE + seconds, datetime.UTC)
    return moment.isoformat().replace("+00:00", "Z")


@pytest.fixture
async def current_only() -> AsyncIterator[tuple[list[Any], list[str]]]:
    """An API server that accepts only the token a plugin (put in the list first) issued
    last, as a cloud's authenticator does once a login is renewed; records what it was sent."""
    holder: list[Any] = []
    seen: list[str] = []

    async def nodes(request: web.Request) -> web.Response:
        plugin: ScriptedPlugin = holder[0]
        sent = request.headers.get("Authorization", "")
        seen.append(sent)
        if sent != f"Bearer {plugin.latest()}":
            return web.json_response({"message": "Unauthorized"}, status=401)
        return web.json_response({"items": [], "metadata": {"resourceVersion": "7"}})

    app = web.Application()
    app.router.add_get("/api/v1/nodes", nodes)
    async with loopback.serving(app) as port:
        holder.append(port)
        yield holder, seen


def _serve_plugin(
    holder: list[Any], plugin: ScriptedPlugin, tmp_path: Path
) -> credentials_module.Credentials:
    """Credentials from a kubeconfig whose user is ``plugin``, for the server in ``holder``."""
    port = holder.pop()
    holder.append(plugin)
    return credentials_module.load(plugin.kubeconfig(tmp_path, f"http://127.0.0.1:{port}"))


async def test_a_401_runs_the_exec_plugin_again_and_sends_the_request_once_more(
    current_only: tuple[list[Any], list[str]], tmp_path: Path
) -> None:
    holder, seen = current_only
    plugin = ScriptedPlugin(tmp_path / "plugin")  # no expiry: only a 401 says it is stale
    api = k8s_client.ApiClient(_serve_plugin(holder, plugin, tmp_path))
    try:
        assert (await api.request("GET", "/api/v1/nodes")).status == 200
        # Another client of the same login renewed it: tok-1 is dead now, as an EKS or
        # kubelogin token is after its lifetime.
        plugin.run_elsewhere()
        response = await api.request("GET", "/api/v1/nodes")
        assert response.status == 200
        assert seen == ["Bearer tok-1", "Bearer tok-1", "Bearer tok-3"]
        assert len(plugin.runs) == 3
    finally:
        await api.close()


async def test_many_requests_refused_at_once_run_the_plugin_once(
    current_only: tuple[list[Any], list[str]], tmp_path: Path
) -> None:
    holder, seen = current_only
    plugin = ScriptedPlugin(tmp_path / "plugin")
    api = k8s_client.ApiClient(_serve_plugin(holder, plugin, tmp_path))
    try:
        plugin.run_elsewhere()  # tok-2: tok-1 is refused from now on
        responses = await asyncio.gather(
            *(api.request("GET", "/api/v1/nodes", hot=True) for _ in range(8))
        )
        assert [r.status for r in responses] == [200] * 8
        assert len(plugin.runs) == 3  # one renewal for the eight 401s, as client-go
        assert seen.count("Bearer tok-3") == 8
    finally:
        await api.close()


def _fake_time_tokens(
    creds: credentials_module.Credentials,
) -> tuple[credentials_module.Tokens, ManualClock, ManualClock]:
    """Tokens on fake clocks: the wall clock at BASE (the plans' times), the monotonic one
    past the pause after the first run."""
    wall, clock = ManualClock(BASE), ManualClock(0.0)
    tokens = credentials_module.Tokens(creds, clock=clock, wall_clock=wall)
    clock.now = credentials_module.EXEC_MIN_INTERVAL
    return tokens, wall, clock


def test_an_exec_credential_is_renewed_shortly_before_it_expires(tmp_path: Path) -> None:
    plugin = ScriptedPlugin(tmp_path, plan=[{"expires": _at(300)}, {"expires": _at(600)}])
    creds = credentials_module.load(plugin.kubeconfig(tmp_path, "https://a"))
    tokens, wall, _ = _fake_time_tokens(creds)
    early = credentials_module.EXEC_RENEW_EARLY
    wall.now = BASE + 300 - early - 1
    assert tokens.current() == "tok-1"
    assert len(plugin.runs) == 1
    wall.now = BASE + 300 - early  # before the expiry, not after it
    assert tokens.current() == "tok-2"
    assert len(plugin.runs) == 2
    wall.now = BASE + 600 - early - 1  # the next one's own expiry counts now
    assert tokens.current() == "tok-2"
    assert len(plugin.runs) == 2


def test_a_short_lived_exec_credential_is_renewed_at_nine_tenths_of_its_life(
    tmp_path: Path,
) -> None:
    plugin = ScriptedPlugin(tmp_path, plan=[{"expires": _at(20)}])
    creds = credentials_module.load(plugin.kubeconfig(tmp_path, "https://a"))
    tokens, wall, _ = _fake_time_tokens(creds)
    wall.now = BASE + 17.9
    assert tokens.current() == "tok-1"
    wall.now = BASE + 18  # 10 s early would have renewed it at once, and again and again
    assert tokens.current() == "tok-2"


def test_an_exec_credential_without_an_expiry_is_renewed_only_when_refused(
    tmp_path: Path,
) -> None:
    plugin = ScriptedPlugin(tmp_path)
    creds = credentials_module.load(plugin.kubeconfig(tmp_path, "https://a"))
    tokens, wall, _ = _fake_time_tokens(creds)
    wall.now = BASE + 365 * 86400.0
    assert tokens.current() == "tok-1"
    assert tokens.refresh() is True
    assert tokens.current() == "tok-2"
    assert len(plugin.runs) == 2


async def test_a_request_after_the_exec_credential_expired_carries_a_new_one(
    current_only: tuple[list[Any], list[str]], tmp_path: Path
) -> None:
    holder, seen = current_only
    plugin = ScriptedPlugin(tmp_path / "plugin", plan=[{"expires": _at(60)}, {}])
    creds = _serve_plugin(holder, plugin, tmp_path)
    tokens, wall, _ = _fake_time_tokens(creds)
    api = k8s_client.ApiClient(creds, tokens=tokens)
    try:
        assert (await api.request("GET", "/api/v1/nodes")).status == 200
        wall.now = BASE + 60
        assert (await api.request("GET", "/api/v1/nodes", hot=True)).status == 200
        # Renewed before the request went, not after a 401.
        assert seen == ["Bearer tok-1", "Bearer tok-2"]
    finally:
        await api.close()


def test_a_plugin_that_fails_keeps_the_last_credential_and_is_run_again_after_a_pause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plan = [{"expires": _at(60)}, {"fail": "sts.amazonaws.com: connection refused"}, {}]
    plugin = ScriptedPlugin(tmp_path, plan=plan)
    creds = credentials_module.load(plugin.kubeconfig(tmp_path, "https://a"))
    tokens, wall, clock = _fake_time_tokens(creds)
    wall.now = BASE + 60
    with caplog.at_level(logging.WARNING, logger=credentials_module.__name__):
        assert tokens.current() == "tok-1"  # maybe still good: better than none
    assert "failed with exit code 1: sts.amazonaws.com: connection refused" in caplog.text
    assert "keeping the last credential" in caplog.text
    assert len(plugin.runs) == 2
    clock.now += credentials_module.EXEC_RETRY_SECONDS - 0.1
    assert tokens.current() == "tok-1"
    assert tokens.refresh() is False  # a 401 does not hurry a broken plugin either
    assert len(plugin.runs) == 2
    clock.now += 0.1
    assert tokens.current() == "tok-3"
    assert len(plugin.runs) == 3


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> pki.Authority:
    """A CA with a serving certificate for 127.0.0.1 and client certificates alice and bob."""
    made = pki.Authority(directory=tmp_path_factory.mktemp("pki"))
    made.server("server", common_name="server", names=("127.0.0.1",))
    for user in ("alice", "bob"):
        made.client(pki.Identity(name=user, user=user))
    return made


async def test_a_new_client_certificate_from_the_plugin_is_presented_on_new_connections(
    authority: pki.Authority, tmp_path: Path
) -> None:
    alice, bob = authority.pair("alice"), authority.pair("bob")
    plugin = ScriptedPlugin(
        tmp_path / "plugin",
        plan=[
            {"token": False, "cert": str(alice.cert), "key": str(alice.key), "expires": _at(60)},
            {"token": False, "cert": str(bob.cert), "key": str(bob.key)},
        ],
    )
    users: list[str] = []

    async def nodes(request: web.Request) -> web.Response:
        assert request.transport is not None
        subject = dict(pair[0] for pair in request.transport.get_extra_info("peercert")["subject"])
        users.append(subject["commonName"])
        return web.json_response({"items": [], "metadata": {"resourceVersion": "1"}})

    app = web.Application()
    app.router.add_get("/api/v1/nodes", nodes)
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=authority.ca.cert)
    serving.load_cert_chain(authority.pair("server").cert, authority.pair("server").key)
    serving.verify_mode = ssl.CERT_REQUIRED
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=serving)
    await site.start()
    port = runner.addresses[0][1]
    kubeconfig = plugin.kubeconfig(
        tmp_path, f"https://127.0.0.1:{port}", **{"certificate-authority": str(authority.ca.cert)}
    )
    creds = credentials_module.load(kubeconfig)
    tokens, wall, _ = _fake_time_tokens(creds)
    api = k8s_client.ApiClient(creds, tokens=tokens)
    try:
        for hot in (False, True):
            assert (await api.request("GET", "/api/v1/nodes", hot=hot)).status == 200
        wall.now = BASE + 60
        for hot in (False, True):
            assert (await api.request("GET", "/api/v1/nodes", hot=hot)).status == 200
        assert users == ["alice", "alice", "bob", "bob"]
        assert tokens.certificate_generation == 1
    finally:
        await api.close()
        await runner.cleanup()
