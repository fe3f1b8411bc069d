"""Tenant quotas as plumb reads them: scheduler-plugins' ElasticQuota (scheduling.x-k8s.io/v1alpha1,
one per namespace: ``min`` guaranteed, ``max`` the ceiling) and the resource vectors its
CapacityScheduling plugin compares, with that plugin's reading of missing names.

CapacityScheduling holds a quota's bounds and use as kube-scheduler's ``framework.Resource``:
cpu (millicores), memory, ephemeral-storage and pods are always there, other names only if they
are scalar resources (extended resources such as ``nvidia.com/gpu``, ``hugepages-*``,
``kubernetes.io/*``, ``attachable-volumes-*``). So a bound that is not given at all is 0 (min)
or unlimited (max) on cpu, memory and ephemeral-storage, but a bound that lists only some names
is 0 on the fixed names it leaves out (an ElasticQuota whose max names only cpu lets no pod
that asks for memory in), while a scalar it leaves out is 0 (min) or unlimited (max). ``Bound``
keeps that reading in one place; ``over`` is the plugin's comparison (cmp2).

A pod counts its effective request as plumb's NodeResourcesFit counts it (``PodInfo.requests``:
sidecars and pod-level requests as kube-scheduler reads them), where CapacityScheduling sums
the containers and takes the largest init container without those rules; the two differ only
for pods with restartable init containers or pod-level requests (docs/quotas.md, Limits).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from plumb.backend.records import objects
from plumb.k8s import quantities

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
KIND = "ElasticQuota"
PLURAL = "elasticquotas"
FIXED = (objects.CPU, objects.MEMORY, objects.EPHEMERAL_STORAGE, objects.PODS)
"""framework.Resource's own fields: always compared, 0 when a listed bound leaves them out."""
UNLIMITED = sys.maxsize
"""math.MaxInt64: UpperBoundOfMax, a missing max."""


def scalar(name: str) -> bool:
    """schedutil.IsScalarResourceName: the names framework.Resource keeps besides FIXED."""
    return "/" in name or name.startswith((objects.HUGEPAGES_PREFIX, "attachable-volumes-"))


def vector(raw: Mapping[str, int]) -> dict[str, int]:
    """A resource list as framework.Resource holds it: FIXED names and scalars, others
    dropped."""
    return {name: value for name, value in raw.items() if name in FIXED or scalar(name)}


@dataclasses.dataclass(frozen=True, slots=True)
class Bound:
    """A quota's min or max as CapacityScheduling compares against it: ``values`` has every
    FIXED name; a scalar it lacks counts ``otherwise``."""

    values: Mapping[str, int]
    otherwise: int

    @classmethod
    def of(cls, raw: Mapping[str, int] | None, missing: int) -> Bound:
        """From the spec's list (None: not given), ``missing`` being 0 for min and UNLIMITED
        for max (newElasticQuotaInfo and makeResourceListForBound)."""
        if raw is None:
            fixed = {name: missing for name in FIXED if name != objects.PODS}
            return cls({**fixed, objects.PODS: 0}, missing)
        values = {name: 0 for name in FIXED}
        values.update(vector(raw))
        return cls(values, missing)

    def get(self, name: str) -> int:
        return self.values.get(name, self.otherwise)


def over(first: Mapping[str, int], second: Mapping[str, int], bound: Bound) -> bool:
    """cmp2: whether first + second exceeds ``bound`` on a FIXED name, or on a scalar that
    ``first`` names."""
    for name in FIXED:
        if first.get(name, 0) + second.get(name, 0) > bound.get(name):
            return True
    return any(
        value + second.get(name, 0) > bound.get(name)
        for name, value in first.items()
        if name not in FIXED
    )


def readable(name: str, value: int) -> str:
    """One amount as a person reads it: cpu in cores (7.5), bytes in Gi or Mi when whole."""
    if name == objects.CPU:
        return f"{value / 1000:g}"
    if name in (objects.MEMORY, objects.EPHEMERAL_STORAGE) or name.startswith(
        objects.HUGEPAGES_PREFIX
    ):
        for unit, size in (("Gi", 1024**3), ("Mi", 1024**2)):
            if value and value % size == 0:
                return f"{value // size}{unit}"
    return str(value)


def add(into: dict[str, int], other: Mapping[str, int], sign: int = 1) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + sign * value


def total(vectors: Iterable[Mapping[str, int]]) -> dict[str, int]:
    summed: dict[str, int] = {}
    for each in vectors:
        add(summed, each)
    return summed


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ElasticQuota:
    """One ElasticQuota: its bounds as given (None: not given) and as compared."""

    namespace: str
    name: str
    uid: str
    creation_timestamp: str
    resource_version: str = dataclasses.field(compare=False)
    min: Mapping[str, int] | None
    max: Mapping[str, int] | None
    # status.used as last written (by plumb or scheduler-plugins' controller).
    used: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def lower(self) -> Bound:
        return Bound.of(self.min, 0)

    @property
    def upper(self) -> Bound:
        return Bound.of(self.max, UNLIMITED)


class QuotaError(ValueError):
    """An ElasticQuota plumb cannot read (an unparsable quantity)."""


def parse_quota(body: Mapping[str, Any]) -> ElasticQuota:
    """An ElasticQuota from its body; QuotaError when a quantity does not parse."""
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}

    def listed(field: str) -> dict[str, int] | None:
        raw = spec.get(field)
        if raw is None:
            return None
        try:
            return {str(name): objects.amount(str(name), text) for name, text in raw.items()}
        except quantities.QuantityError as error:
            raise QuotaError(f"spec.{field}: {error}") from error

    return ElasticQuota(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        creation_timestamp=str(metadata.get("creationTimestamp") or ""),
        resource_version=str(metadata.get("resourceVersion") or ""),
        min=listed("min"),
        max=listed("max"),
        used={str(k): str(v) for k, v in (status.get("used") or {}).items()},
    )
