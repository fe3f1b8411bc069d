"""The Grafana dashboard against a real Prometheus: Debian's ``prometheus``, started here on
127.0.0.1 with a configuration of its own that scrapes both installed replicas at their pod
addresses on the bridge, after a workload under a SchedulingPolicy with a spread, a budget and
zone health, a pod with a ResourceClaim, a gang, and a tenant with an ElasticQuota whose second
pod the quota refuses. Every panel's query must evaluate without error and return at least one
series, and ``plumb_leader`` must sum to 1: one leader, one standby. The panels of features a
person opts into and this install does not (OPT_IN: a Python plugin built into plumb's image, a
trace collector) must evaluate, and every metric they read must be on the replicas' pages (its
HELP line); their series are shown where those features run (OPT_IN names the tests).

Traffic stays on this machine: Prometheus listens on loopback and scrapes the bridge only.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from plumb_dev.testing import builders, drabuilders, draclient, groupclient, kube, quotaclient
from plumb_dev.testing import prometheus as prometheus_module
from plumb_dev.testing.groupbuilders import POD_GROUP_LABEL, make_coscheduling_group
from tests.support.installation import REPOSITORY, Installed

DASHBOARD = REPOSITORY / "manifests" / "grafana" / "plumb-dashboard.json"
ZONES = ("zone-a", "zone-b", "zone-c")
TAINT = "e2e.plumb.dev/zoned"
MAINTENANCE = "e2e.plumb.dev/maintenance"
PODS = 5
# Grafana's variables, as a person looking at every replica over the last minute would set them.
VARIABLES = {"$instance": ".+", "$__rate_interval": "1m"}
SCRAPE = "1s"
# Panels of features this install leaves off, with the tests whose plumb runs them.
OPT_IN = {
    "Python plugin latency": "tests/integration/test_plugin_failures.py (a plugin in plumb's env)",
    "Python plugin failures": "tests/integration/test_plugin_failures.py",
    "Spans not exported": "tests/unit/observability/test_spans.py (tracing to a collector)",
}
_METRIC = re.compile(r"\bplumb_[a-z_]+")
_SERIES_SUFFIX = re.compile(r"_(bucket|sum|count)$")


def _queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel."""
    found = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            if "expr" in target:
                found.append((panel["title"], str(target["expr"])))
    assert found, f"no queries found in {DASHBOARD}"
    return found


@pytest.fixture
def prometheus(installed: Installed, tmp_path: Path) -> Iterator[int]:
    """Prometheus on 127.0.0.1, scraping every replica's pod address every second."""
    try:
        prometheus_module.binary()
    except prometheus_module.PrometheusUnavailable as error:
        pytest.skip(reason=str(error))
    targets = [f"{pod['status']['podIP']}:10251" for pod in installed.plumb_pods()]
    config = {
        "global": {"scrape_interval": SCRAPE, "evaluation_interval": SCRAPE},
        "scrape_configs": [{"job_name": "plumb", "static_configs": [{"targets": targets}]}],
    }
    with prometheus_module.running(config, tmp_path) as port:
        kube.wait_for(
            f"Prometheus to scrape {targets}",
            lambda: len(_query(port, "up == 1").get("data", {}).get("result", [])) == len(targets),
            timeout=60,
            interval=1.0,
        )
        yield port


_query = prometheus_module.query


