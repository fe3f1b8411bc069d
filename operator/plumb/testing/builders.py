"""Chained builders for Pod and Node bodies: ``make_pod("web").req(cpu="1").scheduler("plumb")``."""

from __future__ import annotations

import copy
from typing import Any, Self

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _resources(values: dict[str, str | int]) -> dict[str, str]:
    # Python keywords cannot hold dashes: ephemeral_storage= means "ephemeral-storage".
    return {key.replace("_", "-"): str(value) for key, value in values.items()}


class PodBuilder:
    def __init__(self, name: str, namespace: str) -> None:
        self._body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {}},
            "spec": {
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
            },
        }

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._body["spec"]
        return spec

    def req(self, **resources: str | int) -> Self:
        """Requests of the main container (``cpu="500m", memory="1Gi"``)."""
        container = self._spec["containers"][0]
        requests = _resources(resources)
        container.setdefault("resources", {})["requests"] = requests
        # The API server requires limit == request for extended resources (they cannot be
        # overcommitted); "example.com/widget" style names are the extended ones.
        extended = {name: value for name, value in requests.items() if "/" in name}
        if extended:
            container["resources"]["limits"] = extended
        return self

    def container(self, name: str, **requests: str | int) -> Self:
        """One more app container with these requests."""
        self._spec["containers"].append(
            {
                "name": name,
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": _resources(requests)},
            }
        )
        return self

    def init(self, name: str, *, sidecar: bool = False, **requests: str | int) -> Self:
        """An init container; ``sidecar=True`` makes it a restartable (restartPolicy Always) one."""
        container: dict[str, Any] = {
            "name": name,
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": _resources(requests)},
        }
        if sidecar:
            container["restartPolicy"] = "Always"
        self._spec.setdefault("initContainers", []).append(container)
        return self

    def scheduler(self, name: str) -> Self:
        self._spec["schedulerName"] = name
        return self

    def node(self, name: str) -> Self:
        self._spec["nodeName"] = name
        return self

    def label(self, key: str, value: str) -> Self:
        self._body["metadata"]["labels"][key] = value
        return self

    def priority(self, value: int) -> Self:
        self._spec["priority"] = value
        return self

    def gate(self, name: str) -> Self:
        self._spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name}},
            "spec": {},
            "status": {
                "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "plain API object, no kubelet",
                    }
                ],
            },
        }

    def capacity(self, **resources: str | int) -> Self:
        """Capacity and allocatable (the same here), replacing the defaults given."""
        values = _resources(resources)
        self._body["status"]["capacity"].update(values)
        self._body["status"]["allocatable"].update(values)
        return self

    def zone(self, zone: str) -> Self:
        return self.label(ZONE_LABEL, zone)

    def label(self, key: str, value: str) -> Self:
        self._body["metadata"]["labels"][key] = value
        return self

    def unschedulable(self) -> Self:
        self._body["spec"]["unschedulable"] = True
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)
