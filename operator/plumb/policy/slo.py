"""SLO-elastic quotas: a SchedulingPolicy's ``spec.quotaSLO``, the tenant's SLO (an objective,
a window, a tolerance, where its attainment comes from) and the rule that moves the limit its
namespace's ElasticQuota enforces with that attainment.

The rule (the seed design's multi-tenant QoS): the tenant's ceiling is its quota's ``max``,
lowered to ``min * (1 + ceiling%)`` when the policy sets an elastic ceiling; while its SLO is
breached (attainment below the objective for at least ``tolerance``), each ``step.drop``
percentage points of attainment below the objective release ``step.release`` percent of that
ceiling for other tenants to borrow; the limit never goes below the quota's ``min`` nor above
its ``max``. Back at the objective, the ceiling is restored. Pure functions and records: the
leader's evaluation (app/quotalimits.py) applies them every ``period``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from plumb.backend.records import quotaobjects
from plumb.backend.records.quotaobjects import Bound
from plumb.policy import fields
from plumb.policy.fields import PolicyError

SCHEDULING = "scheduling"
PROMETHEUS = "prometheus"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """Each ``drop`` percentage points below the objective release ``release`` percent."""

    drop: float = 5.0
    release: float = 2.0


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class QuotaSLO:
    """``spec.quotaSLO``. ``source`` is SCHEDULING (plumb's own: the share of the governed
    pods bound within ``within`` seconds of their creation) or PROMETHEUS (``query``, a PromQL
    expression with one value in [0, 1], against ``url``)."""

    objective: float
    window: float = 600.0
    tolerance: float = 60.0
    period: float = 30.0
    ceiling: float | None = None  # percent above min; None: the quota's max
    step: Step = Step()
    source: str = SCHEDULING
    within: float = 30.0
    url: str = ""
    query: str = ""


# The rule ------------------------------------------------------------------------------------


def steps(slo: QuotaSLO, attainment: float) -> int:
    """How many steps of release an attainment below the objective is worth (0 at or above)."""
    drop = (slo.objective - attainment) * 100.0
    if drop <= 0:
        return 0
    return math.floor(drop / slo.step.drop + 1e-9)


def ceiling_of(slo: QuotaSLO, lower: Bound, upper: Bound) -> dict[str, int]:
    """The tenant's ceiling per resource its quota bounds: its max, or min * (1 + ceiling%)
    when that is lower. An unlimited max with no elastic ceiling stays unlimited."""
    names = {*lower.values, *upper.values}
    found = {}
    for name in names:
        top = upper.get(name)
        if slo.ceiling is not None:
            top = min(top, math.floor(lower.get(name) * (1 + slo.ceiling / 100.0)))
        found[name] = max(top, lower.get(name))
    return found


def limit(slo: QuotaSLO, lower: Bound, upper: Bound, breached_steps: int) -> Bound:
    """The max the quota enforces after ``breached_steps`` steps of release."""
    share = max(0.0, 1.0 - breached_steps * slo.step.release / 100.0)
    values = {}
    for name, top in ceiling_of(slo, lower, upper).items():
        if top >= quotaobjects.UNLIMITED:
            values[name] = top
            continue
        values[name] = max(lower.get(name), min(top, math.floor(top * share)))
    return Bound(values, upper.otherwise)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Breach:
    """Where a tenant's SLO stands: the attainment last read, since when it has been below the
    objective (None: it is not), and how many steps of release count now (0 within the
    tolerance)."""

    attainment: float
    below_since: float | None
    steps: int


def judge(slo: QuotaSLO, attainment: float, now: float, before: Breach | None) -> Breach:
    """The breach after reading ``attainment`` at ``now``: a drop counts only once the
    attainment has stayed below the objective for ``tolerance`` seconds."""
    if attainment >= slo.objective:
        return Breach(attainment=attainment, below_since=None, steps=0)
    since = before.below_since if before is not None and before.below_since is not None else now
    counted = steps(slo, attainment) if now - since >= slo.tolerance else 0
    return Breach(attainment=attainment, below_since=since, steps=counted)


# Parsing -------------------------------------------------------------------------------------


def parse(value: Any, where: str) -> QuotaSLO | None:
    """``spec.quotaSLO`` compiled; PolicyError naming the field."""
    if value is None:
        return None
    raw = fields.mapping(value, where)
    fields.known(
        raw,
        where,
        (
            "objective",
            "window",
            "tolerance",
            "evaluationPeriod",
            "ceiling",
            "step",
            "scheduling",
            "prometheus",
        ),
    )
    if raw.get("objective") is None:
        raise PolicyError(f"{where}.objective: required, the share of success to hold (0.99)")
    objective = _number(raw["objective"], f"{where}.objective", low=0.0, high=1.0)
    if objective <= 0:
        raise PolicyError(f"{where}.objective: must be more than 0, got {fields.show(objective)}")
    ceiling = raw.get("ceiling")
    step = fields.mapping(fields.or_default(raw.get("step"), {}), f"{where}.step")
    fields.known(step, f"{where}.step", ("drop", "release"))
    drop = _number(step.get("drop", 5), f"{where}.step.drop", low=0.0, high=100.0)
    release = _number(step.get("release", 2), f"{where}.step.release", low=0.0, high=100.0)
    if drop <= 0:
        raise PolicyError(f"{where}.step.drop: must be more than 0, got {fields.show(drop)}")
    scheduling, prometheus = raw.get("scheduling"), raw.get("prometheus")
    if (scheduling is None) == (prometheus is None):
        raise PolicyError(
            f"{where}: set exactly one of scheduling (plumb's own SLO: pods bound within a time) "
            "and prometheus (a PromQL query giving the attainment)"
        )
    base = QuotaSLO(
        objective=objective,
        window=fields.parse_duration(raw.get("window", "10m"), f"{where}.window"),
        tolerance=fields.parse_duration(raw.get("tolerance", "1m"), f"{where}.tolerance"),
        period=fields.parse_duration(
            raw.get("evaluationPeriod", "30s"), f"{where}.evaluationPeriod"
        ),
        ceiling=None if ceiling is None else _number(ceiling, f"{where}.ceiling", low=0, high=1000),
        step=Step(drop=drop, release=release),
    )
    if scheduling is not None:
        sched = fields.mapping(scheduling, f"{where}.scheduling")
        fields.known(sched, f"{where}.scheduling", ("within",))
        within = fields.parse_duration(sched.get("within", "30s"), f"{where}.scheduling.within")
        return dataclasses.replace(base, source=SCHEDULING, within=within)
    prom = fields.mapping(prometheus, f"{where}.prometheus")
    fields.known(prom, f"{where}.prometheus", ("url", "query"))
    url, query = prom.get("url"), prom.get("query")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise PolicyError(
            f"{where}.prometheus.url: must be an http(s) URL of a Prometheus, got "
            f"{fields.show(url)}"
        )
    if not isinstance(query, str) or not query.strip():
        raise PolicyError(f"{where}.prometheus.query: required, a PromQL expression")
    return dataclasses.replace(base, source=PROMETHEUS, url=url.rstrip("/"), query=query)


def _number(value: Any, where: str, *, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PolicyError(f"{where}: must be a number, got {fields.show(value)}")
    if not (math.isfinite(value) and low <= value <= high):
        raise PolicyError(
            f"{where}: must be between {low:g} and {high:g}, got {fields.show(value)}"
        )
    return float(value)
