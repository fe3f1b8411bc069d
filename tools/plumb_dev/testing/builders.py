"""Chained builders for Pod and Node bodies: ``make_pod("web").req(cpu="1").scheduler("plumb")``."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Self

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def _resources(values: dict[str, str | int]) -> dict[str, str]:
    # Python keywords cannot hold dashes: ephemeral_storage= means "ephemeral-storage".
    return {key.replace("_", "-"): str(value) for key, value in values.items()}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    """A node selector requirement: ``expr("zone", "In", "a", "b")``, ``expr("gpu", "Exists")``."""
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return requirement


def _term(
    expressions: Sequence[dict[str, Any]], fields: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    term: dict[str, Any] = {}
    if expressions:
        term["matchExpressions"] = list(expressions)
    if fields:
        term["matchFields"] = list(fields)
    return term


def label_selector(
    match_labels: Mapping[str, str] | None, expressions: Sequence[dict[str, Any]] = ()
) -> dict[str, Any] | None:
    """A LabelSelector body: None when given neither labels nor expressions (the field is left
    out, which selects no pod), ``{}`` for an empty mapping (which selects every pod)."""
    if match_labels is None and not expressions:
        return None
    selector: dict[str, Any] = {}
    if match_labels:
        selector["matchLabels"] = dict(match_labels)
    if expressions:
        selector["matchExpressions"] = list(expressions)
    return selector


def _pod_affinity_term(
    topology_key: str,
    selector: Mapping[str, str] | None,
    expressions: Sequence[dict[str, Any]],
    namespaces: Sequence[str] | None,
    namespace_selector: Mapping[str, str] | None,
) -> dict[str, Any]:
    term: dict[str, Any] = {"topologyKey": topology_key}
    pods = label_selector(selector, expressions)
    if pods is not None:
        term["labelSelector"] = pods
    if namespaces is not None:
        term["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        term["namespaceSelector"] = label_selector(namespace_selector) or {}
    return term


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

    def priority(self, value: int, *, preemption_policy: str | None = None) -> Self:
        """A priority as a user's cluster gives it: through a PriorityClass (the Priority
        admission plugin resolves ``priorityClassName``; ``Kube.create_pod`` makes the class
        named by ``priority_class_name`` when missing). ``spec.priority`` is set too, equal to
        the class's value, so that bodies parsed without an API server carry it."""
        self._spec["priorityClassName"] = priority_class_name(value, preemption_policy)
        self._spec["priority"] = value
        if preemption_policy is not None:
            self._spec["preemptionPolicy"] = preemption_policy
        return self

    def grace(self, seconds: int) -> Self:
        """spec.terminationGracePeriodSeconds: 0 lets a pod on a node without a kubelet (the
        scale nodes) be deleted at once instead of waiting for a kubelet that never comes."""
        self._spec["terminationGracePeriodSeconds"] = seconds
        return self

    def finalizer(self, name: str) -> Self:
        """A finalizer: the pod stays, terminating, until the test removes it."""
        self._body["metadata"].setdefault("finalizers", []).append(name)
        return self

    def gate(self, name: str) -> Self:
        self._spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def toleration(
        self, key: str = "", *, operator: str = "Equal", value: str = "", effect: str = ""
    ) -> Self:
        """A toleration; an empty key with ``operator="Exists"`` tolerates every taint."""
        toleration = {"key": key, "operator": operator, "value": value, "effect": effect}
        self._spec.setdefault("tolerations", []).append(
            {name: text for name, text in toleration.items() if text}
        )
        return self

    def node_selector(self, key: str, value: str) -> Self:
        self._spec.setdefault("nodeSelector", {})[key] = value
        return self

    def _node_affinity(self) -> dict[str, Any]:
        affinity: dict[str, Any] = self._spec.setdefault("affinity", {})
        node_affinity: dict[str, Any] = affinity.setdefault("nodeAffinity", {})
        return node_affinity

    def node_affinity(
        self, *expressions: dict[str, Any], fields: Sequence[dict[str, Any]] = ()
    ) -> Self:
        """One more required nodeSelectorTerm (terms are ORed, its requirements ANDed).

        ``node_affinity(expr("zone", "In", "a"), fields=[expr("metadata.name", "In", "n1")])``;
        with no arguments it adds an empty term, which matches no node.
        """
        required = self._node_affinity().setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": []}
        )
        required["nodeSelectorTerms"].append(_term(expressions, fields))
        return self

    def no_node_selector_terms(self) -> Self:
        """Required node affinity with an empty nodeSelectorTerms list (matches no node)."""
        self._node_affinity()["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": []
        }
        return self

    def preferred_node_affinity(
        self, weight: int, *expressions: dict[str, Any], fields: Sequence[dict[str, Any]] = ()
    ) -> Self:
        """One more preferred term: ``weight`` is added to a node's score where it matches."""
        self._node_affinity().setdefault(
            "preferredDuringSchedulingIgnoredDuringExecution", []
        ).append({"weight": weight, "preference": _term(expressions, fields)})
        return self

    def host_port(
        self,
        port: int,
        *,
        protocol: str | None = None,
        host_ip: str | None = None,
        container_port: int | None = None,
    ) -> Self:
        """A hostPort on the main container; protocol and hostIP left out unless given."""
        entry: dict[str, Any] = {"containerPort": container_port or port, "hostPort": port}
        if protocol is not None:
            entry["protocol"] = protocol
        if host_ip is not None:
            entry["hostIP"] = host_ip
        self._spec["containers"][0].setdefault("ports", []).append(entry)
        return self

    def pod_group(self, name: str) -> Self:
        """A member of the upstream PodGroup ``name`` (spec.schedulingGroup.podGroupName)."""
        self._spec["schedulingGroup"] = {"podGroupName": name}
        return self

    def uid(self, value: str) -> Self:
        self._body["metadata"]["uid"] = value
        return self

    def claims(self, *names: str) -> Self:
        """A volume per PersistentVolumeClaim named, called v0, v1, ... in order."""
        volumes: list[dict[str, Any]] = self._spec.setdefault("volumes", [])
        for name in names:
            claim = {"claimName": name}
            volumes.append({"name": f"v{len(volumes)}", "persistentVolumeClaim": claim})
        return self

    def resource_claim(
        self,
        name: str,
        *,
        claim: str | None = None,
        template: str | None = None,
        request: str | None = None,
    ) -> Self:
        """A DRA claim of the pod (spec.resourceClaims): an existing ResourceClaim (``claim``)
        or one the resourceclaim controller makes from a ResourceClaimTemplate (``template``);
        the main container uses it (all its requests, or only ``request``)."""
        if (claim is None) == (template is None):
            raise ValueError(f"resource_claim({name!r}): give exactly one of claim, template")
        entry = {"name": name}
        if claim is not None:
            entry["resourceClaimName"] = claim
        else:
            entry["resourceClaimTemplateName"] = str(template)
        self._spec.setdefault("resourceClaims", []).append(entry)
        used = {"name": name}
        if request is not None:
            used["request"] = request
        resources = self._spec["containers"][0].setdefault("resources", {})
        resources.setdefault("claims", []).append(used)
        return self

    def ephemeral(self, name: str, *, storage_class: str, size: str = "1Gi") -> Self:
        """A generic ephemeral volume: a ReadWriteOnce claim of ``storage_class`` made for the
        pod (named ``<pod>-<name>``) by the ephemeral volume controller."""
        template = {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": size}},
        }
        self._spec.setdefault("volumes", []).append(
            {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": template}}}
        )
        return self

    def created(self, at: str) -> Self:
        """metadata.creationTimestamp, as the API server sets it (RFC 3339)."""
        self._body["metadata"]["creationTimestamp"] = at
        return self

    def resource_version(self, version: str) -> Self:
        self._body["metadata"]["resourceVersion"] = version
        return self

    def generation(self, value: int) -> Self:
        """metadata.generation: the API server raises it on every change to the spec."""
        self._body["metadata"]["generation"] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._body["metadata"].setdefault("annotations", {})[key] = value
        return self

    def owner(self, kind: str, name: str) -> Self:
        """The controller that owns the pod (``owner("ReplicaSet", "web-7d")``)."""
        reference = {"kind": kind, "name": name, "controller": True}
        self._body["metadata"].setdefault("ownerReferences", []).append(reference)
        return self

    def phase(self, value: str) -> Self:
        """status.phase (``"Running"``, ``"Succeeded"``, ...)."""
        self._body.setdefault("status", {})["phase"] = value
        return self

    def nominated(self, node: str) -> Self:
        """status.nominatedNodeName: the node a preemption made room on for the pod."""
        self._body.setdefault("status", {})["nominatedNodeName"] = node
        return self

    def overhead(self, **resources: str | int) -> Self:
        """spec.overhead, as a RuntimeClass adds it (``overhead(cpu="250m")``)."""
        self._spec["overhead"] = _resources(resources)
        return self

    def pod_resources(
        self, requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None
    ) -> Self:
        """Pod-level resources (spec.resources); with neither given, an empty one."""
        resources: dict[str, Any] = {}
        if requests is not None:
            resources["requests"] = dict(requests)
        if limits is not None:
            resources["limits"] = dict(limits)
        self._spec["resources"] = resources
        return self

    def images(self, *images: str, init: Sequence[str] = ()) -> Self:
        """App containers c0, c1, ... running these images, in place of the main one (and no
        requests), and init containers i0, i1, ... running ``init``."""
        self._spec["containers"] = [
            {"name": f"c{i}", "image": image} for i, image in enumerate(images)
        ]
        if init:
            self._spec["initContainers"] = [
                {"name": f"i{i}", "image": image} for i, image in enumerate(init)
            ]
        return self

    def image_volume(self, name: str, reference: str) -> Self:
        """A volume of an OCI image (``spec.volumes[].image``), mounted nowhere."""
        volume = {"name": name, "image": {"reference": reference, "pullPolicy": "IfNotPresent"}}
        self._spec.setdefault("volumes", []).append(volume)
        return self

    def restart_all_on_exit(self, code: int = 42) -> Self:
        """The main container restarts the whole pod when it exits with ``code`` (a restart rule
        with action RestartAllContainers; the container's restartPolicy Never, as the rules
        require): what NodeDeclaredFeatures' RestartAllContainersOnContainerExits is for."""
        container = self._spec["containers"][0]
        container["restartPolicy"] = "Never"
        container["restartPolicyRules"] = [
            {
                "action": "RestartAllContainers",
                "exitCodes": {"operator": "In", "values": [code]},
            }
        ]
        return self

    def terminating(self, at: str = "2025-01-01T00:00:00Z") -> Self:
        """Being deleted: ``metadata.deletionTimestamp`` set (the pod still holds its node)."""
        self._body["metadata"]["deletionTimestamp"] = at
        return self

    def spread(
        self,
        topology_key: str,
        max_skew: int,
        *,
        when: str = "DoNotSchedule",
        selector: Mapping[str, str] | None = None,
        expressions: Sequence[dict[str, Any]] = (),
        min_domains: int | None = None,
        node_affinity_policy: str | None = None,
        node_taints_policy: str | None = None,
        match_label_keys: Sequence[str] = (),
    ) -> Self:
        """One more topologySpreadConstraint; ``selector`` is its matchLabels (None with no
        ``expressions`` leaves labelSelector out; ``{}`` is the empty selector)."""
        constraint: dict[str, Any] = {
            "maxSkew": max_skew,
            "topologyKey": topology_key,
            "whenUnsatisfiable": when,
        }
        pods = label_selector(selector, expressions)
        if pods is not None:
            constraint["labelSelector"] = pods
        if min_domains is not None:
            constraint["minDomains"] = min_domains
        if node_affinity_policy is not None:
            constraint["nodeAffinityPolicy"] = node_affinity_policy
        if node_taints_policy is not None:
            constraint["nodeTaintsPolicy"] = node_taints_policy
        if match_label_keys:
            constraint["matchLabelKeys"] = list(match_label_keys)
        self._spec.setdefault("topologySpreadConstraints", []).append(constraint)
        return self

    def _pod_affinity(self, anti: bool) -> dict[str, Any]:
        affinity: dict[str, Any] = self._spec.setdefault("affinity", {})
        kind: dict[str, Any] = affinity.setdefault("podAntiAffinity" if anti else "podAffinity", {})
        return kind

    def affinity(
        self,
        topology_key: str,
        selector: Mapping[str, str] | None,
        *,
        anti: bool = False,
        expressions: Sequence[dict[str, Any]] = (),
        namespaces: Sequence[str] | None = None,
        namespace_selector: Mapping[str, str] | None = None,
    ) -> Self:
        """One more required pod affinity (``anti=True``: anti-affinity) term.

        ``selector`` is the term's matchLabels (None with no ``expressions`` leaves labelSelector
        out, which matches no pod); ``namespaces`` None and ``namespace_selector`` None mean the
        pod's own namespace; ``namespace_selector={}`` means every namespace.
        """
        term = _pod_affinity_term(
            topology_key, selector, expressions, namespaces, namespace_selector
        )
        self._pod_affinity(anti).setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", []
        ).append(term)
        return self

    def preferred_affinity(
        self,
        weight: int,
        topology_key: str,
        selector: Mapping[str, str] | None,
        *,
        anti: bool = False,
        expressions: Sequence[dict[str, Any]] = (),
        namespaces: Sequence[str] | None = None,
        namespace_selector: Mapping[str, str] | None = None,
    ) -> Self:
        """One more preferred pod affinity (``anti=True``: anti-affinity) term of ``weight``."""
        term = _pod_affinity_term(
            topology_key, selector, expressions, namespaces, namespace_selector
        )
        self._pod_affinity(anti).setdefault(
            "preferredDuringSchedulingIgnoredDuringExecution", []
        ).append({"weight": weight, "podAffinityTerm": term})
        return self

    def copy(self) -> Self:
        """A builder of the same pod, to vary without changing this one."""
        twin = type(self).__new__(type(self))
        twin._body = copy.deepcopy(self._body)
        return twin

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

    def annotate(self, key: str, value: str) -> Self:
        self._body["metadata"].setdefault("annotations", {})[key] = value
        return self

    def unschedulable(self) -> Self:
        self._body["spec"]["unschedulable"] = True
        return self

    def images(self, *images: tuple[Sequence[str], int]) -> Self:
        """status.images: the images the node holds, each as (names, sizeBytes)."""
        self._body["status"]["images"] = [
            {"names": list(names), "sizeBytes": size} for names, size in images
        ]
        return self

    def declared_features(self, *names: str) -> Self:
        """status.declaredFeatures, sorted as the API server requires."""
        self._body["status"]["declaredFeatures"] = sorted(names)
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        """A taint, in the order given (kube-scheduler names the first one not tolerated)."""
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        self._body["spec"].setdefault("taints", []).append(taint)
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


PRIORITY_CLASS_PREFIX = "plumb-test-priority-"


def priority_class_name(value: int, preemption_policy: str | None = None) -> str:
    """The test PriorityClass of a value (and a preemptionPolicy other than the default)."""
    sign = "minus-" if value < 0 else ""
    suffix = "" if preemption_policy in (None, "PreemptLowerPriority") else "-never"
    return f"{PRIORITY_CLASS_PREFIX}{sign}{abs(value)}{suffix}"


def priority_class(value: int, preemption_policy: str | None = None) -> dict[str, Any]:
    """The PriorityClass ``priority_class_name(value, preemption_policy)`` names."""
    body: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(value, preemption_policy)},
        "value": value,
        "description": "made by plumb's tests",
    }
    if preemption_policy is not None:
        body["preemptionPolicy"] = preemption_policy
    return body
