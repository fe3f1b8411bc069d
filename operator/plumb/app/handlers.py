"""kopf handlers: login, startup sync, the node and workload watches, and the pod watch task.

Every kopf handler on cluster objects is an ``on.event`` handler that returns None, so kopf
stores nothing on them: no annotations, no finalizers, no status. Pods, the hot path, are
watched by plumb's own list-then-watch stream (k8s/watching.py) started from the startup list.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from plumb import scheduler as scheduler_module
from plumb.backend import workloads
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module
from plumb.k8s import watching

logger = logging.getLogger(__name__)

# Collections whose selectors make up the default spread selector, and their kinds.
WORKLOAD_PATHS = (
    ("/api/v1/services", workloads.SERVICE),
    ("/api/v1/replicationcontrollers", workloads.REPLICATION_CONTROLLER),
    ("/apis/apps/v1/replicasets", workloads.REPLICA_SET),
    ("/apis/apps/v1/statefulsets", workloads.STATEFUL_SET),
)


def _resource(path: str) -> tuple[str, str, str]:
    """(group, version, plural) of a collection path such as /apis/apps/v1/replicasets."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        return "", parts[1], parts[2]
    return parts[1], parts[2], parts[3]


def register(
    registry: kopf.OperatorRegistry,
    *,
    scheduler: scheduler_module.Scheduler,
    api: k8s_client.ApiClient,
    creds: credentials_module.Credentials,
    resync_period: float = 300.0,
) -> None:
    """Attach plumb's handlers to a kopf registry, bound to one scheduler instance."""

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        # One set of credentials for kopf's watches and for plumb's own binding client.
        return kopf.ConnectionInfo(
            server=creds.server,
            ca_path=creds.ca_file,
            insecure=creds.insecure,
            token=creds.token,
            username=creds.username,
            password=creds.password,
            certificate_path=creds.client_cert_file,
            private_key_path=creds.client_key_file,
        )

    async def resync_forever(period: float) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                mark = scheduler.mark()
                nodes, _rv = await api.list_all("/api/v1/nodes")
                pods, _rv = await api.list_all("/api/v1/pods")
                scheduler.sweep(mark, nodes, pods)
            except k8s_client.TransportError as error:
                logger.warning("periodic resync failed, trying again later: %s", error)

    @kopf.on.startup(registry=registry)
    async def start_resync(memo: kopf.Memo, **_: Any) -> None:
        memo["resync"] = asyncio.get_running_loop().create_task(resync_forever(resync_period))

    async def relist_pods() -> str:
        mark = scheduler.mark()
        pods, version = await api.list_all("/api/v1/pods")
        for body in pods:
            scheduler.on_pod(None, body)
        scheduler.sweep(mark, None, pods)
        return version

    @kopf.on.cleanup(registry=registry)
    async def stop_tasks(memo: kopf.Memo, **_: Any) -> None:
        for name in ("pod_watch", "resync"):
            task = memo.get(name)
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    @kopf.on.startup(registry=registry)
    async def sync(memo: kopf.Memo, **_: Any) -> None:
        # The watches begin after startup handlers: list first so the loop starts on a full
        # picture of the cluster instead of scheduling onto the first nodes to arrive.
        for path, kind in WORKLOAD_PATHS:
            items, _rv = await api.list_all(path)
            for item in items:
                scheduler.on_workload(kind, None, item)
        namespaces, _rv = await api.list_all("/api/v1/namespaces")
        for item in namespaces:
            scheduler.on_namespace(None, item)
        nodes, _rv = await api.list_all("/api/v1/nodes")
        pods, version = await api.list_all("/api/v1/pods")
        scheduler.resync(nodes, pods)
        # The pod watch resumes exactly where the list ended: no pod is replayed or missed.
        memo["pod_watch"] = asyncio.get_running_loop().create_task(
            watching.watch_forever(
                api,
                "/api/v1/pods",
                version,
                on_event=scheduler.on_pod,
                relist=relist_pods,
            ),
            name="plumb-pod-watch",
        )
        logger.info("synced %d nodes and %d pods", len(nodes), len(pods))

    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def node_event(event: kopf.RawEvent, **_: Any) -> None:
        scheduler.on_node(event.get("type"), event["object"])

    # The selectors kube-scheduler's default spread constraints are built from.
    def workload_handler(kind: str) -> Callable[..., Awaitable[None]]:
        async def workload_event(event: kopf.RawEvent, **_: Any) -> None:
            scheduler.on_workload(kind, event.get("type"), event["object"])

        return workload_event

    for path, kind in WORKLOAD_PATHS:
        group, version, plural = _resource(path)
        kopf.on.event(group, version, plural, registry=registry, id=f"workload-{plural}")(
            workload_handler(kind)
        )

    @kopf.on.event("", "v1", "namespaces", registry=registry)
    async def namespace_event(event: kopf.RawEvent, **_: Any) -> None:
        scheduler.on_namespace(event.get("type"), event["object"])
