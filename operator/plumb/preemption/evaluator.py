"""The evaluator: whom to evict for a pod that fits nowhere, and on which node; pure computation.

kube-scheduler's DefaultPreemption PostFilter (its Evaluator, preemption.go) without its API
calls, as v1.34 to v1.37 decide (they differ in how budgets are spent: ``first_violation``):
preemption/search.py feeds it from the cache with the kernel as ``fits``, and
scheduler/postfilter.py carries the verdict out with preemption/execution.py (nomination,
DisruptionTarget, deletes, events).

The story of one call to ``preempt``, after a pod fits nowhere:
1. eligible? not with preemptionPolicy Never, nor while an earlier preemption's victims still
   terminate on its nominated node;
2. every node that failed only for reasons removing pods can cure (Unschedulable, never
   UnschedulableAndUnresolvable) is searched, all of them (no sampling, unlike kube-scheduler);
3. per node: remove every lower-priority pod, check the pod fits, then reprieve victims one by
   one (PDB-violating ones first, each group most important first) while it still fits;
4. the node with the fewest PDB violations, then the lowest highest-victim priority, the smallest
   priority sum, the fewest victims, the latest start of its most important victims, then
   plumb's stable hash of (pod uid, node name) — or, with no node, kube-scheduler's sentence.

``fits`` stands for "run the filters with only these pods on the node" (the kernel, in the
scheduler; a resource sum in some tests). Purely computational; no I/O.

A lower-priority pod that is already terminating is a victim like any other, as in
kube-scheduler: it still holds its room until it is gone, it counts with its priority when
nodes are compared, and it is marked and deleted again (the API server keeps the first
deletion's deadline).

A SchedulingPolicy's ``spec.preemption`` narrows this for the pods it governs (docs/policy.md);
the caller turns it into ``Rules`` for the preemptor and marks the pods on the nodes. With
``NO_RULES`` and no pod ``exempt``, everything above holds unchanged.

- ``Pod.exempt`` (the pod's own policy lists its QoS class in ``exemptQoS``): never a victim. It
  stays on the node like a pod of equal or higher priority and takes its room in every fit check.
- ``Rules.same_namespace`` (``scope: SameNamespace``): pods of other namespaces than the
  preemptor's are never victims, in the same way.
- ``Rules.qos_order`` (``victimOrder: QoSThenPriority``): importance is the QoS class first
  (Guaranteed > Burstable > BestEffort; an unknown class counts as Burstable), then
  kube-scheduler's (priority, start). Step 3 reprieves in that order, so BestEffort pods go
  first; the PDB-violating-first grouping stays, and the victims are listed in that order. The
  choice of node (step 4) stays kube-scheduler's.
- ``Rules.max_victims`` (``maxVictimsPerPod``): a node whose victims, after the reprieve, outnumber
  the cap is no candidate; its reason (``cap_reason``, one text for every such node, so the
  sentence counts them together) names the cap and ``Rules.source``.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

import numpy as np

from plumb.backend.records import hashing, specs
from plumb.framework import diagnoses
from plumb.kernel import reference

# kube-scheduler's words (defaultpreemption/default_preemption.go, preemption/preemption.go).
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_NODES = "no nodes available"
NO_CANDIDATE = "no candidate node for preemption"  # HTTP extenders left no candidate
PREFIX = "preemption: "
# Preempt's status on success, from v1.37 (#140180); DefaultPreemption puts PREFIX before it.
FOUND = "found a potential placement for pod on node {node}, preempting {victims} victims"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
NEVER = "Never"
# A pod's QoS class (status.qosClass), as ``Pod.qos``; "" is unknown and ranks as Burstable.
GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"
QOS_CLASSES = (GUARANTEED, BURSTABLE, BEST_EFFORT)  # most important first
_QOS_RANK: Mapping[str, int] = MappingProxyType({GUARANTEED: 0, BURSTABLE: 1, BEST_EFFORT: 2})
# Added to each victim's priority before summing, so all terms are >= 0 (pickOneNodeForPreemption).
_PRIORITY_OFFSET = 2**31
_EMPTY_LABELS: Mapping[str, str] = MappingProxyType({})
_EMPTY: Mapping[str, int] = MappingProxyType({})


class Code(enum.Enum):
    """A node's filter verdict, as kube-scheduler's status codes: only Unschedulable nodes may be
    cured by removing pods."""

    UNSCHEDULABLE = "Unschedulable"
    UNRESOLVABLE = "UnschedulableAndUnresolvable"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Pod:
    """A preemptor or a pod on a node. ``start_time`` None means not started yet, which
    kube-scheduler reads as now (later than any start). ``preempted`` is the DisruptionTarget
    condition, True with reason PreemptionByScheduler; ``deleting`` a deletionTimestamp.
    ``qos`` is the QoS class (``QOS_CLASSES``, "" unknown); ``exempt`` that the policy governing
    this pod lists its class in exemptQoS, so no preemptor may evict it."""

    uid: str
    namespace: str
    name: str
    priority: int = 0
    requests: Mapping[str, int] = dataclasses.field(default_factory=lambda: _EMPTY)
    labels: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY_LABELS)
    start_time: datetime.datetime | None = None
    deleting: bool = False
    preempted: bool = False
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    nominated_node: str = ""
    qos: str = ""
    exempt: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class NodePods:
    name: str
    allocatable: Mapping[str, int] = dataclasses.field(default_factory=lambda: _EMPTY)
    pods: tuple[Pod, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget as preemption reads it. A None or empty selector matches nothing
    (policy/v1), as does one that failed to parse (pass None). ``disrupted`` are the names in
    status.disruptedPods: already counted by the API server, so neither counted nor violated.
    A pod with no labels at all matches no budget, even one selecting only by NotIn or
    DoesNotExist: kube-scheduler's filterPodsWithPDBViolation skips such a pod (v1.34 to v1.37)."""

    namespace: str
    selector: specs.LabelSelector | None
    disruptions_allowed: int
    disrupted: frozenset[str] = frozenset()

    def matches(self, pod: Pod) -> bool:
        if self.selector is None or not self.selector.requirements or not pod.labels:
            return False
        return self.namespace == pod.namespace and self.selector.matches(pod.labels)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Rules:
    """The preemptor's policy's ``spec.preemption`` (module docstring). ``source`` names the
    policy in messages, e.g. "SchedulingPolicy team-a/web"."""

    qos_order: bool = False
    same_namespace: bool = False
    max_victims: int | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if self.max_victims is not None and self.max_victims < 1:
            raise ValueError(f"max_victims must be at least 1 or None, got {self.max_victims}")

    def may_evict(self, preemptor: Pod, pod: Pod) -> bool:
        """Whether the rules let ``preemptor`` evict ``pod``, priority aside."""
        if pod.exempt:
            return False
        return not self.same_namespace or pod.namespace == preemptor.namespace


