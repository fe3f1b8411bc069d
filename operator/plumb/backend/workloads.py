"""Services and controllers (ReplicaSets, StatefulSets, ReplicationControllers), kept only for
the selector kube-scheduler's default spread constraints derive from them.

A pod with no topologySpreadConstraints of its own is spread by the system defaults, over the
pods selected by the services that select it and by its controller: the same "default
selector" kube-scheduler builds (helper.DefaultSelector).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from plumb.backend import objects, specs

SERVICE = "Service"
REPLICA_SET = "ReplicaSet"
STATEFUL_SET = "StatefulSet"
REPLICATION_CONTROLLER = "ReplicationController"


class Workloads:
    """Selectors of services and controllers, by namespace and name."""

    def __init__(self) -> None:
        self._services: dict[str, dict[str, dict[str, str]]] = {}
        self._controllers: dict[tuple[str, str, str], specs.LabelSelector] = {}

    def on_event(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        metadata = body.get("metadata") or {}
        namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
        spec = body.get("spec") or {}
        deleted = event_type == "DELETED"
        if kind == SERVICE:
            services = self._services.setdefault(namespace, {})
            selector = spec.get("selector") or {}
            if deleted or not selector:
                services.pop(name, None)
            else:
                services[name] = {str(k): str(v) for k, v in selector.items()}
            return
        key = (kind, namespace, name)
        if deleted:
            self._controllers.pop(key, None)
            return
        raw = spec.get("selector")
        try:
            if kind == REPLICATION_CONTROLLER:
                parsed = specs.label_selector({"matchLabels": raw or {}}, "spec.selector")
            else:
                parsed = specs.label_selector(raw, "spec.selector")
        except specs.SpecError:
            parsed = None
        if parsed is None or not parsed.requirements:
            self._controllers.pop(key, None)
        else:
            self._controllers[key] = parsed

    def replace(self, kind: str, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Make one kind's selectors match a full list of its objects."""
        if kind == SERVICE:
            self._services.clear()
        else:
            for key in [k for k in self._controllers if k[0] == kind]:
                del self._controllers[key]
        for body in bodies:
            self.on_event(kind, None, body)

    def default_selector(self, pod: objects.PodInfo) -> specs.LabelSelector | None:
        """The merged selector of the pod's services and controller; None when empty."""
        merged: dict[str, str] = {}
        for selector in self._services.get(pod.namespace, {}).values():
            if all(pod.labels.get(k) == v for k, v in selector.items()):
                merged.update(selector)
        requirements = [specs.Requirement(k, "In", (v,)) for k, v in sorted(merged.items())]
        if pod.owner is not None:
            owner = self._controllers.get((pod.owner[0], pod.namespace, pod.owner[1]))
            if owner is not None:
                requirements.extend(r for r in owner.requirements if r not in requirements)
        return specs.LabelSelector(tuple(requirements)) if requirements else None
