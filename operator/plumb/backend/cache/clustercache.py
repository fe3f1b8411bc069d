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

Every write notes how to undo it in ``journal`` (backend/cache/journal.py), for snapshot dumps that
``plumb replay`` rewinds to the state a decision saw.

Only the event loop calls this class; it holds no locks.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from plumb.backend.cache import (
    controllers,
    countrows,
    dra,
    nodetable,
    podgroups,
    quotas,
    snapshot,
    volumes,
)
from plumb.backend.cache import journal as journal_module
from plumb.backend.records import objects, specs


class CacheError(RuntimeError):
    """An operation broke the state machine (assuming a pod twice); a bug, not bad input."""


PodState = journal_module.PodState  # the states of the diagram above; a pod is a journal.Placed


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Swept:
    """What ``Cache.sweep`` removed: nodes by name, and the pods as they were placed."""

    nodes: tuple[str, ...] = ()
    pods: tuple[objects.PodInfo, ...] = ()

    def __len__(self) -> int:
        return len(self.nodes) + len(self.pods)


class Cache:
    """Nodes and the pods on them; the single source the scheduler snapshots each cycle."""

    def __init__(self, journal_limit: int = journal_module.DEFAULT_LIMIT) -> None:
        self.nodes = nodetable.NodeTable()
        self._pods: dict[str, journal_module.Placed] = {}
        self._by_node: dict[str, set[str]] = {}
        self.rows = countrows.CountRows()
        self.journal = journal_module.Journal(journal_limit)
        self.workloads = controllers.Workloads(self.journal)
        # PersistentVolumes, claims, StorageClasses and CSINodes, for the volume plugins (not
        # journalled: a replayed pod with claims reads them as they are now).
        self.volumes = volumes.Volumes()
        # ResourceSlices, DeviceClasses, ResourceClaims and templates, and the allocations
        # assumed by DynamicResources (journalled: a dump rewinds them with the pods).
        self.dra = dra.DraStore(self.journal)
        # PodGroups of both APIs, and each group's members placed (kept here at every place
        # and unplace, so a gang's count of scheduled members follows assume and forget).
        self.groups = podgroups.GroupStore()
        self.quotas = quotas.QuotaStore()
        self._ports: dict[str, collections.Counter[specs.HostPort]] = {}
        self._assumed = 0
        self._priorities: collections.Counter[int] = collections.Counter()
        self._tick = 0
        self._pod_ticks: dict[str, int] = {}
        self._node_ticks: dict[str, int] = {}

    # Nodes ---------------------------------------------------------------------------------

    def upsert_node(self, node: objects.NodeInfo) -> bool:
        """Add or update a node; False when nothing scheduling cares about changed."""
        self._touch_node(node.name)
        before = self.nodes.info(node.name)
        is_new = before is None
        changed = self.nodes.upsert(node)
        if changed or is_new:
            self.journal.note(journal_module.Renode(name=node.name, node=before))
        if is_new:
            slot = self.nodes.slot(node.name)
            assert slot is not None
            self.rows.clear_slot(slot)
            for uid in self._by_node.get(node.name, ()):
                pod = self._pods[uid].pod
                self.nodes.add_request(node.name, pod.requests, +1, pod.nonzero)
                self.rows.count(pod, slot, +1)
        return changed

    def remove_node(self, name: str) -> None:
        self._tick += 1
        self._node_ticks.pop(name, None)  # only present entries are swept: nothing to date
        before = self.nodes.info(name)
        if before is not None:
            self.journal.note(journal_module.Renode(name=name, node=before))
        slot = self.nodes.slot(name)
        self.nodes.remove(name)
        if slot is not None:
            self.rows.clear_slot(slot)

    def set_namespace(self, name: str, labels: Mapping[str, str] | None) -> None:
        """A namespace's labels (None: deleted), for namespaceSelector in affinity terms."""
        before = self.rows.namespace_labels.get(name)
        if before != labels:
            self.journal.note(journal_module.Renamespace(name=name, labels=before))
        self.rows.set_namespace(name, labels)

    def namespaces(self) -> list[str]:
        """The namespaces whose labels are recorded."""
        return list(self.rows.namespace_labels)

    # What the framework reads ---------------------------------------------------------------

    def count_rows(self, keys: Sequence[countrows.RowKey]) -> npt.NDArray[np.int32]:
        """(rows x nodes in name order): how many placed pods of each row are on each node."""
        order = self.nodes.order
        out = np.zeros((len(keys), order.shape[0]), dtype=np.int32)
        capacity = self.nodes.capacity
        for t, key in enumerate(keys):
            row = self.rows.row(key, capacity, self._placed_slots())
            out[t] = row[order]
        return out

    def carriers(self) -> list[countrows.Carrier]:
        return self.rows.carriers()

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]:
        return self.rows.namespace_labels

    def used_ports(self, names: Sequence[str]) -> list[list[specs.HostPort]]:
        """Host ports taken on each named node, in the order given."""
        return [list(self._ports.get(name, ())) for name in names]

    def _placed_slots(self) -> Iterator[tuple[objects.PodInfo, int | None]]:
        for placed in self._pods.values():
            yield placed.pod, self.nodes.slot(placed.node)

    # Pods ----------------------------------------------------------------------------------

    def state(self, uid: str) -> PodState | None:
        placed = self._pods.get(uid)
        return placed.state if placed else None

    def node_of(self, uid: str) -> str | None:
        placed = self._pods.get(uid)
        return placed.node if placed else None

    def pod(self, uid: str) -> objects.PodInfo | None:
        """The pod as placed (assumed or bound), if it is."""
        placed = self._pods.get(uid)
        return placed.pod if placed else None

    def assume(self, pod: objects.PodInfo, node: str) -> None:
        if pod.uid in self._pods:
            raise CacheError(f"pod {pod.key} ({pod.uid}) is already in the cache; not assuming it")
        self.journal.note(journal_module.Unplace(uid=pod.uid))
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
        node, before = pod.node_name, self._pods.get(pod.uid)
        if before is None:
            self.journal.note(journal_module.Unplace(uid=pod.uid))
        elif before.state is PodState.ASSUMED and before.node == pod.node_name:
            self.journal.note(journal_module.Restate(uid=pod.uid, state=before.state))
            if objects.same_but_node(before.pod, pod):
                # The watch confirms our binding and nothing else: the pod's room on the node
                # is what it was, only its state changes. The record the scheduler decided on
                # stays (its kernel run keeps it too, for replay): no second copy of the pod.
                self._touch_pod(pod.uid)
                self._pods[pod.uid] = journal_module.Placed(
                    pod=before.pod, node=node, state=PodState.ADDED
                )
                self._assumed -= 1
                return
        else:
            self.journal.note(journal_module.Replace(placed=before))
        if before is not None:
            self._unplace(pod.uid, noted=True)
        self._place(pod, node, PodState.ADDED)

    def remove_pod(self, uid: str) -> None:
        if uid in self._pods:
            self._unplace(uid)

    def reconcile(self, nodes: Iterable[objects.NodeInfo], pods: Iterable[objects.PodInfo]) -> None:
        """Make the cache match a full list (mark and sweep); assumed pods the list still has
        stay assumed.

        Nodes and bound pods in the list are upserted; nodes and added pods that the list no
        longer has are swept. For the first list, when nothing else has written the cache.
        """
        node_list, pod_list = list(nodes), list(pods)
        for node in node_list:
            self.upsert_node(node)
        for pod in pod_list:
            if pod.node_name:
                self.add_pod(pod)  # a terminal pod is removed: it holds nothing
        self.sweep({n.name for n in node_list}, {p.uid for p in pod_list}, listed_at=self.tick)

    def sweep(
        self, node_names: set[str] | None, pod_uids: set[str] | None, *, listed_at: int
    ) -> Swept:
        """Remove what a list started at ``listed_at`` no longer has: nodes, and pods (bound,
        or assumed by us) deleted while the watch was down (None: that kind was not listed).
        An assumed pod the list lacks was deleted before the list began (it was assumed
        earlier, and a pod that exists is listed): its confirming event, and its deletion, were
        lost in the gap, and nothing else would ever release its room. Entries written after
        the list started are newer than it and stay. Returns what was swept."""
        nodes: list[str] = []
        pods: list[objects.PodInfo] = []
        if node_names is not None:
            for name in self.nodes.names():
                if name not in node_names and self._node_ticks.get(name, 0) <= listed_at:
                    self.remove_node(name)
                    nodes.append(name)
        if pod_uids is not None:
            for uid, placed in list(self._pods.items()):
                if uid not in pod_uids and self._pod_ticks.get(uid, 0) <= listed_at:
                    self._unplace(uid)
                    pods.append(placed.pod)
        return Swept(nodes=tuple(nodes), pods=tuple(pods))

    @property
    def tick(self) -> int:
        """A counter of writes; a list that starts now is older than any later write."""
        return self._tick

    def _touch_pod(self, uid: str) -> None:
        self._tick += 1
        self._pod_ticks[uid] = self._tick

    def _touch_node(self, name: str) -> None:
        self._tick += 1
        self._node_ticks[name] = self._tick

    def pod_count(self) -> int:
        return len(self._pods)

    def assumed_count(self) -> int:
        """Pods decided and assumed whose binding the watch has not shown yet."""
        return self._assumed

    def lowest_priority(self) -> int | None:
        """The lowest priority of any placed pod (None: no pod), which tells preemption at once
        whether a pod could have any victim at all."""
        return min(self._priorities) if self._priorities else None

    def pods_on(self, node: str) -> list[journal_module.Placed]:
        """The pods placed (assumed or added) on ``node``, in uid order."""
        return [self._pods[uid] for uid in sorted(self._by_node.get(node, ()))]

    def claim_use(self) -> volumes.InUse:
        """The claims the placed pods use, by node (VolumeRestrictions, NodeVolumeLimits)."""
        return volumes.InUse.of((placed.node, placed.pod) for placed in self._pods.values())

    def placed(self) -> Iterator[journal_module.Placed]:
        """Every pod in the cache with its node and state (snapshot dumps)."""
        return iter(self._pods.values())

    def place(self, record: journal_module.Placed) -> None:
        """Put a pod back as a dump recorded it (rebuilding a dumped cache)."""
        if record.state is PodState.ASSUMED:
            self.assume(record.pod, record.node)
        else:
            self.add_pod(dataclasses.replace(record.pod, node_name=record.node))

    def snapshot(self) -> snapshot.Snapshot:
        return self.nodes.snapshot()

    def _place(self, pod: objects.PodInfo, node: str, state: PodState) -> None:
        self._touch_pod(pod.uid)
        self._pods[pod.uid] = journal_module.Placed(pod=pod, node=node, state=state)
        self._assumed += state is PodState.ASSUMED
        self._priorities[pod.priority] += 1
        self._by_node.setdefault(node, set()).add(pod.uid)
        self.nodes.add_request(node, pod.requests, +1, pod.nonzero)
        self.rows.track(pod, +1)
        self.groups.place(pod)
        self.quotas.place(pod)
        slot = self.nodes.slot(node)
        if slot is not None:
            self.rows.count(pod, slot, +1)
        if pod.scheduling.host_ports:
            self._ports.setdefault(node, collections.Counter()).update(pod.scheduling.host_ports)

    def _unplace(self, uid: str, *, noted: bool = False) -> None:
        self._tick += 1
        self._pod_ticks.pop(uid, None)  # only present entries are swept: nothing to date
        placed = self._pods.pop(uid)
        self._assumed -= placed.state is PodState.ASSUMED
        self._priorities[placed.pod.priority] -= 1
        if not self._priorities[placed.pod.priority]:
            del self._priorities[placed.pod.priority]
        if not noted:
            self.journal.note(journal_module.Replace(placed=placed))
        on_node = self._by_node.get(placed.node)
        if on_node is not None:
            on_node.discard(uid)
            if not on_node:
                del self._by_node[placed.node]
        self.nodes.add_request(placed.node, placed.pod.requests, -1, placed.pod.nonzero)
        self.rows.track(placed.pod, -1)
        self.groups.unplace(placed.pod)
        self.quotas.unplace(placed.pod)
        slot = self.nodes.slot(placed.node)
        if slot is not None:
            self.rows.count(placed.pod, slot, -1)
        ports = self._ports.get(placed.node)
        if ports is not None and placed.pod.scheduling.host_ports:
            ports.subtract(placed.pod.scheduling.host_ports)
            ports += collections.Counter()  # drop the ports no pod holds any more
            if not ports:
                del self._ports[placed.node]
