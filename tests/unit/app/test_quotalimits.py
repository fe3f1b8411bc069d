"""The leader's SLO-elastic limits: a tenant whose scheduling SLO falls has its quota's limit
lowered within one evaluation period, its refusals say why, and the limit comes back when the
SLO recovers; the Prometheus answer is read as one value."""

from __future__ import annotations

from typing import Any

import pytest

from plumb import scheduler as scheduler_module
from plumb.app import quotalimits
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

TENANT = "team-a"


def _quota() -> dict[str, Any]:
    return {
        "metadata": {"namespace": TENANT, "name": "q", "uid": "q1"},
        "spec": {"min": {"cpu": "4", "memory": "64Gi"}, "max": {"cpu": "10", "memory": "64Gi"}},
    }


def _policy() -> dict[str, Any]:
    return {
        "metadata": {"namespace": TENANT, "name": "slo", "uid": "p1", "generation": 1},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "quotaSLO": {
                "objective": 0.99,
                "tolerance": "1s",
                "evaluationPeriod": "5s",
                "scheduling": {"within": "10s"},
            },
        },
    }


def _pod(name: str, **changes: Any) -> dict[str, Any]:
    builder = make_pod(name, TENANT).scheduler("plumb").label("app", "web").req(cpu="1")
    if changes.get("node"):
        builder = builder.node(changes["node"])
    body = builder.obj()
    body["metadata"]["uid"] = f"uid-{name}"
    if changes.get("stuck"):
        body["spec"]["nodeSelector"] = {"nowhere": "true"}
    return body


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def plumb(api: FakeApi, clock: ManualClock) -> scheduler_module.Scheduler:
    s = make_scheduler(api, clock)
    s.feed.on_quota("ADDED", _quota())
    s.policies.apply(_policy())
    return s


async def test_a_falling_slo_lowers_the_limit_and_a_recovered_one_restores_it(
    plumb: scheduler_module.Scheduler, api: FakeApi, clock: ManualClock
) -> None:
    bound = [_pod(f"web-{i}", node="n1") for i in range(4)]
    stuck = [_pod(f"stuck-{i}", stuck=True) for i in range(4)]
    plumb.feed.resync([make_node("n1").capacity(cpu="32", memory="64Gi").obj()], bound + stuck)
    limits = quotalimits.QuotaLimits(plumb, wall=lambda: 1_700_000_000.0)
    await limits.evaluate_due()
    quota = plumb.cache.quotas.governing(TENANT)
    assert quota is not None
    assert plumb.cache.quotas.upper(quota) == quota.upper  # nobody waited too long yet

    clock.advance(11.0)  # the stuck pods now wait past `within`: 0 of 4 met
    await limits.evaluate_due()  # the breach starts; the tolerance (1 s) has not passed
    assert plumb.cache.quotas.limit(TENANT) is None
    clock.advance(5.0)  # one evaluation period later
    await limits.evaluate_due()
    limit = plumb.cache.quotas.limit(TENANT)
    assert limit is not None
    assert limit.steps == 19  # 99 points below: 19 steps of 2%
    assert plumb.cache.quotas.upper(quota).get("cpu") == 6200  # 10 cpu less 38%
    await plumb.drain()
    events = [e for e in api.events if e["reason"] == "QuotaLimitLowered"]
    assert len(events) == 1
    assert "its limit is cpu 6.2 (max cpu 10), lowered from cpu 10" in events[0]["note"]
    assert "because its SLO attainment fell to 0%" in events[0]["note"]
    status = plumb.policies.status(TENANT, "slo")
    assert status is not None
    assert status["quota"]["limit"] == {"cpu": "6.2", "memory": "64Gi"}
    assert status["quota"]["steps"] == 19

    for body in stuck:
        plumb.feed.on_pod("DELETED", body)
    clock.advance(5.0)
    await limits.evaluate_due()
    assert plumb.cache.quotas.limit(TENANT) is None
    await plumb.drain()
    assert [e["reason"] for e in api.events if e["reason"].startswith("QuotaLimit")] == [
        "QuotaLimitLowered",
        "QuotaLimitRestored",
    ]


@pytest.mark.parametrize(
    ("body", "value"),
    [
        ({"status": "success", "data": {"resultType": "scalar", "result": [1, "0.91"]}}, 0.91),
        (
            {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "1.2"]}]},
            },
            1.0,
        ),
    ],
)
def test_a_prometheus_answer_gives_one_value_in_0_1(body: dict[str, Any], value: float) -> None:
    assert quotalimits.single_value(body) == value


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"status": "error", "error": "parse error"}, "the query failed: parse error"),
        ({"status": "success", "data": {"resultType": "vector", "result": []}}, "0 vector"),
    ],
)
def test_a_prometheus_answer_without_one_value_is_an_error(
    body: dict[str, Any], words: str
) -> None:
    with pytest.raises(quotalimits.AttainmentError, match=words):
        quotalimits.single_value(body)
