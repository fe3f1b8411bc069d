"""InterPodAffinity: required pod affinity and anti-affinity (filter), the existing pods'
anti-affinity against the incoming pod (filter, symmetric), and preferred terms in both
directions (score, weight 2).

The counting runs in the kernel over count rows (backend/cache/countrows.py); this module holds the
plugin's name, reasons and weights.
"""

from __future__ import annotations

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
