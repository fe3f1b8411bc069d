"""A SchedulingPolicy object, as the API server returns it, compiled into a frozen ``Policy``.

The CRD's schema makes the API server refuse nonsense, but an object stored under an older or
looser CRD, or edited through a path that skips validation, can still reach plumb. So every
field is checked again here, with the schema's own limits: anything unusable raises a
``PolicyError`` whose message names the field and the offending value (``spec.topology[0]
.maxSkew: must be at least 1, got 0``). No other exception escapes ``compile_policy`` for any
JSON-like input. Purely computational; no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

from plumb.backend.records import specs
from plumb.policy import fields, slo
from plumb.policy.fields import PolicyError

__all__ = [
    "BEST_EFFORT",
    "BURSTABLE",
    "CLUSTER",
    "DEFAULT_ZONE_KEY",
    "GUARANTEED",
    "NO_PREEMPTION_RULES",
    "PRIORITY",
    "QOS_CLASSES",
    "QOS_THEN_PRIORITY",
    "SAME_NAMESPACE",
    "SCOPES",
    "VICTIM_ORDERS",
    "DeviationBudget",
    "GangTopology",
    "Key",
    "OnExhausted",
    "Policy",
    "PolicyError",
    "Preemption",
    "Scoring",
    "Strategy",
    "TopologyRule",
    "Weights",
    "ZoneHealth",
    "compile_policy",
    "object_generation",
    "object_key",
    "object_uid",
]

DEFAULT_ZONE_KEY = "topology.kubernetes.io/zone"
INT32_MAX = 2**31 - 1
MAX_PRIORITY = 1_000_000_000
MAX_VIOLATIONS = 10_000
MAX_WEIGHT = 100
MAX_TOPOLOGY = 8
MAX_LABELS = 32
MAX_EXPRESSIONS = 32
MAX_VALUES = 64
MAX_VICTIMS = 10_000

# spec.preemption's enums. The QoS class names are a pod's status.qosClass; preemption/evaluator
# spells them too (it reads no policy: the PostFilter turns one into its Rules).
GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"
QOS_CLASSES = (GUARANTEED, BURSTABLE, BEST_EFFORT)
PRIORITY = "Priority"  # victimOrder: kube-scheduler's order (priority, then start time)
QOS_THEN_PRIORITY = "QoSThenPriority"  # victimOrder: BestEffort, Burstable, Guaranteed first
VICTIM_ORDERS = (PRIORITY, QOS_THEN_PRIORITY)
CLUSTER = "Cluster"  # scope: victims from any namespace
SAME_NAMESPACE = "SameNamespace"  # scope: victims from the preemptor's namespace only
SCOPES = (CLUSTER, SAME_NAMESPACE)

Key = tuple[str, str]
"""(namespace, name) of a policy."""


class Strategy(enum.Enum):
    LEAST_ALLOCATED = "LeastAllocated"
    MOST_ALLOCATED = "MostAllocated"
    BALANCED_ALLOCATION = "BalancedAllocation"


class OnExhausted(enum.Enum):
    BLOCK = "Block"  # stop deviating until the window frees budget
    REVERT = "Revert"  # also fall back to the last good generation after a failing spec change


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class TopologyRule:
    """One spread constraint over the governed pods; ``hard`` is whenUnsatisfiable
    DoNotSchedule (a filter a deviation budget may exceed), otherwise a score preference."""

    topology_key: str
    max_skew: int = 1
    min_domains: int | None = None
    hard: bool = True

    @property
    def when_unsatisfiable(self) -> str:
        return "DoNotSchedule" if self.hard else "ScheduleAnyway"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class GangTopology:
    """``spec.gangs``: keep each pod group whose members the policy governs inside one domain
    of ``topology_key`` when one can hold its minimum. ``hard`` (whenUnsatisfiable
    DoNotSchedule): a group no single domain holds spans domains only on the deviation budget,
    one deviation per group, and waits when the budget is spent; otherwise (ScheduleAnyway) it
    spans domains freely."""

    topology_key: str
    hard: bool = True

    @property
    def when_unsatisfiable(self) -> str:
        return "DoNotSchedule" if self.hard else "ScheduleAnyway"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Weights:
    """Multipliers of each plugin's 0-100 score; kube-scheduler's defaults."""

    resources: int = 1
    balance: int = 1
    spread: int = 2
    affinity: int = 2
    taints: int = 3
    zone_health: int = 1


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Scoring:
    """``spec.scoring``; ``given`` is False when the policy has none (the pods it governs are
    then scored by their scheduler profile's weights and strategy, ZoneHealth's weight aside)."""

    strategy: Strategy = Strategy.LEAST_ALLOCATED
    weights: Weights = Weights()
    given: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ZoneHealth:
    """Which node label names a zone, and how long observations count (seconds)."""

    topology_key: str = DEFAULT_ZONE_KEY
    window: float = 300.0
    stale_after: float = 120.0


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DeviationBudget:
    """Placements allowed beyond a hard maxSkew per window (seconds), and when it trips."""

    max_violations: int = 3
    window: float = 600.0
    failure_rate_threshold: float = 0.15
    on_exhausted: OnExhausted = OnExhausted.BLOCK


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Preemption:
    """``spec.preemption``: how the governed pods take part in preemption. ``exempt_qos``: the
    QoS classes of governed pods no preemptor may evict; ``victim_order``: ``PRIORITY`` or
    ``QOS_THEN_PRIORITY``; ``same_namespace``: a governed preemptor evicts only pods of its own
    namespace (scope SameNamespace); ``max_victims``: at most this many victims per preemption
    (maxVictimsPerPod), None for no cap. The defaults are kube-scheduler's behaviour."""

    exempt_qos: frozenset[str] = frozenset()
    victim_order: str = PRIORITY
    same_namespace: bool = False
    max_victims: int | None = None

    @property
    def qos_order(self) -> bool:
        return self.victim_order == QOS_THEN_PRIORITY

    @property
    def scope(self) -> str:
        return SAME_NAMESPACE if self.same_namespace else CLUSTER

    def exempts(self, qos_class: str) -> bool:
        """Whether a governed pod of ``qos_class`` is never a victim."""
        return qos_class in self.exempt_qos


