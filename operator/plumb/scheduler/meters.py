"""The scheduler's metrics as it goes: kernel runs, bindings and attempts. An attempt runs from
its pop to its result: the binding's answer when the pod was placed."""

from __future__ import annotations

import time

from plumb.backend import queue as queue_module
from plumb.binder import BindOutcome
from plumb.kernel import contract
from plumb.observability import metrics as metrics_module

BIND_RESULTS = {
    BindOutcome.BOUND: metrics_module.BOUND,
    BindOutcome.CONFLICT: metrics_module.CONFLICT,
    BindOutcome.GONE: metrics_module.GONE,
}
"""A binding's metric label by its outcome; any other outcome is an error."""


def timed(kernel: contract.KernelRunner, metrics: metrics_module.Metrics) -> contract.KernelRunner:
    """``kernel``, each run's duration observed."""
    observe = metrics.kernel_run

    async def run(cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
        started = time.perf_counter()
        result = await kernel(cluster, batch)
        observe(time.perf_counter() - started)
        return result

    return run


def count_bind(
    metrics: metrics_module.Metrics,
    queue: queue_module.SchedulingQueue,
    entry: queue_module.Entry,
    outcome: BindOutcome,
    seconds: float,
) -> None:
    metrics.binding(BIND_RESULTS.get(outcome, metrics_module.ERROR), seconds)
    now = queue.now()
    if outcome is BindOutcome.BOUND:
        metrics.attempt(metrics_module.SCHEDULED, now - entry.popped_at)
        metrics.pod_scheduled(now - entry.first_enqueued, entry.attempts)
    else:  # kube-scheduler counts a binding the API server refused as an error
        metrics.attempt(metrics_module.ERROR, now - entry.popped_at)


def count_errors(
    metrics: metrics_module.Metrics,
    queue: queue_module.SchedulingQueue,
    entries: list[queue_module.Entry],
) -> None:
    """A batch failed unexpectedly: its pods still in flight ended their attempt in error
    (the others were decided before the failure, and counted then)."""
    now = queue.now()
    for entry in entries:
        if queue.where(entry.pod.uid) is queue_module.Where.IN_FLIGHT:
            metrics.attempt(metrics_module.ERROR, now - entry.popped_at)
