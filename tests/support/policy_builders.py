"""Chained builders for SchedulingPolicy bodies:
``make_policy("web").labels(app="web").spread(ZONE, max_skew=1).budget(3).obj()``."""

from __future__ import annotations

import copy
import re
from typing import Any, Self

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


class PolicyBuilder:
    def __init__(self, name: str, namespace: str) -> None:
        self._body: dict[str, Any] = {
            "apiVersion": "scheduling.plumb.dev/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "generation": 1,
            },
            "spec": {"selector": {"matchLabels": {"app": name}}},
        }

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._body["spec"]
        return spec

    def generation(self, generation: int) -> Self:
        self._body["metadata"]["generation"] = generation
        return self

    def uid(self, uid: str) -> Self:
        self._body["metadata"]["uid"] = uid
        return self

    def labels(self, **labels: str) -> Self:
        """Replace matchLabels (``labels()`` leaves none)."""
        self._spec["selector"]["matchLabels"] = dict(labels)
        return self

    def expression(self, key: str, operator: str, *values: str) -> Self:
        term: dict[str, Any] = {"key": key, "operator": operator}
        if values:
            term["values"] = list(values)
        self._spec["selector"].setdefault("matchExpressions", []).append(term)
        return self

    def priority(self, priority: int) -> Self:
        self._spec["priority"] = priority
        return self

    def spread(
        self,
        key: str = ZONE,
        max_skew: int = 1,
        *,
        min_domains: int | None = None,
        hard: bool = True,
    ) -> Self:
        rule: dict[str, Any] = {
            "topologyKey": key,
            "maxSkew": max_skew,
            "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        }
        if min_domains is not None:
            rule["minDomains"] = min_domains
        self._spec.setdefault("topology", []).append(rule)
        return self

    def scoring(self, strategy: str | None = None, **weights: int) -> Self:
        scoring = self._spec.setdefault("scoring", {})
        if strategy is not None:
            scoring["strategy"] = strategy
        if weights:
            scoring.setdefault("weights", {}).update(
                {"zoneHealth" if k == "zone_health" else k: v for k, v in weights.items()}
            )
        return self

    def zone_health(
        self, window: str = "5m", stale_after: str = "2m", key: str | None = None
    ) -> Self:
        self._spec["zoneHealth"] = {"window": window, "staleAfter": stale_after}
        if key is not None:
            self._spec["zoneHealth"]["topologyKey"] = key
        return self

    def budget(
        self,
        max_violations: int = 3,
        window: str = "10m",
        threshold: float = 0.15,
        on_exhausted: str = "Block",
    ) -> Self:
        self._spec["deviationBudget"] = {
            "maxViolations": max_violations,
            "window": window,
            "failureRateThreshold": threshold,
            "onExhausted": on_exhausted,
        }
        return self

    def gangs(self, key: str = ZONE, *, hard: bool = True) -> Self:
        """spec.gangs: keep each pod group in one domain of ``key``."""
        self._spec["gangs"] = {
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        }
        return self

    def set(self, path: str, value: Any) -> Self:
        """Put ``value`` at a path such as ``spec.topology[0].maxSkew`` (for malformed
        objects the schema would refuse)."""
        steps: list[str | int] = [
            int(index) if index else field for field, index in _STEP.findall(path)
        ]
        target: Any = self._body
        for step in steps[:-1]:
            target = target[step]
        target[steps[-1]] = value
        return self

    def drop(self, path: str) -> Self:
        steps = path.split(".")
        target: Any = self._body
        for step in steps[:-1]:
            target = target[step]
        del target[steps[-1]]
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


def make_policy(name: str = "web", namespace: str = "shop") -> PolicyBuilder:
    return PolicyBuilder(name, namespace)