NO_RULES = Rules()


def cap_reason(rules: Rules) -> str:
    """The reason a node is no candidate because its victims outnumber ``rules.max_victims``."""
    of = f" of {rules.source}" if rules.source else ""
    return f"node(s) would need more than {rules.max_victims} victims (maxVictimsPerPod{of})"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class NodeStatus:
    """Why the pod failed on a node in the cycle before: the code and the filter reasons."""

    code: Code
    reasons: tuple[str, ...] = ()


class Fits(Protocol):
    """Whether ``pod`` passes every filter on ``node`` holding only ``remaining`` of its pods.

    As kube-scheduler's RunFilterPluginsWithNominatedPods, an implementation should also count
    the pods nominated to the node with a priority at least the pod's."""

    def __call__(self, pod: Pod, node: NodePods, remaining: Sequence[Pod], /) -> bool: ...


class Explains(Protocol):
    """The filter reasons ``pod`` does not fit ``node`` holding only ``remaining``."""

    def __call__(self, pod: Pod, node: NodePods, remaining: Sequence[Pod], /) -> Sequence[str]: ...


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """A node where preemption makes room: its victims, most important first."""

    node: str
    victims: tuple[Pod, ...]
    pdb_violations: int


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PreemptionVerdict:
    """The chosen node and its victims, or ``message`` (the PostFilter text the FailedScheduling
    message ends with) when none. ``candidates`` are every node where preemption would work, in
    name order; ``rejected`` the searched nodes where it would not, with why.
    ``clear_nomination`` is kube-scheduler's "nominate no node" when no candidate exists."""

    node: str | None
    victims: tuple[Pod, ...] = ()
    pdb_violations: int = 0
    candidates: tuple[Candidate, ...] = ()
    rejected: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    message: str = ""
    clear_nomination: bool = False


