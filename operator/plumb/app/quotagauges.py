"""The tenant quota gauges' rows, read from the cache's QuotaStore at each scrape: for each
namespace an ElasticQuota governs, per resource, what plumb holds against the quota (the
requests of its pods bound or assumed), the quota's min and its max as CapacityScheduling
reads them (docs/quotas.md), the max in force (the limit an SLO rule set, else the max) and the
attainment it was set from, in base units: cpu in cores, the rest as counted (bytes, devices).

The resources: cpu and memory always (a listed bound that leaves them out makes them 0, which a
dashboard should show), and every other one the quota's min or max names. The max is the
quota's own: a limit its SLO rule sets in its place (``QuotaStore.upper``) is another figure.
Read only; nothing here runs between scrapes.
"""

from __future__ import annotations

from plumb.backend.cache import quotas
from plumb.backend.records import objects, quotaobjects
from plumb.backend.records.quotaobjects import ElasticQuota
from plumb.observability import metrics

ALWAYS = (objects.CPU, objects.MEMORY)


def rows(store: quotas.QuotaStore) -> list[metrics.QuotaRow]:
    """A row per governing quota and resource, by namespace then resource."""
    found = []
    for quota in store:
        used = store.used(quota.namespace)
        lower, upper, enforced = quota.lower, quota.upper, store.upper(quota)
        attained = store.attainment(quota.namespace)
        for name in resources(quota):
            found.append(
                metrics.QuotaRow(
                    namespace=quota.namespace,
                    resource=name,
                    used=base(name, used.get(name, 0)),
                    min=base(name, lower.get(name)),
                    max=bounded(name, upper.get(name)),
                    limit=bounded(name, enforced.get(name)),
                    attainment=attained,
                )
            )
    return found


def resources(quota: ElasticQuota) -> list[str]:
    """cpu, memory and the names its min or max lists that CapacityScheduling compares."""
    named = {*ALWAYS, *quotaobjects.vector(quota.min or {}), *quotaobjects.vector(quota.max or {})}
    return sorted(named)


def bounded(resource: str, amount: int) -> float | None:
    """``base``, None for unlimited."""
    return None if amount >= quotaobjects.UNLIMITED else base(resource, amount)


def base(resource: str, amount: int) -> float:
    """An amount as the cache counts it (millicores for cpu) in its base unit."""
    return amount / 1000 if resource == objects.CPU else float(amount)
