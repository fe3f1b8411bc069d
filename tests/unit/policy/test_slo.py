"""SLO-elastic quotas: the rule that moves a quota's limit with its tenant's SLO attainment,
the breach's tolerance, spec.quotaSLO compiled, and plumb's own scheduling attainment."""

from __future__ import annotations

from typing import Any

import pytest

from plumb.backend.records import objects, quotaobjects, specs
from plumb.backend.records.quotaobjects import Bound
from plumb.policy import attainment, slo
from plumb.policy.fields import PolicyError
from plumb_dev.testing.builders import make_pod

RULE = slo.QuotaSLO(objective=0.99, tolerance=60.0)
LOWER = Bound.of({"cpu": 8000}, 0)
UPPER = Bound.of({"cpu": 10000}, quotaobjects.UNLIMITED)


@pytest.mark.parametrize(
    ("attained", "expected"),
    [(1.0, 0), (0.99, 0), (0.95, 0), (0.94, 1), (0.91, 1), (0.89, 2), (0.0, 19)],
)
def test_each_five_points_below_the_objective_is_a_step(attained: float, expected: int) -> None:
    assert slo.steps(RULE, attained) == expected


def test_each_step_releases_two_percent_of_the_ceiling_never_below_min() -> None:
    assert slo.limit(RULE, LOWER, UPPER, 0).get("cpu") == 10000
    assert slo.limit(RULE, LOWER, UPPER, 1).get("cpu") == 9800
    assert slo.limit(RULE, LOWER, UPPER, 2).get("cpu") == 9600
    assert slo.limit(RULE, LOWER, UPPER, 50).get("cpu") == 8000  # min
    # memory: a max naming only cpu makes it 0, and the limit keeps it so
    assert slo.limit(RULE, LOWER, UPPER, 1).get("memory") == 0


def test_an_elastic_ceiling_caps_the_limit_below_max() -> None:
    payments = slo.QuotaSLO(objective=0.99, ceiling=10.0)
    assert slo.limit(payments, LOWER, UPPER, 0).get("cpu") == 8800  # min 8 + 10%
    offline = slo.QuotaSLO(objective=0.99, ceiling=0.0)
    assert slo.limit(offline, LOWER, UPPER, 0).get("cpu") == 8000
    unlimited = Bound.of(None, quotaobjects.UNLIMITED)
    assert slo.limit(RULE, LOWER, unlimited, 3).get("cpu") == quotaobjects.UNLIMITED


def test_a_breach_counts_only_after_the_tolerance() -> None:
    first = slo.judge(RULE, 0.80, 100.0, None)
    assert (first.below_since, first.steps) == (100.0, 0)
    later = slo.judge(RULE, 0.80, 159.0, first)
    assert later.steps == 0
    counted = slo.judge(RULE, 0.80, 160.0, later)
    assert (counted.below_since, counted.steps) == (100.0, 3)
    recovered = slo.judge(RULE, 0.995, 170.0, counted)
    assert (recovered.below_since, recovered.steps) == (None, 0)


def _spec(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"objective": 0.99, "scheduling": {"within": "10s"}}
    raw.update(changes)
    return raw


def test_the_spec_compiles_with_the_seeds_defaults() -> None:
    rule = slo.parse(_spec(), "spec.quotaSLO")
    assert rule == slo.QuotaSLO(objective=0.99, within=10.0)
    assert (rule.step.drop, rule.step.release, rule.window, rule.period) == (5.0, 2.0, 600.0, 30.0)
    prom = slo.parse(
        {"objective": 0.9, "prometheus": {"url": "http://prom:9090/", "query": "up"}}, "q"
    )
    assert prom is not None
    assert (prom.source, prom.url, prom.query) == (slo.PROMETHEUS, "http://prom:9090", "up")


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"scheduling": {}}, "spec.quotaSLO.objective: required"),
        (_spec(objective=0), "spec.quotaSLO.objective: must be more than 0"),
        (_spec(objective=1.5), "spec.quotaSLO.objective: must be between 0 and 1"),
        ({"objective": 0.9}, "set exactly one of scheduling"),
        (_spec(prometheus={"url": "x", "query": "up"}), "set exactly one of scheduling"),
        (
            {"objective": 0.9, "prometheus": {"url": "prom:9090", "query": "up"}},
            r"spec.quotaSLO.prometheus.url: must be an http\(s\) URL",
        ),
        (_spec(step={"drop": 0}), "spec.quotaSLO.step.drop: must be more than 0"),
        (_spec(window="ten minutes"), "spec.quotaSLO.window"),
        (_spec(extra=1), "extra"),
    ],
)
def test_a_bad_spec_is_named(raw: dict[str, Any], words: str) -> None:
    with pytest.raises(PolicyError, match=words):
        slo.parse(raw, "spec.quotaSLO")


def _pod(name: str, **labels: str) -> objects.PodInfo:
    builder = make_pod(name, "team-a")
    for key, value in labels.items():
        builder = builder.label(key, value)
    return objects.parse_pod(builder.obj())


def test_plumbs_own_attainment_counts_bound_pods_and_pods_waiting_too_long() -> None:
    every = specs.label_selector({"matchLabels": {"app": "web"}}, "selector")
    assert every is not None
    outcomes = attainment.SchedulingOutcomes()
    outcomes.bound(_pod("ignored", app="web"), 1.0, 10.0)  # not watched yet
    outcomes.watch(["team-a"])
    outcomes.bound(_pod("fast", app="web"), 2.0, 100.0)
    outcomes.bound(_pod("slow", app="web"), 40.0, 100.0)
    outcomes.bound(_pod("other", app="db"), 40.0, 100.0)  # not selected
    outcomes.bound(_pod("old", app="web"), 1.0, 1.0)  # outside the window

    def share(now: float, waiting: list[tuple[objects.PodInfo, float]]) -> tuple[float, int]:
        return outcomes.attainment(
            "team-a", every, within=30.0, window=60.0, now=now, waiting=waiting
        )

    assert share(110.0, []) == (0.5, 2)
    stuck = _pod("stuck", app="web")
    assert share(110.0, [(stuck, 90.0)]) == (0.5, 2)  # 20 s waiting: not yet a miss
    assert share(110.0, [(stuck, 70.0)]) == (1 / 3, 3)
    assert share(1000.0, []) == (1.0, 0)  # nothing in the window: nothing missed
