"""SLO-elastic quotas on the real control plane (plumb only: no other scheduler has them): a
tenant whose SLO attainment falls has its ElasticQuota's limit lowered by the rule within one
evaluation period, the room it would have borrowed goes to a higher-priority tenant's pod, and
the limit is restored when the attainment recovers; each adjustment is in the policy's
status.quota, a QuotaLimitLowered/QuotaLimitRestored event and the refusal's words. The
attainment comes from plumb's own scheduling SLO, and from a PromQL query against a real
Prometheus (Debian's) scraping a tiny exporter the test sets.

The tenants (tests/support/tenants.py): a and b with min 4 / max 12 cpu each, c idle with min 8,
one node of 16 cpu. a holds 8 cpu (4 borrowed from c's idle min), b 4: 4 cpu are left under the
sum of mins (16), which a's next pod would take. With a's SLO breached, its limit falls by the
rule's amount (the policy's step releases 5% of its 12 cpu per 5 points below the objective:
8.4 cpu at 67%, 6.6 at 50%), below what a's next pod needs, so it is refused and b's takes the
room.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plumb.observability import metrics, trace
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import crds, kube, prometheus, quotaclient, schedulerplugins
from tests.support import metrics_page, side_by_side
from tests.support.live_cluster import NodeFactory, events_of
from tests.support.plumb_process import PlumbFactory, free_port
from tests.support.tenants import Tenants, no_quota_left

pytestmark = [pytest.mark.integration, pytest.mark.quotas]

PERIOD = 2.0  # the policy's evaluationPeriod
TOLERANCE = 1.0
WITHIN = 3.0  # plumb's own SLO: bound within 3 s of entering the queue
SLACK = 3.0  # watch and status write delays on top of one period


@pytest.fixture
def metrics_port() -> int:
    return free_port()


@pytest.fixture
def tenants(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    policy_crd: crds.Kubectl,
    start_plumb: PlumbFactory,
    metrics_port: int,
    tmp_path: Path,
) -> Iterator[Tenants]:
    """plumb (its /metrics on ``metrics_port``) with the ElasticQuota and SchedulingPolicy
    CRDs installed before it starts."""
    schedulerplugins.install_elasticquotas(control_plane, tmp_path / "kubectl-cache")
    no_quota_left(quotaclient.ElasticQuotaClient(kube_client))
    name = side_by_side.PLUMB_SCHEDULER_NAME
    port = str(metrics_port)
    plumb = start_plumb(
        "--scheduler-name", name, "--metrics-port", port, "--metrics-address", "127.0.0.1"
    )
    runner = side_by_side.Runner(name=side_by_side.PLUMB, scheduler_name=name, log=plumb.log)
    scene = Tenants(kube_client, runner, namespace, add_node)
    try:
        yield scene
    finally:
        scene.clean()


def _metric(port: int, name: str, **labels: str) -> float | None:
    return metrics_page.value(metrics_page.scrape(port), name, **labels)


def _policy(kubectl: crds.Kubectl, namespace: str, source: dict[str, Any]) -> None:
    body = {
        "apiVersion": "scheduling.plumb.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "slo"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "quotaSLO": {
                "objective": 0.99,
                "tolerance": f"{TOLERANCE:g}s",
                "evaluationPeriod": f"{PERIOD:g}s",
                "window": "10m",
                "step": {"drop": 5, "release": 5},
                **source,
            },
        },
    }
    kubectl.check("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))


def _quota_status(kubectl: crds.Kubectl, namespace: str) -> dict[str, Any]:
    got = json.loads(kubectl.check("get", "spol", "slo", "-n", namespace, "-o", "json"))
    quota: dict[str, Any] = (got.get("status") or {}).get("quota") or {}
    return quota


def _limit_is(kubectl: crds.Kubectl, namespace: str, cpu: str) -> dict[str, Any] | None:
    status = _quota_status(kubectl, namespace)
    return status if (status.get("limit") or {}).get("cpu") == cpu else None


def _events(client: kube.Kube, namespace: str, reason: str) -> list[str]:
    return [str(e["message"]) for e in events_of(client, namespace, "slo", reason)]


def _tenants(tenants: Tenants) -> tuple[str, str, str]:
    """The node and tenants a and b (and c, idle)."""
    (node,) = tenants.nodes({"cpu": "16"})
    a = tenants.tenant("a", minimum={"cpu": "4"}, maximum={"cpu": "12"})
    b = tenants.tenant("b", minimum={"cpu": "4"}, maximum={"cpu": "12"})
    tenants.tenant("c", minimum={"cpu": "8"}, maximum={"cpu": "8"})
    return node, a, b


def _fill(tenants: Tenants, node: str, a: str, b: str) -> None:
    """a holds 8 cpu (its pods governed by the policy), b 4."""
    web = [tenants.pod(f"a-{i}", a, cpu="1").label("app", "web") for i in range(8)]
    assert set(tenants.settle(a, *web).values()) == {node}
    others = [tenants.pod(f"b-{i}", b, cpu="1") for i in range(4)]
    assert set(tenants.settle(b, *others).values()) == {node}


def _freed_room_goes_to_b(tenants: Tenants, a: str, b: str, node: str, limit: str) -> None:
    """a's next pod is refused by its lowered limit (``limit`` cpu), and b's higher-priority pod
    takes the room a would have borrowed."""
    placed = tenants.settle(a, tenants.pod("a-more", a, cpu="4").label("app", "web"))
    assert placed == {"a-more": None}
    said = tenants.said(a, "a-more") or ""
    assert f"ElasticQuota {a} is more than Max (its limit is cpu {limit} (max cpu 12), lowered" in (
        said
    )
    assert "because its SLO attainment fell to" in said
    # Its trace line (what `plumb explain` reads) has the figures behind the refusal.
    lines = tenants.runner.log.read_text().splitlines()
    traced = [t for line in lines if (t := trace.from_log_line(line)) is not None]
    (refusal, *_) = [t for t in traced if t.pod == f"{a}/a-more"]
    assert refusal.quota.startswith(
        f"namespace {a} uses cpu 8 of {limit} and asks 4 cpu more; its limit is cpu {limit} "
        "(max cpu 12), lowered from cpu 12"
    )
    assert list(refusal.rejected) == ["CapacityScheduling"]
    assert tenants.settle(b, tenants.pod("b-more", b, priority=100, cpu="4")) == {"b-more": node}


@pytest.mark.long  # in make test-long with the Prometheus case; unit-tested in make test
def test_a_falling_scheduling_slo_lowers_the_limit_and_a_recovered_one_restores_it(
    tenants: Tenants, policy_crd: crds.Kubectl, metrics_port: int
) -> None:
    client = tenants.client
    node, a, b = _tenants(tenants)
    _policy(policy_crd, a, {"scheduling": {"within": f"{WITHIN:g}s"}})
    time.sleep(PERIOD)  # the leader watches a from its next evaluation: its pods' waits count
    _fill(tenants, node, a, b)
    # Pods of a that nothing can place: past `within` each is a miss (8 met, 4 missed: 67%).
    stuck = [
        tenants.pod(f"stuck-{i}", a, cpu="100m")
        .label("app", "web")
        .node_selector("plumb.test/nowhere", "true")
        for i in range(4)
    ]
    tenants.create(*stuck)
    breached = time.monotonic() + WITHIN + TOLERANCE
    status = kube.wait_for(
        "a's limit lowered by the rule",
        functools.partial(_limit_is, policy_crd, a, "8.4"),
        timeout=WITHIN + TOLERANCE + PERIOD + 30,
    )
    late = time.monotonic() - breached
    print(f"limit lowered {late:.1f} s after the breach counted")
    assert late <= PERIOD + SLACK
    assert status["max"] == {"cpu": "12"}
    assert status["steps"] == 6  # 99% - 67% = 32 points: 6 steps of 5% of 12 cpu
    assert float(status["attainment"]) == pytest.approx(8 / 12, abs=1e-3)
    assert _metric(metrics_port, metrics.QUOTA_LIMIT, namespace=a, resource="cpu") == 8.4
    attained = _metric(metrics_port, metrics.QUOTA_ATTAINMENT, namespace=a)
    assert attained == pytest.approx(8 / 12, abs=1e-3)
    lowered = kube.wait_for("QuotaLimitLowered", lambda: _events(client, a, "QuotaLimitLowered"))
    assert (
        f"ElasticQuota {a}/quota: its limit is cpu 8.4 (max cpu 12), lowered from cpu 12"
        in (lowered[0])
    )
    _freed_room_goes_to_b(tenants, a, b, node, "8.4")

    for pod in stuck:  # nothing waits past `within` any more: 100% met
        client.core.delete_namespaced_pod(pod.obj()["metadata"]["name"], a, grace_period_seconds=0)
    kube.wait_for(
        "a's limit back at its max", functools.partial(_limit_is, policy_crd, a, "12"), timeout=30
    )
    restored = kube.wait_for("QuotaLimitRestored", lambda: _events(client, a, "QuotaLimitRestored"))
    assert "its limit is its max again" in restored[0]
    assert _metric(metrics_port, metrics.QUOTA_LIMIT, namespace=a, resource="cpu") == 12.0
    assert _metric(metrics_port, metrics.QUOTA_ATTAINMENT, namespace=a) == 1.0


class _Attainment(http.server.BaseHTTPRequestHandler):
    """A tiny exporter: ``tenant_slo_attainment`` at the value the test sets."""

    value = 1.0

    def do_GET(self) -> None:
        text = f"# TYPE tenant_slo_attainment gauge\ntenant_slo_attainment {self.value}\n"
        body = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def exporter() -> Iterator[tuple[int, type[_Attainment]]]:
    handler = type("Attainment", (_Attainment,), {"value": 1.0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.long  # in make test-long: a real Prometheus; the SLO of plumb's own stays in make test
def test_a_prometheus_query_moves_the_limit(
    tenants: Tenants,
    policy_crd: crds.Kubectl,
    exporter: tuple[int, type[_Attainment]],
    metrics_port: int,
    tmp_path: Path,
) -> None:
    exporter_port, attained = exporter
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "tenant", "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}]}
        ],
    }
    try:
        prometheus.binary()
    except prometheus.PrometheusUnavailable as error:
        pytest.skip(reason=str(error))
    with prometheus.running(config, tmp_path / "prometheus") as port:
        client = tenants.client
        node, a, b = _tenants(tenants)
        _fill(tenants, node, a, b)
        url = f"http://127.0.0.1:{port}"
        _policy(policy_crd, a, {"prometheus": {"url": url, "query": "tenant_slo_attainment"}})
        attained.value = 0.5  # 49 points below: 9 steps of 5% of 12 cpu
        kube.wait_for(
            "a's limit lowered by the rule",
            functools.partial(_limit_is, policy_crd, a, "6.6"),
            timeout=TOLERANCE + PERIOD + 30,
        )
        assert float(_quota_status(policy_crd, a)["attainment"]) == 0.5
        assert _metric(metrics_port, metrics.QUOTA_LIMIT, namespace=a, resource="cpu") == 6.6
        assert _metric(metrics_port, metrics.QUOTA_ATTAINMENT, namespace=a) == 0.5
        lowered = kube.wait_for(
            "QuotaLimitLowered", lambda: _events(client, a, "QuotaLimitLowered")
        )
        assert "its limit is cpu 6.6 (max cpu 12)" in lowered[0]
        _freed_room_goes_to_b(tenants, a, b, node, "6.6")
        attained.value = 1.0
        kube.wait_for(
            "a's limit back at its max",
            functools.partial(_limit_is, policy_crd, a, "12"),
            timeout=30,
        )
        kube.wait_for("QuotaLimitRestored", lambda: _events(client, a, "QuotaLimitRestored"))
        assert _metric(metrics_port, metrics.QUOTA_LIMIT, namespace=a, resource="cpu") == 12.0
        assert _metric(metrics_port, metrics.QUOTA_ATTAINMENT, namespace=a) == 1.0
