"""SchedulingPolicies on the real control plane: spreading, deviation budgets, revert, delete,
restart and malformed objects, as a user sees them through kubectl and events."""

from __future__ import annotations

import datetime
import functools
import json
import re
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from plumb_dev.testing import builders, crds, kube
from tests.support.live_cluster import NodeFactory, events_of
from tests.support.plumb_process import PlumbFactory, free_port

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"


def _policy(
    name: str,
    *,
    max_skew: int = 1,
    budget: dict[str, Any] | None = None,
    extra_rules: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "web"}},
        "topology": [
            {"topologyKey": ZONE, "maxSkew": max_skew, "whenUnsatisfiable": "DoNotSchedule"},
            *extra_rules,
        ],
    }
    if budget is not None:
        spec["deviationBudget"] = budget
    return {
        "apiVersion": "scheduling.plumb.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def _apply(kubectl: crds.Kubectl, namespace: str, policy: dict[str, Any]) -> None:
    kubectl.check("apply", "-n", namespace, "-f", "-", stdin=json.dumps(policy))


def _get(kubectl: crds.Kubectl, namespace: str, name: str) -> dict[str, Any]:
    return dict(json.loads(kubectl.check("get", "spol", name, "-n", namespace, "-o", "json")))


def _condition(policy: dict[str, Any], kind: str) -> dict[str, Any]:
    for condition in (policy.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return {}


def _web_pods(
    client: kube.Kube, namespace: str, count: int, *, cpu: str = "100m", first: int = 0
) -> list[str]:
    """Create web-<first> .. web-<first + count - 1>, app=web, for plumb."""
    names = [f"web-{i:02d}" for i in range(first, first + count)]
    for name in names:
        client.create_pod(
            builders.make_pod(name, namespace)
            .label("app", "web")
            .scheduler("plumb")
            .req(cpu=cpu)
            .obj()
        )
    return names


def _zones(client: kube.Kube, namespace: str) -> Counter[str]:
    zones = {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE) for n in client.nodes()}
    return Counter(
        zones[p["spec"]["nodeName"]] for p in client.pods(namespace) if p["spec"].get("nodeName")
    )


def _bound(client: kube.Kube, namespace: str) -> int:
    return sum(1 for p in client.pods(namespace) if p["spec"].get("nodeName"))


@pytest.fixture
def kubectl(policy_crd: crds.Kubectl) -> crds.Kubectl:
    return policy_crd


def test_a_zone_spread_policy_keeps_thirty_pods_within_one_and_reports_it(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    kubectl: crds.Kubectl,
) -> None:
    # Zone a is far roomier: without the policy, LeastAllocated would put most pods there.
    for zone, cpu in (("a", "64"), ("b", "4"), ("c", "4")):
        for i in range(2):
            add_node(builders.make_node(f"{namespace}-{zone}{i}").zone(zone).capacity(cpu=cpu))
    _apply(kubectl, namespace, _policy("web-spread"))
    start_plumb()
    _web_pods(kube_client, namespace, 30)

    kube.wait_for("30 pods bound", lambda: _bound(kube_client, namespace) == 30, timeout=60)
    zones = _zones(kube_client, namespace)
    assert max(zones.values()) - min(zones.values()) <= 1, zones

    def reported() -> dict[str, Any] | None:
        policy = _get(kubectl, namespace, "web-spread")
        return policy if (policy.get("status") or {}).get("matchedPods") == 30 else None

    policy = kube.wait_for("the policy's status to count 30 pods", reported, timeout=30)
    status = policy["status"]
    assert status["skew"][ZONE] <= 1
    assert sorted(status["domains"][ZONE]) == ["a", "b", "c"]
    assert _condition(policy, "Ready")["status"] == "True"
    table = kubectl.check("get", "spol", "-n", namespace)
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "READY", "MATCHED", "SKEW", "BUDGET", "AGE"]
    assert row.split()[:4] == ["web-spread", "True", "30", f"{status['skew'][ZONE]}/1"]


