"""The cluster cache: nodes in a NodeTable and a compact index of the pods placed on them.

Pod states, as in kube-scheduler's cache::

    Initial ──assume──▶ Assumed ──add (watch shows it bound)──▶ Added ──remove──▶ Deleted
                          │                                       ▲ update
                          └──forget (bind failed)──▶ Initial      └──┘

- ``assume`` places a pod the scheduler has just decided, before the API server knows, so the
  next cycle sees the node's resources as taken. No pod is assumed twice.
- ``add`` records a bound pod the watch reported; for an assumed pod it confirms the assumption
  (moving it if the watch says another node). Pods in phase Succeeded or Failed hold nothing, so
  ``add`` of a terminal pod removes it.
- ``forget`` undoes an assumption whose binding failed; it applies to assumed pods only.
- Pods may name a node the cache has not seen yet; their requests are counted once it appears.

Only the event loop calls this class; it holds no locks.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable

from plumb.backend import nodetable, objects, snapshot


class CacheError(RuntimeError):
    """An operation broke the state machine (assuming a pod twice); a bug, not bad input."""


class PodState(enum.Enum):
    ASSUMED = "Assumed"
    ADDED = "Added"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class _Placed:
    pod: objects.PodInfo
    node: str
    state: PodState


class Cache:
    """Nodes and the pods on them; the single source the scheduler snapshots each cycle."""

    def __init__(self) -> None:
        self.nodes = nodetable.NodeTable()
        self._pods: dict[str, _Placed] = {}
        self._by_node: dict[str, set[str]] = {}

    # Nodes ---------------------------------------------------------------------------------

    def upsert_node(self, node: objects.NodeInfo) -> None:
        is_new = node.name not in self.nodes
        self.nodes.upsert(node)
        if is_new:
            for uid in self._by_node.get(node.name, ()):
                self.nodes.add_request(node.name, self._pods[uid].pod.requests, +1)

    def remove_node(self, name: str) -> None:
        self.nodes.remove(name)

    # Pods ----------------------------------------------------------------------------------

    def state(self, uid: str) -> PodState | None:
        placed = self._pods.get(uid)
        return placed.state if placed else None

    def node_of(self, uid: str) -> str | None:
        placed = self._pods.get(uid)
        return placed.node if placed else None

    def assume(self, pod: objects.PodInfo, node: str) -> None:
        if pod.uid in self._pods:
            raise CacheError(f"pod {pod.key} ({pod.uid}) is already in the cache; not assuming it")
        self._place(pod, node, PodState.ASSUMED)

    def forget(self, uid: str) -> None:
        placed = self._pods.get(uid)
        if placed is not None and placed.state is PodState.ASSUMED:
            self._unplace(uid)

    def add_pod(self, pod: objects.PodInfo) -> None:
        """Record a pod the API server reports bound (``pod.node_name`` set)."""
        if pod.terminal:
            self.remove_pod(pod.uid)
            return
        if pod.uid in self._pods:
            self._unplace(pod.uid)
        self._place(pod, pod.node_name, PodState.ADDED)

    def remove_pod(self, uid: str) -> None:
        if uid in self._pods:
            self._unplace(uid)

    def reconcile(self, nodes: Iterable[objects.NodeInfo], pods: Iterable[objects.PodInfo]) -> None:
        """Make the cache match a full re-list (mark and sweep); assumed pods stay assumed.

        Nodes and bound pods in the list are upserted; nodes and added pods that the list no
        longer has (deleted while the watch was down) are swept.
        """
        live_nodes = set()
        for node in nodes:
            self.upsert_node(node)
            live_nodes.add(node.name)
        for name in self.nodes.names():
            if name not in live_nodes:
                self.remove_node(name)
        bound = set()
        for pod in pods:
            if pod.node_name and not pod.terminal:
                self.add_pod(pod)
                bound.add(pod.uid)
        for uid, placed in list(self._pods.items()):
            if placed.state is PodState.ADDED and uid not in bound:
                self._unplace(uid)

    def pod_count(self) -> int:
        return len(self._pods)

    def snapshot(self) -> snapshot.Snapshot:
        return self.nodes.snapshot()

    def _place(self, pod: objects.PodInfo, node: str, state: PodState) -> None:
        self._pods[pod.uid] = _Placed(pod=pod, node=node, state=state)
        self._by_node.setdefault(node, set()).add(pod.uid)
        self.nodes.add_request(node, pod.requests, +1)

    def _unplace(self, uid: str) -> None:
        placed = self._pods.pop(uid)
        on_node = self._by_node.get(placed.node)
        if on_node is not None:
            on_node.discard(uid)
            if not on_node:
                del self._by_node[placed.node]
        self.nodes.add_request(placed.node, placed.pod.requests, -1)
