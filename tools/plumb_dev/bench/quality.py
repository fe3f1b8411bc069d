"""Placement quality of one run, read from the final pods and nodes: spread skew, nodes used,
cpu balance, preferred-affinity hits, and violations (which must be zero); for a mixed workload
also per pod class (placed, skew of the class's own spread, its preferred-node share).

Pure: it takes the API objects as listed and computes; nothing here talks to the API server.
A violation is a node over its allocatable cpu, memory or pod count, a DoNotSchedule spread
constraint whose final skew exceeds maxSkew (pods are only added, so a placement that respected
the constraint when it was made never breaks it later), or a pod sharing a topology domain with
a pod its required anti-affinity forbids.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from plumb.k8s import quantities

JSON = dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassQuality:
    """The measured pods of one class of a mixed workload."""

    measured_pods: int
    placed: int
    max_skew: int | None
    """The largest final skew over the spread constraints of the class's pods; None if none."""
    preferred_share: float | None
    """Share of the class's placed pods with preferred node affinity on a preferred node."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Quality:
    measured_pods: int
    placed: int
    """Measured pods bound to a node of the run."""
    nodes: int
    nodes_used_share: float
    """Share of the run's nodes that received at least one measured pod."""
    cpu_utilisation_stddev: float
    """Population stddev across nodes of requested cpu / allocatable cpu (0 is perfectly even)."""
    spread_skew: dict[str, int]
    """Final skew (max - min pods over the domains) per spread constraint of the measured pods."""
    preferred_share: float | None
    """Share of placed pods with preferred node affinity that landed on a preferred node."""
    violations: dict[str, int]
    """Per kind: "allocatable" (nodes over), "spread" (pods beyond maxSkew), "anti-affinity"
    (pods sharing a domain with a pod they must avoid)."""
    classes: dict[str, ClassQuality] = dataclasses.field(default_factory=dict)
    """Per pod class (the class label's value) of a mixed workload; empty for one shape."""

    @property
    def total_violations(self) -> int:
        return sum(self.violations.values())


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether labels satisfy a LabelSelector (a missing selector matches nothing)."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for requirement in selector.get("matchExpressions") or []:
        key, operator = requirement["key"], requirement["operator"]
        values = requirement.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _node_term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    # A node selector term uses the same operators; Gt/Lt are not used by bench workloads.
    return matches({"matchExpressions": term.get("matchExpressions") or []}, labels)


def requests(pod: JSON) -> tuple[int, int]:
    """(milli-cpu, memory bytes) a pod requests: containers summed, init containers' max."""
    spec = pod.get("spec") or {}

    def of(containers: Iterable[JSON]) -> list[tuple[int, int]]:
        out = []
        for container in containers:
            wanted = (container.get("resources") or {}).get("requests") or {}
            out.append(
                (
                    quantities.milli_value(wanted.get("cpu", "0")),
                    quantities.value(wanted.get("memory", "0")),
                )
            )
        return out

    app = of(spec.get("containers") or [])
    init = of(spec.get("initContainers") or [])
    cpu = max([sum(c for c, _ in app), *(c for c, _ in init)])
    memory = max([sum(m for _, m in app), *(m for _, m in init)])
    return cpu, memory


def _name(obj: JSON) -> str:
    return str(obj["metadata"]["name"])


def _labels(obj: JSON) -> dict[str, str]:
    return dict(obj["metadata"].get("labels") or {})


def assess(
    nodes: Sequence[JSON],
    pods: Sequence[JSON],
    measured: Collection[str],
    *,
    class_label: str | None = None,
) -> Quality:
    """The quality of the placement of pods (initial and measured) on nodes; with class_label,
    also per value of that label among the measured pods."""
    node_by_name = {_name(node): node for node in nodes}
    placed_pods = [pod for pod in pods if (pod.get("spec") or {}).get("nodeName") in node_by_name]
    measured_placed = [pod for pod in placed_pods if _name(pod) in measured]
    violations = {
        "allocatable": _over_allocatable(node_by_name, placed_pods),
        "spread": 0,
        "anti-affinity": _anti_affinity_violations(node_by_name, placed_pods),
    }
    skews: dict[str, int] = {}
    for key, constraint in _spread_constraints(pod for pod in pods if _name(pod) in measured):
        skew, excess = _skew(constraint, node_by_name, placed_pods)
        skews[key] = skew
        if constraint.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule":
            violations["spread"] += excess
    used = {pod["spec"]["nodeName"] for pod in measured_placed}
    classes = {}
    if class_label is not None:
        classes = _per_class(class_label, node_by_name, pods, placed_pods, measured)
    return Quality(
        measured_pods=len(measured),
        placed=len(measured_placed),
        nodes=len(nodes),
        nodes_used_share=len(used) / len(nodes) if nodes else 0.0,
        cpu_utilisation_stddev=_cpu_stddev(node_by_name, placed_pods),
        spread_skew=skews,
        preferred_share=_preferred_share(node_by_name, measured_placed),
        violations=violations,
        classes=classes,
    )


