"""How a batch is filtered and scored: the plugins a profile enables, each score plugin's
weight, the plugins' arguments, the resource strategy and the zone health factors.

A profile comes from kube-scheduler's defaults or from a KubeSchedulerConfiguration profile
(framework/schedconfig/); a SchedulingPolicy replaces its weights and strategy for the pods it
governs (policy/engine.py), so pods of different profiles never share a batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from plumb.backend.records import specs
from plumb.extensions import enabling
from plumb.framework import emulation
from plumb.framework.plugins import (
    interpodaffinity,
    nodeaffinity,
    noderesourcesfit,
    podtopologyspread,
    tainttoleration,
    volumecapacity,
)

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
BALANCED_ALLOCATION = "BalancedAllocation"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"

DEFAULT_RESOURCES = (("cpu", 1), ("memory", 1))
"""NodeResourcesFit's and NodeResourcesBalancedAllocation's default resources and weights."""

FILTERS = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
    # Last, when its gate is on (v1.36 on by default); inert with the gate off, as
    # kube-scheduler's (nodedeclaredfeatures.py).
    "NodeDeclaredFeatures",
)
"""The filter plugins plumb runs, in kube-scheduler's default order."""

DEFAULT_WEIGHTS = (
    noderesourcesfit.SCORE_WEIGHT,  # NodeResourcesFit
    1,  # NodeResourcesBalancedAllocation
    tainttoleration.SCORE_WEIGHT,
    nodeaffinity.SCORE_WEIGHT,
    podtopologyspread.SCORE_WEIGHT,
    interpodaffinity.SCORE_WEIGHT,
    0,  # ZoneHealth: not a kube-scheduler plugin; only a policy weighs it
    1,  # ImageLocality
    1,  # VolumeBinding: scores only with StorageCapacityScoring on (v1.37's default)
    2,  # DynamicResources: scores from v1.35 (prioritized lists); 0 for pods without claims
)
"""kube-scheduler's default weights, in the kernel's SCORE_PLUGINS order."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """How one batch is filtered and scored.

    - ``name``: the schedulerName the profile serves ("" for kube-scheduler's defaults unnamed);
      ``config``: the hash of the configuration file it came from ("" for built-in defaults).
    - ``weights``: per score plugin, in kernel/contract.py's SCORE_PLUGINS order (0: disabled).
    - ``filters``: the enabled filter plugins (names from FILTERS); a plugin not listed is
      not run as a filter (its score, if weighed, still is).
    - ``preemption``: whether DefaultPreemption runs (PostFilter) for a pod no node fits.
    - NodeResourcesFit's scoring strategy: ``strategy`` (LeastAllocated, MostAllocated,
      RequestedToCapacityRatio; a policy may also make it BalancedAllocation), over
      ``fit_resources`` (name, weight), and for RequestedToCapacityRatio ``fit_shape``:
      (utilization 0-100, score 0-10) points in increasing utilization. Its filter skips the
      extended resources named in ``fit_ignored`` (ignoredResources, or the extenders'
      ignoredByScheduler resources) or whose prefix before "/" is in ``fit_ignored_groups``.
    - ``balanced_resources``: NodeResourcesBalancedAllocation's (name, weight).
    - PodTopologySpread's defaults for pods without constraints of their own:
      ``spread_defaulting`` "System" (kube-scheduler's built-in ones) or "List"
      (``spread_defaults``, their selectors filled from the pod's workloads).
    - ``hard_pod_affinity_weight``: InterPodAffinity's weight for existing pods' required
      affinity terms the incoming pod matches.
    - NodeAffinity's ``addedAffinity``: ``added_required`` terms (ORed, as a pod's; None: none)
      every pod must also match, and ``added_preferred`` (weight, term) pairs scored for all.
    - zone health: the node label naming a zone and each zone's factor in (0, 1]. A node
      scores ZoneHealth round(100 * its zone's factor); a zone not listed, or a node without
      the label, scores 100, as a healthy zone does.
    - ``capacity_shape``: VolumeBindingArgs.shape, (utilization 0-100, score 0-10) points the
      storage-capacity score follows (plugins/volumecapacity.py); read only where
      ``kube``'s StorageCapacityScoring gate is on.
    - ``extensions``: the Python plugins the profile enables (extensions/enabling.py), in the
      order of their first extension point.
    """

    name: str = ""
    config: str = ""
    weights: tuple[int, ...] = DEFAULT_WEIGHTS
    filters: frozenset[str] = frozenset(FILTERS)
    preemption: bool = True
    strategy: str = LEAST_ALLOCATED
    fit_resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES
    fit_shape: tuple[tuple[int, int], ...] = ()
    fit_ignored: frozenset[str] = frozenset()
    fit_ignored_groups: frozenset[str] = frozenset()
    balanced_resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES
    spread_defaulting: str = "System"
    spread_defaults: tuple[specs.SpreadConstraint, ...] = ()
    hard_pod_affinity_weight: int = interpodaffinity.HARD_POD_AFFINITY_WEIGHT
    added_required: tuple[specs.NodeSelectorTerm, ...] | None = None
    added_preferred: tuple[tuple[int, specs.NodeSelectorTerm], ...] = ()
    zone_key: str = ""
    zone_factors: Mapping[str, float] = dataclasses.field(default_factory=dict)
    kube: emulation.Emulation = emulation.NEWEST_EMULATION
    capacity_shape: volumecapacity.Shape = volumecapacity.DEFAULT_SHAPE
    extensions: tuple[enabling.Enabled, ...] = ()


DEFAULT = Profile()
