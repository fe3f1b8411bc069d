"""kopf handlers: login with plumb's credentials, the cluster feed started at startup and
stopped at cleanup, and the SchedulingPolicy reconciler.

kopf runs the operator (signals, startup and cleanup, login) and feeds SchedulingPolicies
(a spec seen for the first time, a new generation, a deletion); the collections the scheduler
reads are fed by app/watches.py, and the status writer runs on the leader (app/leading.py).
No kopf handler writes anything: SchedulingPolicies are read through raw watch events rather
than kopf's create/update handlers, because those store kopf's progress in annotations, and
two replicas (a leader and its standby) would each write them and hide changes from each
other. No finalizer is needed either: plumb only has to forget a deleted policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import kopf

from plumb import scheduler as scheduler_module
from plumb.app import policylist, watches
from plumb.app import probes as probes_module
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module

POLICIES = ("scheduling.plumb.dev", "v1alpha1", "schedulingpolicies")

logger = logging.getLogger(__name__)


def register(
    registry: kopf.OperatorRegistry,
    *,
    scheduler: scheduler_module.Scheduler,
    api: k8s_client.ApiClient,
    creds: credentials_module.Credentials,
    probes: probes_module.Probes,
) -> None:
    """Attach plumb's handlers to a kopf registry, bound to one scheduler instance."""
    tokens = api.tokens

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        # One set of credentials for kopf and for plumb's own client. kopf calls this again
        # after a 401; a token from a file is read again then, so kopf follows a rotated
        # service-account token as plumb's own client does. (No periodic expiration: kopf
        # would close its session, and with it the policy watch, each time.)
        tokens.refresh()
        return kopf.ConnectionInfo(
            server=creds.server,
            ca_path=creds.ca_file,
            insecure=creds.insecure,
            token=tokens.current(),
            username=creds.username,
            password=creds.password,
            certificate_path=creds.client_cert_file,
            private_key_path=creds.client_key_file,
        )

    @kopf.on.startup(registry=registry)
    async def sync(memo: kopf.Memo, **_: Any) -> None:
        # Policies first: no pod may be scheduled before the policy governing it is known.
        for body in await policylist.list_policies(api) or ():
            scheduler.feed.on_policy("RESUMED", body)
        tasks = await watches.sync_and_watch(scheduler, api)
        memo["tasks"] = tasks
        probes.watches = tasks

    @kopf.on.cleanup(registry=registry)
    async def stop_tasks(memo: kopf.Memo, **_: Any) -> None:
        for task in memo.get("tasks", ()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @kopf.on.event(*POLICIES, registry=registry)
    async def policy_event(event: kopf.RawEvent, **_: Any) -> None:
        body = event["object"]
        if event.get("type") == "DELETED":
            scheduler.feed.on_policy("DELETED", body)
            return
        metadata = body.get("metadata") or {}
        known = scheduler.policies.store.get(
            str(metadata.get("namespace", "")), str(metadata.get("name", ""))
        )
        if known is None:
            scheduler.feed.on_policy("RESUMED", body)  # first seen: take its status up
        elif known.observed_generation != metadata.get("generation") or known.uid != metadata.get(
            "uid"
        ):
            scheduler.feed.on_policy("APPLIED", body)
        # Else only its status or metadata changed (the leader's own status writes, mostly):
        # nothing to reconcile, and no reason to retry the waiting pods.
