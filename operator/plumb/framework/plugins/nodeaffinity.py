"""NodeAffinity: a node must match the pod's nodeSelector and its required node affinity
(filter), and nodes matching more weight of its preferred terms score higher (score, weight 2).

Semantics of component-helpers' ``nodeaffinity`` as kube-scheduler v1.34 uses it:

- nodeSelector: every key must be a label of the node with exactly that value.
- required terms are ORed; an empty ``nodeSelectorTerms`` list matches no node, and so does a
  term with neither matchExpressions nor matchFields. Within a term everything is ANDed.
- In / NotIn / Exists / DoesNotExist on labels; NotIn and DoesNotExist match a node without the
  label. Gt / Lt compare the label as an integer; a node without the label, or whose value is
  not an integer, does not match.
- matchFields supports ``metadata.name`` with In or NotIn and exactly one value.
- A requirement kube-scheduler cannot parse (In without values, Gt with two, a field operator
  other than In/NotIn) makes its term match nothing rather than failing the pod.

Every requirement is one numpy expression over the statics' label columns (int32 value ids),
so a pod costs a handful of array operations whatever the number of nodes.
"""

from __future__ import annotations

import numpy as np

from plumb.backend.cache import snapshot
from plumb.backend.records import objects, specs

NAME = "NodeAffinity"
SCORE_WEIGHT = 2
# DefaultNormalizeScore with reverse=false: the node with the most matched weight scores 100.
SCORE_REVERSED = False
# kube-scheduler's ErrReasonPod (plugins/nodeaffinity/node_affinity.go).
MISMATCH = "node(s) didn't match Pod's node affinity/selector"
# errReasonEnforced: the node does not match the profile's addedAffinity (NodeAffinityArgs),
# which every pod must match besides its own (same file; checked first, same plugin).
ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
# PreFilter's errReasonConflict: every required term pins metadata.name In a set and the union of
# those sets is empty, so no node can match (same file).
CONFLICT = "pod affinity terms conflict"
# When PreFilter pins node names (see prefilter_nodes), kube-scheduler does not run the filters
# on the other nodes and reports them with this status from schedule_one.go, built as
# fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", []string{"NodeAffinity"}).
NOT_PREFILTERED = f"node(s) didn't satisfy plugin(s) [{NAME}]"
# Labels are not changed by evicting pods: preemption cannot help.
UNRESOLVABLE = True

NAME_FIELD = "metadata.name"
# strconv.ParseInt(s, 10, 64) accepts an optional sign and decimal digits only.
# Up to this many values, ORed comparisons beat np.isin's sorting.
_FEW = 4


def matches(pod: objects.PodInfo, statics: snapshot.NodeStatics) -> snapshot.BoolArray:
    """True where the node satisfies nodeSelector and required node affinity (a new array).

    This is what PodTopologySpread's ``nodeAffinityPolicy: Honor`` counts with.
    """
    scheduling = pod.scheduling
    ok = np.ones(len(statics), dtype=np.bool_)
    for key, value in scheduling.node_selector:
        # value_id is UNSEEN (never a node's id) when no node has this value.
        ok &= statics.label_ids(key) == statics.value_id(key, value)
    if scheduling.required_node_terms is not None:
        any_term = np.zeros(len(statics), dtype=np.bool_)
        for term in scheduling.required_node_terms:
            any_term |= _term(term, statics)
        ok &= any_term
    return ok


def filter(pod: objects.PodInfo, statics: snapshot.NodeStatics) -> snapshot.BoolArray:
    """True where the node fails nodeSelector or required node affinity."""
    return ~matches(pod, statics)


def score_raw(pod: objects.PodInfo, statics: snapshot.NodeStatics) -> snapshot.Int64Array:
    """Per node: the sum of the weights of the preferred terms it matches."""
    return preferred_raw(pod.scheduling.preferred_node_terms, statics)


def preferred_raw(
    terms: tuple[tuple[int, specs.NodeSelectorTerm], ...], statics: snapshot.NodeStatics
) -> snapshot.Int64Array:
    """Per node: the sum of the weights of the (weight, term) pairs it matches (weight 0 terms
    are left out, as kube-scheduler's PreferredSchedulingTerms does): a pod's preferred terms,
    or a profile's addedAffinity preferred ones, which Score adds to every pod's."""
    total = np.zeros(len(statics), dtype=np.int64)
    for weight, term in terms:
        if weight:
            total += weight * _term(term, statics)
    return total