def test_with_one_zone_full_exactly_the_budget_deviates_and_the_rest_wait(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    kubectl: crds.Kubectl,
) -> None:
    add_node(builders.make_node(f"{namespace}-a").zone("a").capacity(cpu="16"))
    add_node(builders.make_node(f"{namespace}-b").zone("b").capacity(cpu="16"))
    add_node(builders.make_node(f"{namespace}-c").zone("c").capacity(cpu="1"))  # two pods fit
    _apply(kubectl, namespace, _policy("web-spread", budget={"maxViolations": 2}))
    start_plumb()
    names = _web_pods(kube_client, namespace, 12, cpu="400m")

    # a and b take 3 each beside c's 2 within maxSkew 1; then 2 deviate; 2 are left waiting.
    kube.wait_for("10 pods bound", lambda: _bound(kube_client, namespace) == 10, timeout=60)
    deviations = [e for n in names for e in events_of(kube_client, namespace, n, "PolicyDeviation")]
    assert len(deviations) == 2, deviations
    assert all("web-spread" in e["message"] for e in deviations)
    waiting = [
        p["metadata"]["name"] for p in kube_client.pods(namespace) if not p["spec"].get("nodeName")
    ]
    assert len(waiting) == 2

    def budget_named(name: str) -> str | None:
        found = events_of(kube_client, namespace, name, "FailedScheduling")
        messages = [e["message"] for e in found if "deviation budget" in e["message"]]
        return messages[-1] if messages else None

    for name in waiting:
        message = kube.wait_for(
            f"{name}'s FailedScheduling to name the budget", functools.partial(budget_named, name)
        )
        assert f"SchedulingPolicy {namespace}/web-spread's deviation budget: 2 of 2 used" in message

    def exhausted() -> dict[str, Any] | None:
        policy = _get(kubectl, namespace, "web-spread")
        return policy if _condition(policy, "BudgetExhausted").get("status") == "True" else None

    policy = kube.wait_for("BudgetExhausted=True", exhausted, timeout=30)
    assert policy["status"]["budget"]["remaining"] == 0
    assert policy["status"]["budget"]["used"] == 2
    assert _zones(kube_client, namespace) == Counter({"a": 4, "b": 4, "c": 2})


def test_a_failing_spec_change_reverts_to_the_last_good_generation(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    kubectl: crds.Kubectl,
) -> None:
    for zone in "abc":
        add_node(builders.make_node(f"{namespace}-{zone}").zone(zone).capacity(cpu="16"))
    budget = {"maxViolations": 0, "failureRateThreshold": 0.5, "onExhausted": "Revert"}
    _apply(kubectl, namespace, _policy("web-spread", budget=budget))
    start_plumb()
    _web_pods(kube_client, namespace, 3)
    kube.wait_for("3 pods bound", lambda: _bound(kube_client, namespace) == 3, timeout=60)

    # Generation 2 asks for a rack label no node carries: every pod it governs fails.
    rack = {"topologyKey": "example.com/rack", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}
    _apply(kubectl, namespace, _policy("web-spread", budget=budget, extra_rules=(rack,)))
    kube.wait_for(
        "generation 2 observed",
        lambda: (
            (_get(kubectl, namespace, "web-spread").get("status") or {}).get("observedGeneration")
            == 2
        ),
        timeout=30,
    )
    _web_pods(kube_client, namespace, 10, first=3)

    kube.wait_for(
        "all 13 pods bound after the revert",
        lambda: _bound(kube_client, namespace) == 13,
        timeout=90,
    )

    def reverted() -> dict[str, Any] | None:
        policy = _get(kubectl, namespace, "web-spread")
        return policy if _condition(policy, "Reverted").get("status") == "True" else None

    policy = kube.wait_for("Reverted=True", reverted, timeout=30)
    assert policy["status"]["activeGeneration"] == 1
    assert policy["status"]["observedGeneration"] == 2
    notes = [e["message"] for e in kube_client.events(namespace) if e.get("reason") == "Reverted"]
    assert any("to generation 1" in note for note in notes), notes


