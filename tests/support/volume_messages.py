"""kube-scheduler v1.34.4's FailedScheduling messages for the volume scenarios on five nodes, as
the integration tests hold plumb's against them."""

from __future__ import annotations

# As recorded from the real binary by test_kube_scheduler_volume_messages
# (tests/integration/test_volume_prebind.py). After the filters' part comes its PostFilters':
# DynamicResources ("no new claims to deallocate"), then DefaultPreemption. When a PreFilter
# rejected the pod, DynamicResources' PreFilter never ran, its PostFilter finds no state and fails
# with the CycleState's "not found", and that error is all the PostFilter part says.
NOT_HELPFUL = (
    " no new claims to deallocate, preemption: 0/5 nodes are available: "
    "5 Preemption is not helpful for scheduling."
)
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
RWOP_SUFFIX = (
    " no new claims to deallocate, preemption: 0/5 nodes are available: "
    "5 No preemption victims found for incoming pod."
)
