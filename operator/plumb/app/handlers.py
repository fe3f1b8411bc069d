"""kopf handlers: login with plumb's credentials, the cluster feed and the policy status writer
started at startup and stopped at cleanup, and the SchedulingPolicy reconciler.

kopf runs the operator (signals, startup and cleanup, login) and reconciles SchedulingPolicies
(create, update, resume, delete); the collections the scheduler reads are fed by
app/watches.py. No kopf handler touches Pods or Nodes, so kopf stores nothing on them: no
annotations, no finalizers, no status. Deleting a policy needs no finalizer either: plumb
only has to forget it, which the watch's DELETED event is enough for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import kopf

from plumb import scheduler as scheduler_module
from plumb.app import watches
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module
from plumb.policy import writer

POLICIES = ("scheduling.plumb.dev", "v1alpha1", "schedulingpolicies")

logger = logging.getLogger(__name__)


def register(
    registry: kopf.OperatorRegistry,
    *,
    scheduler: scheduler_module.Scheduler,
    api: k8s_client.ApiClient,
    creds: credentials_module.Credentials,
) -> None:
    """Attach plumb's handlers to a kopf registry, bound to one scheduler instance."""

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        # One set of credentials for kopf and for plumb's own client.
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

    @kopf.on.startup(registry=registry)
    async def sync(memo: kopf.Memo, **_: Any) -> None:
        status_writer = writer.StatusWriter(api, scheduler.policies.status)
        scheduler.policies.on_dirty = status_writer.mark_dirty
        tasks = [asyncio.get_running_loop().create_task(status_writer.run(), name="plumb-status")]
        memo["tasks"] = tasks
        # Policies first: no pod may be scheduled before the policy governing it is known.
        # kopf's resume handlers see the same generations again later, which changes nothing.
        for body in await _list_policies(api):
            scheduler.on_policy("RESUMED", body)
        tasks.extend(await watches.sync_and_watch(scheduler, api))

    @kopf.on.cleanup(registry=registry)
    async def stop_tasks(memo: kopf.Memo, **_: Any) -> None:
        for task in memo.get("tasks", ()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @kopf.on.create(*POLICIES, registry=registry)
    @kopf.on.update(*POLICIES, registry=registry)
    async def policy_changed(body: kopf.Body, **_: Any) -> None:
        scheduler.on_policy("APPLIED", dict(body))

    @kopf.on.resume(*POLICIES, registry=registry)
    async def policy_resumed(body: kopf.Body, **_: Any) -> None:
        scheduler.on_policy("RESUMED", dict(body))

    @kopf.on.event(*POLICIES, registry=registry)
    async def policy_deleted(event: kopf.RawEvent, **_: Any) -> None:
        # An on.delete handler would need a finalizer on every policy (kopf calls optional
        # ones only for objects that carry one); the watch's DELETED event is enough here.
        if event.get("type") == "DELETED":
            scheduler.on_policy("DELETED", event["object"])


async def _list_policies(api: k8s_client.ApiClient) -> list[dict[str, Any]]:
    group, version, plural = POLICIES
    try:
        items, _version = await api.list_all(f"/apis/{group}/{version}/{plural}")
    except k8s_client.TransportError as error:
        # Without the CRD plumb schedules by the defaults alone; kopf says so too.
        logger.warning("no SchedulingPolicies read (is crds/ applied?): %s", error)
        return []
    return items
