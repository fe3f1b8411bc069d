"""Services and controllers (ReplicaSets, StatefulSets, ReplicationControllers), kept only for
the selector kube-scheduler's default spread constraints derive from them.

A pod with no topologySpreadConstraints of its own is spread by the system defaults, over the
pods selected by the services that select it and by its controller: the same "default
selector" kube-scheduler builds (helper.DefaultSelector).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from plumb.backend import journal as journal_module
from plumb.backend import objects, specs

SERVICE = "Service"
REPLICA_SET = "ReplicaSet"
STATEFUL_SET = "StatefulSet"
REPLICATION_CONTROLLER = "ReplicationController"


class Workloads:
    """Selectors of services and controllers, by namespace and name."""

    def __init__(self, journal: journal_module.Journal | None = None) -> None:
        self._services: dict[str, dict[str, dict[str, str]]] = {}
        self._controllers: dict[tuple[str, str, str], specs.LabelSelector] = {}
        self._journal = journal if journal is not None else journal_module.Journal(0)

    def on_event(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        before = self.state()
        self._on_event(kind, event_type, body)
        self._noted(before)

    def state(self) -> journal_module.Reworkload:
        """The selectors as they are now (copies: for the journal and snapshot dumps)."""
        return journal_module.Reworkload(
            services={ns: {n: dict(s) for n, s in by.items()} for ns, by in self._services.items()},
            controllers={"/".join(key): s for key, s in self._controllers.items()},
        )

    def restore(self, state: journal_module.Reworkload) -> None:
        """Make the selectors ``state`` (a dump being rebuilt)."""
        self._services = {
            ns: {n: dict(s) for n, s in by.items()} for ns, by in state.services.items()
        }
        self._controllers = {}
        for key, selector in state.controllers.items():
            kind, namespace, name = key.split("/", 2)
            self._controllers[(kind, namespace, name)] = selector

    def _noted(self, before: journal_module.Reworkload) -> None:
        if before != self.state():
            self._journal.note(before)

    def _on_event(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
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
        before = self.state()
        if kind == SERVICE:
            self._services.clear()
        else:
            for key in [k for k in self._controllers if k[0] == kind]:
                del self._controllers[key]
        for body in bodies:
            self._on_event(kind, None, body)
        self._noted(before)

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
