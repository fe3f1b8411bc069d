"""A pod updated while its binding is in flight, and the binding refused: both plumb and
kube-scheduler v1.34.4 retry the pod as the watch last showed it, not as they decided it.

An admission webhook (served by the test on 127.0.0.1) holds every binding to one node until
the test has updated the pod, then refuses it. kube-scheduler ignores updates of assumed pods
and requeues a pod whose binding failed as its informer last saw it (schedule_one.go
handleSchedulingFailure); plumb keeps the update aside for the retry."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from plumb_dev.cluster.controlplane import pki
from plumb_dev.testing import builders, kube
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = pytest.mark.integration

_PROBE_NODE = "plumb-test-refused-probe"  # bindings to it are refused at once
_HOLD_SECONDS = 15.0


class _RefusingWebhook:
    """A validating admission webhook that refuses bindings to ``node`` (holding each until
    ``release`` is set) and to the probe node, and allows every other."""

    def __init__(self, pair: pki.Pair, node: str) -> None:
        self.held = threading.Event()
        self.release = threading.Event()
        webhook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length))["request"]
                target = ((request.get("object") or {}).get("target") or {}).get("name")
                allowed = target not in (node, _PROBE_NODE)
                if target == node:
                    webhook.held.set()
                    webhook.release.wait(_HOLD_SECONDS)
                answer = {"uid": request["uid"], "allowed": allowed}
                if not allowed:
                    answer["status"] = {"code": 403, "message": f"bindings to {target} refused"}
                body = json.dumps(
                    {
                        "apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview",
                        "response": answer,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # quiet: stderr is the test's
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pair.cert, pair.key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def _refusing_bindings_to(
    client: kube.Kube, namespace: str, node: str, directory: Path
) -> Iterator[_RefusingWebhook]:
    """The webhook, registered for the namespace's bindings and in force when this returns."""
    authority = pki.Authority(directory=directory)
    pair = authority.server("webhook", common_name="webhook", names=("127.0.0.1",))
    webhook = _RefusingWebhook(pair, node)
    admission = k8s.AdmissionregistrationV1Api(client.api)
    name = f"refuse-{namespace}"[:63]
    admission.create_validating_webhook_configuration(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": "refuse.plumb.test",
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{webhook.port}/",
                        "caBundle": base64.b64encode(authority.ca.cert.read_bytes()).decode(),
                    },
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["pods/binding"],
                        }
                    ],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 20,
                }
            ],
        }
    )
    try:
        _wait_in_force(client, namespace)
        yield webhook
    finally:
        admission.delete_validating_webhook_configuration(name)
        webhook.close()


def _wait_in_force(client: kube.Kube, namespace: str) -> None:
    """The API server loads webhook configurations from a watch: bind a pod no scheduler takes
    to the probe node, in dry run (webhooks without side effects see those too), until the
    webhook refuses it."""
    client.create_pod(builders.make_pod("webhook-probe", namespace).scheduler("nobody").obj())
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "webhook-probe"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": _PROBE_NODE},
    }

    def refused() -> bool:
        try:
            client.core.create_namespaced_pod_binding(
                "webhook-probe", namespace, binding, dry_run="All", _preload_content=False
            )
        except ApiException as error:
            return "refused" in str(error.body)
        return False

    kube.wait_for("the binding webhook to be in force", refused, timeout=30)
    client.core.delete_namespaced_pod("webhook-probe", namespace, grace_period_seconds=0)


def test_a_refused_binding_is_retried_with_the_pods_newest_spec(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
    tmp_path: Path,
) -> None:
    # As created, the pod fits only trap (safe has a NoSchedule taint it does not tolerate);
    # once it tolerates that taint, safe wins: trap has a PreferNoSchedule taint it does not.
    trap = add_node(
        builders.make_node(f"{namespace}-trap").taint("avoid", "yes", "PreferNoSchedule")
    )
    safe = add_node(builders.make_node(f"{namespace}-safe").taint("dedicated", "safe"))
    side_by_side.in_view(kube_client, scheduler, namespace, [trap, safe])
    with _refusing_bindings_to(kube_client, namespace, trap, tmp_path / "pki") as webhook:
        kube_client.create_pod(scheduler.pod("web", namespace).obj())
        assert webhook.held.wait(30), f"{scheduler.name} never tried to bind web to {trap}"
        started = time.monotonic()
        # Tolerations may be added to a pending pod (the API server added two already).
        tolerations = kube_client.pod(namespace, "web")["spec"].get("tolerations") or []
        wanted = {"key": "dedicated", "operator": "Equal", "value": "safe", "effect": "NoSchedule"}
        kube_client.patch_pod(namespace, "web", {"spec": {"tolerations": [*tolerations, wanted]}})
        time.sleep(1.0)  # the update reaches the scheduler's watch while the binding is held
        webhook.release.set()
        placed = kube.wait_for(
            f"web to be bound to {safe}",
            lambda: kube_client.pod(namespace, "web")["spec"].get("nodeName"),
            timeout=20,
        )
        assert placed == safe, f"{scheduler.name} retried the version it decided, not the newest"
        assert time.monotonic() - started < 10
