"""Cluster events into the scheduler's cache and queue: pods, nodes, namespaces, workloads, volume
and DRA objects and SchedulingPolicies as the watches report them, full lists, and the sweep
after a watch's gap.

``ClusterFeed`` is what the app layer's watch handlers call (``scheduler.feed``): it writes what
the cluster told us into the state it shares with the scheduling and binding cycles
(scheduler/state.py). Which waiting pods an event may help is decided here: a coarse form of
kube-scheduler's queueing hints, by the filter plugins that rejected them. It also runs
DynamicResources' PreEnqueue for the queue: a pod whose claims do not exist yet waits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import dra
from plumb.backend.records import draobjects, groupobjects, objects, quotaobjects
from plumb.extensions import interface
from plumb.framework.plugins import (
    capacityscheduling,
    dynamicresources,
    gangscheduling,
    interpodaffinity,
    nodeaffinity,
    nodedeclaredfeatures,
    nodeports,
    noderesourcesfit,
    nodeunschedulable,
    nodevolumelimits,
    podtopologyspread,
    tainttoleration,
    volumebinding,
    volumerestrictions,
    volumezone,
)
from plumb.observability import trace
from plumb.preemption import search
from plumb.scheduler import state as state_module

logger = logging.getLogger("plumb.scheduler")


class ClusterFeed:
    """Keeps the cache, the queue and the policies of the shared state in step with the
    cluster."""

    def __init__(self, state: state_module.SchedulerState) -> None:
        self._state = state
        self.synced = asyncio.Event()  # set by the first full list
        # The queue asks this before letting a pod in (it knows no cache of its own).
        state.queue.pre_enqueue = self.pre_enqueue

    def _move(self, helps: frozenset[str] | None, event: str = "") -> None:
        """A cluster event that may help the pods ``helps`` rejected (None: every pod): the
        Python plugins that wait for it (its ``event``, one of interface.EVENTS, or any event
        for a plugin that names none) join the built-ins it helps."""
        if helps is not None:
            helps = helps | self._state.served.extension_hints(event)
        self._state.queue.move_all(helps)

    def pre_enqueue(self, pod: objects.PodInfo) -> str | None:
        """The PreEnqueue plugins: GangScheduling's (a pod of an upstream PodGroup waits
        until the PodGroup exists and, for a gang, until minCount of its pods do) and
        DynamicResources' (a pod one of whose claims does not exist yet: a template's claim
        the resourceclaim controller has not made and named in the pod's status, a named
        claim missing, one being deleted, one not the pod's own). Returns the plugin that
        turns it away, None to let it in."""
        if pod.pod_group and self.gang_waits(pod) is not None:
            return gangscheduling.NAME
        if not pod.resource_claims:
            return None
        if self._state.cache.dra.pod_claims(pod).error:
            return dra.PLUGIN
        return None

    def gang_waits(self, pod: objects.PodInfo) -> str | None:
        """Why GangScheduling's PreEnqueue keeps a pod of an upstream group out (its words,
        for the trace), None when it may be tried."""
        ref, group = self._state.cache.groups.of(pod)
        if ref is None or ref.api != groupobjects.UPSTREAM:
            return None
        members = self._state.queue.group_size(ref)
        members += self._state.cache.groups.placed_count(ref)
        return gangscheduling.pre_enqueue(group, ref.name, members)

    def on_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A pod was listed, added, modified or deleted."""
        uid = str((body.get("metadata") or {}).get("uid", ""))
        known = self._state.cache.pod(uid) or self._state.queue.pod(uid)
        parse = functools.partial(
            objects.parse_pod, known=known, resize=self._state.served.accounting
        )
        pod = _read("Pod", body, parse)
        if pod is not None:
            self._pod_event(event_type, pod)
            self._keep_pod(event_type, pod, body)

    def _keep_pod(
        self, event_type: str | None, pod: objects.PodInfo, body: Mapping[str, Any]
    ) -> None:
        """The pod's body, for the extenders (when they need it: rawbodies.py)."""
        kept = self._state.served.bodies_kept
        if not (kept.pending or kept.bound or len(self._state.bodies)):
            return
        gone = event_type == "DELETED" or pod.terminal
        pending = not pod.node_name and pod.scheduler_name in self._state.served.names
        pending = pending and not pod.deleting
        self._state.bodies.on_pod(kept, pod.uid, None if gone else body, pending=pending)

    def _pod_event(self, event_type: str | None, pod: objects.PodInfo) -> None:
        ref = groupobjects.group_of(pod)
        added = ref is not None and event_type != "DELETED" and not self._known(pod.uid)
        self._record_pod(event_type, pod)
        if ref is not None and event_type != "DELETED":
            self._resume(ref)
        if added and ref is not None:
            # GangScheduling's hint on a pod added (unscheduled or assigned), once it is
            # recorded: its group's members may reach minCount now.
            self._state.queue.move_group(ref, GROUP_HELPS)

    def _resume(self, ref: groupobjects.GroupRef) -> None:
        """A gang bound in part, below its minimum (plumb binds a group whole, so only a
        binding lost with a crash leaves one so): its pending members go first, to finish it
        in the room it was placed with."""
        group = self._state.cache.groups.get(ref)
        if group is None or not group.gang:
            return
        placed = self._state.cache.groups.placed_count(ref)
        if 0 < placed < gangscheduling.minimum(group):
            self._state.queue.resume_group(ref)

    def _known(self, uid: str) -> bool:
        return self._state.cache.pod(uid) is not None or uid in self._state.queue

    def _record_pod(self, event_type: str | None, pod: objects.PodInfo) -> None:
        if event_type == "DELETED":
            if self._forget(pod):
                self._move(POD_REMOVED_HELPS, interface.POD_DELETED)
            return
        if pod.node_name:
            self._committed_late(pod)
            self._state.nominations.remove(pod.uid)
            self._state.queue.delete(pod.uid)
            before = self._state.cache.state(pod.uid)
            was = self._state.cache.pod(pod.uid)
            self._state.cache.add_pod(pod)
            if pod.terminal:
                self._move(POD_REMOVED_HELPS, interface.POD_DELETED)
            elif before is not cache_module.PodState.ADDED:
                # A pod newly placed, or our own binding confirmed: pods waiting for affinity
                # to it, or for its domain to fill, may fit now.
                self._move(POD_ADDED_HELPS, interface.POD_ADDED)
            elif was is not None and _scaled_down(was, pod):
                # A resize that gives room back (kube-scheduler's AssignedPod UpdatePodScaleDown).
                self._move(SCALE_DOWN_HELPS)
            return
        if self._state.cache.state(pod.uid) is cache_module.PodState.ASSUMED:
            # Being bound by us; the watch has not caught up yet. The decision stands, but a
            # retry after a failed binding must decide this newer version.
            self._state.queue.update_assumed(pod)
            return
        if pod.scheduler_name not in self._state.served.names or pod.deleting or pod.terminal:
            if self._state.nominations.remove(pod.uid) is not None:
                self._move(POD_REMOVED_HELPS, interface.POD_DELETED)
            self._state.queue.delete(pod.uid)
            return
        # The nomination follows the status (set before this replica saw the pod: a restart,
        # a new leader; moved or cleared by the leader while this replica stood by). Up to
        # v1.36 a gated pod seen for the first time holds nothing (kube-scheduler's queue
        # nominated only pods it let in); any later update of it follows the status.
        held_on = self._state.nominations.node_of(pod.uid)
        follows = held_on is not None or bool(pod.nominated_node)
        if follows and pod.gated and not self._state.served.kube.gated_nominations:
            follows = self._state.queue.pod(pod.uid) is not None
        now_on = self._state.nominations.update(pod) if follows else None
        if held_on is not None and now_on != held_on:
            self._move(POD_REMOVED_HELPS, interface.POD_DELETED)  # the room it held there is free
        self._state.queue.add(pod)

    def _forget(self, pod: objects.PodInfo) -> bool:
        """The pod is gone (deleted, or missing from a full list): every record of it goes.
        Returns whether it held room, placed or nominated, that a waiting pod may now take."""
        self._state.uncertain.pop(pod.uid, None)
        self._state.committed_late.discard(pod.uid)
        freed = self._state.nominations.remove(pod.uid) is not None
        self._state.queue.delete(pod.uid)
        self._state.recorder.forget(pod.uid)
        self._state.tracer.forget(pod.key, pod.uid)
        self._state.bodies.forget_pods((pod.uid,))
        freed = freed or self._state.cache.state(pod.uid) is not None
        self._state.cache.remove_pod(pod.uid)
        return freed

    def on_budget(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A PodDisruptionBudget was listed, added, modified or deleted."""
        metadata = body.get("metadata") or {}
        key = (str(metadata.get("namespace", "")), str(metadata.get("name", "")))
        if event_type == "DELETED":
            self._state.budgets.pop(key, None)
        else:
            self._state.budgets[key] = search.parse_budget(body)

    def relist_budgets(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Every PodDisruptionBudget, after a (re)list: the ones missing are gone."""
        self._state.budgets.clear()
        for body in bodies:
            self.on_budget("ADDED", body)

    def on_volume(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver or
        CSIStorageCapacity (``kind``, one of VOLUME_KINDS) was listed, added, modified or
        deleted."""
        metadata = body.get("metadata") or {}
        name = str(metadata.get("name", ""))
        current = None if event_type == "DELETED" else body
        if kind == PERSISTENT_VOLUME:
            self._state.cache.volumes.on_pv(current, name)
        elif kind == PERSISTENT_VOLUME_CLAIM:
            self._state.cache.volumes.on_pvc(current, str(metadata.get("namespace", "")), name)
        elif kind == STORAGE_CLASS:
            self._state.cache.volumes.on_storage_class(current, name)
        elif kind == CSI_NODE:
            self._state.cache.volumes.on_csinode(current, name)
        elif kind == CSI_DRIVER:
            self._state.cache.volumes.on_csidriver(current, name)
        elif kind == CSI_STORAGE_CAPACITY:
            volumes = self._state.cache.volumes
            volumes.on_storage_capacity(current, str(metadata.get("namespace", "")), name)
        else:
            raise ValueError(f"{kind!r} is not one of {VOLUME_KINDS}")
        self._move(VOLUME_HELPS)

    def relist_volumes(self, kind: str, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Every object of a volume ``kind`` after a (re)list: the ones missing are gone."""
        resync = {
            PERSISTENT_VOLUME: self._state.cache.volumes.resync_pvs,
            PERSISTENT_VOLUME_CLAIM: self._state.cache.volumes.resync_pvcs,
            STORAGE_CLASS: self._state.cache.volumes.resync_storage_classes,
            CSI_NODE: self._state.cache.volumes.resync_csinodes,
            CSI_DRIVER: self._state.cache.volumes.resync_csidrivers,
            CSI_STORAGE_CAPACITY: self._state.cache.volumes.resync_storage_capacities,
        }
        resync[kind](bodies)
        self._move(VOLUME_HELPS)

    def on_dra(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A ResourceSlice, DeviceClass, ResourceClaim or ResourceClaimTemplate (``kind``, one
        of DRA_KINDS) was listed, added, modified or deleted; the pods it may help are moved
        as DynamicResources' EventsToRegister and queueing hints say."""
        metadata = body.get("metadata") or {}
        name, namespace = str(metadata.get("name", "")), str(metadata.get("namespace", ""))
        current = None if event_type == "DELETED" else body
        store = self._state.cache.dra
        if kind == RESOURCE_CLAIM:
            before, after = store.on_claim(current, namespace, name)
            self._claim_changed(before, after, namespace, name)
        elif kind == RESOURCE_SLICE:
            store.on_slice(current, name)
            if current is None:  # its selector verdicts are of no use any more
                dynamicresources.VERDICTS.forget(name)
            else:  # added or updated: devices may have appeared
                self._move(DRA_HELPS)
        elif kind == DEVICE_CLASS:
            held = store.device_class(name)
            store.on_class(current, name)
            device_class = store.device_class(name)
            if device_class is not None:
                helps = self._class_helps_fit(held, device_class)
                self._move(DRA_HELPS | helps)
        elif kind == RESOURCE_CLAIM_TEMPLATE:
            store.on_template(current, namespace, name)  # no event kube-scheduler acts on
        else:
            raise ValueError(f"{kind!r} is not one of {DRA_KINDS}")

    def _class_helps_fit(
        self, before: draobjects.DeviceClass | None, after: draobjects.DeviceClass
    ) -> frozenset[str]:
        """NodeResourcesFit's DeviceClass hint (DRAExtendedResource): a class added, or its
        extendedResourceName changed, may back what the pods it rejected ask for."""
        if not self._state.served.kube.devices.extended_resources:
            return frozenset()
        if before is not None and before.extended_resource_name == after.extended_resource_name:
            return frozenset()
        return CLASS_HELPS_FIT

    def relist_dra(self, kind: str, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Every object of a DRA ``kind`` after a (re)list: the ones missing are gone."""
        store = self._state.cache.dra
        if kind == RESOURCE_CLAIM:
            for before, after in store.resync_claims(bodies):
                claim = after if after is not None else before
                assert claim is not None
                self._claim_changed(before, after, claim.namespace, claim.name)
            return
        if kind == RESOURCE_SLICE:
            store.resync_slices(bodies)
        elif kind == DEVICE_CLASS:
            store.resync_classes(bodies)
            if self._state.served.kube.devices.extended_resources:
                self._move(DRA_HELPS | CLASS_HELPS_FIT)
                return
        elif kind == RESOURCE_CLAIM_TEMPLATE:
            store.resync_templates(bodies)
            return
        else:
            raise ValueError(f"{kind!r} is not one of {DRA_KINDS}")
        self._move(DRA_HELPS)

    def _claim_changed(
        self,
        before: draobjects.ResourceClaim | None,
        after: draobjects.ResourceClaim | None,
        namespace: str,
        name: str,
    ) -> None:
        """isSchedulableAfterClaimChange with its preQueueingHint: a claim deallocated (or
        deleted allocated) frees devices for every pod DynamicResources rejected; a claim
        created, or whose status changed, concerns the pods that name it; a change of
        anything else (a finalizer added), or an unallocated claim deleted, none."""
        queue = self._state.queue
        allocated = before is not None and before.allocation is not None
        if allocated and (after is None or after.allocation is None):
            self._move(DRA_HELPS)
            return
        if after is None:
            return
        if before is None or _claim_status(before) != _claim_status(after):
            queue.move_claim_users(namespace, name, DRA_HELPS)

    def on_pod_group(self, api: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A PodGroup of ``api`` (groupobjects.UPSTREAM or COSCHEDULING) was listed, added,
        modified or deleted; its pods that wait are moved as GangScheduling's hints say (a
        PodGroup added, its minCount lowered) or, for Coscheduling, on any change of it."""
        group = _read("PodGroup", body, _GROUP_PARSERS[api])
        if group is None:
            return
        store = self._state.cache.groups
        if event_type == "DELETED":
            if store.remove(group.ref) is not None:
                self._state.group_conditions.forget(group.uid)
            return
        before = store.put(group)
        self._group_changed(before, group)

    def relist_pod_groups(self, api: str, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Every PodGroup of ``api`` after a (re)list: the ones missing are gone."""
        parse = _GROUP_PARSERS[api]
        groups = [g for body in bodies if (g := _read("PodGroup", body, parse)) is not None]
        for before, after in self._state.cache.groups.replace(api, groups):
            if after is not None:
                self._group_changed(before, after)

    def on_quota(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """An ElasticQuota was added, modified or deleted: every pod CapacityScheduling
        rejected is tried again (its EventsToRegister: ElasticQuota, any action, no hint)."""
        quota = _read("ElasticQuota", body, quotaobjects.parse_quota)
        if quota is None:
            return
        store = self._state.cache.quotas
        if event_type == "DELETED":
            changed = store.remove(quota.namespace, quota.name) is not None
        else:
            changed = store.put(quota) != quota
        if changed:
            self._move(QUOTA_HELPS)

    def relist_quotas(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Every ElasticQuota after a (re)list: the ones missing are gone."""
        quotas = [
            q for body in bodies if (q := _read("ElasticQuota", body, quotaobjects.parse_quota))
        ]
        if self._state.cache.quotas.replace(quotas):
            self._move(QUOTA_HELPS)

    def _group_changed(
        self, before: groupobjects.PodGroup | None, after: groupobjects.PodGroup
    ) -> None:
        helps = after.api == groupobjects.COSCHEDULING or before is None
        if before is not None and after.min_count < before.min_count:
            helps = True
        if helps:
            self._state.queue.move_group(after.ref, GROUP_HELPS)

    def _committed_late(self, pod: objects.PodInfo) -> None:
        """A binding whose answer was lost turns out committed: its Scheduled event and trace
        line, which the failed request could not give."""
        record = self._state.uncertain.pop(pod.uid, {}).get(pod.node_name)
        if record is None:
            return
        if not self._state.recorder.writes.may_act("the report of a lost answer", pod):
            # Leadership lost, before the loop has stood down (a replica stalled past its
            # lease): the binding may be the next leader's; this replica reports nothing.
            return
        self._state.committed_late.add(pod.uid)
        if record.deviation and record.policy:
            # The deviation was refunded when the request failed; it stands after all.
            namespace, _, name = record.policy.partition("/")
            stored = self._state.policies.store.get(namespace, name)
            if stored is not None and stored.active is not None:
                self._state.policies.spend(stored.active, pod)
        self._state.tracer.emit(
            dataclasses.replace(
                record,
                result=trace.SCHEDULED,
                message="the binding's answer was lost; the watch shows it committed",
            )
        )
        self._state.recorder.scheduled(pod, pod.node_name)

    def on_node(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A node was listed, added, modified or deleted."""
        node = _read("Node", body, objects.parse_node)
        if node is None:
            return
        self._state.policies.observe_node(node.name, None if event_type == "DELETED" else body)
        kept = self._state.served.bodies_kept
        self._state.bodies.on_node(kept, node.name, None if event_type == "DELETED" else body)
        if event_type == "DELETED":
            self._state.cache.remove_node(node.name)
            return
        if node.problem is not None:
            logger.warning(
                "node %s: %s; it is treated as having no resources", node.name, node.problem
            )
        before = self._state.cache.nodes.info(node.name)
        if self._state.cache.upsert_node(node):
            self._move(
                None if before is None else node_change_helps(before, node), interface.NODE_CHANGED
            )

    def on_workload(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A Service or controller changed: the default spread selector of pods may change."""
        self._state.cache.workloads.on_event(kind, event_type, body)

    def on_namespace(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A namespace's labels matter to affinity terms with a namespaceSelector."""
        metadata = body.get("metadata") or {}
        name = str(metadata.get("name", ""))
        labels = None if event_type == "DELETED" else dict(metadata.get("labels") or {})
        self._state.cache.set_namespace(name, labels)

    def relist_namespaces(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Make the namespaces' labels match a full list."""
        listed = {str((b.get("metadata") or {}).get("name", "")) for b in bodies}
        for name in self._state.cache.namespaces():
            if name not in listed:
                self._state.cache.set_namespace(name, None)
        for body in bodies:
            self.on_namespace(None, body)

    def relist_workloads(self, kind: str, bodies: Iterable[Mapping[str, Any]]) -> None:
        """Make one kind of Service or controller match a full list."""
        self._state.cache.workloads.replace(kind, bodies)

    def relist_pods(self, mark: tuple[int, float], bodies: Sequence[Mapping[str, Any]]) -> None:
        """Bring the pods up to date with a list taken after ``mark`` (a watch's gap)."""
        for body in bodies:
            self.on_pod(None, body)
        self.sweep(mark, None, bodies)

    def relist_nodes(self, mark: tuple[int, float], bodies: Sequence[Mapping[str, Any]]) -> None:
        """Bring the nodes up to date with a list taken after ``mark`` (a watch's gap)."""
        for body in bodies:
            self.on_node(None, body)
        self.sweep(mark, bodies, None)

    def on_policy(self, event_type: str, body: Mapping[str, Any]) -> None:
        """A SchedulingPolicy was created, updated (its spec), resumed after a restart, or
        deleted; the pods of its namespace waiting may fit under what is in force now. Only
        those: a policy governs no other pod, and moving every namespace's unschedulable pods
        on each policy event starved the pods that could be placed (the chaos suite's fuzzing
        of a thousand policies found it)."""
        metadata = body.get("metadata") or {}
        if event_type == "DELETED":
            self._state.policies.delete(
                str(metadata.get("namespace", "")), str(metadata.get("name", ""))
            )
        elif event_type == "RESUMED":
            self._state.policies.resume(body)
        else:
            self._state.policies.apply(body)
        self._state.queue.move_all(namespace=str(metadata.get("namespace", "")))

    def resync(self, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> None:
        """Make the cache and queue match a full list of nodes and pods."""
        node_infos = []
        kept = self._state.served.bodies_kept
        self._state.bodies.clear()
        for body in nodes:
            if (info := _read("Node", body, objects.parse_node)) is not None:
                self._state.policies.observe_node(info.name, body)
                self._state.bodies.on_node(kept, info.name, body)
                node_infos.append(info)
        parse = functools.partial(objects.parse_pod, resize=self._state.served.accounting)
        listed = [(pod, body) for body in pods if (pod := _read("Pod", body, parse)) is not None]
        pod_infos = [pod for pod, _body in listed]
        self._state.cache.reconcile(node_infos, pod_infos)
        # reconcile placed the bound pods; only the pending ones are left to queue.
        for pod, body in listed:
            if not pod.node_name:
                self._pod_event(None, pod)
            self._keep_pod(None, pod, body)
        self._state.queue.move_all()
        self.synced.set()

    def mark(self) -> tuple[int, float]:
        """Where the cache and queue stand before a full list is requested (for ``sweep``)."""
        return self._state.cache.tick, self._state.queue.now()

    def sweep(
        self,
        mark: tuple[int, float],
        nodes: Iterable[Mapping[str, Any]] | None,
        pods: Iterable[Mapping[str, Any]] | None,
    ) -> int:
        """Forget what a full list taken after ``mark`` no longer has: nodes and pods deleted
        while a watch was down (a re-list after such a gap cannot report deletions). A None
        list was not taken, and what it would hold is left as it is."""
        node_names = (
            None
            if nodes is None
            else {str((n.get("metadata") or {}).get("name", "")) for n in nodes}
        )
        pod_uids = (
            None if pods is None else {str((p.get("metadata") or {}).get("uid", "")) for p in pods}
        )
        removed = self._state.cache.sweep(node_names, pod_uids, listed_at=mark[0])
        self._state.bodies.forget_nodes(removed.nodes)
        swept = len(removed.nodes)
        if pod_uids is not None:
            # A deletion the watch missed is a deletion everywhere (client-go's relist delivers
            # it as one): a nominated pod's room, a lost binding's record, its trace lines.
            gone = [*removed.pods, *self._state.queue.sweep(pod_uids, mark[1])]
            gone += [
                held.pod
                for held in self._state.nominations.all()
                if held.pod.uid not in pod_uids
                and held.pod.uid not in self._state.queue
                and self._state.cache.state(held.pod.uid) is None
            ]
            swept += len({pod.uid for pod in gone})
            for pod in gone:
                self._forget(pod)
        if swept:
            logger.warning("resync removed %d objects deleted while a watch was down", swept)
            self._state.queue.move_all()
        return swept


PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
STORAGE_CLASS = "StorageClass"
CSI_NODE = "CSINode"
# VolumeBinding's storage-capacity check and score; NodeVolumeLimits' driver check.
CSI_DRIVER = "CSIDriver"
CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
VOLUME_KINDS = (
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    CSI_NODE,
    CSI_DRIVER,
    CSI_STORAGE_CAPACITY,
)

RESOURCE_SLICE = "ResourceSlice"
DEVICE_CLASS = "DeviceClass"
RESOURCE_CLAIM = "ResourceClaim"
RESOURCE_CLAIM_TEMPLATE = "ResourceClaimTemplate"
DRA_KINDS = (RESOURCE_SLICE, DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE)

# Which unschedulable pods a cluster event may help, by the filter plugins that rejected them
# (a coarse form of kube-scheduler's queueing hints).
VOLUME_HELPS = frozenset(
    {volumebinding.NAME, volumerestrictions.NAME, volumezone.NAME, nodevolumelimits.NAME}
)
POD_REMOVED_HELPS = frozenset(
    {
        noderesourcesfit.NAME,
        nodeports.NAME,
        podtopologyspread.NAME,
        interpodaffinity.NAME,
        volumerestrictions.NAME,  # a ReadWriteOncePod claim released
        nodevolumelimits.NAME,  # a volume slot freed
        capacityscheduling.NAME,  # its namespace's use fell
    }
)
# Coscheduling registers Pod/Add with no hint: a pod placed anywhere moves its pods.
POD_ADDED_HELPS = frozenset(
    {podtopologyspread.NAME, interpodaffinity.NAME, gangscheduling.COSCHEDULING}
)
SCALE_DOWN_HELPS = frozenset({noderesourcesfit.NAME})
# DynamicResources' EventsToRegister: claims, slices and classes (and a node added, or its
# labels or allocatable changed: node_change_helps). A pod's deletion is not among them: the
# devices it held are freed when the resourceclaim controller deallocates its claims, and
# that claim update moves the pods.
DRA_HELPS = frozenset({dra.PLUGIN})
# CapacityScheduling's: any change of an ElasticQuota.
QUOTA_HELPS = frozenset({capacityscheduling.NAME})
# The plugins whose waiting pods a change of their pod group may help.
GROUP_HELPS = frozenset({gangscheduling.NAME, gangscheduling.COSCHEDULING})
_GROUP_PARSERS = {
    groupobjects.UPSTREAM: groupobjects.parse_upstream,
    groupobjects.COSCHEDULING: groupobjects.parse_coscheduling,
}
# NodeResourcesFit's DeviceClass events (DRAExtendedResource): a class that now backs an
# extended resource lets that plugin leave it to DynamicResources.
CLASS_HELPS_FIT = frozenset({noderesourcesfit.NAME})


def _claim_status(claim: draobjects.ResourceClaim) -> tuple[Any, ...]:
    """What a claim's status holds (compared as kube-scheduler compares the whole status)."""
    return (claim.allocation, claim.reserved_for, claim.device_conditions)


def _scaled_down(before: objects.PodInfo, after: objects.PodInfo) -> bool:
    """Whether a placed pod now counts less of some resource than it did."""
    return any(after.requests.get(name, 0) < amount for name, amount in before.requests.items())


def node_change_helps(before: objects.NodeInfo, after: objects.NodeInfo) -> frozenset[str]:
    """The plugins whose verdict a node update may change."""
    helps: set[str] = set()
    if before.allocatable != after.allocatable:
        helps |= {noderesourcesfit.NAME, dra.PLUGIN}
    if before.unschedulable != after.unschedulable:
        helps.add(nodeunschedulable.NAME)
    if before.taints != after.taints:
        helps |= {tainttoleration.NAME, podtopologyspread.NAME}
    if before.labels != after.labels:
        helps |= {
            nodeaffinity.NAME,
            podtopologyspread.NAME,
            interpodaffinity.NAME,
            volumebinding.NAME,  # a PersistentVolume's node affinity
            volumezone.NAME,
            dra.PLUGIN,  # a slice's node selector, a device's reach
        }
    if before.declared_features != after.declared_features:
        # NodeDeclaredFeatures' hint: the list changed (slices.Equal, isSchedulableAfterNodeChange).
        helps.add(nodedeclaredfeatures.NAME)
    return frozenset(helps)


_T = TypeVar("_T")


def _read(
    kind: str, body: Mapping[str, Any], parse: Callable[[Mapping[str, Any]], _T]
) -> _T | None:
    """The object parsed, or None, logged, when plumb cannot read it: one object plumb has a
    bug with must not stop the watch of its whole collection (every relist would meet it
    again) nor the scheduling of the others."""
    try:
        return parse(body)
    except Exception as error:
        metadata = body.get("metadata") or {}
        name = "/".join(str(p) for p in (metadata.get("namespace"), metadata.get("name")) if p)
        logger.error(
            "cannot read %s %s: %s: %s; left out (a bug in plumb: please report it)",
            kind,
            name,
            type(error).__name__,
            error,
        )
        return None
