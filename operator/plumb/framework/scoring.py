"""How a batch's nodes are scored: each score plugin's weight, the resource strategy and the
zone health factors.

kube-scheduler's defaults score every pod; a SchedulingPolicy replaces them for the pods it
governs (policy/engine.py builds its profile), so pods of different profiles never share a batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from plumb.framework.plugins import (
    interpodaffinity,
    nodeaffinity,
    noderesourcesfit,
    podtopologyspread,
    tainttoleration,
)

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
BALANCED_ALLOCATION = "BalancedAllocation"

DEFAULT_WEIGHTS = (
    noderesourcesfit.SCORE_WEIGHT,  # NodeResourcesFit
    1,  # NodeResourcesBalancedAllocation
    tainttoleration.SCORE_WEIGHT,
    nodeaffinity.SCORE_WEIGHT,
    podtopologyspread.SCORE_WEIGHT,
    interpodaffinity.SCORE_WEIGHT,
    0,  # ZoneHealth: not a kube-scheduler plugin; only a policy weighs it
)
"""kube-scheduler's default weights, in the kernel's SCORE_PLUGINS order."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """How one batch is scored: the weights (SCORE_PLUGINS order, ZoneHealth's last),
    NodeResourcesFit's strategy, and for zone health the node label naming a zone and each
    zone's factor in (0, 1]. A node scores ZoneHealth round(100 * its zone's factor); a zone
    not listed, or a node without the label, scores 100, as a healthy zone does."""

    weights: tuple[int, ...] = DEFAULT_WEIGHTS
    strategy: str = LEAST_ALLOCATED
    zone_key: str = ""
    zone_factors: Mapping[str, float] = dataclasses.field(default_factory=dict)


DEFAULT = Profile()