def test_deleting_a_policy_returns_its_pods_to_default_scoring(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    kubectl: crds.Kubectl,
) -> None:
    add_node(builders.make_node(f"{namespace}-a").zone("a").capacity(cpu="64"))
    add_node(builders.make_node(f"{namespace}-b").zone("b").capacity(cpu="4"))
    _apply(kubectl, namespace, _policy("web-spread"))
    plumb = start_plumb()
    _web_pods(kube_client, namespace, 4)
    kube.wait_for("4 pods bound", lambda: _bound(kube_client, namespace) == 4, timeout=60)
    assert _zones(kube_client, namespace) == Counter({"a": 2, "b": 2})

    kubectl.check("delete", "spol", "web-spread", "-n", namespace)
    gone = f"policy {namespace}/web-spread deleted"
    kube.wait_for("plumb to forget the policy", lambda: gone in plumb.output(), timeout=30)
    _web_pods(kube_client, namespace, 6, first=4)
    kube.wait_for("10 pods bound", lambda: _bound(kube_client, namespace) == 10, timeout=60)
    # Without the policy LeastAllocated sends every new pod to the roomy zone.
    assert _zones(kube_client, namespace) == Counter({"a": 8, "b": 2})


def test_a_restart_keeps_the_budget_spent_in_the_window(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    kubectl: crds.Kubectl,
) -> None:
    add_node(builders.make_node(f"{namespace}-a").zone("a").capacity(cpu="16"))
    add_node(builders.make_node(f"{namespace}-b").zone("b").capacity(cpu="1"))  # two pods fit
    _apply(kubectl, namespace, _policy("web-spread", budget={"maxViolations": 2}))
    first = start_plumb()
    _web_pods(kube_client, namespace, 5, cpu="400m")  # a 3, b 2 within maxSkew 1: no deviation
    kube.wait_for("5 pods bound", lambda: _bound(kube_client, namespace) == 5, timeout=60)
    _web_pods(kube_client, namespace, 1, cpu="400m", first=5)
    kube.wait_for("a deviation", lambda: _bound(kube_client, namespace) == 6, timeout=60)

    def used(count: int) -> dict[str, Any] | None:
        policy = _get(kubectl, namespace, "web-spread")
        return (
            policy
            if ((policy.get("status") or {}).get("budget") or {}).get("used") == count
            else None
        )

    window_start = kube.wait_for("budget used 1", lambda: used(1), timeout=30)["status"]["budget"][
        "windowStart"
    ]
    assert first.stop() == 0

    start_plumb()
    _web_pods(kube_client, namespace, 3, cpu="400m", first=6)
    # One deviation was left in the window: one more pod deviates, two wait.
    kube.wait_for("7 pods bound", lambda: _bound(kube_client, namespace) == 7, timeout=60)
    policy = kube.wait_for("budget used 2", lambda: used(2), timeout=30)
    assert policy["status"]["budget"]["windowStart"] == window_start
    assert policy["status"]["budget"]["remaining"] == 0
    assert _bound(kube_client, namespace) == 7


