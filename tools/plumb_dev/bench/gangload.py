"""The gang workload's pod groups: the upstream PodGroups each run creates, which measured pod
belongs to which, the time each group took to be placed whole, the check that no group was left
part placed, and the removal of the groups.

The measured pods come in groups of ``size`` consecutive pods (pod i is in group i // size), one
upstream PodGroup (scheduling.k8s.io/v1beta1, gang.minCount = size) each, created before any of
its pods; a pod names its group in spec.schedulingGroup.podGroupName and carries GROUP_LABEL for
the assessment. The API needs the GenericWorkload gate (``GATES``), on in the bench's control
plane and, for this workload's run only, in kube-scheduler.

With the gate on, the API server's PodGroupProtection admission puts a finalizer on every
PodGroup that only kube-controller-manager's podgroup-protection controller takes off; the
bench runs none, so ``delete_groups`` takes the finalizers off itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from plumb.k8s import client as k8s_client
from plumb_dev.bench import measuring, populating
from plumb_dev.cluster.controlplane import featuregates
from plumb_dev.testing import builders, groupbuilders

JSON = dict[str, Any]
GATES: Mapping[str, bool] = {featuregates.GENERIC_WORKLOAD: True}
GROUP_LABEL = "bench.plumb.dev/group"
"""The group of a measured pod, as a label: the assessment reads pods, not their specs."""
_GROUPS = "/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups"


def group_of(measured_index: int, size: int) -> str:
    """The PodGroup of the measured_index-th measured pod."""
    return f"gang-{measured_index // size:05d}"


def member(pod: builders.PodBuilder, measured_index: int, size: int) -> builders.PodBuilder:
    """A measured pod as a member of its group."""
    name = group_of(measured_index, size)
    return pod.pod_group(name).label(GROUP_LABEL, name)


def group_body(name: str, namespace: str, size: int) -> JSON:
    """A gang of ``size``: all its pods or none."""
    return groupbuilders.GroupBuilder(name, namespace, size).obj()


async def create_groups(api: k8s_client.ApiClient, namespace: str, pods: int, size: int) -> None:
    """The PodGroups of ``pods`` measured pods in groups of ``size``, before any pod."""
    path = _GROUPS.format(namespace=quote(namespace))
    names = sorted({group_of(index, size) for index in range(pods)})

    async def create(index: int) -> None:
        response = await api.request("POST", path, body=group_body(names[index], namespace, size))
        if not response.ok:
            raise populating.PopulateError(
                f"POST {path}: HTTP {response.status}: {response.message()}; does the API server "
                f"serve scheduling.k8s.io/v1beta1 (Kubernetes v1.37 with GenericWorkload on)?"
            )

    await populating.many(len(names), create)


def placed_whole(
    sent: Mapping[str, float], bound: Mapping[str, float], groups: Mapping[str, str]
) -> list[float]:
    """Per group whose every member was bound: seconds from its first member's create request
    to its last member's binding (the time until the job can start), sorted. ``groups``: pod
    name → group name, for every measured pod."""
    members: dict[str, list[str]] = defaultdict(list)
    for pod, group in groups.items():
        members[group].append(pod)
    spans = []
    for pods in members.values():
        if all(pod in bound and pod in sent for pod in pods):
            spans.append(max(bound[pod] for pod in pods) - min(sent[pod] for pod in pods))
    return sorted(spans)


def group_figures(spans: list[float], groups: int) -> JSON:
    """What the report shows of placed_whole: groups placed whole of all, p50 and p99."""
    return {
        "groups": groups,
        "whole": len(spans),
        "p50": measuring.percentile(spans, 0.5),
        "p99": measuring.percentile(spans, 0.99),
    }


def part_placed(pods: Iterable[JSON], size: int) -> list[str]:
    """The groups with some but fewer than ``size`` (the minimum) members bound, one sentence
    each: what all-or-nothing forbids."""
    bound: dict[str, int] = defaultdict(int)
    for pod in pods:
        group = ((pod.get("metadata") or {}).get("labels") or {}).get(GROUP_LABEL)
        if group is not None and (pod.get("spec") or {}).get("nodeName"):
            bound[group] += 1
    return [
        f"group {group} has {count} of its {size} members bound"
        for group, count in sorted(bound.items())
        if count < size
    ]


async def delete_groups(api: k8s_client.ApiClient, namespace: str) -> None:
    """The run's PodGroups: their finalizers taken off (no controller is there to), then the
    groups deleted, and waited for."""
    path = _GROUPS.format(namespace=quote(namespace))
    items, _ = await api.list_all(path)
    await populating.unfinalize(api, path, items)
    await populating.delete_collection(api, path, {})

    async def remaining() -> int:
        left, _ = await api.list_all(path)
        return len(left)

    await populating.wait_gone(f"PodGroups in {namespace}", remaining)