@pytest.fixture
def zoned_workload(installed: Installed) -> Iterator[str]:
    """Pods under a SchedulingPolicy that spreads them over three zones with maxSkew 1, scores
    zone health and allows 2 deviations, while zone-c is in maintenance: two placements in
    zones a and b, then two on the budget (deviations), then one waits."""
    client, kubectl = installed.cluster.client, installed.kubectl
    namespace = "e2e-payments"
    client.create_namespace(namespace)
    nodes = []
    for zone in ZONES:
        node = builders.make_node(f"e2e-{zone}").zone(zone).capacity(cpu=8)
        node = node.label(TAINT, "true").taint(TAINT)
        if zone == ZONES[-1]:
            node = node.taint(MAINTENANCE)
        client.create_node(node.obj())
        nodes.append(f"e2e-{zone}")
    policy = {
        "apiVersion": "scheduling.plumb.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "api-spread", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "api"}},
            "topology": [{"topologyKey": builders.ZONE_LABEL, "maxSkew": 1}],
            "scoring": {
                "weights": {
                    "resources": 1,
                    "balance": 1,
                    "spread": 2,
                    "affinity": 2,
                    "taints": 3,
                    "zoneHealth": 10,
                }
            },
            "zoneHealth": {"topologyKey": builders.ZONE_LABEL, "window": "5m", "staleAfter": "1m"},
            "deviationBudget": {"maxViolations": 2, "window": "10m"},
        },
    }
    kubectl.check("apply", "-f", "-", stdin=json.dumps(policy))
    for i in range(PODS):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"api-{i}", "namespace": namespace, "labels": {"app": "api"}},
            "spec": {
                "schedulerName": "plumb",
                "tolerations": [{"key": TAINT, "operator": "Exists"}],
                "nodeSelector": {TAINT: "true"},
                "containers": [
                    {
                        "name": "api",
                        "image": installed.cluster.image,
                        "imagePullPolicy": "Never",
                        "resources": {"requests": {"cpu": "100m"}},
                    }
                ],
            },
        }
        kubectl.check("apply", "-f", "-", stdin=json.dumps(pod))
        time.sleep(0.5)  # one at a time, so the spread sees each placement before the next
    yield namespace
    client.delete_namespace(namespace)
    for name in nodes:
        client.delete_node(name)


@pytest.fixture
def claimed_pod(installed: Installed, zoned_workload: str) -> Iterator[str]:
    """A pod with a ResourceClaim for one device a driver publishes on a node of its own, so
    the DynamicResources panels have its PreFilter, Filter, Reserve and PreBind to show."""
    client = installed.cluster.client
    node, driver = "e2e-gpu", "gpu.e2e.plumb.dev"
    client.create_node(builders.make_node(node).capacity(cpu=8).obj())
    dra = draclient.Dra(client)
    try:
        dra.create_class(drabuilders.make_class("e2e-gpu").driver(driver).obj())
        gpus = drabuilders.make_slice(f"{node}-gpus", driver).node(node).pool(node)
        dra.create_slice(gpus.devices(drabuilders.device("gpu-0")).obj())
        claim = drabuilders.make_claim("gpu", zoned_workload).request("gpu", "e2e-gpu")
        dra.create_claim(claim.obj())
        pod = builders.make_pod("trainer", zoned_workload).scheduler("plumb")
        client.create_pod(
            pod.node_selector(builders.HOSTNAME_LABEL, node)
            .resource_claim("gpu", claim="gpu")
            .obj()
        )
        dra.wait_allocated(zoned_workload, "gpu", timeout=60)
        yield "trainer"
    finally:
        dra.close()
        client.delete_node(node)


@pytest.fixture
def gang(installed: Installed, zoned_workload: str) -> Iterator[str]:
    """A scheduler-plugins PodGroup of 2 and its two pods, on a node of their own, so the pod
    group panels have a group placed whole to show."""
    client = installed.cluster.client
    node = "e2e-gang"
    client.create_node(builders.make_node(node).capacity(cpu=8).obj())
    try:
        groups = groupclient.Groups(client)
        groups.create(make_coscheduling_group("trainers", zoned_workload, 2).obj())
        for name in ("trainer-0", "trainer-1"):
            pod = builders.make_pod(name, zoned_workload).scheduler("plumb")
            pod = pod.node_selector(builders.HOSTNAME_LABEL, node).label(
                POD_GROUP_LABEL, "trainers"
            )
            client.create_pod(pod.obj())
        kube.wait_for(
            "the gang bound",
            lambda: all(
                client.pod(zoned_workload, n)["spec"].get("nodeName")
                for n in ("trainer-0", "trainer-1")
            ),
            timeout=60,
        )
        yield "trainers"
    finally:
        client.delete_node(node)


