"""Calls into the Python plugins off the event loop, each watched against its plugin's timeout.

The scheduling loop awaits ``PluginCalls.judge`` for a batch: one worker thread judges its pods
in turn (extensions/judgements.py) while the loop watches the call in progress. A call that
runs past its plugin's ``timeout`` fails the pod it was judging; since Python cannot stop a
thread, that worker is left to finish in the background (extensions/abandoned.py counts such
calls; past its limit the plugin is busy and its pods fail at once, saying so) and the rest of
the batch is judged on a fresh worker. A call that returns, but late, fails its pod too.
Nothing a plugin does can stop the loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from plumb.backend.cache import snapshot
from plumb.backend.records import objects
from plumb.extensions import abandoned, enabling, interface, judgements, registry

POLL_SECONDS = 0.01


@dataclasses.dataclass(slots=True)
class _WorkerProgress:
    """What the worker is doing, read by the loop's watch (under ``lock``)."""

    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    pod: str = ""
    plugin: str = ""
    point: str = ""
    started: float = 0.0
    abandoned: bool = False
    results: dict[str, judgements.Judgement] = dataclasses.field(default_factory=dict)

    def left(self) -> bool:
        """Whether the loop gave up on this worker (read under ``lock``; another thread sets
        it, so never narrowed from an earlier read)."""
        return self.abandoned


def instances(
    enabled: Sequence[enabling.Enabled], found: registry.Registry
) -> list[tuple[enabling.Enabled, interface.Plugin]]:
    """The plugins of a profile that judge pods over the nodes (PreFilter, Filter, Score)."""
    judging = {interface.PRE_FILTER, interface.FILTER, interface.SCORE}
    return [(e, enabling.instance(e, found)) for e in enabled if e.points & judging]


def judge_now(
    pods: Sequence[objects.PodInfo],
    snap: snapshot.Snapshot,
    plugins: judgements.Plugins,
    now: float,
) -> dict[str, judgements.Judgement]:
    """Each pod's judgement, on this thread and unwatched (a replay, the tests)."""
    if not plugins:
        return {}
    view = judgements.node_view(snap, now)
    checked = judgements.CheckedAnswers()
    return {
        pod.uid: judgements.judge(judgements.pod_view(pod), view, plugins, checked=checked)
        for pod in pods
    }


class PluginCalls:
    """The scheduling loop's way into the plugins (one per scheduler)."""

    def __init__(
        self, found: Callable[[], registry.Registry], left: abandoned.AbandonedCalls
    ) -> None:
        self._found = found
        self._worker = abandoned.worker("plumb-plugins")
        self._left = left

    async def judge(
        self,
        pods: Sequence[objects.PodInfo],
        snap: snapshot.Snapshot,
        enabled: Sequence[enabling.Enabled],
        now: float,
    ) -> dict[str, judgements.Judgement]:
        """Each pod's judgement by the profile's plugins, by uid ({} when none judges)."""
        plugins = instances(enabled, self._found())
        if not plugins:
            return {}
        view = judgements.node_view(snap, now)
        timeouts = {e.name: e.timeout for e, _ in plugins}
        results: dict[str, judgements.Judgement] = {}
        remaining = list(pods)
        while remaining:
            progress = _WorkerProgress()
            worker = self._worker
            future = asyncio.wrap_future(
                worker.submit(self._work, remaining, view, plugins, timeouts, progress)
            )
            hung = await self._watch(future, progress, timeouts)
            with progress.lock:
                results.update(progress.results)
            if hung is None:
                break
            # The call is left running on the old worker; the rest go to a new one.
            results[hung.pod] = hung.judgement
            self._worker = abandoned.worker("plumb-plugins")
            worker.shutdown(wait=False)
            remaining = [pod for pod in remaining if pod.uid not in results]
        return results

    @dataclasses.dataclass(frozen=True, slots=True)
    class _Hung:
        pod: str
        judgement: judgements.Judgement

    async def _watch(
        self,
        future: asyncio.Future[None],
        progress: _WorkerProgress,
        timeouts: Mapping[str, float],
    ) -> _Hung | None:
        """Wait for the worker; the pod whose call outran its timeout, if one did."""
        while True:
            done, _ = await asyncio.wait({future}, timeout=POLL_SECONDS)
            if done:
                future.result()
                return None
            with progress.lock:
                plugin, started = progress.plugin, progress.started
                if not plugin or time.monotonic() - started <= timeouts[plugin]:
                    continue
                progress.abandoned = True
                pod, point = progress.pod, progress.point
            self._left.left(plugin)
            message = judgements.error_words(point, plugin, judgements.late(timeouts[plugin]))
            failure = judgements.PluginFailure(plugin, point, message, judgements.TIMED_OUT)
            return self._Hung(pod, judgements.Judgement(failure=failure))

    def _work(
        self,
        pods: Sequence[objects.PodInfo],
        view: interface.NodeView,
        plugins: judgements.Plugins,
        timeouts: Mapping[str, float],
        progress: _WorkerProgress,
    ) -> None:
        """The worker: judge pod after pod until done or abandoned."""
        checked = judgements.CheckedAnswers()
        try:
            for pod in pods:
                with progress.lock:
                    if progress.left():
                        return
                    progress.pod = pod.uid
                waiting = next((e for e, _ in plugins if self._left.busy(e.name)), None)
                if waiting is not None:
                    point = judgements.first_point(waiting)
                    message = judgements.error_words(
                        point,
                        waiting.name,
                        f"{self._left.limit} earlier calls did not answer within "
                        f"{timeouts[waiting.name]:g}s and are still running",
                    )
                    failure = judgements.PluginFailure(
                        waiting.name, point, message, judgements.BUSY
                    )
                    found = judgements.Judgement(failure=failure)
                else:
                    found = judgements.judge(
                        judgements.pod_view(pod),
                        view,
                        plugins,
                        self._calling(progress),
                        watched=True,
                        checked=checked,
                    )
                with progress.lock:
                    if progress.left():
                        return
                    progress.results[pod.uid] = found
                    progress.plugin = ""
        finally:
            with progress.lock:
                left = progress.abandoned
                plugin = progress.plugin
            if left and plugin:
                self._left.returned(plugin)

    @staticmethod
    def _calling(progress: _WorkerProgress) -> Callable[[str, str], None]:
        def calling(plugin: str, point: str) -> None:
            with progress.lock:
                progress.plugin, progress.point = plugin, point
                progress.started = time.monotonic()

        return calling
