"""plumb with a kubeconfig whose user is an exec credential plugin (as on EKS, GKE or with
kubelogin), against a real API server that accepts only the plugin's current token: a webhook
token authenticator, run by this module, answers the API server's TokenReviews.

The module starts its own control plane (etcd and kube-apiserver only, with the webhook's
flags through ``Parts.apiserver_flags``), so the session's shared one is left as it is.
"""

from __future__ import annotations

import datetime
import http.server
import json
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plumb_dev.cluster.controlplane import building
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, crds, kube
from tests.support.plumb_process import Plumb, launch_plumb, wait_synced
from tests.support.scripted_plugin import ScriptedPlugin

# A control plane of its own (~20 s): in `make test-long`; the unit tests of
# tests/unit/k8s/test_credentials.py keep the renewal in `make test`.
pytestmark = [pytest.mark.integration, pytest.mark.long]

LIFETIME = 3.0  # seconds each token of the plugin lives
# kube-apiserver keeps a token it accepted for 10 s without asking the webhook again
# (TokenSuccessCacheTTL, not a flag): a token is refused only that long after its first use.
APISERVER_TOKEN_CACHE = 10.0


class Authenticator(http.server.ThreadingHTTPServer):
    """A TokenReview webhook: authenticated (as a cluster admin) only for the token the plugin
    issued last, and only until its expirationTimestamp."""

    def __init__(self, plugin: ScriptedPlugin) -> None:
        super().__init__(("127.0.0.1", 0), _Review)
        self.plugin = plugin

    def accepts(self, token: str) -> bool:
        issued = self.plugin.issued
        if not issued or issued[-1].get("token") != token:
            return False
        expires = datetime.datetime.fromisoformat(issued[-1]["expirationTimestamp"])
        return datetime.datetime.now(datetime.UTC) < expires

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/authenticate"


class _Review(http.server.BaseHTTPRequestHandler):
    server: Authenticator

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        accepted = self.server.accepts(str(review.get("spec", {}).get("token", "")))
        status: dict[str, Any] = {"authenticated": accepted}
        if accepted:
            status["user"] = {"username": "exec-user", "groups": ["system:masters"]}
        body = json.dumps({**review, "status": status}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request on stderr otherwise


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> ScriptedPlugin:
    return ScriptedPlugin(tmp_path_factory.mktemp("exec-plugin"), plan=[{"lifetime": LIFETIME}])


@pytest.fixture(scope="module")
def authenticator(plugin: ScriptedPlugin) -> Iterator[Authenticator]:
    server = Authenticator(plugin)
    thread = threading.Thread(target=server.serve_forever, name="token-webhook", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def webhook_plane(
    authenticator: Authenticator, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[controlplane.ControlPlane]:
    """etcd and kube-apiserver, the API server asking ``authenticator`` about the tokens its
    token file does not know, with no cache of the webhook's answers."""
    directory = tmp_path_factory.mktemp("webhook-plane")
    config = directory / "token-webhook.kubeconfig"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "webhook", "cluster": {"server": authenticator.url}}],
                "users": [{"name": "apiserver", "user": {}}],
                "contexts": [
                    {"name": "webhook", "context": {"cluster": "webhook", "user": "apiserver"}}
                ],
                "current-context": "webhook",
            }
        )
    )
    parts = controlplane.Parts(
        controllers=False,
        service_accounts=False,
        apiserver_flags=(
            f"--authentication-token-webhook-config-file={config}",
            "--authentication-token-webhook-version=v1",
            "--authentication-token-webhook-cache-ttl=0s",
        ),
    )
    plane = controlplane.start(directory, bin_dir=building.ensure_binaries(), parts=parts)
    try:
        crds.install(crds.Kubectl.of(plane, cache_dir=directory / "kubectl-cache"))
        yield plane
    finally:
        controlplane.stop(directory)


def _status_with(plane: controlplane.ControlPlane, token: str) -> int:
    """What the API server answers a request made with ``token``."""
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    request = urllib.request.Request(
        f"{plane.server}/api/v1/nodes?limit=1", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_plumb_keeps_binding_after_its_exec_credential_expires_by_running_the_plugin_again(
    webhook_plane: controlplane.ControlPlane,
    plugin: ScriptedPlugin,
    authenticator: Authenticator,
    tmp_path: Path,
) -> None:
    client = kube.Kube(webhook_plane.kubeconfig)  # the admin token of the token file
    namespace = "exec"
    client.create_namespace(namespace, account=False)
    client.create_node(builders.make_node("exec-node").capacity(cpu="8").obj())
    kubeconfig = plugin.kubeconfig(
        tmp_path, webhook_plane.server, **{"certificate-authority": str(webhook_plane.ca_file)}
    )
    log = tmp_path / "plumb.log"
    plumb = Plumb(launch_plumb(kubeconfig, log), log)

    def bound(name: str) -> str:
        client.create_pod(
            builders.make_pod(name, namespace).scheduler("plumb").req(cpu="100m").obj()
        )
        pod = kube.wait_for(
            f"{name} bound",
            lambda: (pod := client.pod(namespace, name))["spec"].get("nodeName") and pod,
            timeout=20,
        )
        return str(pod["spec"]["nodeName"])

    try:
        wait_synced(plumb.process, plumb.output)
        assert bound("before") == "exec-node"
        # The first token is dead for the API server once its 10-s cache of it has gone too
        # (plumb run before this change sends it for ever; refused asks never fill the cache).
        first = str(plugin.issued[0]["token"])
        kube.wait_for(
            "the API server to refuse the plugin's first token",
            lambda: _status_with(webhook_plane, first) == 401,
            timeout=APISERVER_TOKEN_CACHE + LIFETIME + 5,
            interval=0.5,
        )
        runs = len(plugin.runs)
        assert bound("after") == "exec-node"
        assert len(plugin.runs) > runs  # the plugin ran again to bind it
        assert "ran the exec plugin" in plumb.output()
    finally:
        code = plumb.stop()
        print(f"--- plumb log ---\n{plumb.output()[-6000:]}")
        client.close()
    assert code == 0, f"plumb exited with {code}"
    assert "Traceback" not in plumb.output()
