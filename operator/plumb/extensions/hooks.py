"""The Python plugins' points around a placement: Reserve, Unreserve, Permit, PreBind, PostBind.

Reserve and Permit run in the scheduling cycle, once the pod has its node: on a worker thread,
the loop waiting at most the plugin's timeout (a plugin that hangs there holds the loop that
long, and the call is left running: extensions/abandoned.py). PreBind and PostBind are coroutines
run in the pod's binding task, cancelled at the timeout. A refusal or a failure is said in
kube-scheduler's words; the plugins that had reserved are unreserved, in reverse order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from plumb.backend.records import objects
from plumb.extensions import abandoned, enabling, interface, judgements, registry

logger = logging.getLogger("plumb.extensions")


@dataclasses.dataclass(frozen=True, slots=True)
class PlacementRefusal:
    """Why a plugin turned a placement down: its ``message`` as FailedScheduling gives it,
    whether it is an error (reason SchedulerError, a backoff) or a rejection (the pod waits for
    a cluster event), and ``why`` for the failures metric ("" for a rejection)."""

    plugin: str
    point: str
    message: str
    error: bool
    why: str = ""


class Hooks:
    """Calls the profile's plugins at the points that judge one pod on one node."""

    def __init__(
        self, found: Callable[[], registry.Registry], left: abandoned.AbandonedCalls
    ) -> None:
        self._found = found
        self._worker = abandoned.worker("plumb-hooks")
        self._left = left

    def reserve(
        self, enabled: Sequence[enabling.Enabled], pod: objects.PodInfo, node: str
    ) -> PlacementRefusal | None:
        """Each plugin's Reserve, then each one's Permit; on a refusal those reserved are
        unreserved and the refusal returned."""
        view = judgements.pod_view(pod)
        reserved: list[enabling.Enabled] = []
        for point in (interface.RESERVE, interface.PERMIT):
            for plugin in enabled:
                if not plugin.runs(point):
                    continue
                refusal = self._bounded(plugin, point, view, node)
                if refusal is not None:
                    self._unreserve(reserved, view, node)
                    return refusal
                if point == interface.RESERVE:
                    reserved.append(plugin)
        return None

    def unreserve(
        self, enabled: Sequence[enabling.Enabled], pod: objects.PodInfo, node: str
    ) -> None:
        """Every reserving plugin's Unreserve (a placement that will not be bound)."""
        reserving = [p for p in enabled if p.runs(interface.RESERVE)]
        self._unreserve(reserving, judgements.pod_view(pod), node)

    async def pre_bind(
        self, enabled: Sequence[enabling.Enabled], pod: objects.PodInfo, node: str
    ) -> PlacementRefusal | None:
        """Each plugin's PreBind, awaited in turn; the first refusal."""
        return await self._awaited(enabled, interface.PRE_BIND, pod, node)

    async def post_bind(
        self, enabled: Sequence[enabling.Enabled], pod: objects.PodInfo, node: str
    ) -> None:
        """Each plugin's PostBind (informational: a failure is logged, nothing undone)."""
        refusal = await self._awaited(enabled, interface.POST_BIND, pod, node, every=True)
        if refusal is not None:
            logger.warning("%s: %s", pod.key, refusal.message)

    async def _awaited(
        self,
        enabled: Sequence[enabling.Enabled],
        point: str,
        pod: objects.PodInfo,
        node: str,
        every: bool = False,
    ) -> PlacementRefusal | None:
        view = judgements.pod_view(pod)
        first: PlacementRefusal | None = None
        for plugin in enabled:
            if not plugin.runs(point):
                continue
            method = getattr(enabling.instance(plugin, self._found()), interface.METHODS[point])
            refusal: PlacementRefusal | None
            try:
                answer = await asyncio.wait_for(method(view, node), timeout=plugin.timeout)
            except TimeoutError:
                refusal = _failed(
                    plugin, point, judgements.late(plugin.timeout), judgements.TIMED_OUT
                )
            except Exception as error:
                refusal = _failed(plugin, point, _said(error), judgements.RAISED)
            else:
                refusal = _refused(plugin, point, answer)
            if refusal is not None:
                if not every:
                    return refusal
                first = first or refusal
        return first

    def _bounded(
        self, plugin: enabling.Enabled, point: str, pod: interface.PodView, node: str
    ) -> PlacementRefusal | None:
        """One synchronous call on the worker, waited for at most the plugin's timeout."""
        if self._left.busy(plugin.name):
            message = (
                f"{self._left.limit} earlier calls did not answer in time and are still running"
            )
            return _failed(plugin, point, message, judgements.BUSY)
        method = getattr(enabling.instance(plugin, self._found()), interface.METHODS[point])
        worker = self._worker
        future = worker.submit(_timed, method, pod, node)
        try:
            answer, _seconds = future.result(timeout=plugin.timeout)
        except concurrent.futures.TimeoutError:
            self._left.left(plugin.name)
            future.add_done_callback(lambda _: self._left.returned(plugin.name))
            self._worker = abandoned.worker("plumb-hooks")
            worker.shutdown(wait=False)
            return _failed(plugin, point, judgements.late(plugin.timeout), judgements.TIMED_OUT)
        except Exception as error:
            return _failed(plugin, point, _said(error), judgements.RAISED)
        return _refused(plugin, point, answer)

    def _unreserve(
        self, reserved: Sequence[enabling.Enabled], pod: interface.PodView, node: str
    ) -> None:
        for plugin in reversed(reserved):
            unreserve = getattr(enabling.instance(plugin, self._found()), "unreserve", None)
            if unreserve is None:
                continue
            try:
                unreserve(pod, node)
            except Exception:
                logger.exception("plugin %s failed to unreserve %s", plugin.name, pod.key)


def _timed(
    method: Callable[[interface.PodView, str], Any], pod: interface.PodView, node: str
) -> Any:
    started = time.perf_counter()
    return method(pod, node), time.perf_counter() - started


def _said(error: Exception) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _failed(plugin: enabling.Enabled, point: str, error: str, why: str) -> PlacementRefusal:
    message = judgements.error_words(point, plugin.name, error)
    return PlacementRefusal(plugin.name, point, message, error=True, why=why)


def _refused(plugin: enabling.Enabled, point: str, answer: Any) -> PlacementRefusal | None:
    """A point's answer: None passes; a Status refuses (kube-scheduler's FitError over the
    one node, "0/1 nodes are available: 1 <reason>."); anything else is malformed."""
    if answer is None:
        return None
    if not isinstance(answer, interface.Status):
        wrong = f"answered {type(answer).__name__}, not a Status or None"
        return _failed(plugin, point, wrong, judgements.MALFORMED)
    if point == interface.PRE_BIND:
        return PlacementRefusal(plugin.name, point, answer.reason, error=False)
    return PlacementRefusal(
        plugin.name, point, f"0/1 nodes are available: 1 {answer.reason}.", error=False
    )
