"""The scheduling-relevant parts of a pod spec and a node, parsed once into frozen records.

Selectors, node affinity, tolerations and taints, pod (anti-)affinity terms, topology spread
constraints and host ports. Parsing is lenient where the API server already validated and
strict where a value could still be unusable: a ``SpecError`` names the field and the value,
and the pod then gets a FailedScheduling event quoting it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
NODE_OPERATORS = LABEL_OPERATORS | {"Gt", "Lt"}
TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})


class SpecError(ValueError):
    """A part of a pod spec plumb cannot evaluate; the message names field and value."""


@dataclasses.dataclass(frozen=True, slots=True)
class Requirement:
    """``key operator values``: a label (or field) selector requirement."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies this requirement (Gt/Lt compare integers)."""
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if value is None:
            return False
        number = parse_int64(value)
        bound = parse_int64(self.values[0]) if len(self.values) == 1 else None
        if number is None or bound is None:
            return False  # kube-scheduler cannot parse it: the requirement matches nothing
        return number > bound if op == "Gt" else number < bound


@dataclasses.dataclass(frozen=True, slots=True)
class LabelSelector:
    """matchLabels and matchExpressions, ANDed; an empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def with_requirements(self, extra: Iterable[Requirement]) -> LabelSelector:
        return LabelSelector(self.requirements + tuple(extra))


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of required node affinity: expressions on labels and fields, ANDed."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """core/v1 ToleratesTaint: effect, then key (empty key + Exists matches all), value."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclasses.dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def describe(self) -> str:
        """``{key: value}``, as kube-scheduler printed taints before v1.34 (for explanations)."""
        return f"{{{self.key}: {self.value}}}"


@dataclasses.dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """Pods matching ``selector`` in ``namespaces`` (or namespaces matching
    ``namespace_selector``), counted per domain of ``topology_key``.

    ``namespaces`` empty and ``namespace_selector`` None means the owning pod's namespace
    (already filled in by the parser); a selector of None matches no pod.
    """

    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str


@dataclasses.dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: PodAffinityTerm


@dataclasses.dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()

    @property
    def hard(self) -> bool:
        return self.when_unsatisfiable == "DoNotSchedule"


@dataclasses.dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    ip: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """Same protocol and port, and one IP is 0.0.0.0 (all) or both are equal."""
        if self.protocol != other.protocol or self.port != other.port:
            return False
        return self.ip == other.ip or "0.0.0.0" in (self.ip, other.ip)


@dataclasses.dataclass(frozen=True, slots=True)
class Scheduling:
    """Everything of a pod spec that constrains where it may go, beyond resources."""

    node_selector: tuple[tuple[str, str], ...] = ()
    required_node_terms: tuple[NodeSelectorTerm, ...] | None = None
    preferred_node_terms: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    required_affinity: tuple[PodAffinityTerm, ...] = ()
    required_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()

    @property
    def has_pod_affinity_terms(self) -> bool:
        return bool(
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )


NO_CONSTRAINTS = Scheduling()


# Parsing ---------------------------------------------------------------------------------------


