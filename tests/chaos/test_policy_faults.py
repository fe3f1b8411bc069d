"""SchedulingPolicies against the real API server, for two fixes first shown by unit tests only.

1. A policy deleted and created again under its name gets its whole status. The status writer
   used to diff what plumb wants against what it last wrote to the old object and patch only
   the difference, so the new object got a partial status (no observedGeneration, no
   matchedPods, a budget without used or remaining). Fixed in policy/writer.py: what was
   written belongs to one uid.
2. The startup list of SchedulingPolicies retries what fails on the way (here 500s): it used to
   take any failure for "the CRD is not installed", so the pending pods were scheduled without
   their policies until kopf delivered them. Fixed in app/policylist.py. The fault proxy answers
   500 to the lists of SchedulingPolicies alone, for 2 s: a fault on every list would also fail
   the pod and node lists that follow, and kopf would run the whole startup handler again
   later, listing the policies anew and hiding the bug.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client as k8s

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube
from tests.chaos import faultproxy, harness
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

GROUP, VERSION, PLURAL = "scheduling.plumb.dev", "v1alpha1", "schedulingpolicies"
POLICIES_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
ZONE = "topology.kubernetes.io/zone"
JSON = dict[str, Any]


def _policy(name: str, spec: JSON) -> JSON:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def _condition(status: Mapping[str, Any], kind: str) -> JSON:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return {}


def _whole(policy: JSON) -> bool:
    """Whether the policy carries all that plumb writes for a budget and no topology."""
    status = policy.get("status") or {}
    generation = policy["metadata"]["generation"]
    budget = status.get("budget") or {}
    return (
        status.get("observedGeneration") == generation
        and status.get("activeGeneration") == generation
        and status.get("matchedPods") == 0
        and _condition(status, "Ready").get("status") == "True"
        and _condition(status, "Ready").get("observedGeneration") == generation
        and {"used", "remaining", "windowStart", "failureRate"} <= budget.keys()
    )


def test_a_policy_deleted_and_created_again_under_its_name_gets_its_whole_status(
    client: kube.Kube, namespace: str, start_plumb: RestartablePlumbFactory
) -> None:
    custom = k8s.CustomObjectsApi(client.api)
    spec = {
        "selector": {"matchLabels": {"app": "web"}},
        "deviationBudget": {"maxViolations": 2, "window": "10m"},
    }
    plumb = start_plumb()

    def get() -> JSON:
        body: JSON = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web")
        return body

    def whole_status(what: str) -> JSON:
        seen: list[JSON] = []

        def probe() -> JSON | None:
            seen[:] = [get()]
            return seen[0] if _whole(seen[0]) else None

        try:
            return kube.wait_for(what, probe, timeout=10)
        except kube.WaitTimeout as error:
            status = seen[0].get("status") if seen else None
            raise AssertionError(f"{error}; the status it has: {status}") from None

    first = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, _policy("web", spec)
    )
    old = whole_status("plumb to write the first policy's status")["status"]
    assert (old["budget"]["used"], old["budget"]["remaining"]) == (0, 2), old

    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web")
    # plumb has forgotten the old object before the new one appears (kopf's DELETED event).
    harness.wait_until(
        "plumb to forget the deleted policy",
        lambda: f"policy {namespace}/web deleted" in plumb.output(),
        timeout=10,
    )
    second = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, _policy("web", spec)
    )
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert not second.get("status"), second.get("status")

    new = whole_status("plumb to write the whole status of the policy created again")
    assert new["metadata"]["uid"] == second["metadata"]["uid"]
    status = new["status"]
    assert status.keys() == old.keys(), (old, status)
    assert (status["budget"]["used"], status["budget"]["remaining"]) == (0, 2), status
    assert sorted(c["type"] for c in status["conditions"]) == sorted(
        c["type"] for c in old["conditions"]
    )


class PolicyListFaults(faultproxy.FaultProxy):
    """The fault proxy, answering 500 to every list of SchedulingPolicies (GET of the
    cluster-wide collection, not a watch) from the first such request for ``window`` seconds."""

    def __init__(self, upstream: str, *, window: float, **kwargs: Any) -> None:
        super().__init__(upstream, **kwargs)
        self.window = window
        self.refused = 0
        self._first: float | None = None
        self._refusing = threading.Lock()

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        kind = faultproxy.classify(request.method, request.raw_path)
        if (
            request.method == "GET"
            and request.path == POLICIES_PATH
            and kind is faultproxy.RequestClass.OTHER
        ):
            with self._refusing:
                now = time.monotonic()
                self._first = now if self._first is None else self._first
                refuse = now - self._first < self.window
                self.refused += refuse
            if refuse:
                return _internal_error(request)
        return await super()._answer(request)


def _internal_error(request: web.BaseRequest) -> web.Response:
    """The API server's 500, as the fault proxy injects it."""
    message = f"faultproxy injected InternalError into {request.method} {request.path}"
    return web.Response(
        status=500,
        headers={"Content-Type": "application/json"},
        body=faultproxy.status_body(500, "InternalError", message),
    )


