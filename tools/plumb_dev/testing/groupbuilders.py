"""PodGroup bodies for tests: the upstream PodGroup (scheduling.k8s.io/v1beta1) and
scheduler-plugins' (scheduling.x-k8s.io/v1alpha1). Pods join them with
``PodBuilder.pod_group`` (upstream) or ``PodBuilder.label(POD_GROUP_LABEL, name)``."""

from __future__ import annotations

import copy
from typing import Any, Self

UPSTREAM_API = "scheduling.k8s.io/v1beta1"
COSCHEDULING_API = "scheduling.x-k8s.io/v1alpha1"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class GroupBuilder:
    """An upstream PodGroup: a gang of ``minCount`` by default."""

    def __init__(self, name: str, namespace: str, min_count: int) -> None:
        self._body: dict[str, Any] = {
            "apiVersion": UPSTREAM_API,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
        }

    def basic(self) -> Self:
        """Each member placed on its own (no minimum)."""
        self._body["spec"]["schedulingPolicy"] = {"basic": {}}
        return self

    def priority_class(self, name: str) -> Self:
        self._body["spec"]["priorityClassName"] = name
        return self

    def disrupt_all(self) -> Self:
        """Preempted as a whole (disruptionMode all)."""
        self._body["spec"]["disruptionMode"] = {"all": {}}
        return self

    def uid(self, value: str) -> Self:
        """A uid, as the API server would give one (for tests without a server)."""
        self._body["metadata"]["uid"] = value
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


class CoschedulingGroupBuilder:
    """A scheduler-plugins PodGroup of ``minMember``."""

    def __init__(self, name: str, namespace: str, min_member: int) -> None:
        self._body: dict[str, Any] = {
            "apiVersion": COSCHEDULING_API,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": min_member},
        }

    def timeout(self, seconds: int) -> Self:
        """scheduleTimeoutSeconds: how long placed members wait for the rest."""
        self._body["spec"]["scheduleTimeoutSeconds"] = seconds
        return self

    def min_resources(self, **resources: str) -> Self:
        self._body["spec"]["minResources"] = dict(resources)
        return self

    def uid(self, value: str) -> Self:
        self._body["metadata"]["uid"] = value
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


def make_group(name: str, namespace: str, min_count: int) -> GroupBuilder:
    return GroupBuilder(name, namespace, min_count)


def make_coscheduling_group(name: str, namespace: str, min_member: int) -> CoschedulingGroupBuilder:
    return CoschedulingGroupBuilder(name, namespace, min_member)
