"""The MaintenanceWindow Filter: nodes annotated with a maintenance window are avoided during it.

A node's annotation (``plumb.io/maintenance-window`` unless ``args.annotation`` names another
key) holds one or more RFC 3339 intervals ``start/end`` separated by commas (``intervals``).
While the cycle's clock (``NodeView.now``) is inside one, or ``args.leadSeconds`` or less
before it starts, the node is rejected with "node(s) are in a maintenance window"; a node
whose value cannot be read is rejected too, with "node(s) have an unreadable maintenance
window" (a typo must not let pods onto a node about to be drained). Both are unresolvable:
evicting pods from the node would not end its maintenance. A node without the annotation, or
with an empty value, passes.

The filter is vectorised: each distinct annotation value is parsed once per process
(``intervals.schedule`` is cached by value) and the nodes' verdicts are numpy masks, so one call
over 5,000 nodes costs the parsing of the values they carry plus a few array operations.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
from plumb.extensions import interface

from plumb_maintenance_window import intervals

DEFAULT_ANNOTATION = "plumb.io/maintenance-window"
IN_WINDOW = "node(s) are in a maintenance window"
UNREADABLE = "node(s) have an unreadable maintenance window"

# A Kubernetes annotation key: an optional DNS-subdomain prefix and "/", then a name of at most
# 63 characters (apimachinery's IsQualifiedName).
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class WindowArgs:
    """MaintenanceWindow's pluginConfig args: the annotation key to read (``annotation``) and
    how many seconds before a window starts the node is avoided already (``leadSeconds``)."""

    annotation: str = DEFAULT_ANNOTATION
    lead_seconds: int = 0

    def __post_init__(self) -> None:
        prefix, slash, name = self.annotation.rpartition("/")
        if not (
            _NAME.fullmatch(name)
            and len(name) <= 63
            and (not slash or (_PREFIX.fullmatch(prefix) and len(prefix) <= 253))
        ):
            raise ValueError(f"annotation: {self.annotation!r} is not an annotation key")
        if self.lead_seconds < 0:
            raise ValueError(f"leadSeconds: must be 0 or more, got {self.lead_seconds}")


class MaintenanceWindow(interface.Plugin):
    """Rejects the nodes in (or ``leadSeconds`` before) a maintenance window, and the nodes
    whose window cannot be read."""

    name = "MaintenanceWindow"
    Args = WindowArgs
    # The default key. A profile's args may name another: plumb's cache keeps every node
    # annotation today, so NodeView.annotation serves that key too (docs/plugins.md).
    node_annotations = (DEFAULT_ANNOTATION,)
    # A node added, or changed (its annotation removed or moved), may take the pod; time
    # passing is no event: a pod waits at most until the queue's flush (README.md).
    events = (interface.NODE_ADDED, interface.NODE_CHANGED)

    def __init__(self, args: WindowArgs | None = None) -> None:
        super().__init__(args if args is not None else WindowArgs())
        self.settings: WindowArgs = self.args

    def filter(
        self, pod: interface.PodView, nodes: interface.NodeView
    ) -> list[interface.FilterRejection] | None:
        # The verdict depends on the nodes and the clock, not on the pod: worked out once per
        # cycle and handed to every pod as the same arrays (so replicas share plumb's row).
        key = (self.name, self.settings.annotation, self.settings.lead_seconds)
        return nodes.kept(key, lambda: self._rejections(nodes))

    def _rejections(self, nodes: interface.NodeView) -> list[interface.FilterRejection] | None:
        values = nodes.annotation(self.settings.annotation)
        annotated = values != ""
        if not annotated.any():
            return None
        distinct, inverse = np.unique(values[annotated], return_inverse=True)
        read = [intervals.schedule(str(value)) for value in distinct]
        unreadable = np.array([bool(s.problem) for s in read], dtype=np.bool_)
        owner = np.repeat(np.arange(len(read)), [len(s.windows) for s in read])
        bounds = np.array([w for s in read for w in s.windows], dtype=np.float64).reshape(-1, 2)
        now, lead = float(nodes.now), float(self.settings.lead_seconds)
        hit = (bounds[:, 0] - lead <= now) & (now < bounds[:, 1])
        inside = np.bincount(owner[hit], minlength=len(read)) > 0
        rejections = []
        for mask, reason in ((inside, IN_WINDOW), (unreadable, UNREADABLE)):
            fails = np.zeros(len(nodes), dtype=np.bool_)
            fails[annotated] = mask[inverse.reshape(-1)]
            if fails.any():
                rejections.append(interface.FilterRejection(fails, reason, unresolvable=True))
        return rejections or None
