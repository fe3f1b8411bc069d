"""The cluster feed: list every collection the scheduler reads once, then watch each from its list's
resourceVersion, so the loop starts on a full picture and no object is replayed or missed.

Pods, nodes, namespaces, Services, controllers, PodDisruptionBudgets, the volume plugins' objects
(PersistentVolumes, claims, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities) and
DynamicResources' (ResourceSlices, DeviceClasses, ResourceClaims, ResourceClaimTemplates of
resource.k8s.io/v1) and the PodGroups of scheduling.k8s.io/v1beta1 and scheduler-plugins'
scheduling.x-k8s.io/v1alpha1 (an API server that does not serve one of those groups is logged
once and plumb goes on without it) are watched with k8s/reflectors.py rather than kopf's
on.event: kopf's per-object machinery cost more CPU and memory than the scheduling itself
(docs/performance.md#watches-plumbs-own-not-kopfs). kopf runs the operator around it.

Each collection has its own task, supervised by reflectors.watch_forever: a handler failing on one
object re-lists that collection only (counted in ``plumb_watch_restarts_total``), and the others go
on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from plumb import scheduler as scheduler_module
from plumb.backend.cache import controllers
from plumb.backend.records import groupobjects, quotaobjects
from plumb.k8s import client as k8s_client
from plumb.k8s import reflectors

logger = logging.getLogger(__name__)

JSON = dict[str, Any]

# Collections whose selectors make up the default spread selector, and their kinds.
WORKLOAD_PATHS = (
    ("/api/v1/services", controllers.SERVICE),
    ("/api/v1/replicationcontrollers", controllers.REPLICATION_CONTROLLER),
    ("/apis/apps/v1/replicasets", controllers.REPLICA_SET),
    ("/apis/apps/v1/statefulsets", controllers.STATEFUL_SET),
)
NAMESPACES = "/api/v1/namespaces"
NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
# Preemption counts the victims whose eviction a budget would refuse.
BUDGETS = "/apis/policy/v1/poddisruptionbudgets"
# The volume plugins' objects, by kind.
VOLUME_PATHS = (
    ("/api/v1/persistentvolumes", scheduler_module.PERSISTENT_VOLUME),
    ("/api/v1/persistentvolumeclaims", scheduler_module.PERSISTENT_VOLUME_CLAIM),
    ("/apis/storage.k8s.io/v1/storageclasses", scheduler_module.STORAGE_CLASS),
    ("/apis/storage.k8s.io/v1/csinodes", scheduler_module.CSI_NODE),
    ("/apis/storage.k8s.io/v1/csidrivers", scheduler_module.CSI_DRIVER),
    ("/apis/storage.k8s.io/v1/csistoragecapacities", scheduler_module.CSI_STORAGE_CAPACITY),
)
# DynamicResources' objects, by kind (claims and templates of every namespace).
DRA_GROUP = "/apis/resource.k8s.io/v1"
DRA_PATHS = (
    (f"{DRA_GROUP}/resourceslices", scheduler_module.RESOURCE_SLICE),
    (f"{DRA_GROUP}/deviceclasses", scheduler_module.DEVICE_CLASS),
    (f"{DRA_GROUP}/resourceclaims", scheduler_module.RESOURCE_CLAIM),
    (f"{DRA_GROUP}/resourceclaimtemplates", scheduler_module.RESOURCE_CLAIM_TEMPLATE),
)
# The pod groups of both APIs: kube-scheduler's (served where GenericWorkload is on) and
# scheduler-plugins' CRD (where it is installed).
GROUP_PATHS = (
    (f"/apis/{groupobjects.UPSTREAM}/{groupobjects.UPSTREAM_VERSION}", groupobjects.UPSTREAM),
    (
        f"/apis/{groupobjects.COSCHEDULING}/{groupobjects.COSCHEDULING_VERSION}",
        groupobjects.COSCHEDULING,
    ),
)
# scheduler-plugins' ElasticQuotas (where its CRD is installed): tenant quotas.
QUOTAS = f"/apis/{quotaobjects.GROUP}/{quotaobjects.VERSION}/{quotaobjects.PLURAL}"
NOT_FOUND, FORBIDDEN = 404, 403


@dataclasses.dataclass(frozen=True)
class Feed:
    """One watched collection: where it is, and how the scheduler takes its events and lists."""

    path: str
    on_event: Callable[[str, Mapping[str, Any]], None]
    # A full list, and where the scheduler stood before it was requested (see ClusterFeed.mark).
    on_list: Callable[[tuple[int, float], list[JSON]], None]
    # The API group it belongs to, when the API server may not serve it (a 404 on its list):
    # plumb then goes on without the group's collections, and logs what that means.
    optional_group: str = ""
    without: str = ""


def feeds(scheduler: scheduler_module.Scheduler) -> list[Feed]:
    """Every collection plumb reads, in the order a re-list of all would apply them."""
    cluster = scheduler.feed

    def workload(kind: str) -> Feed:
        path = next(p for p, k in WORKLOAD_PATHS if k == kind)
        return Feed(
            path,
            lambda event_type, body: cluster.on_workload(kind, event_type, body),
            lambda _mark, items: cluster.relist_workloads(kind, items),
        )

    def volume(path: str, kind: str) -> Feed:
        return Feed(
            path,
            lambda event_type, body: cluster.on_volume(kind, event_type, body),
            lambda _mark, items: cluster.relist_volumes(kind, items),
        )

    def resource(path: str, kind: str) -> Feed:
        return Feed(
            path,
            lambda event_type, body: cluster.on_dra(kind, event_type, body),
            lambda _mark, items: cluster.relist_dra(kind, items),
            optional_group=DRA_GROUP,
            without="pods with resourceClaims wait, as their claims cannot exist",
        )

    def pod_groups(group: str, api: str) -> Feed:
        return Feed(
            f"{group}/podgroups",
            lambda event_type, body: cluster.on_pod_group(api, event_type, body),
            lambda _mark, items: cluster.relist_pod_groups(api, items),
            optional_group=group,
            without=f"pods naming a PodGroup of {api} are decided one by one",
        )

    return [
        *(workload(kind) for _path, kind in WORKLOAD_PATHS),
        *(volume(path, kind) for path, kind in VOLUME_PATHS),
        # Before the pods: a pod listed with its claims made is let in at once.
        *(resource(path, kind) for path, kind in DRA_PATHS),
        # Before the pods too: a gang listed with its PodGroup is let in at once.
        *(pod_groups(group, api) for group, api in GROUP_PATHS),
        Feed(
            QUOTAS,
            cluster.on_quota,
            lambda _mark, items: cluster.relist_quotas(items),
            # Its own key: the PodGroup CRD of the same API group may be there without it.
            optional_group=QUOTAS,
            without="no namespace's pods are limited by an ElasticQuota",
        ),
        Feed(
            NAMESPACES,
            cluster.on_namespace,
            lambda _mark, items: cluster.relist_namespaces(items),
        ),
        Feed(BUDGETS, cluster.on_budget, lambda _mark, items: cluster.relist_budgets(items)),
        Feed(NODES, cluster.on_node, cluster.relist_nodes),
        Feed(PODS, cluster.on_pod, cluster.relist_pods),
    ]


async def sync_and_watch(
    scheduler: scheduler_module.Scheduler,
    api: k8s_client.ApiClient,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> list[asyncio.Task[None]]:
    """List everything, hand the scheduler its first full picture, and start the watches
    (``sleep`` waits out their backoffs: tests pass a fake)."""
    versions: dict[str, str] = {}
    lists: dict[str, list[JSON]] = {}
    every: list[Feed] = []
    unserved: set[str] = set()
    for feed in feeds(scheduler):
        if feed.optional_group in unserved:
            continue
        try:
            lists[feed.path], versions[feed.path] = await api.list_all(feed.path)
        except k8s_client.StatusError as error:
            if not feed.optional_group or error.status not in (NOT_FOUND, FORBIDDEN):
                raise
            unserved.add(feed.optional_group)
            why = (
                "the API server does not serve"
                if error.status == NOT_FOUND
                else "plumb's service account may not list (see its ClusterRole)"
            )
            logger.warning(
                "%s %s (GET %s: HTTP %d); plumb goes on without it: %s",
                why,
                feed.optional_group,
                feed.path,
                error.status,
                feed.without,
            )
            continue
        every.append(feed)
    every = [feed for feed in every if feed.optional_group not in unserved]
    for feed in every:
        if feed.path not in (NODES, PODS):
            feed.on_list(scheduler.feed.mark(), lists.pop(feed.path))
    nodes, pods = lists.pop(NODES), lists.pop(PODS)
    scheduler.feed.resync(nodes, pods)
    logger.info("synced %d nodes and %d pods", len(nodes), len(pods))
    del nodes, pods  # the raw bodies are parsed; keep only the cache
    loop = asyncio.get_running_loop()
    return [
        loop.create_task(
            reflectors.watch_forever(
                api,
                feed.path,
                versions[feed.path],
                on_event=feed.on_event,
                relist=_relister(api, feed, scheduler),
                on_failure=_counter(scheduler, feed.path),
                sleep=sleep,
            ),
            name=f"plumb-watch {feed.path}",
        )
        for feed in every
    ]


def _counter(scheduler: scheduler_module.Scheduler, path: str) -> reflectors.FailureHandler:
    resource = path.rsplit("/", 1)[-1]  # "/apis/apps/v1/replicasets": "replicasets"
    scheduler.metrics.watching(resource)

    def count(_error: Exception) -> None:
        scheduler.metrics.watch_restart(resource)

    return count


def _relister(
    api: k8s_client.ApiClient, feed: Feed, scheduler: scheduler_module.Scheduler
) -> reflectors.Relister:
    async def relist() -> str:
        mark = scheduler.feed.mark()
        items, version = await api.list_all(feed.path)
        feed.on_list(mark, items)
        return version

    return relist
