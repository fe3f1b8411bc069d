"""Why a pod did not fit: per-node reasons counted into kube-scheduler's FailedScheduling text."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping

# kube-scheduler's wording (pkg/scheduler/framework: NoNodeAvailableMsg, ErrNoNodesAvailable).
NO_NODES_AVAILABLE = "no nodes available to schedule pods"
NO_NODES_PREFIX = "0/{total} nodes are available:"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """How many nodes each reason rejected, out of how many nodes in all."""

    total_nodes: int
    reasons: Mapping[str, int]

    @classmethod
    def count(cls, total_nodes: int, per_node: Iterable[Iterable[str]]) -> Diagnosis:
        """Each node's reasons counted; an empty reason is no words (a status without
        reasons, as kube-scheduler's for a node an HTTP extender dropped silently)."""
        counter: collections.Counter[str] = collections.Counter()
        for reasons in per_node:
            counter.update(reason for reason in reasons if reason)
        return cls(total_nodes=total_nodes, reasons=dict(counter))

    def message(self) -> str:
        """ "0/3 nodes are available: 1 Too many pods, 2 Insufficient cpu." as kube-scheduler.

        Entries are "<count> <reason>" sorted as strings, exactly as kube-scheduler sorts them.
        """
        if self.total_nodes == 0:
            return NO_NODES_AVAILABLE
        text = NO_NODES_PREFIX.format(total=self.total_nodes)
        histogram = sorted(f"{count} {reason}" for reason, count in self.reasons.items())
        if histogram:
            text += f" {', '.join(histogram)}."
        return text
