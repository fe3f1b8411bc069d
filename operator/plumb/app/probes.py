"""Liveness and readiness, served beside /metrics: ``GET /healthz`` and ``GET /readyz``.

Ready (``/readyz`` 200) once the cache has had its first full list, on the leader and on a warm
standby alike: a standby is a healthy replica that could lead at once. Before that, 500.

Live (``/healthz`` 200) unless something is stuck, concretely:

- the scheduling loop died of an error, or has been deciding one batch for more than
  ``scheduler.STALLED_CYCLE_SECONDS`` (60 s; a batch takes milliseconds);
- a watch task ended, or a watch has had no stream open and no answer from the API server for
  ``WATCH_STALL_SECONDS`` (5 min: a watch request lasts 5 min and its reconnect backoff is at
  most 30 s, so a healthy watch always has a stream open or just had an answer).

An idle loop waiting for pods is not stuck. A failing probe answers 500 with the reasons, one
per line, so ``kubectl describe pod`` shows them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from aiohttp import web

from plumb import scheduler as scheduler_module
from plumb.app import leading
from plumb.k8s import client as k8s_client

WATCH_STALL_SECONDS = 300.0


class Probes:
    """The answers of /healthz and /readyz, from the scheduler, the watches and the leadership."""

    def __init__(
        self,
        scheduler: scheduler_module.Scheduler,
        api: k8s_client.ApiClient,
        leadership: leading.Leadership,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._scheduler = scheduler
        self._api = api
        self._leadership = leadership
        self._clock = clock
        self.watches: Sequence[asyncio.Task[None]] = ()  # set once the watches start

    def problems(self) -> list[str]:
        """Why this replica is not live; empty when it is."""
        found: list[str] = []
        if self._leadership.failed is not None:
            found.append(f"the scheduling loop failed: {self._leadership.failed!r}")
        stalled = self._scheduler.stalled()
        if stalled is not None:
            found.append(stalled)
        now = self._clock()
        for task in self.watches:
            path = task.get_name().removeprefix("plumb-watch ")
            if task.done():
                found.append(f"the watch of {path} has ended")
                continue
            activity = self._api.streams.get(path)
            if activity is not None and not activity.open:
                silent = now - activity.changed_at
                if silent > WATCH_STALL_SECONDS:
                    found.append(
                        f"the watch of {path} has had no stream and no answer for {silent:.0f} s"
                    )
        return found

    def ready(self) -> bool:
        return self._scheduler.feed.synced.is_set()

    def routes(self) -> list[web.RouteDef]:
        async def healthz(_: web.Request) -> web.Response:
            found = self.problems()
            if found:
                return web.Response(status=500, text="not live:\n" + "\n".join(found) + "\n")
            return web.Response(text="ok\n")

        async def readyz(_: web.Request) -> web.Response:
            if not self.ready():
                return web.Response(
                    status=500, text="not ready: the cache has not had its first full list\n"
                )
            return web.Response(text="ok\n")

        return [web.get("/healthz", healthz), web.get("/readyz", readyz)]
