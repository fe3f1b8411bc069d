"""The AcceleratorPacking Score: accelerator pods go where the accelerators are most in use.

For a pod requesting one of ``args.resources`` (``nvidia.com/gpu`` by default), a node scores
the share of that resource in use once the pod is placed there, 0 to 100
(``(requested + the pod's request) * 100 // allocatable``, at most 100), so a partly used node
is filled before a free one is opened and whole nodes stay free for large jobs. A node
offering none of the resource scores 0; a pod requesting several of the resources gets the
mean of their shares; a pod requesting none scores 0 everywhere (the plugin then has no say).
The scores are final (AS_IS).

The plugin is ``batch_dependent``: a packing score depends on where the earlier pods of the
same batch went, so plumb decides its pods one per batch (README.md: enable it in a profile of
its own for accelerator pods).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from plumb.extensions import interface

MAX_SCORE = 100


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PackingArgs:
    """AcceleratorPacking's pluginConfig args: the extended resources it packs."""

    resources: tuple[str, ...] = ("nvidia.com/gpu",)

    def __post_init__(self) -> None:
        if not self.resources:
            raise ValueError("resources: must name at least one resource")
        for resource in self.resources:
            if not resource or resource != resource.strip():
                raise ValueError(f"resources: {resource!r} is not a resource name")
        if len(set(self.resources)) != len(self.resources):
            raise ValueError(f"resources: {list(self.resources)} names a resource twice")


class AcceleratorPacking(interface.Plugin):
    """Scores each node by its accelerators' use with the pod placed there (bin-packing)."""

    name = "AcceleratorPacking"
    Args = PackingArgs
    normalize = interface.AS_IS
    batch_dependent = True

    def __init__(self, args: PackingArgs | None = None) -> None:
        super().__init__(args if args is not None else PackingArgs())
        self.settings: PackingArgs = self.args

    def score(self, pod: interface.PodView, nodes: interface.NodeView) -> interface.Ints:
        wanted = tuple(
            (resource, int(pod.requests.get(resource, 0)))
            for resource in self.settings.resources
            if pod.requests.get(resource, 0) > 0
        )
        # Pods asking the same amounts get the same scores: worked out once per cycle.
        return nodes.kept((self.name, wanted), lambda: self._packed(wanted, nodes))

    @staticmethod
    def _packed(wanted: tuple[tuple[str, int], ...], nodes: interface.NodeView) -> interface.Ints:
        total = np.zeros(len(nodes), dtype=np.int64)
        for resource, amount in wanted:
            allocatable = nodes.allocatable(resource)
            after = nodes.requested(resource) + amount
            share = after * MAX_SCORE // np.maximum(allocatable, 1)
            # A node that cannot hold the pod (NodeResourcesFit rejects it) still needs a
            # score within 0-100; one lacking the resource has no accelerators to pack.
            total += np.where(allocatable > 0, np.minimum(share, MAX_SCORE), 0)
        return total // max(len(wanted), 1)
