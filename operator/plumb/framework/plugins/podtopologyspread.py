"""PodTopologySpread: pods spread across topology domains within maxSkew (filter for
DoNotSchedule constraints, score for ScheduleAnyway ones, weight 2).

The counting runs in the kernel over count rows (backend/cache/countrows.py); this module holds the
plugin's name, reasons and how a constraint becomes a row selection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from plumb.backend.cache import countrows
from plumb.backend.records import objects, specs

NAME = "PodTopologySpread"
SCORE_WEIGHT = 2
CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
# A node missing the key can never satisfy the constraint; preemption cannot help.
MISSING_LABEL_UNRESOLVABLE = True
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def effective_selector(
    constraint: specs.SpreadConstraint, pod: objects.PodInfo
) -> specs.LabelSelector | None:
    """The constraint's selector with matchLabelKeys added as ``key In (pod's value)``.

    Keys the pod does not carry are ignored, as kube-scheduler does. (From v1.34 the API server
    may already have merged them; adding the same requirement twice changes nothing.)
    """
    if constraint.selector is None or not constraint.match_label_keys:
        return constraint.selector
    extra = [
        specs.Requirement(key, "In", (pod.labels[key],))
        for key in constraint.match_label_keys
        if key in pod.labels
    ]
    return constraint.selector.with_requirements(extra)


def selection(constraint: specs.SpreadConstraint, pod: objects.PodInfo) -> countrows.Selection:
    """The pods a constraint counts: its selector, in the pod's namespace, not terminating.

    An empty selector counts no existing pod (kube-scheduler's countPodsMatchSelector returns 0
    for it), although it matches the incoming pod itself.
    """
    return selection_of(effective_selector(constraint, pod), pod.namespace)


def selection_of(selector: specs.LabelSelector | None, namespace: str) -> countrows.Selection:
    """The pods a spread selector counts in ``namespace``, not terminating (see ``selection``;
    a SchedulingPolicy's rules count its selector's pods the same way)."""
    if selector is not None and not selector.requirements:
        selector = None
    matcher = countrows.Matcher(selector, frozenset({namespace}))
    return countrows.Selection((matcher,), skip_terminating=True)


def default_constraints(selector: specs.LabelSelector) -> tuple[specs.SpreadConstraint, ...]:
    """kube-scheduler's system defaults for pods with no constraints of their own:
    hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway."""
    return (
        specs.SpreadConstraint(3, HOSTNAME, "ScheduleAnyway", selector),
        specs.SpreadConstraint(5, ZONE, "ScheduleAnyway", selector),
    )


def with_constraints(
    pod: objects.PodInfo, extra: Sequence[specs.SpreadConstraint]
) -> objects.PodInfo:
    """``pod`` with ``extra`` constraints after its own (a SchedulingPolicy's rules)."""
    if not extra:
        return pod
    scheduling = dataclasses.replace(pod.scheduling, spread=pod.scheduling.spread + tuple(extra))
    return dataclasses.replace(pod, scheduling=scheduling)