def _per_class(
    class_label: str,
    node_by_name: Mapping[str, JSON],
    pods: Sequence[JSON],
    placed_pods: Sequence[JSON],
    measured: Collection[str],
) -> dict[str, ClassQuality]:
    by_class: dict[str, list[JSON]] = defaultdict(list)
    for pod in pods:
        value = _labels(pod).get(class_label)
        if value is not None and _name(pod) in measured:
            by_class[value].append(pod)
    out = {}
    for value, members in sorted(by_class.items()):
        placed = [pod for pod in members if (pod.get("spec") or {}).get("nodeName") in node_by_name]
        # The skew of the class's own constraints, counted over every placed pod they select.
        skews = [_skew(c, node_by_name, placed_pods)[0] for _, c in _spread_constraints(members)]
        out[value] = ClassQuality(
            measured_pods=len(members),
            placed=len(placed),
            max_skew=max(skews, default=None),
            preferred_share=_preferred_share(node_by_name, placed),
        )
    return out


def _allocatable(node: JSON) -> tuple[int, int, int]:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return (
        quantities.milli_value(allocatable.get("cpu", "0")),
        quantities.value(allocatable.get("memory", "0")),
        quantities.value(allocatable.get("pods", "0")),
    )


def _per_node(node_by_name: Mapping[str, JSON], pods: Iterable[JSON]) -> dict[str, list[JSON]]:
    grouped: dict[str, list[JSON]] = {name: [] for name in node_by_name}
    for pod in pods:
        grouped[pod["spec"]["nodeName"]].append(pod)
    return grouped


def _over_allocatable(node_by_name: Mapping[str, JSON], pods: Iterable[JSON]) -> int:
    over = 0
    for name, on_node in _per_node(node_by_name, pods).items():
        cpu, memory, count = _allocatable(node_by_name[name])
        asked = [requests(pod) for pod in on_node]
        if (
            sum(c for c, _ in asked) > cpu
            or sum(m for _, m in asked) > memory
            or len(on_node) > count
        ):
            over += 1
    return over


def _cpu_stddev(node_by_name: Mapping[str, JSON], pods: Iterable[JSON]) -> float:
    shares = []
    for name, on_node in _per_node(node_by_name, pods).items():
        cpu = _allocatable(node_by_name[name])[0]
        asked = sum(requests(pod)[0] for pod in on_node)
        shares.append(asked / cpu if cpu else 0.0)
    return statistics.pstdev(shares) if shares else 0.0


def _spread_constraints(pods: Iterable[JSON]) -> list[tuple[str, JSON]]:
    """The distinct spread constraints of pods, each with a readable key."""
    seen: dict[str, JSON] = {}
    for pod in pods:
        for constraint in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
            selector = constraint.get("labelSelector") or {}
            labels = ",".join(
                f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())
            )
            key = (
                f"{constraint['topologyKey']} maxSkew={constraint['maxSkew']} "
                f"{constraint.get('whenUnsatisfiable', 'DoNotSchedule')} [{labels}]"
            )
            seen.setdefault(key, constraint)
    return sorted(seen.items())


def _skew(
    constraint: JSON, node_by_name: Mapping[str, JSON], pods: Iterable[JSON]
) -> tuple[int, int]:
    """(max - min matching pods over the domains, pods beyond min + maxSkew)."""
    key = constraint["topologyKey"]
    counts: Counter[str] = Counter(
        {_labels(node)[key]: 0 for node in node_by_name.values() if key in _labels(node)}
    )
    selector = constraint.get("labelSelector")
    for pod in pods:
        domain = _labels(node_by_name[pod["spec"]["nodeName"]]).get(key)
        if domain is not None and matches(selector, _labels(pod)):
            counts[domain] += 1
    if not counts:
        return 0, 0
    low = min(counts.values())
    excess = sum(max(0, n - (low + int(constraint["maxSkew"]))) for n in counts.values())
    return max(counts.values()) - low, excess


def _anti_affinity_violations(node_by_name: Mapping[str, JSON], pods: Sequence[JSON]) -> int:
    """Pods that share a topology domain with another pod their required anti-affinity names."""
    by_domain: dict[tuple[str, str], list[JSON]] = defaultdict(list)
    keys = {term["topologyKey"] for pod in pods for term in _anti_terms(pod)}
    for pod in pods:
        labels = _labels(node_by_name[pod["spec"]["nodeName"]])
        for key in keys:
            if key in labels:
                by_domain[(key, labels[key])].append(pod)
    violating = 0
    for pod in pods:
        labels = _labels(node_by_name[pod["spec"]["nodeName"]])
        for term in _anti_terms(pod):
            key = term["topologyKey"]
            if key not in labels:
                continue
            others = (q for q in by_domain[(key, labels[key])] if q is not pod)
            if any(matches(term.get("labelSelector"), _labels(q)) for q in others):
                violating += 1
                break
    return violating


def _anti_terms(pod: JSON) -> list[JSON]:
    anti = ((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}
    terms: list[JSON] = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return terms


def _preferred_share(node_by_name: Mapping[str, JSON], pods: Sequence[JSON]) -> float | None:
    hits = total = 0
    for pod in pods:
        node_affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
        preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if not preferred:
            continue
        total += 1
        labels = _labels(node_by_name[pod["spec"]["nodeName"]])
        if any(_node_term_matches(p.get("preference") or {}, labels) for p in preferred):
            hits += 1
    return hits / total if total else None
