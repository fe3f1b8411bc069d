"""SLO-elastic quota limits on the leader: every evaluation period, each SchedulingPolicy with a
``spec.quotaSLO`` reads its tenant's SLO attainment (plumb's own scheduling SLO, or a PromQL
query), judges the breach and sets the limit its namespace's ElasticQuota enforces
(policy/slo.py's rule); every change is recorded: the policy's status (``status.quota``), a
``QuotaLimitLowered`` / ``QuotaLimitRestored`` event on the policy, a log line, the metrics,
and the words of every refusal it causes (``capacityscheduling.over_max``). A limit raised
retries the pods the quota refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from plumb import scheduler as scheduler_module
from plumb.backend.cache import quotas
from plumb.backend.records import quotaobjects
from plumb.backend.records.quotaobjects import Bound, ElasticQuota
from plumb.policy import slo
from plumb.policy import spec as spec_module
from plumb.scheduler import feed

logger = logging.getLogger(__name__)

TICK = 1.0
"""How often the loop looks for a policy whose period has come."""
QUERY_TIMEOUT = 10.0
JSON = dict[str, Any]
Query = Callable[[str, str], Awaitable[float]]
"""(url, PromQL) → the attainment; raises AttainmentError."""


class AttainmentError(RuntimeError):
    """The attainment could not be read (the query failed or did not give one value)."""


async def prometheus_query(url: str, query: str) -> float:
    """One instant query against a Prometheus: its single value."""
    timeout = aiohttp.ClientTimeout(total=QUERY_TIMEOUT)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"{url}/api/v1/query", params={"query": query}) as response,
        ):
            body = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
        raise AttainmentError(f"GET {url}/api/v1/query: {error}") from error
    return single_value(body)


def single_value(body: Any) -> float:
    """The one value of a Prometheus query answer (a scalar, or a vector of one sample)."""
    if not isinstance(body, Mapping) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, Mapping) else body
        raise AttainmentError(f"the query failed: {error}")
    data = body.get("data") or {}
    kind, result = data.get("resultType"), data.get("result")
    if not isinstance(result, list):
        raise AttainmentError(f"the query's answer has no result: {body}")
    try:
        if kind == "scalar":
            value = float(result[1])
        elif kind == "vector" and isinstance(result, list) and len(result) == 1:
            value = float(result[0]["value"][1])
        else:
            raise AttainmentError(f"the query gave {len(result)} {kind} results, not one value")
    except (TypeError, KeyError, IndexError, ValueError) as error:
        raise AttainmentError(f"the query's answer has no value: {error}") from error
    if not math.isfinite(value):
        raise AttainmentError(f"the query gave {value}, not a number in [0, 1]")
    return min(1.0, max(0.0, value))


@dataclasses.dataclass(kw_only=True)
class _Tenant:
    """One policy's evaluation state."""

    next_at: float = 0.0
    breach: slo.Breach | None = None
    error: str = ""