def found(node: str, victims: int) -> str:
    """kube-scheduler v1.37's words for a preemption that found ``node`` (``FOUND``); the
    count is of every victim chosen, those already being deleted too."""
    return FOUND.format(node=node, victims=victims)


def importance(pod: Pod) -> tuple[int, float, str, str, str]:
    """Sort key, most important first: higher priority, then earlier start (MoreImportantPod).
    kube-scheduler's sort is unstable among equals; plumb falls back to namespace, name, uid."""
    return (-pod.priority, _start(pod.start_time), pod.namespace, pod.name, pod.uid)


def qos_importance(pod: Pod) -> tuple[int, int, float, str, str, str]:
    """Sort key for ``victimOrder: QoSThenPriority``, most important first: the QoS class
    (Guaranteed, then Burstable or unknown, then BestEffort), then ``importance``."""
    return (_QOS_RANK.get(pod.qos, _QOS_RANK[BURSTABLE]), *importance(pod))


def victim_order(rules: Rules) -> Callable[[Pod], tuple[int | float | str, ...]]:
    """The sort key, most important first, that reprieves and lists victims under ``rules``."""
    return qos_importance if rules.qos_order else importance


def not_eligible(
    pod: Pod, nodes: Mapping[str, NodePods], statuses: Mapping[str, NodeStatus]
) -> str | None:
    """Why ``pod`` may not preempt now, in kube-scheduler's words, or None when it may
    (PodEligibleToPreemptOthers)."""
    if pod.preemption_policy == NEVER:
        return NOT_ELIGIBLE_NEVER
    if not pod.nominated_node:
        return None
    nominated = statuses.get(pod.nominated_node)
    # A node absent from the statuses counts as UnschedulableAndUnresolvable, as in kube-scheduler.
    if nominated is None or nominated.code is Code.UNRESOLVABLE:
        return None
    node = nodes.get(pod.nominated_node)
    if node is not None and any(
        p.priority < pod.priority and p.deleting and p.preempted for p in node.pods
    ):
        return NOT_ELIGIBLE_TERMINATING
    return None


def split_by_budgets(
    pods: Sequence[Pod], budgets: Sequence[DisruptionBudget], *, first_violation: bool = True
) -> tuple[list[Pod], list[Pod]]:
    """(violating, non-violating), order kept: each budget matching a pod is spent one
    disruption per pod, pods in the given order, budgets in theirs; a pod that overdraws one
    violates it. ``first_violation`` (v1.37's FilterVictimsWithPDBViolation): a pod stops at
    the first budget it overdraws, leaving the later ones unspent; without it (v1.34 to v1.36,
    filterPodsWithPDBViolation) every budget matching it is spent.

    kube-scheduler takes the budgets in its informer's order, which is random; so, with a pod
    under several budgets, which of them v1.37 leaves unspent is a coin toss there, and plumb
    decides it by the order it is given (the PostFilter sorts by namespace and name)."""
    allowed = [b.disruptions_allowed for b in budgets]
    violating: list[Pod] = []
    keeping: list[Pod] = []
    for pod in pods:
        violates = False
        for i, budget in enumerate(budgets):
            if not budget.matches(pod) or pod.name in budget.disrupted:
                continue
            allowed[i] -= 1
            violates |= allowed[i] < 0
            if violates and first_violation:
                break
        (violating if violates else keeping).append(pod)
    return violating, keeping


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSearch:
    """One node searched: a candidate, or the reasons (or error) it is none."""

    candidate: Candidate | None
    reasons: tuple[str, ...] = ()
    error: str = ""


