"""Services and controllers (ReplicaSets, StatefulSets, ReplicationControllers), kept only for
the selector kube-scheduler's default spread constraints derive from them.

A pod with no topologySpreadConstraints of its own is spread by the system defaults, over the
pods selected by the services that select it and by its controller: the same "default
selector" kube-scheduler builds (helper.DefaultSelector).

Most events of these objects leave their selector as it was (a ReplicaSet's status, a rollout's
scale steps): such an event costs a comparison of one selector, copies nothing and writes
nothing to the journal. A change is journalled as the one selector it replaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from plumb.backend.cache import journal as journal_module
from plumb.backend.records import objects, specs

SERVICE = "Service"
REPLICA_SET = "ReplicaSet"
STATEFUL_SET = "StatefulSet"
REPLICATION_CONTROLLER = "ReplicationController"

ServiceSelector = Mapping[str, str]


class Workloads:
    """Selectors of services and controllers, by namespace and name.

    The selectors held are never changed in place, only replaced, so copies of the maps
    (``state``) and the journal share them."""

    def __init__(self, journal: journal_module.Journal | None = None) -> None:
        self._services: dict[str, dict[str, ServiceSelector]] = {}
        self._controllers: dict[journal_module.ControllerKey, specs.LabelSelector] = {}
        self._journal = journal if journal is not None else journal_module.Journal(0)
        self._journal.workloads_now = self.state

    def on_event(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        if kind == SERVICE:
            key, selector = _service(event_type, body)
            self._write({key: selector}, {})
        else:
            controller, parsed = _controller(kind, event_type, body)
            self._write({}, {controller: parsed})

    def replace(self, kind: str, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Make one kind's selectors match a full list of its objects."""
        if kind == SERVICE:
            services: dict[journal_module.ServiceKey, ServiceSelector | None] = {
                (namespace, name): None
                for namespace, by_name in self._services.items()
                for name in by_name
            }
            for body in bodies:
                key, selector = _service(None, body)
                services[key] = selector
            self._write(services, {})
        else:
            controllers: dict[journal_module.ControllerKey, specs.LabelSelector | None] = {
                key: None for key in self._controllers if key[0] == kind
            }
            for body in bodies:
                controller, parsed = _controller(kind, None, body)
                controllers[controller] = parsed
            self._write({}, controllers)

    def state(self) -> journal_module.Reworkload:
        """The selectors as they are now (copies of the maps: for the journal and snapshot
        dumps; the selectors themselves are shared, never changed in place)."""
        return journal_module.Reworkload(
            services={ns: dict(by) for ns, by in self._services.items()},
            controllers={"/".join(key): s for key, s in self._controllers.items()},
        )

    def restore(self, state: journal_module.Reworkload) -> None:
        """Make the selectors ``state`` (a dump being rebuilt)."""
        self._services = {ns: dict(by) for ns, by in state.services.items() if by}
        self._controllers = {}
        for key, selector in state.controllers.items():
            kind, namespace, name = key.split("/", 2)
            self._controllers[(kind, namespace, name)] = selector

    def _write(
        self,
        services: Mapping[journal_module.ServiceKey, ServiceSelector | None],
        controllers: Mapping[journal_module.ControllerKey, specs.LabelSelector | None],
    ) -> None:
        """Set these selectors (None: none), journalling the ones that change as they were."""
        undo_services: dict[journal_module.ServiceKey, ServiceSelector | None] = {}
        for (namespace, name), selector in services.items():
            by_name = self._services.get(namespace)
            before = by_name.get(name) if by_name is not None else None
            if before == selector:
                continue
            undo_services[(namespace, name)] = before
            if selector is not None:
                self._services.setdefault(namespace, {})[name] = selector
            elif by_name is not None:
                del by_name[name]
                if not by_name:
                    del self._services[namespace]
        undo_controllers: dict[journal_module.ControllerKey, specs.LabelSelector | None] = {}
        for key, parsed in controllers.items():
            was = self._controllers.get(key)
            if was == parsed:
                continue
            undo_controllers[key] = was
            if parsed is None:
                del self._controllers[key]
            else:
                self._controllers[key] = parsed
        if undo_services or undo_controllers:
            self._journal.note(
                journal_module.Reselect(services=undo_services, controllers=undo_controllers)
            )

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


def _key(body: Mapping[str, Any]) -> tuple[str, str]:
    metadata = body.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))


def _service(
    event_type: str | None, body: Mapping[str, Any]
) -> tuple[journal_module.ServiceKey, ServiceSelector | None]:
    """A Service's key and selector (None: deleted, or it selects nothing)."""
    key = _key(body)
    selector = (body.get("spec") or {}).get("selector") or {}
    if event_type == "DELETED" or not selector:
        return key, None
    return key, {str(k): str(v) for k, v in selector.items()}


def _controller(
    kind: str, event_type: str | None, body: Mapping[str, Any]
) -> tuple[journal_module.ControllerKey, specs.LabelSelector | None]:
    """A controller's key and parsed selector (None: deleted, unusable or selecting nothing)."""
    namespace, name = _key(body)
    key = (kind, namespace, name)
    if event_type == "DELETED":
        return key, None
    raw = (body.get("spec") or {}).get("selector")
    try:
        if kind == REPLICATION_CONTROLLER:
            parsed = specs.label_selector({"matchLabels": raw or {}}, "spec.selector")
        else:
            parsed = specs.label_selector(raw, "spec.selector")
    except specs.SpecError:
        return key, None
    if parsed is None or not parsed.requirements:
        return key, None
    return key, parsed