def test_policies_listed_through_errors_at_startup_still_govern_the_first_pods(
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    namespace: str,
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    tmp_path: Path,
) -> None:
    # Node a is far roomier: by the defaults (LeastAllocated, BalancedAllocation; bare pods get
    # no system default spreading) every pod goes there. The policy's zone spread with maxSkew 1
    # DoNotSchedule puts two in each zone.
    for zone, cpu, memory in (("a", "64", "256Gi"), ("b", "4", "16Gi")):
        client.create_node(
            builders.make_node(f"{node_prefix}-{zone}")
            .capacity(cpu=cpu, memory=memory, pods=110)
            .zone(zone)
            .label("plumb.test/chaos", node_prefix)
            .obj()
        )
    spread = {"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}
    k8s.CustomObjectsApi(client.api).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        _policy("web-spread", {"selector": {"matchLabels": {"app": "web"}}, "topology": [spread]}),
    )
    names = [f"web-{i}" for i in range(4)]
    for name in names:
        client.create_pod(
            builders.make_pod(name, namespace)
            .label("app", "web")
            .scheduler(harness.SCHEDULER)
            .node_selector("plumb.test/chaos", node_prefix)
            .req(cpu="100m", memory="64Mi")
            .obj()
        )

    # plumb's list at t, its retries at t+1 (refused) and t+3 (answered).
    proxy = PolicyListFaults(plane.server, ca_file=plane.ca_file, window=2.0)
    with proxy:
        plumb = start_plumb(kubeconfig=proxy.write_kubeconfig(tmp_path / "kc", plane.token))
        harness.wait_all_bound(client, namespace, plumb, len(names))
        assert proxy.refused >= 1, "no list of SchedulingPolicies was refused"

        placed = Counter(p["spec"]["nodeName"] for p in client.pods(namespace))
        assert placed == {f"{node_prefix}-a": 2, f"{node_prefix}-b": 2}, placed
        pods = {f"{namespace}/{name}" for name in names}
        traced = {pod: line.get("policy") for pod, line in harness.wait_traced(plumb, pods).items()}
        governed = f"{namespace}/web-spread"
        assert traced == dict.fromkeys(pods, governed), traced
        assert plumb.stop() == 0


class FirstBindingRefused(faultproxy.FaultProxy):
    """The fault proxy, answering 500 to the first binding of the pod named ``pod``."""

    def __init__(self, upstream: str, *, pod: str, **kwargs: Any) -> None:
        super().__init__(upstream, **kwargs)
        self.pod = pod
        self.refused = 0

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        if (
            request.method == "POST"
            and request.path.endswith(f"/pods/{self.pod}/binding")
            and not self.refused
        ):
            self.refused += 1
            return _internal_error(request)
        return await super()._answer(request)


def test_a_deviation_whose_binding_failed_once_is_charged_once(
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    namespace: str,
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    tmp_path: Path,
) -> None:
    # Zone c is too small for a web pod: with one pod in a and one in b, maxSkew 1 blocks every
    # node for the third, which deviates on the budget. Its first binding is refused (500).
    for zone, cpu in (("a", "4"), ("b", "4"), ("c", "500m")):
        client.create_node(
            builders.make_node(f"{node_prefix}-{zone}")
            .capacity(cpu=cpu, memory="16Gi", pods=110)
            .zone(zone)
            .label("plumb.test/chaos", node_prefix)
            .obj()
        )
    spread = {"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}
    spec = {
        "selector": {"matchLabels": {"app": "web"}},
        "topology": [spread],
        "deviationBudget": {"maxViolations": 3, "window": "10m"},
    }
    custom = k8s.CustomObjectsApi(client.api)
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _policy("web", spec))

    def create(name: str) -> None:
        client.create_pod(
            builders.make_pod(name, namespace)
            .label("app", "web")
            .scheduler(harness.SCHEDULER)
            .node_selector("plumb.test/chaos", node_prefix)
            .req(cpu="1", memory="64Mi")
            .obj()
        )

    proxy = FirstBindingRefused(plane.server, ca_file=plane.ca_file, pod="web-2")
    with proxy:
        plumb = start_plumb(kubeconfig=proxy.write_kubeconfig(tmp_path / "kc", plane.token))
        for name in ("web-0", "web-1"):
            create(name)
        harness.wait_all_bound(client, namespace, plumb, 2)
        create("web-2")
        harness.wait_all_bound(client, namespace, plumb, 3)
        assert proxy.refused == 1
        harness.wait_traced(plumb, {f"{namespace}/web-2"})
        # A clean stop writes the last status (the budget as it stands).
        assert plumb.stop() == 0
    body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web")
    budget = body["status"]["budget"]
    uid = next(
        p["metadata"]["uid"] for p in client.pods(namespace) if p["metadata"]["name"] == "web-2"
    )
    assert (budget["used"], budget["remaining"]) == (1, 2), budget
    assert budget["chargedPods"] == [uid], budget
    failed = [
        line
        for line in plumb.lines()
        if line.get("pod") == f"{namespace}/web-2" and line.get("result") == "BindFailed"
    ]
    assert failed, "no BindFailed trace line for web-2"
    assert failed[0].get("deviation"), failed
    harness.record(
        "deviation-bind-fault",
        pods=3,
        faults="the deviating binding refused once (500)",
        violations=0 if budget["used"] == 1 else budget["used"] - 1,
    )
