"""NodeUnschedulable: a cordoned node (``spec.unschedulable``) takes no new pods, unless the pod
tolerates the taint ``node.kubernetes.io/unschedulable:NoSchedule`` (filter only)."""

from __future__ import annotations

import numpy as np

from plumb.backend.cache import snapshot
from plumb.backend.records import objects, specs

NAME = "NodeUnschedulable"
# kube-scheduler's ErrReasonUnschedulable (plugins/nodeunschedulable/node_unschedulable.go).
UNSCHEDULABLE = "node(s) were unschedulable"
# Evicting pods does not uncordon a node: preemption cannot help.
UNRESOLVABLE = True
# The taint kube-scheduler checks the pod's tolerations against: key and effect, empty value.
UNSCHEDULABLE_TAINT = specs.Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def filter(pod: objects.PodInfo, statics: snapshot.NodeStatics) -> snapshot.BoolArray:
    """True where the node is cordoned and the pod does not tolerate that (a new array)."""
    if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.scheduling.tolerations):
        return np.zeros(len(statics), dtype=np.bool_)
    return statics.unschedulable.copy()
