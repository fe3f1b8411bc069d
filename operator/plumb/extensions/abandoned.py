"""The calls into plugins that ran past their timeout and were left running: a count per plugin.

Python cannot stop a thread, so a plugin call the loop stopped waiting for runs on in the
background until it returns. A plugin may have up to ``LIMIT`` such calls at once, so that one
slow pod does not hold up the others; past that the plugin counts as busy, and the pods it
would judge fail at once, saying so, until one of its calls returns: a plugin that hangs on
every call holds at most ``LIMIT`` threads.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Mapping

LIMIT = 4


class AbandonedCalls:
    """Shared by the threads that call plugins and the loop that watches them."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._running: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        return self._limit

    def left(self, plugin: str) -> None:
        """A call of ``plugin`` was given up on (it still runs)."""
        with self._lock:
            self._running[plugin] = self._running.get(plugin, 0) + 1

    def returned(self, plugin: str) -> None:
        """A call given up on has returned at last."""
        with self._lock:
            count = self._running.get(plugin, 0) - 1
            if count > 0:
                self._running[plugin] = count
            else:
                self._running.pop(plugin, None)

    def busy(self, plugin: str) -> bool:
        """Whether ``plugin`` has as many calls left running as it may."""
        with self._lock:
            return self._running.get(plugin, 0) >= self._limit

    def running(self) -> Mapping[str, int]:
        with self._lock:
            return dict(self._running)


def worker(name: str) -> concurrent.futures.ThreadPoolExecutor:
    """A one-thread executor for plugin calls (a new one replaces a worker left running)."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