def matches_terms(
    terms: tuple[specs.NodeSelectorTerm, ...], statics: snapshot.NodeStatics
) -> snapshot.BoolArray:
    """Where a node selector (terms ORed; none matches no node) matches: a profile's
    addedAffinity required terms."""
    ok = np.zeros(len(statics), dtype=np.bool_)
    for term in terms:
        ok |= _term(term, statics)
    return ok


def prefilter_nodes(pod: objects.PodInfo) -> frozenset[str] | None:
    """The node names PreFilter restricts the pod to, or None for all nodes.

    As kube-scheduler: when every required term has ``metadata.name In`` requirements, the pod can
    only land on the union over terms of the intersection within each term (DaemonSet pods pin
    their node this way). An empty result means CONFLICT; nodes outside a non-empty result are
    reported as NOT_PREFILTERED instead of MISMATCH.
    """
    terms = pod.scheduling.required_node_terms
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        pinned: set[str] | None = None
        for field in term.fields:
            if field.key == NAME_FIELD and field.operator == "In":
                pinned = set(field.values) if pinned is None else pinned & set(field.values)
        if pinned is None:
            return None
        names |= pinned
    return frozenset(names)


def _term(term: specs.NodeSelectorTerm, statics: snapshot.NodeStatics) -> snapshot.BoolArray:
    """Where one node selector term matches: its requirements ANDed; an empty term matches none."""
    n = len(statics)
    if not term.expressions and not term.fields:
        return np.zeros(n, dtype=np.bool_)
    ok = np.ones(n, dtype=np.bool_)
    for requirement in term.expressions:
        match = label_requirement(requirement, statics)
        if match is None:
            return np.zeros(n, dtype=np.bool_)
        ok &= match
    for requirement in term.fields:
        match = _field_requirement(requirement, statics)
        if match is None:
            return np.zeros(n, dtype=np.bool_)
        ok &= match
    return ok


def label_requirement(
    requirement: specs.Requirement, statics: snapshot.NodeStatics
) -> snapshot.BoolArray | None:
    """Where a label requirement holds; None if kube-scheduler could not parse it."""
    key, operator, values = requirement.key, requirement.operator, requirement.values
    if operator in ("In", "NotIn"):
        if not values:
            return None
        hit = _one_of(statics.label_ids(key), [statics.value_id(key, v) for v in values])
        return hit if operator == "In" else ~hit
    if operator in ("Exists", "DoesNotExist"):
        if values:
            return None
        present: snapshot.BoolArray = statics.label_ids(key) != snapshot.ABSENT
        return present if operator == "Exists" else ~present
    if operator in ("Gt", "Lt"):
        bound = specs.parse_int64(values[0]) if len(values) == 1 else None
        if bound is None:
            return None
        numbers, valid = statics.label_numbers(key)
        compared: snapshot.BoolArray = numbers > bound if operator == "Gt" else numbers < bound
        return compared & valid
    return None


def _field_requirement(
    requirement: specs.Requirement, statics: snapshot.NodeStatics
) -> snapshot.BoolArray | None:
    """Where a matchFields requirement holds; None if kube-scheduler could not parse it."""
    if (
        requirement.key != NAME_FIELD
        or requirement.operator not in ("In", "NotIn")
        or len(requirement.values) != 1
    ):
        return None
    hit = np.zeros(len(statics), dtype=np.bool_)
    index = statics.index.get(requirement.values[0])
    if index is not None:
        hit[index] = True
    return hit if requirement.operator == "In" else ~hit


def _one_of(ids: snapshot.Int32Array, wanted: list[int]) -> snapshot.BoolArray:
    present = [value for value in wanted if value >= 0]  # UNSEEN values match no node
    if not present:
        return np.zeros(ids.shape, dtype=np.bool_)
    if len(present) > _FEW:
        many: snapshot.BoolArray = np.isin(ids, present)
        return many
    hit: snapshot.BoolArray = ids == present[0]
    for value in present[1:]:
        hit |= ids == value
    return hit
