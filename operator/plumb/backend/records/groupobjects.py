"""Pod groups as one record, whichever API they come from: the upstream PodGroup
(scheduling.k8s.io/v1beta1, v1.35+ behind GenericWorkload) and scheduler-plugins' PodGroup
(scheduling.x-k8s.io/v1alpha1, the Coscheduling plugin's), and the group a pod belongs to.

Both feed the same ``PodGroup``: a group is decided all or nothing at ``min_count`` members.
What differs per API (who may be gated, the words of a failure, the status written) is read
from ``api`` by the parts that write it; parsing never raises on a field plumb does not use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from plumb.backend.records import objects

UPSTREAM = "scheduling.k8s.io"
"""kube-scheduler's GangScheduling: spec.schedulingGroup.podGroupName names the group."""
COSCHEDULING = "scheduling.x-k8s.io"
"""scheduler-plugins' Coscheduling: the pod label ``POD_GROUP_LABEL`` names the group."""
UPSTREAM_VERSION = "v1beta1"
COSCHEDULING_VERSION = "v1alpha1"
POD_GROUP_LABEL = f"{COSCHEDULING}/pod-group"
# The condition kube-scheduler writes on an upstream PodGroup after its first cycle
# (schedulingapi.PodGroupInitiallyScheduled), and its reasons.
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
SCHEDULED_REASON, UNSCHEDULABLE_REASON, ERROR_REASON = (
    "Scheduled",
    "Unschedulable",
    "SchedulerError",
)


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class GroupRef:
    """Which group a pod names: the API and namespace/name."""

    api: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PodGroup:
    """A PodGroup of either API, as the gang logic reads it."""

    api: str
    namespace: str
    name: str
    uid: str
    generation: int
    creation_timestamp: str
    # All or nothing at ``min_count`` (upstream gang.minCount, scheduler-plugins minMember); an
    # upstream ``basic`` group places each member on its own (min_count 1, gang False).
    gang: bool
    min_count: int
    # Upstream: spec.priority, which the Priority admission plugin sets from the class; every
    # member must have it. None where the API has no such field.
    priority: int | None = None
    # Upstream disruptionMode "all": preempted as a whole (default "single").
    disrupt_all: bool = False
    # scheduler-plugins: scheduleTimeoutSeconds (the Permit wait), 0 when not set.
    timeout_seconds: int = 0
    # scheduler-plugins: minResources (base units as PodInfo.requests), empty when not set.
    min_resources: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # Upstream: the PodGroupInitiallyScheduled condition as (status, reason, message), None if
    # not written yet; kube-scheduler never turns a True one back.
    initially_scheduled: tuple[str, str, str] | None = None
    resource_version: str = dataclasses.field(default="", compare=False)

    @property
    def ref(self) -> GroupRef:
        return GroupRef(self.api, self.namespace, self.name)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def group_of(pod: objects.PodInfo) -> GroupRef | None:
    """The group a pod belongs to: spec.schedulingGroup.podGroupName (upstream) first, else
    scheduler-plugins' label; None when it names neither."""
    if pod.pod_group:
        return GroupRef(UPSTREAM, pod.namespace, pod.pod_group)
    labelled = pod.labels.get(POD_GROUP_LABEL, "")
    if labelled:
        return GroupRef(COSCHEDULING, pod.namespace, labelled)
    return None


def _metadata(body: Mapping[str, Any]) -> Mapping[str, Any]:
    return body.get("metadata") or {}


def parse_upstream(body: Mapping[str, Any]) -> PodGroup:
    """A scheduling.k8s.io PodGroup."""
    metadata = _metadata(body)
    spec = body.get("spec") or {}
    policy = spec.get("schedulingPolicy") or {}
    gang = policy.get("gang")
    priority = spec.get("priority")
    condition = None
    for entry in (body.get("status") or {}).get("conditions") or ():
        if entry.get("type") == INITIALLY_SCHEDULED:
            condition = (
                str(entry.get("status", "")),
                str(entry.get("reason", "")),
                str(entry.get("message", "")),
            )
    return PodGroup(
        api=UPSTREAM,
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
        generation=int(metadata.get("generation") or 0),
        creation_timestamp=str(metadata.get("creationTimestamp", "")),
        gang=gang is not None,
        min_count=max(1, int((gang or {}).get("minCount") or 1)),
        priority=None if priority is None else int(priority),
        disrupt_all="all" in (spec.get("disruptionMode") or {}),
        initially_scheduled=condition,
        resource_version=str(metadata.get("resourceVersion", "")),
    )


def parse_coscheduling(body: Mapping[str, Any]) -> PodGroup:
    """A scheduling.x-k8s.io PodGroup (minResources in the units the cache counts in; a
    value that is no quantity is left out, as the CRD's schema would have refused it)."""
    metadata = _metadata(body)
    spec = body.get("spec") or {}
    resources: dict[str, int] = {}
    for name, value in (spec.get("minResources") or {}).items():
        try:
            resources[str(name)] = objects.amount(str(name), value)
        except ValueError:
            continue
    return PodGroup(
        api=COSCHEDULING,
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
        generation=int(metadata.get("generation") or 0),
        creation_timestamp=str(metadata.get("creationTimestamp", "")),
        gang=True,
        min_count=int(spec.get("minMember") or 0),
        timeout_seconds=int(spec.get("scheduleTimeoutSeconds") or 0),
        min_resources=resources,
        resource_version=str(metadata.get("resourceVersion", "")),
    )
