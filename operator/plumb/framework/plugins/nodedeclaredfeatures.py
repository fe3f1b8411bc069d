"""NodeDeclaredFeatures: a node that does not declare every feature the pod needs
(``status.declaredFeatures``) takes no such pod (filter only, kube-scheduler's last filter).

kube-scheduler's plugin (plugins/nodedeclaredfeatures/nodedeclaredfeatures.go), in the default
profile when its feature gate is on (alpha, off in v1.35; beta, on in v1.36; GA in v1.37; no
such plugin in v1.34), inert when the gate is off:

- PreFilter: the features the pod needs are those of its release's registry (component-helpers
  nodedeclaredfeatures/features/registry.go) whose InferForScheduling says the spec needs
  them (objects.needed_features reads the spec); a pod that needs none skips the filter;
- Filter: a node that does not declare them all is UnschedulableAndUnresolvable (preemption
  does not look at it). kube-scheduler drops the names a node declares that its registry does
  not know (TryMap): the pod needs only names it knows, so that changes no verdict.

It is the last filter (appended to the default multiPoint plugins after DefaultBinder,
apis/config/v1/default_plugins.go), so a node another filter rejects reports that filter:
its reason is compiled as one the kernel checks after every other (kernel/contract.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from plumb.backend.cache import snapshot
from plumb.backend.records import objects

NAME = "NodeDeclaredFeatures"
# v1.36 on: errReasonUnsatisfiedRequirements (nodedeclaredfeatures.go:44 in v1.37.2).
UNSATISFIED = "node(s) didn't match Pod's required features"
# v1.35 (nodedeclaredfeatures.go:127 in v1.35.4): the features the node lacks, joined.
UNSATISFIED_LISTED = "node declared features check failed - unsatisfied requirements: {}"
# Evicting pods adds no feature to a node: preemption cannot help.
UNRESOLVABLE = True

# Per Emulation.declared_features: the features of the release's registry a pod can need (the
# others' InferForScheduling is always false: they concern pod updates).
KNOWN: Mapping[int, frozenset[str]] = {
    0: frozenset(),  # v1.34: no such plugin
    1: frozenset({objects.RESTART_ALL_CONTAINERS}),  # v1.35
    2: frozenset({objects.RESTART_ALL_CONTAINERS, objects.USER_NAMESPACES_HOST_NETWORK}),
    3: frozenset(objects.NEEDED_FEATURES),  # v1.37: + VolumeBindMountOptions
}


def required(pod: objects.PodInfo, release: int) -> frozenset[str]:
    """The features the pod needs as the release (Emulation.declared_features) infers them."""
    return pod.needed_features & KNOWN[release]


def reason(needed: frozenset[str], release: int) -> str:
    """The filter's words for a node lacking some of ``needed``. v1.35 lists the features the
    node lacks; a pod there needs one feature at most (KNOWN[1]), so it is that one."""
    if release == 1:
        return UNSATISFIED_LISTED.format(", ".join(sorted(needed)))
    return UNSATISFIED


def filter(needed: frozenset[str], statics: snapshot.NodeStatics) -> snapshot.BoolArray:
    """True where the node does not declare every feature of ``needed``."""
    return np.array(
        [not needed.issubset(node.declared_features) for node in statics.nodes], dtype=np.bool_
    )