def select_victims(
    pod: Pod,
    node: NodePods,
    budgets: Sequence[DisruptionBudget],
    fits: Fits,
    explains: Explains | None = None,
    fallback: tuple[str, ...] = (),
    rules: Rules = NO_RULES,
    *,
    first_violation: bool = True,
) -> NodeSearch:
    """The fewest, least important victims on ``node`` (SelectVictimsOnNode), within ``rules``;
    ``first_violation`` as ``split_by_budgets``'."""

    def stays(p: Pod) -> bool:
        # Equal or higher priority, or shielded by the rules: on the node whatever happens.
        return p.priority >= pod.priority or not rules.may_evict(pod, p)

    remaining = [p for p in node.pods if stays(p)]
    if len(remaining) == len(node.pods):
        return NodeSearch(None, (NO_VICTIMS,))
    if not fits(pod, node, remaining):
        reasons = tuple(explains(pod, node, remaining)) if explains is not None else fallback
        return NodeSearch(None, reasons)
    key = victim_order(rules)
    potential = sorted((p for p in node.pods if not stays(p)), key=key)
    violating, keeping = split_by_budgets(potential, budgets, first_violation=first_violation)
    victims: list[Pod] = []
    violations = 0
    for group_violates, group in ((True, violating), (False, keeping)):
        for victim in group:
            if fits(pod, node, [*remaining, victim]):
                remaining.append(victim)
            else:
                victims.append(victim)
                violations += group_violates
    if not victims and len(remaining) == len(node.pods):
        # The pod fits with every pod in place: the caller's status was wrong (kube-scheduler's
        # error for a node that needs no victims).
        return NodeSearch(None, error=f'expected at least one victim pod on node "{node.name}"')
    if rules.max_victims is not None and len(victims) > rules.max_victims:
        return NodeSearch(None, (cap_reason(rules),))
    victims.sort(key=key)
    return NodeSearch(Candidate(node=node.name, victims=tuple(victims), pdb_violations=violations))


class SelectVictims(Protocol):
    """A plugin's SelectVictimsOnNode: ``select_victims``, or CapacityScheduling's
    (preemption/quotavictims.py) where the cluster has ElasticQuotas."""

    def __call__(
        self,
        pod: Pod,
        node: NodePods,
        budgets: Sequence[DisruptionBudget],
        fits: Fits,
        explains: Explains | None = None,
        fallback: tuple[str, ...] = (),
        rules: Rules = NO_RULES,
        *,
        first_violation: bool = True,
    ) -> NodeSearch: ...


def choose(pod: Pod, candidates: Sequence[Candidate]) -> Candidate:
    """The best candidate by kube-scheduler's order (pickOneNodeForPreemption), then the hash."""
    names = np.array([hashing.stable_hash_u64(c.node) for c in candidates], dtype=np.uint64)
    ties = reference.mix(names, hashing.stable_hash_u64(pod.uid))
    ranked = sorted(range(len(candidates)), key=lambda i: (*_rank(candidates[i]), -int(ties[i])))
    return candidates[ranked[0]]


def _rank(candidate: Candidate) -> tuple[int, int, int, int, float]:
    """Smaller is better. A candidate with no victims (only terminating pods to wait for) has
    the lowest possible highest priority and the latest possible start."""
    victims = candidate.victims
    highest = max((v.priority for v in victims), default=-_PRIORITY_OFFSET - 1)
    total = sum(v.priority + _PRIORITY_OFFSET for v in victims)
    # GetEarliestPodStartTime: the earliest start among the highest-priority victims; later wins.
    earliest = min(
        (_start(v.start_time) for v in victims if v.priority == highest), default=math.inf
    )
    return (candidate.pdb_violations, highest, total, len(victims), -earliest)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Searched:
    """The nodes searched before one is chosen: every candidate (in name order), the searched
    nodes that are none with why, and the errors of nodes that needed no victims; ``total``:
    the nodes there are. HTTP extenders may replace the candidates before ``conclude``."""

    candidates: tuple[Candidate, ...]
    rejected: Mapping[str, tuple[str, ...]]
    errors: tuple[str, ...] = ()
    total: int = 0


def search(
    pod: Pod,
    nodes: Sequence[NodePods],
    statuses: Mapping[str, NodeStatus],
    budgets: Sequence[DisruptionBudget],
    fits: Fits,
    explains: Explains | None = None,
    rules: Rules = NO_RULES,
    *,
    first_violation: bool = True,
    select: SelectVictims = select_victims,
) -> PreemptionVerdict | Searched:
    """Steps 1 to 3 of ``preempt``: the verdict when the pod may not preempt or there is no
    node, else what the search found (findCandidates)."""
    by_name = {node.name: node for node in nodes}
    refusal = not_eligible(pod, by_name, statuses)
    if refusal is not None:
        return PreemptionVerdict(node=None, message=PREFIX + refusal)
    if not nodes:
        return PreemptionVerdict(node=None, message=PREFIX + NO_NODES)
    candidates: list[Candidate] = []
    rejected: dict[str, tuple[str, ...]] = {}
    errors: list[str] = []
    for node in sorted(nodes, key=lambda n: n.name):
        verdict = statuses.get(node.name)
        if verdict is None or verdict.code is not Code.UNSCHEDULABLE:
            continue
        result = select(
            pod,
            node,
            budgets,
            fits,
            explains,
            verdict.reasons,
            rules,
            first_violation=first_violation,
        )
        if result.candidate is not None:
            candidates.append(result.candidate)
        elif result.error:
            errors.append(result.error)
            rejected[node.name] = (result.error,)
        else:
            rejected[node.name] = result.reasons
    return Searched(
        candidates=tuple(candidates), rejected=rejected, errors=tuple(errors), total=len(nodes)
    )


