"""kube-scheduler's FailedScheduling messages for the volume scenarios on five nodes, as the
integration tests hold plumb's against them: the filters' part, the same from v1.34.4 to v1.37.2,
and the PostFilters' part, which loses DynamicResources' words in v1.37 (``not_helpful``,
``rwop_suffix`` by the minor release)."""

from __future__ import annotations

# As recorded from the real binary by test_kube_scheduler_volume_messages
# (tests/integration/test_volume_prebind.py). After the filters' part comes its PostFilters':
# DynamicResources ("no new claims to deallocate"), then DefaultPreemption. When a PreFilter
# rejected the pod, DynamicResources' PreFilter never ran, its PostFilter finds no state and fails
# with the CycleState's "not found", and that error is all the PostFilter part says.
_DRA = " no new claims to deallocate,"
_NOT_HELPFUL = "Preemption is not helpful for scheduling"
_NO_VICTIMS = "No preemption victims found for incoming pod"


def not_helpful(minor: int) -> str:
    """The PostFilters' part for a pod no eviction can help (up to v1.36 DynamicResources'
    words first; v1.37's dynamicresources.go PostFilter says nothing for a pod without claims
    of its own)."""
    words = _DRA if minor < 37 else ""
    return f"{words} preemption: 0/5 nodes are available: 5 {_NOT_HELPFUL}."


def rwop_suffix(minor: int) -> str:
    """The PostFilters' part when preemption searched every node and found no victims."""
    words = _DRA if minor < 37 else ""
    return f"{words} preemption: 0/5 nodes are available: 5 {_NO_VICTIMS}."


AFTER_PREFILTER = " not found"
MISSING_CLAIM = '0/5 nodes are available: persistentvolumeclaim "data-missing" not found.'
UNBOUND_IMMEDIATE = "0/5 nodes are available: pod has unbound immediate PersistentVolumeClaims."
NO_PV_LEFT = "0/5 nodes are available: 5 node(s) didn't find available persistent volumes to bind."
PINNED_ELSEWHERE = (
    "0/5 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
    "4 node(s) didn't match PersistentVolume's node affinity."
)
RWOP_IN_USE = (
    "0/5 nodes are available: 5 node(s) unavailable due to PersistentVolumeClaim with "
    "ReadWriteOncePod access mode already in-use by another pod."
)
