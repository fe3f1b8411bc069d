"""The four volume plugins together: a pod's PreFilter verdict, its per-node filter verdicts in
kube-scheduler's plugin order, and the binding plan for the node it is placed on.

kube-scheduler v1.34 runs PreFilter plugins in profile order (VolumeRestrictions,
NodeVolumeLimits, VolumeBinding, VolumeZone among them, after NodeResourcesFit) and stops at the
first UnschedulableAndUnresolvable one; the pod then fits nowhere and FailedScheduling reads
``0/<nodes> nodes are available: <message>. <PostFilter message>``. Filters run per node in the
same order and stop at the first plugin that fails; each reason of that plugin counts once in the
``<count> <reason>`` histogram (VolumeBinding can give several reasons for one node).

A pod without claims costs nothing here: ``verdicts`` returns ``NO_VERDICTS`` at once.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from plumb.backend.cache import snapshot, volumes
from plumb.backend.records import objects
from plumb.framework.plugins import (
    nodevolumelimits,
    volumebinding,
    volumerestrictions,
    volumezone,
)

PLUGINS = (volumerestrictions.NAME, nodevolumelimits.NAME, volumebinding.NAME, volumezone.NAME)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PreFilterFailure:
    """A PreFilter plugin rejected the pod on every node (or, code Error, failed the cycle).

    ``message`` is what kube-scheduler puts after ``0/<nodes> nodes are available: `` (for
    Error, the whole FailedScheduling message)."""

    plugin: str
    code: str
    message: str

    @property
    def unresolvable(self) -> bool:
        """Preemption is not tried (UnschedulableAndUnresolvable, or an error)."""
        return self.code != volumes.UNSCHEDULABLE


@dataclasses.dataclass(frozen=True, kw_only=True)
class FilterVerdict:
    """Nodes failing one plugin with one reason: ``fails[i]`` is node i of the statics."""

    plugin: str
    reason: str
    unresolvable: bool
    fails: snapshot.BoolArray


@dataclasses.dataclass(frozen=True, kw_only=True)
class VolumeVerdicts:
    """The volume plugins' word on a pod. ``filters`` are in plugin order; a node appears under
    at most one plugin (the first that fails it) but may have several VolumeBinding reasons.
    ``claims`` is what VolumeBinding's PreFilter found, for ``plan``."""

    prefilter: PreFilterFailure | None = None
    filters: tuple[FilterVerdict, ...] = ()
    claims: volumebinding.PodClaims = dataclasses.field(default_factory=volumebinding.PodClaims)

    @property
    def needs_plan(self) -> bool:
        """Whether placing the pod binds or provisions volumes (unbound delayed claims): such a
        pod goes alone, gets a ``plan`` for its node, and PreBind before its Binding."""
        return self.prefilter is None and bool(self.claims.delayed)

    def failing(self, n: int) -> snapshot.BoolArray:
        """Where any volume plugin fails the node (every node after a PreFilter failure)."""
        if self.prefilter is not None:
            return np.ones(n, dtype=np.bool_)
        fails = np.zeros(n, dtype=np.bool_)
        for verdict in self.filters:
            fails |= verdict.fails
        return fails


NO_VERDICTS = VolumeVerdicts()


def verdicts(
    pod: objects.PodInfo,
    statics: snapshot.NodeStatics,
    store: volumes.Volumes,
    in_use: volumes.ClaimUse,
    *,
    drivers: int = nodevolumelimits.DRIVERS_UNCHECKED,
) -> VolumeVerdicts:
    """The pod's PreFilter verdict, else its per-node filter verdicts over the statics;
    ``drivers`` is NodeVolumeLimits' driver check in force (nodevolumelimits.driver_check)."""
    if not pod.claims:
        return NO_VERDICTS
    failure = volumerestrictions.prefilter(pod, store)
    if failure is not None:
        return _rejected(volumerestrictions.NAME, failure)
    failure, claims = volumebinding.prefilter(pod, store)
    if failure is not None:
        return _rejected(volumebinding.NAME, failure)
    failure, topologies = volumezone.prefilter(pod, store)
    if failure is not None:
        return _rejected(volumezone.NAME, failure)

    n = len(statics)
    taken = np.zeros(n, dtype=np.bool_)  # nodes an earlier plugin failed already
    filters: list[FilterVerdict] = []

    def add(plugin: str, reason: str, unresolvable: bool, fails: snapshot.BoolArray) -> None:
        fails = fails & ~taken
        if fails.any():
            filters.append(
                FilterVerdict(plugin=plugin, reason=reason, unresolvable=unresolvable, fails=fails)
            )

    add(
        volumerestrictions.NAME,
        volumerestrictions.RWOP_CONFLICT,
        volumerestrictions.UNRESOLVABLE,
        volumerestrictions.filter(pod, statics, store, in_use),
    )
    taken = _union(taken, filters)
    for reason, fails in nodevolumelimits.filter(pod, statics, store, in_use, drivers).items():
        add(nodevolumelimits.NAME, reason, nodevolumelimits.UNRESOLVABLE, fails)
    taken = _union(taken, filters)
    for reason, fails in volumebinding.filter(statics, store, claims).items():
        add(volumebinding.NAME, reason, volumebinding.UNRESOLVABLE, fails)
    taken = _union(taken, filters)
    add(
        volumezone.NAME,
        volumezone.CONFLICT,
        volumezone.UNRESOLVABLE,
        volumezone.filter(statics, topologies),
    )
    return VolumeVerdicts(filters=tuple(filters), claims=claims)


def _union(taken: snapshot.BoolArray, filters: list[FilterVerdict]) -> snapshot.BoolArray:
    for verdict in filters:
        taken = taken | verdict.fails
    return taken


def _rejected(plugin: str, failure: tuple[str, str]) -> VolumeVerdicts:
    code, message = failure
    return VolumeVerdicts(prefilter=PreFilterFailure(plugin=plugin, code=code, message=message))


def plan(
    pod: objects.PodInfo,
    node: objects.NodeInfo,
    store: volumes.Volumes,
    verdict: VolumeVerdicts | None = None,
) -> volumes.BindingPlan:
    """VolumeBinding's decision for the node the pod was placed on (kube-scheduler's Reserve):
    which PV each unbound WaitForFirstConsumer claim binds to (the smallest that fits), and
    which claims are provisioned on the node. ``verdict`` is the pod's ``verdicts`` result from
    this cycle; without it PreFilter is run again. Raises ValueError if the node does not fit."""
    if verdict is None:
        failure, claims = volumebinding.prefilter(pod, store)
        if failure is not None:
            raise ValueError(f"pod {pod.namespace}/{pod.name}: {failure[1]}")
    else:
        claims = verdict.claims
    return volumebinding.plan(pod, node, store, claims)


def histogram(verdict: VolumeVerdicts) -> dict[str, int]:
    """reason -> nodes failing with it, as kube-scheduler counts them (a test and debug aid)."""
    return {v.reason: int(v.fails.sum()) for v in verdict.filters}
