"""The devices part of the chaos invariant (invariant.device_violations), on objects as the API
server lists them, no server: each way a claim pod's devices can go wrong is reported, in
words that name the pod, the claim and what is wrong, and a sound state reports nothing."""

from __future__ import annotations

import copy
from typing import Any

from tests.chaos import invariant

JSON = dict[str, Any]
NS = "burst"


def _node(name: str, **labels: str) -> JSON:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}}


def _on(node: str) -> JSON:
    match = {"key": "metadata.name", "operator": "In", "values": [node]}
    return {"nodeSelectorTerms": [{"matchFields": [match]}]}


def _claim(name: str, *devices: str, node: str = "n1", reserved: tuple[str, ...] = ()) -> JSON:
    results = [
        {"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": d} for d in devices
    ]
    status: JSON = {}
    if devices:
        status["allocation"] = {"devices": {"results": results}, "nodeSelector": _on(node)}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": u, "uid": u} for u in reserved]
    return {"metadata": {"namespace": NS, "name": name}, "status": status}


def _pod(name: str, node: str, *, template: str | None = None, claim: str | None = None) -> JSON:
    entry: JSON = {"name": "gpu"}
    status: JSON = {"phase": "Pending"}
    if claim is not None:
        entry["resourceClaimName"] = claim
    if template is not None:
        entry["resourceClaimTemplateName"] = "one-gpu"
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": template}]
    return {
        "metadata": {"namespace": NS, "name": name, "uid": name},
        "spec": {"nodeName": node, "resourceClaims": [entry]},
        "status": status,
    }


NODES = [_node("n1"), _node("n2")]
SOUND_CLAIMS = [
    _claim("p0-gpu", "gpu-0", reserved=("p0",)),
    _claim("p1-gpu", "gpu-1", reserved=("p1",)),
    _claim("shared", "gpu-2", reserved=("p2", "p3")),
]
SOUND_PODS = [
    _pod("p0", "n1", template="p0-gpu"),
    _pod("p1", "n1", template="p1-gpu"),
    _pod("p2", "n1", claim="shared"),
    _pod("p3", "n1", claim="shared"),
    _pod("waiting", "", template="w-gpu"),  # pending: nothing to hold yet
]


def test_a_sound_state_reports_nothing() -> None:
    assert invariant.device_violations(SOUND_CLAIMS, SOUND_PODS, NODES) == []


def test_a_device_in_two_claims_is_reported_unless_taken_with_admin_access() -> None:
    twice = [*SOUND_CLAIMS, _claim("thief", "gpu-0", reserved=("p9",))]
    assert invariant.device_violations(twice, SOUND_PODS, NODES) == [
        "device gpu.example.com/n1/gpu-0 allocated to 2 claims: burst/p0-gpu, burst/thief"
    ]
    watcher = _claim("watcher", "gpu-0")
    watcher["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    assert invariant.device_violations([*SOUND_CLAIMS, watcher], SOUND_PODS, NODES) == []


def test_a_bound_pods_claim_unallocated_unreachable_unreserved_or_missing_is_reported() -> None:
    claims = copy.deepcopy(SOUND_CLAIMS)
    del claims[0]["status"]["allocation"]  # p0's: never allocated
    claims[1]["status"]["reservedFor"] = []  # p1's: not reserved for it
    pods = copy.deepcopy(SOUND_PODS)
    pods[2]["spec"]["nodeName"] = "n2"  # p2 on a node its shared claim cannot reach
    pods[3]["status"]["phase"] = "Succeeded"  # done: no longer held to it
    pods.append(_pod("lost", "n1", template="gone"))
    unmade = _pod("unmade", "n1", template="x")
    unmade["status"]["resourceClaimStatuses"] = []
    pods.append(unmade)
    found = invariant.device_violations(claims, pods, NODES)
    assert found == [
        "burst/p0 on n1: claim burst/p0-gpu is not allocated",
        "burst/p1 on n1: claim burst/p1-gpu is not reserved for the pod",
        "burst/p2 on n2: claim burst/shared is allocated where the node cannot reach it: "
        f"{_on('n1')}",
        "burst/lost on n1: claim burst/gone does not exist",
        "burst/unmade on n1: claim burst/<not made from template one-gpu> does not exist",
    ]


def test_node_selectors_match_labels_and_fields_as_the_api_defines_them() -> None:
    node = _node("n1", zone="a", cores="8")
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    assert invariant._reaches({"nodeSelectorTerms": [term]}, node)
    assert invariant._reaches(None, node)  # no selector: every node
    gt = {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["16"]}]}
    assert not invariant._reaches({"nodeSelectorTerms": [gt]}, node)
    assert invariant._reaches({"nodeSelectorTerms": [gt, term]}, node)  # any term
    assert not invariant._reaches({"nodeSelectorTerms": [{}]}, node)  # an empty term: none
    assert not invariant._reaches(_on("n2"), node)