NO_PREEMPTION_RULES = Preemption()


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    """One compiled generation of a SchedulingPolicy."""

    namespace: str
    name: str
    uid: str
    generation: int
    selector: specs.LabelSelector
    priority: int = 0
    topology: tuple[TopologyRule, ...] = ()
    scoring: Scoring = Scoring()
    zone_health: ZoneHealth = ZoneHealth()
    deviation_budget: DeviationBudget | None = None
    preemption: Preemption = NO_PREEMPTION_RULES
    gangs: GangTopology | None = None
    quota_slo: slo.QuotaSLO | None = None

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    def governs(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod of ``namespace`` with ``labels`` is selected (not whether this policy
        wins against others: that is the store's ``match``)."""
        return namespace == self.namespace and self.selector.matches(labels)

    def rule(self, topology_key: str) -> TopologyRule | None:
        return next((r for r in self.topology if r.topology_key == topology_key), None)


def object_key(obj: Any) -> Key | None:
    """(namespace, name) of an object, or None when it has no usable identity."""
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(metadata, Mapping):
        return None
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if isinstance(namespace, str) and namespace and isinstance(name, str) and name:
        return (namespace, name)
    return None


def object_generation(obj: Any) -> int:
    """metadata.generation when it is a non-negative integer, else 0 (never raises)."""
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    value = metadata.get("generation") if isinstance(metadata, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def object_uid(obj: Any) -> str:
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    value = metadata.get("uid") if isinstance(metadata, Mapping) else None
    return value if isinstance(value, str) else ""


def compile_policy(obj: Any) -> Policy:
    """Compile one SchedulingPolicy object; raises ``PolicyError`` and nothing else (a
    property test feeds it arbitrary JSON to hold it to that)."""
    return _compile(obj)


# Compiling -------------------------------------------------------------------------------------


def _compile(obj: Any) -> Policy:
    obj = fields.mapping(obj, "object")
    metadata = fields.mapping(obj.get("metadata"), "metadata")
    key = object_key(obj)
    if key is None:
        raise PolicyError("metadata: needs a namespace and a name")
    generation = metadata.get("generation", 0)
    generation = fields.integer(generation, "metadata.generation", low=0, high=2**63 - 1)
    uid = metadata.get("uid", "")
    if not isinstance(uid, str):
        raise PolicyError(f"metadata.uid: must be a string, got {fields.show(uid)}")
    if obj.get("spec") is None:
        raise PolicyError("spec: required; a SchedulingPolicy needs at least spec.selector")
    raw = fields.mapping(obj["spec"], "spec")
    fields.known(
        raw,
        "spec",
        (
            "selector",
            "priority",
            "topology",
            "scoring",
            "zoneHealth",
            "deviationBudget",
            "preemption",
            "gangs",
            "quotaSLO",
        ),
    )
    budget = raw.get("deviationBudget")
    return Policy(
        namespace=key[0],
        name=key[1],
        uid=uid,
        generation=generation,
        selector=_selector(raw.get("selector"), "spec.selector"),
        priority=fields.integer(
            raw.get("priority", 0), "spec.priority", low=-MAX_PRIORITY, high=MAX_PRIORITY
        ),
        topology=_topology(raw.get("topology"), "spec.topology"),
        scoring=_scoring(raw.get("scoring"), "spec.scoring"),
        zone_health=_zone_health(raw.get("zoneHealth"), "spec.zoneHealth"),
        deviation_budget=None if budget is None else _budget(budget, "spec.deviationBudget"),
        preemption=_preemption(raw.get("preemption"), "spec.preemption"),
        gangs=_gangs(raw.get("gangs"), "spec.gangs"),
        quota_slo=slo.parse(raw.get("quotaSLO"), "spec.quotaSLO"),
    )


def _selector(value: Any, where: str) -> specs.LabelSelector:
    empty = (
        f"{where}: must have at least one matchLabels entry or matchExpressions term; an empty "
        "selector would govern every pod in the namespace"
    )
    if value is None:
        raise PolicyError(empty)
    raw = fields.mapping(value, where)
    fields.known(raw, where, ("matchLabels", "matchExpressions"))
    labels = fields.mapping(fields.or_default(raw.get("matchLabels"), {}), f"{where}.matchLabels")
    if len(labels) > MAX_LABELS:
        raise PolicyError(f"{where}.matchLabels: at most {MAX_LABELS} entries, got {len(labels)}")
    clean_labels: dict[str, str] = {}
    for label, text in labels.items():
        clean_labels[fields.label_key(label, f"{where}.matchLabels")] = fields.label_value(
            text, f"{where}.matchLabels.{label}"
        )
    expressions = fields.listing(
        fields.or_default(raw.get("matchExpressions"), []), f"{where}.matchExpressions"
    )
    if len(expressions) > MAX_EXPRESSIONS:
        raise PolicyError(
            f"{where}.matchExpressions: at most {MAX_EXPRESSIONS} terms, got {len(expressions)}"
        )
    clean_expressions = [
        _expression(e, f"{where}.matchExpressions[{i}]") for i, e in enumerate(expressions)
    ]
    if not clean_labels and not clean_expressions:
        raise PolicyError(empty)
    try:
        selector = specs.label_selector(
            {"matchLabels": clean_labels, "matchExpressions": clean_expressions}, where
        )
    except specs.SpecError as error:
        raise PolicyError(str(error)) from error
    if selector is None:  # label_selector returns None only when given None
        raise PolicyError(empty)
    return selector


def _expression(value: Any, where: str) -> dict[str, Any]:
    raw = fields.mapping(value, where)
    fields.known(raw, where, ("key", "operator", "values"))
    key = fields.label_key(raw.get("key"), f"{where}.key")
    operator = fields.enum_value(
        raw.get("operator"), f"{where}.operator", sorted(specs.LABEL_OPERATORS)
    )
    values = fields.listing(fields.or_default(raw.get("values"), []), f"{where}.values")
    if len(values) > MAX_VALUES:
        raise PolicyError(f"{where}.values: at most {MAX_VALUES} values, got {len(values)}")
    clean = [fields.label_value(v, f"{where}.values[{i}]") for i, v in enumerate(values)]
    if operator in ("In", "NotIn") and not clean:
        raise PolicyError(
            f"{where}.values: operator {operator} needs at least one value; use Exists to "
            "match any value"
        )
    if operator in ("Exists", "DoesNotExist") and clean:
        raise PolicyError(
            f"{where}.values: operator {operator} takes no values; remove values, or use In to "
            "match listed values"
        )
    return {"key": key, "operator": operator, "values": clean}


def _topology(value: Any, where: str) -> tuple[TopologyRule, ...]:
    entries = fields.listing(fields.or_default(value, []), where)
    if len(entries) > MAX_TOPOLOGY:
        raise PolicyError(f"{where}: at most {MAX_TOPOLOGY} entries, got {len(entries)}")
    rules: list[TopologyRule] = []
    for i, entry in enumerate(entries):
        rule = _rule(entry, f"{where}[{i}]")
        for j, earlier in enumerate(rules):
            if earlier.topology_key == rule.topology_key:
                raise PolicyError(
                    f"{where}[{i}].topologyKey: duplicate value {fields.show(rule.topology_key)} "
                    f"({where}[{j}] has it); use one constraint per key"
                )
        rules.append(rule)
    return tuple(rules)


def _rule(value: Any, where: str) -> TopologyRule:
    raw = fields.mapping(value, where)
    fields.known(raw, where, ("topologyKey", "maxSkew", "minDomains", "whenUnsatisfiable"))
    if raw.get("topologyKey") is None:
        raise PolicyError(f"{where}.topologyKey: required")
    key = fields.label_key(raw["topologyKey"], f"{where}.topologyKey")
    max_skew = fields.integer(raw.get("maxSkew", 1), f"{where}.maxSkew", low=1, high=INT32_MAX)
    when = fields.enum_value(
        raw.get("whenUnsatisfiable", "DoNotSchedule"),
        f"{where}.whenUnsatisfiable",
        ["DoNotSchedule", "ScheduleAnyway"],
    )
    min_domains = raw.get("minDomains")
    if min_domains is not None:
        min_domains = fields.integer(min_domains, f"{where}.minDomains", low=1, high=INT32_MAX)
        if when != "DoNotSchedule":
            raise PolicyError(
                f"{where}.minDomains: applies only with whenUnsatisfiable DoNotSchedule; remove "
                "it or use DoNotSchedule"
            )
    return TopologyRule(
        topology_key=key, max_skew=max_skew, min_domains=min_domains, hard=when == "DoNotSchedule"
    )


_WEIGHT_FIELDS = {
    "resources": "resources",
    "balance": "balance",
    "spread": "spread",
    "affinity": "affinity",
    "taints": "taints",
    "zoneHealth": "zone_health",
}


def _scoring(value: Any, where: str) -> Scoring:
    raw = fields.mapping(fields.or_default(value, {}), where)
    fields.known(raw, where, ("strategy", "weights"))
    strategy = fields.enum_value(
        raw.get("strategy", Strategy.LEAST_ALLOCATED.value),
        f"{where}.strategy",
        [s.value for s in Strategy],
    )
    weights_raw = fields.mapping(fields.or_default(raw.get("weights"), {}), f"{where}.weights")
    fields.known(weights_raw, f"{where}.weights", _WEIGHT_FIELDS)
    defaults = Weights()
    weights = {
        attribute: fields.integer(
            weights_raw.get(field, getattr(defaults, attribute)),
            f"{where}.weights.{field}",
            low=0,
            high=MAX_WEIGHT,
        )
        for field, attribute in _WEIGHT_FIELDS.items()
    }
    return Scoring(strategy=Strategy(strategy), weights=Weights(**weights), given=value is not None)


def _zone_health(value: Any, where: str) -> ZoneHealth:
    raw = fields.mapping(fields.or_default(value, {}), where)
    fields.known(raw, where, ("topologyKey", "window", "staleAfter"))
    key = fields.label_key(raw.get("topologyKey", DEFAULT_ZONE_KEY), f"{where}.topologyKey")
    window_text = raw.get("window", "5m")
    stale_text = raw.get("staleAfter", "2m")
    window = fields.parse_duration(window_text, f"{where}.window")
    stale_after = fields.parse_duration(stale_text, f"{where}.staleAfter")
    if stale_after > window:
        raise PolicyError(
            f"{where}.staleAfter: must not be longer than window ({window_text}), got "
            f"{stale_text}: data that has left the window is never fresh"
        )
    return ZoneHealth(topology_key=key, window=window, stale_after=stale_after)


def _budget(value: Any, where: str) -> DeviationBudget:
    raw = fields.mapping(value, where)
    fields.known(raw, where, ("maxViolations", "window", "failureRateThreshold", "onExhausted"))
    threshold = raw.get("failureRateThreshold", 0.15)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise PolicyError(
            f"{where}.failureRateThreshold: must be a number, got {fields.show(threshold)}"
        )
    if not (math.isfinite(threshold) and 0 < threshold <= 1):
        raise PolicyError(
            f"{where}.failureRateThreshold: must be more than 0 and at most 1, got "
            f"{fields.show(threshold)}"
        )
    on_exhausted = fields.enum_value(
        raw.get("onExhausted", "Block"), f"{where}.onExhausted", [o.value for o in OnExhausted]
    )
    return DeviationBudget(
        max_violations=fields.integer(
            raw.get("maxViolations", 3), f"{where}.maxViolations", low=0, high=MAX_VIOLATIONS
        ),
        window=fields.parse_duration(raw.get("window", "10m"), f"{where}.window"),
        failure_rate_threshold=float(threshold),
        on_exhausted=OnExhausted(on_exhausted),
    )


def _preemption(value: Any, where: str) -> Preemption:
    if value is None:
        return NO_PREEMPTION_RULES
    raw = fields.mapping(value, where)
    fields.known(raw, where, ("exemptQoS", "victimOrder", "scope", "maxVictimsPerPod"))
    exempt = fields.enum_set(
        fields.or_default(raw.get("exemptQoS"), []), f"{where}.exemptQoS", list(QOS_CLASSES)
    )
    order = fields.enum_value(
        fields.or_default(raw.get("victimOrder"), PRIORITY),
        f"{where}.victimOrder",
        list(VICTIM_ORDERS),
    )
    scope = fields.enum_value(
        fields.or_default(raw.get("scope"), CLUSTER), f"{where}.scope", list(SCOPES)
    )
    cap = raw.get("maxVictimsPerPod")
    if cap is not None:
        cap = fields.integer(cap, f"{where}.maxVictimsPerPod", low=1, high=MAX_VICTIMS)
    return Preemption(
        exempt_qos=exempt,
        victim_order=order,
        same_namespace=scope == SAME_NAMESPACE,
        max_victims=cap,
    )


def _gangs(value: Any, where: str) -> GangTopology | None:
    if value is None:
        return None
    raw = fields.mapping(value, where)
    fields.known(raw, where, ("topologyKey", "whenUnsatisfiable"))
    if raw.get("topologyKey") is None:
        raise PolicyError(
            f"{where}.topologyKey: required; name the node label whose values are the domains "
            "(topology.kubernetes.io/zone, a rack label)"
        )
    key = fields.label_key(raw["topologyKey"], f"{where}.topologyKey")
    when = fields.enum_value(
        raw.get("whenUnsatisfiable", "DoNotSchedule"),
        f"{where}.whenUnsatisfiable",
        ["DoNotSchedule", "ScheduleAnyway"],
    )
    return GangTopology(topology_key=key, hard=when == "DoNotSchedule")
