"""CapacityScheduling's PreFilter (scheduler-plugins v0.34.7): a pod of a namespace with an
ElasticQuota is let into a cycle only if its namespace's use stays within the quota's max, and
the use of every quota together within the sum of their mins; pods of namespaces without a quota
are not limited.

What counts besides the pod (PreFilter's nominated requests): the pods nominated to a node of
the same namespace with a priority at least the pod's, against the max and the sum; and the
nominated pods of other namespaces whose quota is not above its min, against the sum. plumb adds
the pods placed before it in the same kernel run (``earlier``): a run decides its pods as if one
at a time, so a run of one tenant's pods cannot overshoot its quota (``admit`` tells a pod that
those earlier pods alone would push over from one that fails on its own).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping

from plumb.backend.cache import quotas
from plumb.backend.records import objects, quotaobjects
from plumb.backend.records.quotaobjects import Bound, ElasticQuota

NAME = "CapacityScheduling"


def over_max(
    pod: objects.PodInfo, quota: ElasticQuota, limit: quotas.QuotaLimit | None = None
) -> str:
    """CapacityScheduling's words; with an SLO rule's limit in force, plumb says which."""
    words = (
        f"Pod {pod.namespace}/{pod.name} is rejected in PreFilter because ElasticQuota "
        f"{quota.namespace} is more than Max"
    )
    if limit is None or limit.bound == quota.upper:
        return words
    return f"{words} ({quotas.limit_sentence(quota, limit)})"


def over_min(pod: objects.PodInfo) -> str:
    return (
        f"Pod {pod.namespace}/{pod.name} is rejected in PreFilter because total ElasticQuota "
        f"used is more than min"
    )


class Admission(enum.Enum):
    """A pod's PreFilter verdict within its kernel run."""

    ADMITTED = "admitted"
    REJECTED = "rejected"  # over a bound on its own: Unschedulable, PostFilter runs
    DEFERRED = "deferred"  # over only with the run's earlier pods: decided in a later run


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    admission: Admission
    message: str = ""
    # For a person (the trace, ``plumb explain``): the figures behind a refusal.
    explained: str = ""


ADMITTED = Verdict(Admission.ADMITTED)


@dataclasses.dataclass(frozen=True, slots=True)
class Nominated:
    """The requests PreFilter adds to the pod's own (nominatedPodsReqInEQWithPodReq and
    nominatedPodsReqWithPodReq)."""

    in_quota: Mapping[str, int]
    everywhere: Mapping[str, int]


def used_over_min(store: quotas.QuotaStore, quota: ElasticQuota) -> bool:
    """ElasticQuotaInfo.usedOverMin: the quota's namespace uses more than its min."""
    return quotaobjects.over(store.used(quota.namespace), {}, quota.lower)


def nominated(
    pod: objects.PodInfo, store: quotas.QuotaStore, others: Iterable[objects.PodInfo]
) -> Nominated:
    """PreFilter's sums over the nominated pods ``others`` (the pod itself is skipped)."""
    in_quota: dict[str, int] = {}
    everywhere: dict[str, int] = {}
    for other in others:
        if other.uid == pod.uid:
            continue
        quota = store.governing(other.namespace)
        if quota is None:
            continue
        asked = quotas.request(other)
        if other.namespace == pod.namespace and other.priority >= pod.priority:
            quotaobjects.add(in_quota, asked)
            quotaobjects.add(everywhere, asked)
        elif other.namespace != pod.namespace and not used_over_min(store, quota):
            quotaobjects.add(everywhere, asked)
    return Nominated(in_quota, everywhere)


def total_min(store: quotas.QuotaStore) -> Bound:
    """The sum of every quota's min, compared with missing scalars at 0."""
    return Bound(quotaobjects.total(quota.lower.values for quota in store), 0)


def total_used(store: quotas.QuotaStore) -> dict[str, int]:
    return quotaobjects.total(store.used(quota.namespace) for quota in store)


