"""The tenant quota metrics on plumb's /metrics, against the real control plane: two namespaces
with ElasticQuotas (scheduler-plugins' CRD installed before plumb starts), pods bound within
them, one pod refused for passing its quota's max and one for passing the sum of mins. The page
shows each quota's use (the pods bound), min and max in cores, and as many refusals per rule as
plumb made attempts at the refused pods (its debug endpoint counts them). Never a timing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plumb.observability import metrics
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, quotaclient, schedulerplugins
from tests.support import metrics_page, side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.metrics_page import Samples
from tests.support.plumb_process import PlumbFactory, free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def tenants(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    tmp_path: Path,
) -> Iterator[tuple[str, str]]:
    """Two namespaces beside the test's: ``a`` guaranteed and capped at 2 cpu, ``b`` with no
    guarantee and 4 cpu at most, their quotas made before plumb starts (and deleted after, since
    every quota in the cluster counts towards the sum of mins)."""
    schedulerplugins.install_elasticquotas(control_plane, tmp_path / "kubectl-cache")
    quotas = quotaclient.ElasticQuotaClient(kube_client)
    kube.wait_for("no ElasticQuota left by another test", lambda: not quotas.everywhere())
    a, b = f"{namespace}-a", f"{namespace}-b"
    for name in (a, b):
        kube_client.create_namespace(name)
    try:
        quotas.create(quotaclient.elastic_quota(a, minimum={"cpu": "2"}, maximum={"cpu": "2"}))
        quotas.create(quotaclient.elastic_quota(b, minimum={"cpu": "0"}, maximum={"cpu": "4"}))
        yield a, b
    finally:
        for name in (a, b):
            quotas.delete(name)
            kube_client.delete_workloads(name)


def test_the_page_shows_each_quota_s_use_and_bounds_and_counts_its_refusals(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    tenants: tuple[str, str],
) -> None:
    a, b = tenants
    node = add_node(builders.make_node(f"{namespace}-n0").capacity(cpu="8"))
    metrics_port, debug_port = free_port(), free_port()
    start_plumb(
        "--metrics-port",
        str(metrics_port),
        "--metrics-address",
        "127.0.0.1",
        "--debug-port",
        str(debug_port),
    )

    def pod(name: str, where: str) -> builders.PodBuilder:
        return builders.make_pod(name, where).scheduler("plumb").req(cpu="1").grace(0)

    for name in ("a-0", "a-1"):
        kube_client.create_pod(pod(name, a).obj())
    assert side_by_side.wait_settled(kube_client, a, ["a-0", "a-1"]) == dict.fromkeys(
        ("a-0", "a-1"), node
    )
    # a-2 would take a past its max (2); b-0, within b's max, would take both quotas past the
    # sum of their mins (2 + 0). Neither may preempt: a is beyond its min, b would be too.
    kube_client.create_pod(pod("a-2", a).obj())
    kube_client.create_pod(pod("b-0", b).obj())
    assert side_by_side.wait_settled(kube_client, a, ["a-2"]) == {"a-2": None}
    assert side_by_side.wait_settled(kube_client, b, ["b-0"]) == {"b-0": None}

    def settled() -> tuple[Samples, int, int] | None:
        """The page with the attempts plumb made at both refused pods, unchanged around it."""
        tried = (metrics_page.tried(debug_port, a, "a-2"), metrics_page.tried(debug_port, b, "b-0"))
        samples = metrics_page.scrape(metrics_port)
        again = (metrics_page.tried(debug_port, a, "a-2"), metrics_page.tried(debug_port, b, "b-0"))
        over_max, over_min = tried
        if over_max is None or over_min is None or tried != again:
            return None
        return samples, over_max, over_min

    samples, over_max, over_min = kube.wait_for("the page to settle", settled, timeout=60)
    assert over_max >= 1
    assert over_min >= 1
    refusals = {
        (ns, rule): metrics_page.value(samples, metrics.QUOTA_REFUSALS, namespace=ns, rule=rule)
        for ns in (a, b)
        for rule in metrics.QUOTA_RULES
    }
    assert refusals == {(a, "max"): over_max, (a, "min"): 0, (b, "max"): 0, (b, "min"): over_min}

    def gauge(name: str, ns: str, resource: str = "cpu") -> float | None:
        return metrics_page.value(samples, name, namespace=ns, resource=resource)

    assert (gauge(metrics.QUOTA_USED, a), gauge(metrics.QUOTA_USED, b)) == (2.0, 0.0)
    assert (gauge(metrics.QUOTA_MIN, a), gauge(metrics.QUOTA_MIN, b)) == (2.0, 0.0)
    assert (gauge(metrics.QUOTA_MAX, a), gauge(metrics.QUOTA_MAX, b)) == (2.0, 4.0)
    # A max that names only cpu lets no memory in: 0, on the page as such.
    assert gauge(metrics.QUOTA_MAX, a, "memory") == 0.0
    # Only the quota namespaces have quota series; no label names a pod.
    quota_series = {metrics.QUOTA_USED, metrics.QUOTA_MIN, metrics.QUOTA_MAX}
    for name, labels in samples:
        if name in quota_series or name == metrics.QUOTA_REFUSALS:
            assert dict(labels)["namespace"] in (a, b), (name, labels)
        assert not any(p in value for _, value in labels for p in ("a-2", "b-0")), labels
