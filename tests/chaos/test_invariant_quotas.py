"""The quota part of the chaos invariant (invariant.quota_violations), on objects as the API
server lists them, no server: a namespace over its max and quota namespaces together over the
sum of their mins are reported, in words that name the namespace, the resource and both
figures, with the names a quota leaves out read as CapacityScheduling reads them; a sound state
reports nothing."""

from __future__ import annotations

from typing import Any

from plumb_dev.testing import builders, quotaclient
from tests.chaos import invariant

JSON = dict[str, Any]
GPU = "nvidia.com/gpu"


def _pod(name: str, namespace: str, node: str | None = "n1", **requests: str) -> JSON:
    pod = builders.make_pod(name, namespace).req(**{"cpu": "500m", **requests})
    return (pod.node(node) if node else pod).obj()


def _quota(namespace: str, minimum: dict[str, str], maximum: dict[str, str] | None) -> JSON:
    return quotaclient.elastic_quota(namespace, minimum=minimum, maximum=maximum)


# Three tenants: a guarantees 2 cpu, may use 3; b guarantees 2, may use 2; c guarantees 1 and
# has no max. Together they may use 5 cpu.
QUOTAS = [
    _quota("a", {"cpu": "2", "memory": "1Gi"}, {"cpu": "3", "memory": "2Gi"}),
    _quota("b", {"cpu": "2", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"}),
    _quota("c", {"cpu": "1", "memory": "1Gi"}, None),
]
SOUND_PODS = [
    *(_pod(f"a{i}", "a", memory="64Mi") for i in range(6)),  # 3 cpu: a borrows 1
    *(_pod(f"b{i}", "b", memory="64Mi") for i in range(2)),  # 1 cpu of 2
    _pod("c0", "c", memory="64Mi"),  # 500m: together 4.5 cpu of 5
    _pod("waiting", "a", node=None, memory="64Mi"),  # not bound: counts nothing
    builders.make_pod("done", "a").req(cpu="4").node("n1").phase("Succeeded").obj(),
    *(_pod(f"free{i}", "nobody", cpu="8") for i in range(3)),  # no quota: not limited
]


def test_a_sound_state_reports_nothing() -> None:
    assert invariant.quota_violations(QUOTAS, SOUND_PODS) == []


def test_a_namespace_over_its_max_is_reported() -> None:
    extra = [_pod("b2", "b", memory="64Mi"), _pod("b3", "b", memory="1Gi"), _pod("b4", "b")]
    assert invariant.quota_violations(QUOTAS, [*SOUND_PODS, *extra]) == [
        "namespace b: 2500m cpu bound, ElasticQuota quota max 2000m cpu",
        f"namespace b: {(64 * 3 + 1024) * 2**20} memory bound, ElasticQuota quota max "
        f"{2**30} memory",
        "quota namespaces together: 6000m cpu bound, sum of mins 5000m cpu (a, b, c)",
    ]
    # The same pods within b's max once it may use 3 cpu and 2Gi: only the sum of mins is left.
    raised = [QUOTAS[0], _quota("b", {"cpu": "2"}, {"cpu": "3", "memory": "2Gi"}), QUOTAS[2]]
    assert invariant.quota_violations(raised, [*SOUND_PODS, *extra]) == [
        "quota namespaces together: 6000m cpu bound, sum of mins 5000m cpu (a, b, c)"
    ]


def test_quota_namespaces_together_over_their_mins_are_reported_each_within_its_max() -> None:
    # c has no max: alone it is never over, but together they pass 5 cpu.
    borrowing = [*SOUND_PODS, *(_pod(f"c{i}", "c") for i in range(1, 3))]
    assert invariant.quota_violations(QUOTAS, borrowing) == [
        "quota namespaces together: 5500m cpu bound, sum of mins 5000m cpu (a, b, c)"
    ]
    # A terminating pod still holds its room.
    dying = [*SOUND_PODS, builders.make_pod("c1", "c").req(cpu="1").node("n1").terminating().obj()]
    assert invariant.quota_violations(QUOTAS, dying) == [
        "quota namespaces together: 5500m cpu bound, sum of mins 5000m cpu (a, b, c)"
    ]


def test_names_a_quota_leaves_out_count_as_capacityscheduling_reads_them() -> None:
    # A max naming only cpu: memory and ephemeral-storage 0, an extended resource unlimited.
    quotas = [
        _quota("a", {"cpu": "2", "memory": "1Gi", GPU: "1"}, {"cpu": "2"}),
        _quota("b", {"cpu": "2"}, {"cpu": "2", GPU: "1"}),
    ]
    pods = [
        _pod("a0", "a", **{GPU: "1"}),  # gpu unlimited by a's max, within the mins' 1
        _pod("a1", "a", memory="64Mi"),  # memory: a's max has none
        _pod("b0", "b", **{"ephemeral-storage": "1Gi"}),  # b's max and every min: none
    ]
    assert invariant.quota_violations(quotas, pods) == [
        f"namespace a: {64 * 2**20} memory bound, ElasticQuota quota max 0 memory",
        f"namespace b: {2**30} ephemeral-storage bound, ElasticQuota quota max 0 ephemeral-storage",
        f"quota namespaces together: {2**30} ephemeral-storage bound, sum of mins 0 "
        "ephemeral-storage (a, b)",
    ]
    # An extended resource no min names is 0 in the sum of mins.
    assert invariant.quota_violations(quotas, [_pod("b1", "b", **{GPU: "1"}), pods[0]]) == [
        f"quota namespaces together: 2 {GPU} bound, sum of mins 1 {GPU} (a, b)"
    ]


def test_the_oldest_of_a_namespaces_quotas_governs() -> None:
    old = _quota("a", {"cpu": "4"}, {"cpu": "1"})
    old["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    new = quotaclient.elastic_quota("a", minimum={"cpu": "4"}, maximum={"cpu": "4"}, name="b")
    new["metadata"]["creationTimestamp"] = "2026-01-02T00:00:00Z"
    pods = [_pod(f"a{i}", "a") for i in range(3)]
    assert invariant.quota_violations([new, old], pods) == [
        "namespace a: 1500m cpu bound, ElasticQuota quota max 1000m cpu"
    ]
