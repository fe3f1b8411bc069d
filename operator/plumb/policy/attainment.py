"""plumb's own scheduling SLO per tenant: each namespace's pods bound lately and how long each
waited, and the share that met a policy's ``within`` over its window.

A pod meets the SLO when it is bound within ``within`` seconds of entering plumb's queue (the
clock of kube-scheduler's pod scheduling SLI); a pod still waiting longer than that counts as a
miss now. Only the namespaces an SLO-elastic policy names are recorded (``watch``), and each
keeps the last ``HORIZON`` seconds. No samples: attainment 1 (nothing was missed).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping

from plumb.backend.records import objects, specs

HORIZON = 24 * 3600.0
"""The longest window a policy may set."""


class SchedulingOutcomes:
    """Bound pods of the watched namespaces: (when, seconds waited, labels)."""

    def __init__(self) -> None:
        self._bound: dict[str, collections.deque[tuple[float, float, Mapping[str, str]]]] = {}

    def watch(self, namespaces: Iterable[str]) -> None:
        """Record these namespaces from now on (and only these)."""
        wanted = set(namespaces)
        for namespace in list(self._bound):
            if namespace not in wanted:
                del self._bound[namespace]
        for namespace in wanted:
            self._bound.setdefault(namespace, collections.deque())

    def bound(self, pod: objects.PodInfo, waited: float, now: float) -> None:
        """A pod was bound after waiting ``waited`` seconds (called on every binding: cheap
        for a namespace no policy watches)."""
        samples = self._bound.get(pod.namespace)
        if samples is None:
            return
        samples.append((now, waited, pod.labels))
        while samples and samples[0][0] < now - HORIZON:
            samples.popleft()

    def attainment(
        self,
        namespace: str,
        selector: specs.LabelSelector,
        *,
        within: float,
        window: float,
        now: float,
        waiting: Iterable[tuple[objects.PodInfo, float]] = (),
    ) -> tuple[float, int]:
        """(share met, pods counted) of the selected pods bound in the last ``window`` and
        those still waiting past ``within`` (``waiting``: (pod, first queued))."""
        met = total = 0
        for at, waited, labels in self._bound.get(namespace, ()):
            if at < now - window or not selector.matches(labels):
                continue
            total += 1
            met += waited <= within
        for pod, since in waiting:
            if pod.namespace == namespace and now - since > within and selector.matches(pod.labels):
                total += 1
        return (met / total if total else 1.0), total