@pytest.fixture
def tenant(installed: Installed) -> Iterator[str]:
    """A namespace whose ElasticQuota (conftest installs the CRD before plumb) holds 1 cpu: its
    first pod binds, its second is refused for passing the max, so the tenant quota panels
    have use, bounds and a refusal to show; an SLO-elastic SchedulingPolicy over it gives the
    attainment panel its series."""
    client = installed.cluster.client
    namespace, node = "e2e-tenant", "e2e-tenant"
    client.create_namespace(namespace)
    client.create_node(builders.make_node(node).capacity(cpu=8).obj())
    try:
        body = quotaclient.elastic_quota(namespace, minimum={"cpu": "1"}, maximum={"cpu": "1"})
        quotaclient.ElasticQuotaClient(client).create(body)
        policy = {
            "apiVersion": "scheduling.plumb.dev/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": "tenant-slo", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": {"app": "tenant"}},
                "quotaSLO": {
                    "objective": 0.99,
                    "evaluationPeriod": "1s",
                    "scheduling": {"within": "30s"},
                },
            },
        }
        installed.kubectl.check("apply", "-f", "-", stdin=json.dumps(policy))
        for name in ("t-0", "t-1"):
            pod = builders.make_pod(name, namespace).scheduler("plumb").req(cpu="1")
            client.create_pod(pod.node_selector(builders.HOSTNAME_LABEL, node).obj())
            time.sleep(0.5)  # one at a time: t-1 is refused by the quota, not put off
        kube.wait_for(
            "the tenant's first pod bound",
            lambda: client.pod(namespace, "t-0")["spec"].get("nodeName") == node,
            timeout=60,
        )

        def refused() -> bool:
            said = [str(e.get("message")) for e in client.events(namespace, "t-1")]
            return any("ElasticQuota" in message for message in said)

        kube.wait_for("the tenant's second pod refused by its quota", refused, timeout=60)
        yield namespace
    finally:
        client.delete_namespace(namespace)
        client.delete_node(node)


def test_every_dashboard_query_returns_series_from_a_real_prometheus(
    installed: Installed,
    prometheus: int,
    zoned_workload: str,
    claimed_pod: str,
    gang: str,
    tenant: str,
) -> None:
    kubectl = installed.kubectl

    def deviations() -> bool:
        events = kubectl.check(
            "get", "events.events.k8s.io", "-n", zoned_workload, "-o", "jsonpath={..reason}"
        )
        return events.split().count("PolicyDeviation") >= 1

    kube.wait_for("a PolicyDeviation event", deviations, timeout=60, interval=1.0)

    queries = _queries()
    titles = {title for title, _ in queries}
    assert set(OPT_IN) <= titles, f"OPT_IN names panels the dashboard lacks: {set(OPT_IN) - titles}"
    pages = [_metrics_page(pod["status"]["podIP"]) for pod in installed.plumb_pods()]
    for title, expr in queries:
        if title in OPT_IN:
            for name in {_SERIES_SUFFIX.sub("", found) for found in _METRIC.findall(expr)}:
                assert all(f"# HELP {name} " in page for page in pages), f"{title}: {name}"
    empty: list[str] = []

    def every_query_answers() -> bool:
        empty.clear()
        for title, expr in queries:
            for variable, value in VARIABLES.items():
                expr = expr.replace(variable, value)
            answer = _query(prometheus, expr)
            assert answer.get("status") == "success", f"{title}: {expr}: {answer}"
            if not answer["data"]["result"] and title not in OPT_IN:
                empty.append(f"{title}: {expr}")
        return not empty

    try:
        kube.wait_for("every dashboard query to return a series", every_query_answers, timeout=90)
    except kube.WaitTimeout:
        raise AssertionError("queries with no series:\n" + "\n".join(empty)) from None
    leaders = _query(prometheus, "sum(plumb_leader)")["data"]["result"]
    assert float(leaders[0]["value"][1]) == 1.0, leaders
    replicas = _query(prometheus, "count(plumb_leader)")["data"]["result"]
    assert float(replicas[0]["value"][1]) == installed.replicas
    print(f"{len(queries)} dashboard queries answered from {installed.replicas} replicas' pages")


def _metrics_page(address: str) -> str:
    """A replica's metrics page, read at its pod address on the bridge as Prometheus reads it."""
    with urllib.request.urlopen(f"http://{address}:10251/metrics", timeout=10) as answer:
        return str(answer.read().decode())
