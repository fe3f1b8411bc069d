"""NodeResourcesFit: a node fits when every requested resource is free there (filter), and
its scoring strategy (LeastAllocated by default, over cpu and memory) scores the resources a
profile names (score, weight 1); a SchedulingPolicy may score with MostAllocated or
BalancedAllocation instead (framework/scoring.py).

Which resources a resource score can read is kube-scheduler's resource_allocation.go (shared
with NodeResourcesBalancedAllocation): cpu and memory always; ephemeral-storage always;
a scalar resource (extended, hugepages-, attachable-volumes-, kubernetes.io/-prefixed) only
for a pod requesting it; any other name (pods among them) never. A node with none of a resource
leaves it out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from plumb.backend.records import objects

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"
SCORE_WEIGHT = 1
# The resources the score counts, each with weight 1, as kube-scheduler's default args.
SCORED_RESOURCES = (objects.CPU, objects.MEMORY)
# How a resource score reads a resource (``score_kind``).
ALWAYS = "always"  # cpu, memory, ephemeral-storage
IF_REQUESTED = "if-requested"  # a scalar resource: only for a pod requesting it
# kube-scheduler's config.MaxCustomPriorityScore: RequestedToCapacityRatio's shape scores are
# 0-10, scaled to 0-100 (MaxNodeScore / MaxCustomPriorityScore).
MAX_CUSTOM_PRIORITY_SCORE = 10


def score_kind(resource: str) -> str | None:
    """ALWAYS, IF_REQUESTED or None (never scored) for a resource a profile names (see the
    module doc; schedutil.IsScalarResourceName)."""
    if resource in (objects.CPU, objects.MEMORY, objects.EPHEMERAL_STORAGE):
        return ALWAYS
    scalar = (
        resource.startswith(("hugepages-", "attachable-volumes-"))
        or "kubernetes.io/" in resource
        or ("/" in resource and not resource.startswith("requests."))
    )
    return IF_REQUESTED if scalar else None


def fit_ignored(resource: str, names: frozenset[str], groups: frozenset[str]) -> bool:
    """fitsRequest's skip: an extended resource in ignoredResources, or whose group (the part
    before "/") is in ignoredResourceGroups: the filter does not check it."""
    native = "/" not in resource or "kubernetes.io/" in resource
    if native or resource.startswith("requests."):
        return False
    return resource in names or resource.split("/", 1)[0] in groups


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
