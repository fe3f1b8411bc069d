"""The whole objects HTTP extenders are sent, as the watches last delivered them: kept only while
the configuration has extenders, and only of the kinds they need (extenders.Kept).

plumb's cache keeps what scheduling reads of a pod or a node (backend/records/objects.py), not
its body; kube-scheduler sends extenders the informer's whole ``v1.Pod`` and ``v1.Node``. The
feed (scheduler/feed.py) writes here beside the cache, and drops an object when it leaves: a
pod bound (unless bound pods are kept, as preemption victims), deleted or no longer ours, a
node deleted. An object not seen since extenders were configured (a reload that added them)
has no body until its next event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from plumb.extensions import extenders

Body = Mapping[str, Any]


class RawBodies:
    """The latest body of each pending pod (by uid), bound pod (by uid, when kept) and node
    (by name, when kept)."""

    def __init__(self) -> None:
        self._pods: dict[str, Body] = {}
        self._nodes: dict[str, Body] = {}

    def pod(self, uid: str) -> Body | None:
        return self._pods.get(uid)

    def node(self, name: str) -> Body | None:
        return self._nodes.get(name)

    def on_pod(self, kept: extenders.Kept, uid: str, body: Body | None, *, pending: bool) -> None:
        """A pod's event: ``body`` None when it is gone; ``pending`` when it waits in our
        queue (unbound, ours, not being deleted)."""
        if body is not None and (kept.bound if not pending else kept.pending):
            self._pods[uid] = body
        else:
            self._pods.pop(uid, None)

    def on_node(self, kept: extenders.Kept, name: str, body: Body | None) -> None:
        """A node's event: ``body`` None when it is gone."""
        if body is not None and kept.nodes:
            self._nodes[name] = body
        else:
            self._nodes.pop(name, None)

    def forget_pods(self, uids: Iterable[str]) -> None:
        for uid in uids:
            self._pods.pop(uid, None)

    def forget_nodes(self, names: Iterable[str]) -> None:
        for name in names:
            self._nodes.pop(name, None)

    def clear(self) -> None:
        """No extender needs any body (a reload removed them)."""
        self._pods.clear()
        self._nodes.clear()

    def __len__(self) -> int:
        return len(self._pods) + len(self._nodes)
