"""``plumb run``: build the scheduler, hand its handlers to kopf, run both until a signal."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import time
from pathlib import Path
from typing import Any

import kopf

from plumb import binder, events
from plumb import scheduler as scheduler_module
from plumb.app import handlers
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module
from plumb.kernel import executor

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What ``plumb run`` was asked to do."""

    kubeconfig: Path | None
    context: str | None
    scheduler_name: str
    bind_concurrency: int = 64


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # kopf would otherwise post its own log lines as events on the pods it sees.
    settings.posting.enabled = False
    # plumb watches fixed core resources; no need to scan CRDs or namespaces (or RBAC for it).
    settings.scanning.disabled = True
    settings.peering.standalone = True
    settings.peering.clusterwide = True
    return settings


async def run(settings: RunSettings) -> None:
    """Run the scheduler until SIGINT/SIGTERM (kopf handles the signals)."""
    creds = credentials_module.load(settings.kubeconfig, context=settings.context)
    kernel = executor.KernelExecutor()
    started = time.monotonic()
    await kernel.warm_up()
    logger.info("kernel ready in %.1f s", time.monotonic() - started)
    api = k8s_client.ApiClient(creds, user_agent=f"plumb/{settings.scheduler_name}")
    recorder = events.Recorder(api, instance=f"{settings.scheduler_name}-{socket.gethostname()}")
    scheduler = scheduler_module.Scheduler(
        profile=scheduler_module.Profile(scheduler_name=settings.scheduler_name),
        binder=binder.Binder(api, concurrency=settings.bind_concurrency),
        recorder=recorder,
        kernel=kernel.run,
    )
    registry = kopf.OperatorRegistry()
    handlers.register(registry, scheduler=scheduler, api=api, creds=creds)
    loop_task = asyncio.create_task(scheduler.run(), name="plumb-scheduling-loop")

    @kopf.on.cleanup(registry=registry)
    async def stop_loop(**_: Any) -> None:
        # Stop our own tasks inside kopf's shutdown: left running, kopf would count them as
        # hung and wait its 5 s grace period before exiting.
        loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop_task
        await scheduler.drain()

    try:
        logger.info(
            "plumb scheduling pods with schedulerName=%s on %s",
            settings.scheduler_name,
            creds.server,
        )
        await kopf.operator(
            registry=registry,
            settings=operator_settings(),
            standalone=True,
            clusterwide=True,
        )
    finally:
        loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop_task
        await scheduler.drain()
        await api.close()
        kernel.close()
        logger.info("plumb stopped")
