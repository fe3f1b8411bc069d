"""The local cluster with tracing (``plumb cluster up --tracing``'s): a request that carries a
sampled W3C traceparent from a system:masters caller puts kube-apiserver's spans, and etcd's
under them, into that same trace in Jaeger, under the caller's span; an unsampled request and a
ServiceAccount's request (whose traceparent the API server does not trust) record nothing."""

from __future__ import annotations

import http.client
import json
import secrets
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, jaeger, kube

pytestmark = [pytest.mark.integration, pytest.mark.tracing]

BINDING = "POST /api/v1/namespaces/{:namespace}/pods/{:name}/binding"
ETCD_TXN = "etcdserverpb.KV/Txn"
# kube-apiserver exports every 5 s (the OTel SDK's BatchSpanProcessor), Jaeger batches too.
ARRIVAL_SECONDS = 60.0


@pytest.fixture(scope="module")
def traced_client(traced_plane: controlplane.ControlPlane) -> Iterator[kube.Kube]:
    client = kube.Kube(traced_plane.kubeconfig)
    yield client
    client.close()


@pytest.fixture
def traced_namespace(traced_client: kube.Kube) -> Iterator[str]:
    name = f"traces-{secrets.token_hex(3)}"
    traced_client.create_namespace(name)
    yield name
    traced_client.delete_workloads(name)


def _request(
    plane: controlplane.ControlPlane,
    method: str,
    path: str,
    *,
    token: str,
    traceparent: str,
    body: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One HTTPS request to kube-apiserver with a bearer token and a traceparent header."""
    host, port = plane.server.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    connection = http.client.HTTPSConnection(host, int(port), timeout=30, context=context)
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json",
        "Content-Type": "application/json",
        "traceparent": traceparent,
    }
    try:
        connection.request(
            method, path, body=None if body is None else json.dumps(body), headers=headers
        )
        response = connection.getresponse()
        answer: dict[str, Any] = json.loads(response.read() or b"{}")
        return response.status, answer
    finally:
        connection.close()


def _binding(pod: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def _ancestors(trace: jaeger.JaegerTrace, span: jaeger.JaegerSpan) -> list[str]:
    """The names of span's ancestors in the trace, nearest first."""
    by_id = {s.span_id: s for s in trace.spans}
    names = []
    parent = by_id.get(span.parent_id or "")
    while parent is not None:
        names.append(parent.name)
        parent = by_id.get(parent.parent_id or "")
    return names


def _complete(trace: jaeger.JaegerTrace) -> bool:
    # etcd's own span is the last to come: etcd exports on its own schedule.
    return bool(
        trace.named(BINDING)
        and trace.named("GuaranteedUpdate etcd3")
        and any(s.service == "etcd" for s in trace.spans)
    )


def test_a_binding_with_a_sampled_traceparent_is_traced_into_the_callers_trace(
    traced_plane: controlplane.ControlPlane, traced_client: kube.Kube, traced_namespace: str
) -> None:
    assert traced_plane.jaeger is not None
    namespace = traced_namespace
    node = f"{namespace}-n"
    traced_client.create_node(builders.make_node(node).obj())
    try:
        _bind_and_read_the_traces(traced_plane, traced_client, namespace, node)
    finally:
        traced_client.delete_node(node)


def _bind_and_read_the_traces(
    traced_plane: controlplane.ControlPlane, traced_client: kube.Kube, namespace: str, node: str
) -> None:
    assert traced_plane.jaeger is not None
    for pod in ("web", "quiet", "other"):
        traced_client.create_pod(builders.make_pod(pod, namespace).scheduler("nobody").obj())
    traces = jaeger.JaegerQuery(traced_plane.jaeger.query_url)
    binding = f"/api/v1/namespaces/{namespace}/pods/{{}}/binding"

    # A ServiceAccount's request: kube-apiserver starts a new root trace (linked to the caller's
    # span), unsampled at samplingRatePerMillion 0, so nothing of it is recorded.
    status, answer = _request(
        traced_plane,
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/default/token",
        token=traced_plane.token,
        traceparent=f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-00",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    assert status == 201, answer
    account_trace = secrets.token_hex(16)
    status, answer = _request(
        traced_plane,
        "POST",
        binding.format("other"),
        token=answer["status"]["token"],
        traceparent=f"00-{account_trace}-{secrets.token_hex(8)}-01",
        body=_binding("other", node),
    )
    assert status == 403, answer  # the account may not bind; the request is traced all the same
    # The admin's unsampled request: the API server follows the caller's decision.
    quiet_trace = secrets.token_hex(16)
    status, answer = _request(
        traced_plane,
        "POST",
        binding.format("quiet"),
        token=traced_plane.token,
        traceparent=f"00-{quiet_trace}-{secrets.token_hex(8)}-00",
        body=_binding("quiet", node),
    )
    assert status == 201, answer

    # The admin's sampled request (system:masters): its spans join the caller's trace.
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    status, answer = _request(
        traced_plane,
        "POST",
        binding.format("web"),
        token=traced_plane.token,
        traceparent=f"00-{trace_id}-{caller}-01",
        body=_binding("web", node),
    )
    assert status == 201, answer
    assert traced_client.pod(namespace, "web")["spec"]["nodeName"] == node

    trace = traces.wait_for_trace(trace_id, _complete, timeout=ARRIVAL_SECONDS)
    print(jaeger.describe(trace))
    assert {s.trace_id for s in trace.spans} == {trace_id}
    (server,) = trace.named(BINDING)
    assert server.service == "apiserver"
    assert server.parent_id == caller  # the caller's span, which Jaeger never got
    # Every other span descends from the server span.
    assert [s.name for s in trace.spans if s.parent_id == caller] == [BINDING]
    (create,) = trace.named("Create")
    assert create.service == "apiserver"
    assert BINDING in _ancestors(trace, create)
    assert create.tags.get("subresource") == "binding"
    assert "Write to database call succeeded" in create.events
    (update,) = trace.named("GuaranteedUpdate etcd3")
    assert _ancestors(trace, update)[0] == "Create"
    assert update.tags.get("key") == f"/pods/{namespace}/web"
    assert "Transaction committed" in update.events
    # The etcd client's span in kube-apiserver, and etcd's server span under it.
    clients = [s for s in trace.named(ETCD_TXN) if s.service == "apiserver"]
    assert clients
    assert all(_ancestors(trace, s)[0] == "GuaranteedUpdate etcd3" for s in clients)
    served = [s for s in trace.spans if s.service == "etcd"]
    assert served
    assert {s.parent_id for s in served} <= {s.span_id for s in clients}

    # Exported before the sampled request, so already in Jaeger if they had been recorded.
    assert traces.trace(quiet_trace) is None
    assert traces.trace(account_trace) is None
    assert {"apiserver", "etcd"} <= set(traces.services())