@pytest.fixture
def lenient_crd(kubectl: crds.Kubectl) -> Iterator[None]:
    """The CRD as an older, schema-less version would have it, for the length of one test."""

    def live() -> dict[str, Any]:
        return dict(json.loads(kubectl.check("get", "crd", crds.POLICY_CRD, "-o", "json")))

    strict = live()["spec"]
    lenient = live()
    version = lenient["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    kubectl.check("replace", "-f", "-", stdin=json.dumps(lenient))
    try:
        yield
    finally:
        restored = live()
        restored["spec"] = strict
        kubectl.check("replace", "-f", "-", stdin=json.dumps(restored))


def test_a_malformed_policy_past_the_schema_is_not_ready_and_plumb_goes_on(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    kubectl: crds.Kubectl,
    lenient_crd: None,
) -> None:
    add_node(builders.make_node(f"{namespace}-a").zone("a"))
    bad = _policy("bad-skew", max_skew=0)
    bad["spec"]["deviationBudget"] = {"window": "ten minutes"}
    _apply(kubectl, namespace, bad)
    odd = _policy("odd-types")
    odd["spec"]["topology"] = "zone please"
    _apply(kubectl, namespace, odd)
    plumb = start_plumb()

    def not_ready(name: str) -> dict[str, Any] | None:
        condition = _condition(_get(kubectl, namespace, name), "Ready")
        return condition if condition.get("status") == "False" else None

    skew = kube.wait_for("bad-skew Ready=False", lambda: not_ready("bad-skew"), timeout=30)
    assert "spec.topology[0].maxSkew" in skew["message"]
    types = kube.wait_for("odd-types Ready=False", lambda: not_ready("odd-types"), timeout=30)
    assert "spec.topology" in types["message"]
    # A malformed policy governs nothing: the pod schedules by the defaults.
    _web_pods(kube_client, namespace, 1)
    kube.wait_for("the pod bound", lambda: _bound(kube_client, namespace) == 1, timeout=60)
    assert plumb.process.poll() is None


def _ready_now(status: str) -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": "Ready", "status": status, "lastHeartbeatTime": now, "lastTransitionTime": now}


def _zone_health(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
        text = page.read().decode()
    found = re.findall(r'^plumb_zone_health\{zone="([^"]+)"\} (\S+)$', text, re.MULTILINE)
    return {zone: float(value) for zone, value in found}


def test_a_zone_gone_not_ready_is_avoided_and_a_silent_zone_stays_neutral(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    kubectl: crds.Kubectl,
) -> None:
    nodes = {}
    for zone in "abc":
        body = builders.make_node(f"{namespace}-{zone}").zone(zone).capacity(cpu="4")
        nodes[zone] = add_node(body)
    # a and b report Ready; c's node has never reported (an API-only node): no fresh data.
    for zone in "ab":
        patch = {"status": {"conditions": [_ready_now("True")]}}
        kubectl.check(
            "patch",
            "node",
            nodes[zone],
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(patch),
        )
    policy = _policy("web-health")
    policy["spec"].pop("topology")
    policy["spec"]["scoring"] = {"weights": {"zoneHealth": 10}}
    _apply(kubectl, namespace, policy)
    port = free_port()
    start_plumb("--metrics-port", str(port), "--metrics-address", "127.0.0.1")
    _web_pods(kube_client, namespace, 3)
    kube.wait_for("3 pods bound", lambda: _bound(kube_client, namespace) == 3, timeout=60)
    assert _zones(kube_client, namespace) == Counter({"a": 1, "b": 1, "c": 1})

    # Zone a's node goes NotReady: new pods go to b and c, which fit.
    patch = {"status": {"conditions": [_ready_now("False")]}}
    kubectl.check(
        "patch", "node", nodes["a"], "--subresource=status", "--type=merge", "-p", json.dumps(patch)
    )
    kube.wait_for("zone a's health to fall", lambda: _zone_health(port).get("a") == 0.0, timeout=30)
    _web_pods(kube_client, namespace, 6, first=3)
    kube.wait_for("9 pods bound", lambda: _bound(kube_client, namespace) == 9, timeout=60)
    assert _zones(kube_client, namespace) == Counter({"a": 1, "b": 4, "c": 4})
    health = _zone_health(port)
    assert health["b"] == 1.0
    assert health["c"] == 1.0  # never heard from: exactly neutral, so c takes as many as b


def test_most_allocated_packs_the_pods_it_governs_while_the_others_spread(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    kubectl: crds.Kubectl,
) -> None:
    for name in ("a", "b"):
        add_node(builders.make_node(f"{namespace}-{name}").capacity(cpu="8", memory="8Gi"))
    policy = _policy("web-pack")
    policy["spec"].pop("topology")
    policy["spec"]["scoring"] = {"strategy": "MostAllocated"}
    _apply(kubectl, namespace, policy)
    start_plumb()

    def pods(app: str) -> None:
        for i in range(4):
            pod = builders.make_pod(f"{app}-{i}", namespace).label("app", app).scheduler("plumb")
            kube_client.create_pod(pod.req(cpu="1", memory="1Gi").obj())

    def nodes(app: str) -> Counter[str]:
        return Counter(
            p["spec"]["nodeName"]
            for p in kube_client.pods(namespace)
            if p["metadata"]["labels"].get("app") == app and p["spec"].get("nodeName")
        )

    # No policy governs app=db: LeastAllocated sends each pod to the emptier node.
    pods("db")
    kube.wait_for("4 db pods bound", lambda: _bound(kube_client, namespace) == 4, timeout=60)
    assert sorted(nodes("db").values()) == [2, 2]
    # The web pods' policy packs them: every one goes where the most is already requested.
    pods("web")
    kube.wait_for("8 pods bound", lambda: _bound(kube_client, namespace) == 8, timeout=60)
    assert sorted(nodes("web").values()) == [4]