def conclude(
    pod: Pod,
    searched: Searched,
    chosen_from: Sequence[Candidate] | None = None,
    refusal: str = "",
) -> PreemptionVerdict:
    """Step 4 of ``preempt``: the best candidate, or why there is none. ``chosen_from``: the
    candidates HTTP extenders left (callExtenders; none left: "no candidate node for
    preemption"), ``refusal``: an extender's error, which ends the preemption with its
    words."""
    if refusal:
        return PreemptionVerdict(
            node=None,
            candidates=searched.candidates,
            rejected=searched.rejected,
            message=PREFIX + refusal,
        )
    if searched.candidates and chosen_from is not None and not chosen_from:
        return PreemptionVerdict(
            node=None,
            candidates=searched.candidates,
            rejected=searched.rejected,
            message=PREFIX + NO_CANDIDATE,
        )
    candidates = searched.candidates if chosen_from is None else tuple(chosen_from)
    if candidates:
        best = choose(pod, candidates)
        return PreemptionVerdict(
            node=best.node,
            victims=best.victims,
            pdb_violations=best.pdb_violations,
            candidates=candidates,
            rejected=searched.rejected,
        )
    if searched.errors:
        return PreemptionVerdict(
            node=None, rejected=searched.rejected, message=PREFIX + _aggregate(searched.errors)
        )
    return PreemptionVerdict(
        node=None,
        rejected=searched.rejected,
        message=PREFIX + _sentence(searched.total, searched.rejected.values()),
        clear_nomination=True,
    )


def preempt(
    pod: Pod,
    nodes: Sequence[NodePods],
    statuses: Mapping[str, NodeStatus],
    budgets: Sequence[DisruptionBudget],
    fits: Fits,
    explains: Explains | None = None,
    rules: Rules = NO_RULES,
    *,
    first_violation: bool = True,
    select: SelectVictims = select_victims,
) -> PreemptionVerdict:
    """Where ``pod`` should preempt and whom (Evaluator.Preempt without its API calls):
    ``search``, then ``conclude``.

    ``nodes`` is every node of the snapshot with its pods; ``statuses`` each node's failure in
    the cycle that just failed (nodes absent count as UnschedulableAndUnresolvable). Without
    ``explains``, a node where the pod does not fit even with every lower-priority pod gone is
    reported with its reasons from ``statuses``. ``rules`` are the preemptor's policy's
    ``spec.preemption`` (``NO_RULES`` for a pod no policy governs); ``budgets`` are spent in
    their order, as ``first_violation`` says (``split_by_budgets``); ``select`` chooses the
    victims on each node searched.
    """
    found = search(
        pod,
        nodes,
        statuses,
        budgets,
        fits,
        explains,
        rules,
        first_violation=first_violation,
        select=select,
    )
    return found if isinstance(found, PreemptionVerdict) else conclude(pod, found)


def not_helpful(total: int) -> str:
    """DefaultPreemption's status when no node could be helped (all unresolvable)."""
    return PREFIX + _sentence(total, ())


def _sentence(total: int, searched: Iterable[tuple[str, ...]]) -> str:
    """ "0/N nodes are available: ..." over the searched nodes' reasons, the rest not helped."""
    counter: Counter[str] = Counter()
    searched_count = 0
    for reasons in searched:
        searched_count += 1
        counter.update(reasons)
    if total > searched_count:
        counter[NOT_HELPFUL] += total - searched_count
    return diagnoses.Diagnosis(total_nodes=total, reasons=dict(counter)).message()


def _aggregate(errors: Sequence[str]) -> str:
    """utilerrors.NewAggregate's text: one error as it is, several deduplicated in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _start(when: datetime.datetime | None) -> float:
    return math.inf if when is None else when.timestamp()
