"""kopf handlers: login with plumb's credentials, the cluster feed started at startup and
stopped at cleanup.

kopf runs the operator (signals, startup and cleanup, login); the collections the scheduler
reads are fed by app/watches.py. No kopf handler touches Pods or Nodes, so kopf stores
nothing on them: no annotations, no finalizers, no status.
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
        memo["watches"] = await watches.sync_and_watch(scheduler, api)

    @kopf.on.cleanup(registry=registry)
    async def stop_watches(memo: kopf.Memo, **_: Any) -> None:
        for task in memo.get("watches", ()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
