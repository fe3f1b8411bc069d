"""The kernel's own thread: the event loop hands a batch over and awaits the result.

The compiled kernel releases the GIL (``nogil=True``) while it filters and scores, so running it
on one dedicated worker thread keeps the asyncio loop answering watches, binds and probes
meanwhile. One thread, not a pool: batches are decided strictly one after another, each over the
snapshot it was given, which is what makes a decision replayable.

A batch too small to hold the loop up (``INLINE_PAIRS`` node-pod pairs: well under a millisecond)
runs on the loop itself: handing it to the thread and waking the loop with its answer costs more
CPU than deciding it, and at 500 nodes most batches are that small
(docs/performance.md#cpu-where-plumbs-time-went). The kernel keeps its scratch arrays per thread,
and the loop awaits each batch before the next, so decisions stay one after another either way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, TypeVar

from plumb.kernel import compiled, contract

T = TypeVar("T")
INLINE_PAIRS = 20_000
"""A batch of at most this many (node, pod) pairs is decided on the event loop's thread."""
BATCH = 128
"""Pods decided per kernel call at most: the scheduler's batch (scheduler.DEFAULT_BATCH) and
the kernel micro-benchmark's. A backlog goes in batches this big: the work done once per batch
(the cluster's arrays, the snapshot) is shared by more pods, and such a batch runs on the
kernel's thread while the loop sends the bindings already decided
(docs/performance.md#drains-batches-of-128)."""


class Warmer(Protocol):
    def __call__(self) -> float | None: ...


class KernelExecutor:
    """Runs a kernel (``compiled.run`` unless told otherwise) on a single dedicated thread."""

    def __init__(
        self,
        kernel: contract.Kernel = compiled.run,
        *,
        warm_up: Warmer = compiled.warm_up,
        inline_pairs: int = INLINE_PAIRS,
    ) -> None:
        self._kernel = kernel
        self._warm_up = warm_up
        self._inline_pairs = inline_pairs
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="plumb-kernel"
        )

    async def run(self, cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
        """Decide ``batch`` over ``cluster``: off the event loop, unless it is small."""
        if cluster.name_hashes.shape[0] * batch.requests.shape[0] <= self._inline_pairs:
            return self._kernel(cluster, batch)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._kernel, cluster, batch)

    async def offload(self, work: Callable[[contract.Kernel], T]) -> T:
        """Run ``work`` with the kernel on the kernel's thread (a preemption search asks the
        kernel many times; it reads only what it was given, never the cache)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, work, self._kernel)

    async def warm_up(self) -> float | None:
        """Compile or load the kernel now, on its thread, so the first real pod does not wait;
        what the warmer answers (compiled.warm_up: the seconds its first call took)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._warm_up)

    def close(self) -> None:
        """Wait for the batch in progress, if any, and stop the thread."""
        self._pool.shutdown(wait=True)

    def __enter__(self) -> KernelExecutor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
