"""What this replica does as leader: the work that starts when it gains the Lease and stops when
it loses it.

Gaining: wait for the cache's first sync, take every SchedulingPolicy's status up (the budget
the previous leader spent stays spent), start the status writers (policies, and the
ElasticQuotas' status.used: app/quotastatus.py) and the SLO-elastic quota limits
(app/quotalimits.py), run the scheduling loop.
Losing: cancel the loop and the writer, cancel the bindings in flight and forget their
assumptions. Shutting down: the same, after a last status write, then release the Lease so a
standby takes over within one retry period. Without leader election the replica leads from the
start. The watches and the cache run on every replica, leader or not (app/watches.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from plumb import leader
from plumb import scheduler as scheduler_module
from plumb.app import policylist, quotalimits, quotastatus
from plumb.k8s import client as k8s_client
from plumb.policy import writer as writer_module

logger = logging.getLogger(__name__)


class Leadership:
    """Starts and stops the leader's work as the election decides (``on_change``)."""

    def __init__(
        self,
        scheduler: scheduler_module.Scheduler,
        api: k8s_client.ApiClient,
        elector: leader.Elector | None,
    ) -> None:
        self._scheduler = scheduler
        self._api = api
        self.elector = elector
        self._term: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._writer: writer_module.StatusWriter | None = None
        self.failed: BaseException | None = None  # the loop died of this (liveness reports it)
        self._closing = False

    def on_change(self, leading: bool) -> None:
        """The elector's callback: start the leader's work, or stop it."""
        if self._closing:
            return
        if leading:
            self.start()
        else:
            self._stopping = asyncio.get_running_loop().create_task(
                self._stop(), name="plumb-stand-down"
            )

    def start(self) -> None:
        if self._term is None or self._term.done():
            self._term = asyncio.get_running_loop().create_task(self._lead(), name="plumb-lead")

    @property
    def running(self) -> asyncio.Task[None] | None:
        return self._term

    async def _lead(self) -> None:
        scheduler = self._scheduler
        await scheduler.feed.synced.wait()
        writer = writer_module.StatusWriter(
            self._api, scheduler.policies.status, owner=scheduler.policies.uid_of
        )
        self._writer = writer
        scheduler.policies.on_dirty = writer.mark_dirty
        await self._take_over(writer)
        loop = asyncio.get_running_loop()
        writer_task = loop.create_task(writer.run(), name="plumb-status")
        quotas = quotastatus.QuotaStatus(self._api, scheduler.cache.quotas)
        quota_task = loop.create_task(quotas.run(), name="plumb-quota-status")
        limits_task = loop.create_task(
            quotalimits.QuotaLimits(scheduler).run(), name="plumb-quota-limits"
        )
        try:
            await scheduler.run()
        except Exception as error:
            self.failed = error
            logger.exception("the scheduling loop failed")
            raise
        finally:
            for task in (writer_task, quota_task, limits_task):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _take_over(self, writer: writer_module.StatusWriter) -> None:
        """Read every policy's status as the previous leader left it (the standby's copy is
        the one it started with) before the first pod is scheduled."""
        items = await policylist.list_policies(self._api)
        if items is None:
            return  # no CRD: plumb schedules by its profiles alone
        for body in items:
            metadata: Mapping[str, Any] = body.get("metadata") or {}
            writer.seed(
                str(metadata.get("namespace")),
                str(metadata.get("name")),
                body.get("status"),
                uid=str(metadata.get("uid") or ""),
            )
            self._scheduler.policies.take_over(body)
        # Policies in force may differ from what the standby held: retry the waiting pods.
        self._scheduler.queue.move_all()

    async def _stop(self, *, final: bool = False) -> None:
        term, self._term = self._term, None
        writer = self._writer
        if final and writer is not None and self.elector_allows():
            # A last status write, so the next leader takes up the budget as it is now.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.flush(), timeout=2.0)
        if term is not None:
            term.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await term
        self._scheduler.policies.on_dirty = lambda namespace, name: None
        await self._scheduler.stand_down()

    def elector_allows(self) -> bool:
        return self.elector is None or self.elector.may_act()

    async def shutdown(self) -> None:
        """Stop leading (a last status write first), then release the Lease if held."""
        self._closing = True
        if self._stopping is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stopping
        await self._stop(final=True)
        if self.elector is not None:
            await self.elector.release()
