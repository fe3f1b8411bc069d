"""Pod signatures, and which pods of a batch continue the one before it: kube-scheduler's
OpportunisticBatching (feature gate on by default from v1.35), as the kernel takes it.

After a cycle that placed a pod it could sign, kube-scheduler keeps that pod's other feasible
nodes sorted by their scores (framework/runtime/batch.go). The next cycle, when it is the
profile's next pod, has the same signature and finds the node just chosen full, pops the head
of that list and takes it if it passes the filters, scoring nothing; the scores may then be
stale where a plugin normalised over the node that is now full (docs/versions.md,
"Opportunistic batching"). plumb's kernel does the same between the pods of one batch
(kernel/contract.py ``Batch.continues``), its batch standing for the 500 ms the list is kept.

A signature (framework.go SignPod) joins, for each plugin the profile runs at PreFilter,
Filter, PreScore or Score, what that plugin reads of the pod (each plugin's SignPod). Three
plugins refuse to sign some pods, which then never continue a batch nor start one:

- PodTopologySpread: any pod while the profile has default constraints (the System defaulting
  included, so the default profile signs no pod), and a pod with constraints of its own (a
  SchedulingPolicy's topology rules are some);
- InterPodAffinity: a pod with pod affinity or anti-affinity terms;
- DynamicResources: a pod with resource claims.

What plumb leaves out: volumes other than PersistentVolumeClaims (plumb keeps none; a pod with
volume claims is decided alone anyway), tolerationSeconds, and the
order of node-affinity terms and values (kube-scheduler sorts them: pods that differ only in
that order are the same to it, not to plumb).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence

import numpy as np

from plumb.backend.records import objects
from plumb.extensions import interface
from plumb.framework import scoring
from plumb.framework.plugins import (
    dynamicresources,
    interpodaffinity,
    nodeaffinity,
    nodedeclaredfeatures,
    nodename,
    nodeports,
    noderesourcesfit,
    nodeunschedulable,
    podtopologyspread,
    tainttoleration,
)
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb.kernel import contract

GATE = "OpportunisticBatching"

Signature = tuple[Hashable, ...]


_JUDGING = frozenset({interface.PRE_FILTER, interface.FILTER, interface.SCORE})


def _runs(profile: scoring.Profile, name: str, score: int | None = None) -> bool:
    """Whether the profile runs the plugin (as a filter, or as a score weighing more than 0)."""
    return name in profile.filters or (score is not None and profile.weights[score] != 0)


def signs(profile: scoring.Profile) -> bool:
    """Whether the profile signs any pod: its release has the gate on, it runs no Python plugin
    at PreFilter, Filter or Score (plugins that cannot sign a pod turn signatures off for the
    profile, framework.go's "plugins do not support it"), and PodTopologySpread (when it
    runs) has no default constraints."""
    if not profile.kube.gate(GATE):
        return False
    if any(e.points & _JUDGING for e in profile.extensions):
        return False
    if not _runs(profile, podtopologyspread.NAME, contract.SPREAD):
        return True
    return profile.spread_defaulting == "List" and not profile.spread_defaults


def signature(pod: objects.PodInfo, profile: scoring.Profile) -> Signature | None:
    """The pod's signature under the profile, None where a plugin refuses to sign it."""
    if not signs(profile):
        return None
    s = pod.scheduling
    parts: list[Hashable] = [pod.scheduler_name]
    if _runs(profile, podtopologyspread.NAME, contract.SPREAD) and s.spread:
        return None
    if _runs(profile, interpodaffinity.NAME, contract.INTER_POD):
        if s.has_pod_affinity_terms:
            return None
        parts.append(("labels", tuple(sorted(pod.labels.items()))))
    if _runs(profile, noderesourcesfit.NAME, contract.FIT) or profile.weights[contract.BALANCED]:
        parts.append(("requests", tuple(sorted(pod.requests.items()))))
    if _runs(profile, tainttoleration.NAME, contract.TAINT) or _runs(
        profile, nodeunschedulable.NAME
    ):
        parts.append(("tolerations", tuple(sorted(s.tolerations, key=repr))))
    if _runs(profile, nodeaffinity.NAME, contract.NODE_AFFINITY):
        parts.append(("node affinity", s.node_selector, s.required_node_terms))
        parts.append(("preferred", s.preferred_node_terms))
    if _runs(profile, nodeports.NAME):
        parts.append(("host ports", tuple(sorted({port.port for port in s.host_ports}))))
    if _runs(profile, nodename.NAME):
        parts.append(("node name", pod.node_name))
    if profile.weights[contract.IMAGE_LOCALITY]:
        parts.append(("images", tuple(sorted(set(pod.images)))))
    volumes = profile.weights[contract.VOLUME_BINDING] != 0
    if volumes or any(_runs(profile, name) for name in volume_plugins.PLUGINS):
        parts.append(("claims", pod.claims))
    if _runs(profile, dynamicresources.NAME, contract.DYNAMIC_RESOURCES) and pod.resource_claims:
        return None  # "pods with dra resource claims are not signable"
    if _runs(profile, nodedeclaredfeatures.NAME) and profile.kube.gate(nodedeclaredfeatures.NAME):
        needed = nodedeclaredfeatures.required(pod, profile.kube.declared_features)
        parts.append(("features", tuple(sorted(needed))))
    return tuple(parts)


def unbatched(batch: contract.Batch) -> contract.Batch:
    """The batch with no pod continuing the one before it: OpportunisticBatching is off while
    the configuration has HTTP extenders (v1.37's framework.go: "Disabling signatures for
    profile because it has extenders configured")."""
    if not batch.continues.any():
        return batch
    return dataclasses.replace(batch, continues=np.zeros_like(batch.continues))


def continues(
    pods: Sequence[objects.PodInfo],
    profile: scoring.Profile,
    order: Sequence[objects.PodInfo] | None = None,
) -> contract.B1:
    """Per pod of the kernel's batch, whether it continues the pod before it: that pod came
    just before it in ``order`` (the batch in queue order, pods decided without the kernel
    among them; ``pods`` by default), both have one signature, and neither is nominated to a
    node (v1.37 hands such a pod no hint; v1.35 and v1.36 try its nominated node instead, and
    plumb decides it alone)."""
    flags = np.zeros(len(pods), dtype=np.bool_)
    if len(pods) < 2 or not signs(profile):
        return flags
    position = {pod.uid: i for i, pod in enumerate(order if order is not None else pods)}
    signed = [signature(pod, profile) for pod in pods]
    for b in range(1, len(pods)):
        before, pod = pods[b - 1], pods[b]
        flags[b] = (
            signed[b] is not None
            and signed[b] == signed[b - 1]
            and position[pod.uid] == position[before.uid] + 1
            and not pod.nominated_node
            and not before.nominated_node
        )
    return flags
