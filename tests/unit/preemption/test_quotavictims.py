"""CapacityScheduling's victims on a node: whose pods a preemptor may take, by its quota."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from plumb.backend.records import quotaobjects
from plumb.backend.records.quotaobjects import Bound
from plumb.preemption import evaluator, quotavictims
from plumb.preemption.evaluator import NodePods, Pod

CAPACITY = 4000  # millicores on the node


def _pod(name: str, namespace: str, cpu: int, priority: int = 0) -> Pod:
    return Pod(uid=name, namespace=namespace, name=name, priority=priority, requests={"cpu": cpu})


def _fits(pod: Pod, node: NodePods, remaining: Sequence[Pod]) -> bool:
    used = sum(p.requests.get("cpu", 0) for p in remaining)
    return used + pod.requests.get("cpu", 0) <= CAPACITY


def _bound(cpu: int, missing: int) -> Bound:
    return Bound.of({"cpu": cpu, "memory": quotaobjects.UNLIMITED}, missing)


def _view(
    preemptor: Pod,
    used: Mapping[str, int],
    mins: Mapping[str, int],
    maxes: Mapping[str, int] | None = None,
) -> quotavictims.QuotaView:
    maxes = maxes or {ns: 100_000 for ns in mins}
    request = dict(preemptor.requests)
    return quotavictims.QuotaView(
        lower={ns: _bound(value, 0) for ns, value in mins.items()},
        upper={ns: _bound(value, quotaobjects.UNLIMITED) for ns, value in maxes.items()},
        used={ns: {"cpu": value} for ns, value in used.items()},
        request=request,
        in_quota=request,
        everywhere=request,
    )


def _victims(preemptor: Pod, pods: Sequence[Pod], view: quotavictims.QuotaView) -> object:
    node = NodePods(name="n1", pods=tuple(pods))
    found = quotavictims.select(preemptor, node, (), _fits, view=view)
    if found.candidate is None:
        return found.reasons
    return [victim.name for victim in found.candidate.victims]


def test_under_its_min_a_tenant_takes_back_from_tenants_borrowing_beyond_theirs() -> None:
    preemptor = _pod("a-new", "team-a", 2000, priority=0)
    pods = [
        _pod("a-old", "team-a", 1000),
        _pod("b-1", "team-b", 1000, priority=50),  # any priority: team-b borrows
        _pod("b-2", "team-b", 2000, priority=100),
    ]
    view = _view(
        preemptor, used={"team-a": 1000, "team-b": 3000}, mins={"team-a": 3000, "team-b": 1000}
    )
    # team-b uses 3 cpu of its 1: both its pods may go; b-2, the more important, is tried
    # first and must go for the room, b-1 is then reprieved.
    assert _victims(preemptor, pods, view) == ["b-2"]


def test_above_its_min_a_tenant_preempts_only_its_own_lower_priority_pods() -> None:
    preemptor = _pod("a-new", "team-a", 2000, priority=10)
    pods = [_pod("a-low", "team-a", 2000, priority=0), _pod("b-1", "team-b", 2000)]
    view = _view(
        preemptor, used={"team-a": 2000, "team-b": 2000}, mins={"team-a": 1000, "team-b": 8000}
    )
    assert _victims(preemptor, pods, view) == ["a-low"]


def test_a_pod_without_quota_reaches_only_lower_priority_pods_without_quota() -> None:
    preemptor = _pod("free", "nobody", 2000, priority=10)
    pods = [_pod("a-1", "team-a", 2000), _pod("other", "elsewhere", 2000)]
    view = _view(preemptor, used={"team-a": 2000}, mins={"team-a": 8000})
    assert _victims(preemptor, pods, view) == ["other"]


def test_no_potential_victim_is_named_in_scheduler_plugins_words() -> None:
    preemptor = _pod("a-new", "team-a", 2000, priority=0)
    pods = [_pod("b-1", "team-b", 4000)]
    view = _view(
        preemptor, used={"team-a": 0, "team-b": 4000}, mins={"team-a": 4000, "team-b": 4000}
    )
    # team-b is within its min: nothing of it may be taken.
    assert _victims(preemptor, pods, view) == (
        "No victims found on node n1 for preemptor pod a-new",
    )


def test_a_pod_beyond_its_max_even_with_every_victim_gone_is_refused() -> None:
    preemptor = _pod("a-new", "team-a", 2000, priority=10)
    pods = [_pod("a-low", "team-a", 1000, priority=0), _pod("a-2", "team-a", 2000, priority=20)]
    view = _view(
        preemptor,
        used={"team-a": 4000},
        mins={"team-a": 1000, "team-b": 10_000},
        maxes={"team-a": 4500, "team-b": 10_000},
    )
    assert _victims(preemptor, pods, view) == (quotavictims.QUOTA_EXCEEDED,)


def test_the_selection_plugs_into_the_evaluator() -> None:
    preemptor = _pod("a-new", "team-a", 2000, priority=10)
    node = NodePods(name="n1", pods=(_pod("a-low", "team-a", 4000),))
    view = _view(preemptor, used={"team-a": 4000}, mins={"team-a": 1000, "team-b": 9000})
    statuses = {"n1": evaluator.NodeStatus(code=evaluator.Code.UNSCHEDULABLE)}

    def select(*args: object, **kwargs: object) -> evaluator.NodeSearch:
        return quotavictims.select(*args, view=view, **kwargs)  # type: ignore[arg-type]

    verdict = evaluator.preempt(preemptor, [node], statuses, (), _fits, select=select)
    assert verdict.node == "n1"
    assert [v.name for v in verdict.victims] == ["a-low"]


def test_a_policys_qos_rules_hold_in_quota_preemption() -> None:
    # team-a, under its min, takes back from team-b (borrowing): with victimOrder
    # QoSThenPriority the BestEffort pod goes before the Burstable one of lower priority, and a
    # Guaranteed pod its policy exempts is never a victim.
    preemptor = _pod("a-new", "team-a", 2000)
    best_effort = dataclasses.replace(_pod("b-be", "team-b", 2000, priority=50), qos="BestEffort")
    burstable = dataclasses.replace(_pod("b-bu", "team-b", 2000, priority=10), qos="Burstable")
    guarded = dataclasses.replace(
        _pod("b-gu", "team-b", 2000, priority=0), qos="Guaranteed", exempt=True
    )
    view = _view(
        preemptor, used={"team-a": 0, "team-b": 6000}, mins={"team-a": 4000, "team-b": 3000}
    )
    rules = evaluator.Rules(qos_order=True)
    node = NodePods(name="n1", pods=(best_effort, burstable, guarded))
    capacity = 6000

    def fits(pod: Pod, node: NodePods, remaining: Sequence[Pod]) -> bool:
        return sum(p.requests.get("cpu", 0) for p in remaining) + 2000 <= capacity

    found = quotavictims.select(preemptor, node, (), fits, rules=rules, view=view)
    assert found.candidate is not None
    assert [v.name for v in found.candidate.victims] == ["b-be"]
    plain = quotavictims.select(preemptor, node, (), fits, view=view)
    assert plain.candidate is not None
    assert [v.name for v in plain.candidate.victims] == ["b-bu"]  # by priority alone
