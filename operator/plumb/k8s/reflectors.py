"""A list-then-watch stream of one collection, as an informer keeps it: resumes from the last
resourceVersion, re-lists when the API server says that version is gone (410), and backs off
while the server cannot be reached.

It is supervised as client-go's reflector is: whatever goes wrong, the watch starts again
instead of ending. An unexpected error (a bug in an event handler, a payload no handler
expected) is logged once, counted (``on_failure``), and the collection is listed afresh
after a backoff doubling up to ``MAX_BACKOFF``: the event that failed, and any the watch
missed meanwhile, are in that list, and the other collections' watches never notice. Only
cancellation (shutdown) ends it.

plumb watches pods with this rather than through kopf: a pod's events are the hot path (two per
scheduled pod, all pods of the cluster), and kopf's per-object machinery (a worker task, a
diff-base copy of the body, cause detection) cost more CPU than the scheduling itself
(docs/performance.md#watches-plumbs-own-not-kopfs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from plumb.k8s import client as k8s_client

logger = logging.getLogger("plumb.k8s.watching")  # the name log readers filter on

JSON = dict[str, Any]
EventHandler = Callable[[str, Mapping[str, Any]], None]
"""Receives (ADDED | MODIFIED | DELETED, object) for each watch event."""
Relister = Callable[[], Awaitable[str]]
"""Lists the collection again after a gap the watch could not bridge (its resourceVersion
expired, or an event could not be handled), brings its reader up to date, and returns the
list's resourceVersion."""
FailureHandler = Callable[[Exception], None]
"""Told of each unexpected error the watch restarts after (to count it)."""

WATCH_SECONDS = 300
"""How long one watch request lasts before the server ends it and the stream resumes."""
MAX_BACKOFF = 30.0
SHORT_WATCH = 1.0
"""A watch the server ends this soon with no event is a failure, as client-go's reflector
counts a "very short watch": reopening it at once would hammer the API server."""


class Expired(Exception):
    """The API server no longer has the resourceVersion the watch asked for (HTTP 410)."""


async def watch_forever(
    api: k8s_client.ApiClient,
    path: str,
    resource_version: str,
    *,
    on_event: EventHandler,
    relist: Relister,
    on_failure: FailureHandler | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Feed ``on_event`` every change of the collection at ``path`` after ``resource_version``
    (from a list the caller took), until cancelled."""
    version = resource_version
    failures = 0
    stale = False  # the collection must be listed again before the watch resumes
    while True:
        try:
            if stale:
                version = await relist()
                stale = False
            started, events = clock(), 0
            # Closed at once when a handler raises, rather than left to the garbage collector
            # with its response still open.
            async with contextlib.aclosing(_stream(api, path, version)) as stream:
                async for event_type, body in stream:
                    metadata = body.get("metadata") or {}
                    version = str(metadata.get("resourceVersion") or version)
                    if event_type != "BOOKMARK":
                        on_event(event_type, body)
                    events += 1
                    failures = 0
            if not events and clock() - started < SHORT_WATCH:
                failures += 1
                delay = _backoff(failures)
                logger.warning(
                    "watch of %s ended at once with no event; resuming in %.0f s", path, delay
                )
                await sleep(delay)
        except Expired:
            logger.info("watch of %s expired at resourceVersion %s; listing again", path, version)
            stale = True
        except (k8s_client.TransportError, aiohttp.ClientError, TimeoutError) as error:
            failures += 1
            delay = _backoff(failures)
            if stale:
                logger.warning("listing %s failed (%s); trying again in %.0f s", path, error, delay)
            else:
                logger.warning("watch of %s broke (%s); resuming in %.0f s", path, error, delay)
            await sleep(delay)
        except Exception as error:
            # A bug, not the network: left to end the task, it would leave the collection
            # silently stale for good. The event that failed is not skipped: the fresh list
            # holds its object as it is now. One line and no traceback, as every plumb log
            # line: the frame it was raised in is enough to find the bug.
            failures += 1
            delay = _backoff(failures)
            logger.error(
                "watch of %s failed: %s: %s%s; re-listing in %.1f s",
                path,
                type(error).__name__,
                error,
                _raised_at(error),
                delay,
            )
            if on_failure is not None:
                on_failure(error)
            stale = True
            await sleep(delay)


def _raised_at(error: BaseException) -> str:
    """Where ``error`` was raised, its innermost frame, as `` (raised at FILE:LINE in NAME)``."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    where = frames[-1]
    return f" (raised at {where.filename}:{where.lineno} in {where.name})"


def _backoff(failures: int) -> float:
    return float(min(MAX_BACKOFF, 2 ** (failures - 1)))


async def _stream(
    api: k8s_client.ApiClient, path: str, version: str
) -> AsyncGenerator[tuple[str, JSON], None]:
    """One watch request's events, until the server ends it."""
    params = {
        "watch": "true",
        "resourceVersion": version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(WATCH_SECONDS),
    }
    async with api.stream("GET", path, params=params, read_timeout=WATCH_SECONDS + 30) as response:
        if response.status == 410:
            raise Expired()
        if response.status != 200:
            text = (await response.read()).decode(errors="replace")[:300]
            raise k8s_client.TransportError(f"watch {path}: HTTP {response.status}: {text}")
        pending = b""
        async for chunk in response.content.iter_any():
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                event = k8s_client.decode(line)
                event_type = str(event.get("type", ""))
                body = event.get("object") or {}
                if event_type == "ERROR":
                    if body.get("code") == 410:
                        raise Expired()
                    raise k8s_client.TransportError(
                        f"watch {path}: {body.get('reason')}: {body.get('message')}"
                    )
                yield event_type, body
