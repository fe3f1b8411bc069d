"""InterPodAffinity: required pod affinity and anti-affinity (filter), the existing pods'
anti-affinity against the incoming pod (filter, symmetric), and preferred terms in both
directions (score, weight 2).

The counting runs in the kernel over count rows (backend/cache/countrows.py); this module holds the
plugin's name, reasons and weights, and which pods the incoming pod's terms count
(``incoming_matcher``: the namespaceSelector, per release).
"""

from __future__ import annotations

from plumb.backend.cache import countrows
from plumb.backend.records import specs

NAME = "InterPodAffinity"
SCORE_WEIGHT = 2
AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
# kube-scheduler's default args: an existing pod's required affinity term counts this much
# when the incoming pod matches it.
HARD_POD_AFFINITY_WEIGHT = 1
# Affinity to pods that do not exist cannot be fixed by preemption.
AFFINITY_UNRESOLVABLE = True

_EVERY_NAMESPACE = specs.LabelSelector()  # matches every namespace's labels


def incoming_matcher(term: specs.PodAffinityTerm, selector_fixed: bool) -> countrows.Matcher:
    """The pods one of the incoming pod's terms (required or preferred, affinity or
    anti-affinity) counts; ``selector_fixed``: ``Emulation.namespace_selector_fixed``.

    kube-scheduler's PreFilter and PreScore merge the term's namespaceSelector into its
    namespaces (plugin.go mergeAffinityTermNamespacesIfNotEmpty: the namespaces it matches,
    the selector then set to match nothing) and match pods with no namespace labels at all
    (podMatchesAllAffinityTerms, processExistingPod: nil). Up to v1.36 the merge got a copy of
    the term: the namespaces were added (a shared set) but the selector stayed, and a
    selector that an empty label set satisfies (DoesNotExist, NotIn) matched the pods of
    every namespace. From v1.37 (the term by pointer) only the namespaces it matches. The
    existing pods' terms are matched with the incoming pod's namespace labels in every
    release (``countrows.Matcher.of_term``)."""
    selector = term.namespace_selector
    if selector_fixed or selector is None or not selector.matches({}):
        return countrows.Matcher.of_term(term)
    return countrows.Matcher(term.selector, term.namespaces, _EVERY_NAMESPACE)