class QuotaLimits:
    """Moves the quotas' limits as their tenants' SLOs say, while this replica leads."""

    def __init__(
        self,
        scheduler: scheduler_module.Scheduler,
        *,
        query: Query = prometheus_query,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._scheduler = scheduler
        self._query = query
        self._wall = wall
        self._tenants: dict[spec_module.Key, _Tenant] = {}

    async def run(self) -> None:
        while True:
            await self.evaluate_due()
            await asyncio.sleep(TICK)

    def policies(self) -> list[spec_module.Policy]:
        """The SLO-elastic policies in force, one per namespace (the highest priority, then
        the first by name, governs: the others are ignored)."""
        chosen: dict[str, spec_module.Policy] = {}
        ranked = sorted(
            (p for p in self._scheduler.policies.store.active() if p.quota_slo is not None),
            key=lambda p: (-p.priority, p.name),
        )
        for policy in ranked:
            chosen.setdefault(policy.namespace, policy)
        return list(chosen.values())

    async def evaluate_due(self) -> None:
        s = self._scheduler
        policies = self.policies()
        s.state.slo.watch(p.namespace for p in policies)
        keys = {p.key for p in policies}
        for key in [k for k in self._tenants if k not in keys]:
            del self._tenants[key]
        for namespace in {q.namespace for q in s.cache.quotas}:
            if not any(p.namespace == namespace for p in policies):
                self._set(namespace, None, None)
                s.cache.quotas.set_attainment(namespace, None)
        now = s.queue.now()
        for policy in policies:
            tenant = self._tenants.setdefault(policy.key, _Tenant())
            if now < tenant.next_at:
                continue
            assert policy.quota_slo is not None
            tenant.next_at = now + policy.quota_slo.period
            await self.evaluate(policy, tenant)

    async def evaluate(self, policy: spec_module.Policy, tenant: _Tenant) -> None:
        """Reads the attainment and sets the limit (no quota in the namespace: nothing)."""
        s = self._scheduler
        rule = policy.quota_slo
        assert rule is not None
        quota = s.cache.quotas.governing(policy.namespace)
        if quota is None:
            s.policies.quota_status(policy.key, None)
            return
        try:
            attainment = await self._attainment(policy, rule)
        except AttainmentError as error:
            tenant.error = str(error)
            logger.warning("SLO of SchedulingPolicy %s/%s: %s", *policy.key, error)
            s.policies.quota_status(policy.key, self._status(policy, quota, tenant))
            return
        tenant.error = ""
        s.cache.quotas.set_attainment(quota.namespace, attainment)
        tenant.breach = slo.judge(rule, attainment, s.queue.now(), tenant.breach)
        bound = slo.limit(rule, quota.lower, quota.upper, tenant.breach.steps)
        before = s.cache.quotas.limit(quota.namespace)
        limit = None
        if bound != quota.upper:
            limit = quotas.QuotaLimit(
                bound=bound,
                policy=f"{policy.namespace}/{policy.name}",
                attainment=attainment,
                steps=tenant.breach.steps,
                since=self._wall(),
                before=s.cache.quotas.upper(quota),
            )
            if before is not None and before == limit:
                limit = before  # unchanged: its sentence keeps the attainment of the change
        self._set(quota.namespace, limit, policy, quota=quota, attainment=attainment)
        s.policies.quota_status(policy.key, self._status(policy, quota, tenant))

    async def _attainment(self, policy: spec_module.Policy, rule: slo.QuotaSLO) -> float:
        if rule.source == slo.PROMETHEUS:
            return await self._query(rule.url, rule.query)
        s = self._scheduler
        share, _ = s.state.slo.attainment(
            policy.namespace,
            policy.selector,
            within=rule.within,
            window=rule.window,
            now=s.queue.now(),
            waiting=s.queue.waiting(policy.namespace),
        )
        return share

    def _set(
        self,
        namespace: str,
        limit: quotas.QuotaLimit | None,
        policy: spec_module.Policy | None,
        *,
        quota: ElasticQuota | None = None,
        attainment: float = 1.0,
    ) -> None:
        s = self._scheduler
        store = s.cache.quotas
        before = store.upper(quota) if quota is not None else None
        if not store.set_limit(namespace, limit):
            return
        if quota is None or policy is None or before is None:
            return
        after = store.upper(quota)
        lowered = _lower(after, before)
        reason = "QuotaLimitLowered" if lowered else "QuotaLimitRestored"
        note = (
            quotas.limit_sentence(quota, limit)
            if limit is not None
            else f"its limit is its max again: its SLO attainment is {attainment:.0%}"
        )
        logger.info("ElasticQuota %s: %s", quota.key, note)
        s.state.recorder.policy_event(
            namespace=policy.namespace,
            name=policy.name,
            uid=policy.uid,
            kind="Normal",
            reason=reason,
            note=f"ElasticQuota {quota.key}: {note}",
        )
        if not lowered:
            s.queue.move_all(feed.QUOTA_HELPS)

    def _status(self, policy: spec_module.Policy, quota: ElasticQuota, tenant: _Tenant) -> JSON:
        """``status.quota`` of the policy."""
        store = self._scheduler.cache.quotas
        limit = store.limit(quota.namespace)
        names = sorted({*(quota.min or {}), *(quota.max or {})}) or ["cpu", "memory"]
        status: JSON = {
            "elasticQuota": quota.key,
            "limit": _shown(store.upper(quota), names),
            "max": _shown(quota.upper, names),
            "min": _shown(quota.lower, names),
        }
        if tenant.breach is not None:
            status["attainment"] = f"{tenant.breach.attainment:.4f}"
            status["steps"] = tenant.breach.steps
            if tenant.breach.below_since is not None:
                since = self._wall() - (self._scheduler.queue.now() - tenant.breach.below_since)
                status["breachedSince"] = _time(since)
        if limit is not None:
            status["lastAdjustment"] = _time(limit.since)
            status["message"] = quotas.limit_sentence(quota, limit)
        if tenant.error:
            status["message"] = f"the attainment could not be read: {tenant.error}"
        return status


def _lower(after: Bound, before: Bound) -> bool:
    return any(after.get(name) < before.get(name) for name in {*after.values, *before.values})


def _shown(bound: Bound, names: list[str]) -> dict[str, str]:
    return {
        name: quotaobjects.readable(name, bound.get(name))
        for name in names
        if bound.get(name) < quotaobjects.UNLIMITED
    }


def _time(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC).replace(microsecond=0)
    return moment.isoformat().replace("+00:00", "Z")
