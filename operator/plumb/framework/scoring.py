"""How a batch's nodes are scored: each score plugin's weight and the resource strategy.

kube-scheduler's defaults score every pod; a SchedulingPolicy replaces them for the pods it
governs (policy/engine.py builds its profile), so pods of different profiles never share a batch.
"""

from __future__ import annotations

import dataclasses

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
)
"""kube-scheduler's default weights, in the kernel's SCORE_PLUGINS order."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """The weights (SCORE_PLUGINS order) and NodeResourcesFit's strategy for one batch."""

    weights: tuple[int, ...] = DEFAULT_WEIGHTS
    strategy: str = LEAST_ALLOCATED


DEFAULT = Profile()
