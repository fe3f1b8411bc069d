"""NodeResourcesFit: a node fits when every requested resource is free there (filter), and
LeastAllocated prefers the emptier nodes over cpu and memory (score, weight 1); a
SchedulingPolicy may score with MostAllocated or BalancedAllocation instead (framework/scoring.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from plumb.backend import objects

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"
SCORE_WEIGHT = 1
# The resources the score counts, each with weight 1, as kube-scheduler's default args.
SCORED_RESOURCES = (objects.CPU, objects.MEMORY)


def insufficient(resource: str) -> str:
    """The reason kube-scheduler gives for a resource a node lacks: "Insufficient cpu"."""
    if resource == objects.PODS:
        return TOO_MANY_PODS
    return f"Insufficient {resource}"


def reasons(bits: int, resources: Sequence[str]) -> Iterator[str]:
    """The reasons for one node from the kernel's insufficient-resources bitmask."""
    for column, resource in enumerate(resources):
        if bits >> column & 1:
            yield insufficient(resource)
