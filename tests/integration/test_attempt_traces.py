"""plumb's spans end to end on a local cluster started with tracing (Jaeger, kube-apiserver and
etcd sending it their spans): a pod whose binding the fault proxy delays by 2 s has one trace
in Jaeger, queried through its HTTP API, holding plumb's spans for the attempt and the API
server's spans for its binding request under the same trace id (the request carried the
binding span's traceparent), the binding span as long as the delay; the trace line and `plumb
explain` name the trace; a real Prometheus with exemplar storage, scraping plumb, returns that
trace id as the exemplar of the binding's latency observation."""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plumb.observability import trace
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, jaeger, kube, prometheus
from tests.chaos import faultproxy
from tests.support import plumb_process
from tests.support.plumb_process import Plumb, free_port, launch_plumb, wait_synced

pytestmark = [pytest.mark.integration, pytest.mark.tracing]

DELAY = 2.0
BINDING_PATH = "POST /api/v1/namespaces/{:namespace}/pods/{:name}/binding"


@pytest.fixture(name="client")
def client_fixture(traced_plane: controlplane.ControlPlane) -> Iterator[kube.Kube]:
    client = kube.Kube(traced_plane.kubeconfig)
    yield client
    client.close()


@pytest.fixture(name="namespace")
def namespace_fixture(client: kube.Kube) -> Iterator[str]:
    name = f"spans-{secrets.token_hex(3)}"
    client.create_namespace(name)
    yield name
    client.delete_workloads(name)


def _started(
    plane: controlplane.ControlPlane, proxy: faultproxy.FaultProxy, tmp_path: Path, port: int
) -> Plumb:
    assert plane.jaeger is not None
    kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig", plane.token)
    log = tmp_path / "plumb.log"
    process = launch_plumb(
        kubeconfig,
        log,
        "--otlp-endpoint",
        f"http://127.0.0.1:{plane.jaeger.otlp_http_port}",
        "--trace-sampling-ratio",
        "1",
        "--metrics-port",
        str(port),
        "--metrics-address",
        "127.0.0.1",
        "--tracing-ui-url",
        plane.jaeger.query_url,
    )
    plumb = Plumb(process, log)
    wait_synced(process, plumb.output)
    return plumb


def test_a_delayed_binding_is_one_trace_with_the_api_servers_spans_and_an_exemplar(
    traced_plane: controlplane.ControlPlane, client: kube.Kube, namespace: str, tmp_path: Path
) -> None:
    assert traced_plane.jaeger is not None
    node = f"{namespace}-n"
    client.create_node(builders.make_node(node).obj())
    port = free_port()
    scrape = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [
            {"job_name": "plumb", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
        ],
    }
    rules = [faultproxy.Rule(faultproxy.RequestClass.BINDING, faultproxy.Fault.DELAY, 1.0)]
    with (
        faultproxy.FaultProxy(
            traced_plane.server, ca_file=traced_plane.ca_file, delay=DELAY, rules=rules
        ) as proxy,
        prometheus.running(
            scrape, tmp_path / "prometheus", flags=["--enable-feature=exemplar-storage"]
        ) as prometheus_port,
    ):
        plumb = _started(traced_plane, proxy, tmp_path, port)
        try:
            started = time.time()
            client.create_pod(
                builders.make_pod("slow", namespace).scheduler("plumb").req(cpu="100m").obj()
            )
            (line,) = plumb_process.scheduled_traces(plumb, {f"{namespace}/slow"})
            assert len(line.trace_id) == 32
            found = jaeger.JaegerQuery(traced_plane.jaeger.query_url).wait_for_trace(
                line.trace_id,
                lambda t: bool(t.named("binding") and t.named(BINDING_PATH)),
                timeout=60,
            )
            _check_the_trace(found, line)
            explained = plumb_process.explain(
                f"{namespace}/slow",
                "--from",
                str(plumb.log),
                "--tracing-ui-url",
                traced_plane.jaeger.query_url,
            )
            assert f"{traced_plane.jaeger.query_url}/trace/{line.trace_id}" in explained
            exemplar = kube.wait_for(
                "the binding latency's exemplar in Prometheus",
                functools.partial(
                    _exemplar, prometheus_port, line.trace_id, started - 60, started + 600
                ),
                timeout=60,
                interval=1.0,
            )
            assert float(str(exemplar["value"])) >= DELAY
        finally:
            plumb.stop()
            client.delete_node(node)


def _check_the_trace(found: jaeger.JaegerTrace, line: trace.Trace) -> None:
    """plumb's spans and the API server's, one tree under the attempt's root."""
    print(jaeger.describe(found))
    assert {"plumb", "apiserver"} <= found.services()
    (root,) = found.named(f"schedule {line.pod}")
    assert root.service == "plumb"
    assert root.parent_id is None
    assert root.tags.get("k8s.node.name") == line.node
    assert root.tags.get("plumb.plan_hash") == line.plan_hash
    stages = {span.name: span for span in found.children(root.span_id)}
    assert {"queue", "compile", "kernel", "Reserve", "binding"} <= set(stages)
    binding = stages["binding"]
    # The delay the proxy put on the binding request is the binding span's.
    assert DELAY * 1e6 <= binding.duration_us < (DELAY + 1.5) * 1e6, binding
    (server,) = found.named(BINDING_PATH)
    assert server.service == "apiserver"
    assert server.parent_id == binding.span_id  # the request's traceparent named it
    assert server.start_us >= binding.start_us + DELAY * 1e6 * 0.9
    assert found.named("GuaranteedUpdate etcd3")


def _exemplar(port: int, trace_id: str, start: float, end: float) -> dict[str, object] | None:
    answer = prometheus.query_exemplars(
        port, 'plumb_binding_duration_seconds_bucket{result="bound"}', start, end
    )
    for series in answer.get("data") or []:
        for exemplar in series.get("exemplars") or []:
            if exemplar.get("labels", {}).get("trace_id") == trace_id:
                return dict(exemplar)
    return None
