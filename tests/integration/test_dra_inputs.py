"""plumb's DRA inputs on the real control plane: ResourceSlices, DeviceClasses, ResourceClaims and
templates created through the API reach plumb's store (its snapshot dump shows them), and a pod
whose claim template does not exist yet is not tried, nor reported, until kube-controller-manager's
resourceclaim controller has made its claim and named it in the pod's status."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import parser

from plumb.observability import metrics
from plumb_dev.testing import builders, crds, kube
from tests.support import plumb_process
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import PlumbFactory, free_port

pytestmark = pytest.mark.integration

DRIVER = "gpu.dra-inputs.plumb.dev"
QUIET = 5.0  # seconds a pod without its claim must stay untried


def _apply(kubectl: crds.Kubectl, body: dict[str, Any]) -> None:
    kubectl.check("apply", "-f", "-", stdin=json.dumps(body))


def _dra(port: int) -> dict[str, Any]:
    """The DRA part of plumb's cache, from its debug endpoint's snapshot."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/snapshot", timeout=60) as page:
        document = json.load(page)
    dra: dict[str, Any] = document["cache"]["dra"]
    return dra


def _gated(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
        text = page.read().decode()
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == metrics.PENDING_PODS and sample.labels.get("queue") == "gated":
                return float(sample.value)
    raise AssertionError(f"no {metrics.PENDING_PODS} gauge for the gated queue")


@pytest.fixture
def kubectl(policy_crd: crds.Kubectl, namespace: str) -> Iterator[crds.Kubectl]:
    """The control plane's kubectl; the test's cluster-wide DRA objects deleted afterwards."""
    yield policy_crd
    for kind in ("deviceclasses", "resourceslices"):
        names = policy_crd.check("get", kind, "-o", "name").split()
        mine = [n for n in names if namespace in n]
        if mine:
            policy_crd.check("delete", "--ignore-not-found", *mine)


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_plumb_sees_dra_objects_and_a_pod_waits_for_its_claim(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    kubectl: crds.Kubectl,
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n0").capacity(cpu="4"))
    debug, metrics_port = free_port(), free_port()
    plumb = start_plumb("--debug-port", str(debug), "--metrics-port", str(metrics_port))
    device_class = f"{namespace}-gpu"
    selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
    _apply(
        kubectl,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": device_class},
            "spec": {"selectors": [selector]},
        },
    )
    _apply(
        kubectl,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": DRIVER,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "nodeName": node,
                "devices": [
                    {"name": "gpu-0", "attributes": {"model": {"string": "t4"}}},
                    {"name": "gpu-1", "attributes": {"model": {"string": "t4"}}},
                ],
            },
        },
    )
    request = {"name": "gpu", "exactly": {"deviceClassName": device_class}}
    _apply(
        kubectl,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": namespace},
            "spec": {"devices": {"requests": [request]}},
        },
    )

    def seen() -> dict[str, Any] | None:
        dra = _dra(debug)
        slices = {s["name"]: s for s in dra["slices"]}
        classes = {c["name"] for c in dra["classes"]}
        claims = {(c["namespace"], c["name"]) for c in dra["claims"]}
        if f"{node}-gpus" in slices and device_class in classes and (namespace, "shared") in claims:
            return dra
        return None

    dra = kube.wait_for(
        "plumb's store to hold the slice, class and claim", seen, timeout=30, interval=0.5
    )
    piece = next(s for s in dra["slices"] if s["name"] == f"{node}-gpus")
    assert piece["selection"]["node_name"] == node
    assert [d["name"] for d in piece["devices"]] == ["gpu-0", "gpu-1"]
    assert piece["devices"][0]["attributes"] == {"model": "t4"}

    # A pod whose claim comes from a template that does not exist yet: the controller cannot
    # make the claim, and plumb does not try the pod.
    pod = builders.make_pod("train", namespace).scheduler("plumb").req(cpu="100m").obj()
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    created = kube_client.create_pod(pod)
    uid = created["metadata"]["uid"]
    kube.wait_for("plumb to hold the pod gated", lambda: _gated(metrics_port) == 1.0, timeout=30)
    time.sleep(QUIET)
    assert not [r for r in plumb_process.all_traces(plumb) if r.uid == uid]
    assert not kube_client.pod(namespace, "train")["spec"].get("nodeName")
    reasons = [e.get("reason") for e in kube_client.events(namespace, "train")]
    assert "FailedScheduling" not in reasons
    assert _gated(metrics_port) == 1.0

    # The template appears: kube-controller-manager makes the claim and names it in the pod's
    # status, and only then is the pod tried.
    _apply(
        kubectl,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        },
    )

    def claim_named() -> str | None:
        statuses = (
            kube_client.pod(namespace, "train").get("status", {}).get("resourceClaimStatuses")
        )
        return str(statuses[0]["resourceClaimName"]) if statuses else None

    claim = kube.wait_for("the controller to make and name the claim", claim_named, timeout=60)
    decided = kube.wait_for(
        "plumb to try the pod",
        lambda: [r for r in plumb_process.all_traces(plumb) if r.uid == uid],
        timeout=60,
    )
    assert decided
    dra = _dra(debug)
    made = next(c for c in dra["claims"] if (c["namespace"], c["name"]) == (namespace, claim))
    assert made["owner_uid"] == uid
    assert made["pod_claim_name"] == "gpu"
    assert {(t["namespace"], t["name"]) for t in dra["templates"]} >= {(namespace, "one-gpu")}