def admit(
    pod: objects.PodInfo,
    store: quotas.QuotaStore,
    others: Iterable[objects.PodInfo] = (),
    earlier: Iterable[objects.PodInfo] = (),
) -> Verdict:
    """PreFilter for ``pod``: ``others`` are the pods nominated to nodes, ``earlier`` those the
    same kernel run places before it."""
    quota = store.governing(pod.namespace)
    if quota is None:
        return ADMITTED
    counted = nominated(pod, store, others)
    asked = quotas.request(pod)
    in_quota = quotaobjects.total((asked, counted.in_quota))
    everywhere = quotaobjects.total((asked, counted.everywhere))
    used = dict(store.used(pod.namespace))
    every = total_used(store)
    lowest = total_min(store)
    upper = store.upper(quota)
    if quotaobjects.over(in_quota, used, upper):
        return Verdict(
            Admission.REJECTED,
            over_max(pod, quota, store.limit(quota.namespace)),
            explain_max(quota, store, used, in_quota),
        )
    if quotaobjects.over(quotaobjects.total((every, everywhere)), {}, lowest):
        return Verdict(Admission.REJECTED, over_min(pod), explain_min(every, everywhere, lowest))
    before = list(earlier)
    same = quotaobjects.total(quotas.request(p) for p in before if p.namespace == pod.namespace)
    governed = quotaobjects.total(
        quotas.request(p) for p in before if store.governing(p.namespace) is not None
    )
    if quotaobjects.over(in_quota, quotaobjects.total((used, same)), upper):
        return Verdict(Admission.DEFERRED, over_max(pod, quota, store.limit(quota.namespace)))
    if quotaobjects.over(quotaobjects.total((every, governed, everywhere)), {}, lowest):
        return Verdict(Admission.DEFERRED, over_min(pod))
    return ADMITTED


def explain_max(
    quota: ElasticQuota,
    store: quotas.QuotaStore,
    used: Mapping[str, int],
    asked: Mapping[str, int],
) -> str:
    """ "namespace team-a uses cpu 7.5 of 8 and asks 1 more; its limit is cpu 8 (max cpu 10),
    lowered from ..." (or "its max is ..."): the resources over the bound."""
    upper = store.upper(quota)
    names = _over(asked, used, upper)
    uses = ", ".join(f"{n} {_show(n, used.get(n, 0))} of {_show(n, upper.get(n))}" for n in names)
    more = ", ".join(f"{_show(n, asked.get(n, 0))} {n}" for n in names)
    limit = store.limit(quota.namespace)
    why = (
        quotas.limit_sentence(quota, limit)
        if limit is not None and limit.bound != quota.upper
        else f"its max is {', '.join(f'{n} {_show(n, upper.get(n))}' for n in names)}"
    )
    return f"namespace {quota.namespace} uses {uses} and asks {more} more; {why}"


def explain_min(every: Mapping[str, int], asked: Mapping[str, int], lowest: Bound) -> str:
    """ "all quotas use cpu 15 of the 16 their mins add up to, and this pod asks 2 more"."""
    names = _over(asked, every, lowest)
    uses = ", ".join(
        f"{n} {_show(n, every.get(n, 0))} of the {_show(n, lowest.get(n))}" for n in names
    )
    more = ", ".join(f"{_show(n, asked.get(n, 0))} {n}" for n in names)
    return (
        f"all quotas together use {uses} their mins add up to, and this pod asks {more} more: "
        f"a quota borrows beyond its min only what the others leave of theirs"
    )


def _over(first: Mapping[str, int], second: Mapping[str, int], bound: Bound) -> list[str]:
    names = {*quotaobjects.FIXED, *first}
    return sorted(n for n in names if first.get(n, 0) + second.get(n, 0) > bound.get(n))


def _show(name: str, value: int) -> str:
    return "unlimited" if value >= quotaobjects.UNLIMITED else quotaobjects.readable(name, value)
