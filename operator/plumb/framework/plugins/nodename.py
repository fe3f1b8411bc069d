"""NodeName: a pod that already names a node in ``spec.nodeName`` may only go there (filter only).

A pending pod with ``nodeName`` set is rare (the kubelet usually runs such a pod without any
scheduler), but legal; every other node fails.
"""

from __future__ import annotations

import numpy as np

from plumb.backend.cache import snapshot
from plumb.backend.records import objects

NAME = "NodeName"
# kube-scheduler's ErrReason (plugins/nodename/node_name.go).
MISMATCH = "node(s) didn't match the requested node name"
# No eviction turns one node into another: preemption cannot help.
UNRESOLVABLE = True


def filter(pod: objects.PodInfo, statics: snapshot.NodeStatics) -> snapshot.BoolArray:
    """True on every node but the one named in ``spec.nodeName`` (all False when unset)."""
    if not pod.node_name:
        return np.zeros(len(statics), dtype=np.bool_)
    fails = np.ones(len(statics), dtype=np.bool_)
    wanted = statics.index.get(pod.node_name)
    if wanted is not None:
        fails[wanted] = False
    return fails