_INT64 = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int | None:
    """A label value as Go's strconv.ParseInt(v, 10, 64) reads it; None if it cannot."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def requirement(raw: Mapping[str, Any], where: str, operators: frozenset[str]) -> Requirement:
    key = str(raw.get("key", ""))
    op = str(raw.get("operator", ""))
    values = tuple(str(v) for v in raw.get("values") or ())
    if op not in operators:
        raise SpecError(
            f"{where}: unknown operator {op!r} for key {key!r}; "
            f"expected one of {', '.join(sorted(operators))}"
        )
    # A Gt/Lt without one integer value is kept: it matches no node, so only its own term
    # fails, as in kube-scheduler.
    return Requirement(key, op, values)


def label_selector(raw: Mapping[str, Any] | None, where: str) -> LabelSelector | None:
    if raw is None:
        return None
    reqs = [Requirement(str(k), "In", (str(v),)) for k, v in (raw.get("matchLabels") or {}).items()]
    for i, expression in enumerate(raw.get("matchExpressions") or ()):
        reqs.append(requirement(expression, f"{where}.matchExpressions[{i}]", LABEL_OPERATORS))
    return LabelSelector(tuple(reqs))


def node_term(raw: Mapping[str, Any], where: str) -> NodeSelectorTerm:
    expressions = tuple(
        requirement(e, f"{where}.matchExpressions[{i}]", NODE_OPERATORS)
        for i, e in enumerate(raw.get("matchExpressions") or ())
    )
    fields = tuple(
        requirement(e, f"{where}.matchFields[{i}]", NODE_OPERATORS)
        for i, e in enumerate(raw.get("matchFields") or ())
    )
    for field in fields:
        if field.key != "metadata.name":
            raise SpecError(
                f"{where}.matchFields: unsupported field {field.key!r}; "
                "only metadata.name is supported"
            )
    return NodeSelectorTerm(expressions, fields)


def _pod_term(raw: Mapping[str, Any], where: str, namespace: str) -> PodAffinityTerm:
    key = str(raw.get("topologyKey") or "")
    if not key:
        raise SpecError(f"{where}.topologyKey: must not be empty")
    selector = label_selector(raw.get("labelSelector"), f"{where}.labelSelector")
    namespaces = frozenset(str(n) for n in raw.get("namespaces") or ())
    ns_selector = label_selector(raw.get("namespaceSelector"), f"{where}.namespaceSelector")
    if not namespaces and ns_selector is None:
        namespaces = frozenset({namespace})
    return PodAffinityTerm(selector, namespaces, ns_selector, key)


def _weighted(
    raw: Sequence[Mapping[str, Any]], where: str, namespace: str
) -> tuple[WeightedTerm, ...]:
    return tuple(
        WeightedTerm(
            int(item.get("weight") or 0),
            _pod_term(item.get("podAffinityTerm") or {}, f"{where}[{i}]", namespace),
        )
        for i, item in enumerate(raw)
    )


def _spread(raw: Mapping[str, Any], where: str) -> SpreadConstraint:
    key = str(raw.get("topologyKey") or "")
    if not key:
        raise SpecError(f"{where}.topologyKey: must not be empty")
    max_skew = int(raw.get("maxSkew") or 0)
    if max_skew < 1:
        raise SpecError(f"{where}.maxSkew: must be at least 1, got {max_skew}")
    when = str(raw.get("whenUnsatisfiable") or "DoNotSchedule")
    min_domains = raw.get("minDomains")
    return SpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=when,
        selector=label_selector(raw.get("labelSelector"), f"{where}.labelSelector"),
        min_domains=int(min_domains) if min_domains is not None else 1,
        node_affinity_policy=str(raw.get("nodeAffinityPolicy") or "Honor"),
        node_taints_policy=str(raw.get("nodeTaintsPolicy") or "Ignore"),
        match_label_keys=tuple(str(k) for k in raw.get("matchLabelKeys") or ()),
    )


def parse_scheduling(spec: Mapping[str, Any], namespace: str) -> Scheduling:
    """The constraints of a pod spec; raises SpecError naming the field it cannot use."""
    affinity = spec.get("affinity") or {}
    node_aff = affinity.get("nodeAffinity") or {}
    required = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    required_terms = None
    if required is not None:
        required_terms = tuple(
            node_term(t, f"affinity.nodeAffinity.required.nodeSelectorTerms[{i}]")
            for i, t in enumerate(required.get("nodeSelectorTerms") or ())
        )
    preferred_terms = tuple(
        (
            int(p.get("weight") or 0),
            node_term(p.get("preference") or {}, f"affinity.nodeAffinity.preferred[{i}]"),
        )
        for i, p in enumerate(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ())
    )
    pod_aff = affinity.get("podAffinity") or {}
    anti = affinity.get("podAntiAffinity") or {}
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    ports = []
    # Host ports are held by the app containers and by restartable (sidecar) init containers;
    # a plain init container has exited before the app starts.
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    for container in [*(spec.get("containers") or ()), *sidecars]:
        for port in container.get("ports") or ():
            if port.get("hostPort"):
                ports.append(
                    HostPort(
                        str(port.get("protocol") or "TCP"),
                        str(port.get("hostIP") or "0.0.0.0"),
                        int(port["hostPort"]),
                    )
                )
    tolerations = tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or "Equal"),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in spec.get("tolerations") or ()
    )
    scheduling = Scheduling(
        node_selector=tuple(
            sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items())
        ),
        required_node_terms=required_terms,
        preferred_node_terms=preferred_terms,
        tolerations=tolerations,
        host_ports=tuple(ports),
        spread=tuple(
            _spread(c, f"topologySpreadConstraints[{i}]")
            for i, c in enumerate(spec.get("topologySpreadConstraints") or ())
        ),
        required_affinity=tuple(
            _pod_term(t, f"affinity.podAffinity.required[{i}]", namespace)
            for i, t in enumerate(pod_aff.get(req) or ())
        ),
        required_anti_affinity=tuple(
            _pod_term(t, f"affinity.podAntiAffinity.required[{i}]", namespace)
            for i, t in enumerate(anti.get(req) or ())
        ),
        preferred_affinity=_weighted(
            pod_aff.get(pref) or (), "affinity.podAffinity.preferred", namespace
        ),
        preferred_anti_affinity=_weighted(
            anti.get(pref) or (), "affinity.podAntiAffinity.preferred", namespace
        ),
    )
    return scheduling if scheduling != NO_CONSTRAINTS else NO_CONSTRAINTS


def parse_taints(raw: Iterable[Mapping[str, Any]]) -> tuple[Taint, ...]:
    return tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in raw
    )
