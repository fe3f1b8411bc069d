"""The scheduler's metrics as it goes: kernel runs, bindings, attempts, DynamicResources'
extension points and tenant quota refusals. An attempt runs from its pop to its result: the
binding's answer when the pod was placed."""

from __future__ import annotations

import time
from collections.abc import Mapping

from plumb.backend import queue as queue_module
from plumb.backend.records import objects
from plumb.binder import BindOutcome
from plumb.extensions import judgements
from plumb.framework import cycle
from plumb.framework.plugins import capacityscheduling, dynamicresources
from plumb.kernel import contract
from plumb.observability import metrics as metrics_module
from plumb.policy import attainment

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
    outcomes: attainment.SchedulingOutcomes | None = None,
    *,
    trace_id: str = "",
) -> None:
    """A binding's answer, and for a pod bound its attempt's and its scheduling's latency;
    ``trace_id``: the attempt's trace when tracing keeps it (each observation's exemplar)."""
    metrics.binding(BIND_RESULTS.get(outcome, metrics_module.ERROR), seconds, trace_id)
    now = queue.now()
    if outcome is BindOutcome.BOUND:
        metrics.attempt(metrics_module.SCHEDULED, now - entry.popped_at, trace_id)
        metrics.pod_scheduled(now - entry.first_enqueued, entry.attempts, trace_id)
        if outcomes is not None:
            outcomes.bound(entry.pod, now - entry.first_enqueued, now)
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


def count_device_runs(metrics: metrics_module.Metrics, prepared: cycle.Prepared) -> None:
    """DynamicResources' PreFilter and Filter over every node, once per pod with claims."""
    for run in prepared.device_runs.values():
        metrics.plugin_execution(dynamicresources.NAME, run.point, run.status, run.seconds)


def count_judgements(
    metrics: metrics_module.Metrics, judged: Mapping[str, judgements.Judgement]
) -> None:
    """The Python plugins' calls for a batch: each plugin's time per pod (its PreFilter,
    Filter and Score together, under the point it ended at), and each failure."""
    for found in judged.values():
        failure = found.failure
        if failure is not None:
            metrics.plugin_failure(failure.plugin, failure.point, failure.why)
        for (plugin, point), seconds in found.seconds.items():
            status = cycle.SUCCESS
            if failure is not None and (failure.plugin, failure.point) == (plugin, point):
                status = cycle.ERROR
            elif found.refused is not None and found.refused[0] == plugin:
                unresolvable = found.refused[1].unresolvable
                status = cycle.UNRESOLVABLE if unresolvable else UNSCHEDULABLE
            metrics.plugin_execution(plugin, point, status, seconds)


UNSCHEDULABLE = "Unschedulable"  # kube-scheduler's code of a rejection preemption may cure


def count_reserve(metrics: metrics_module.Metrics, reserved: bool, seconds: float) -> None:
    """DynamicResources' Reserve: the claims allocated on the chosen node, or not any more
    (a claim or a device changed while the kernel ran: the pod is tried again)."""
    status = cycle.SUCCESS if reserved else cycle.ERROR
    metrics.plugin_execution(dynamicresources.NAME, cycle.RESERVE, status, seconds)


def count_prebind(metrics: metrics_module.Metrics, written: bool, seconds: float) -> None:
    """DynamicResources' PreBind: the claims' allocation and reservation written, or not."""
    status = cycle.SUCCESS if written else cycle.ERROR
    metrics.plugin_execution(dynamicresources.NAME, cycle.PREBIND, status, seconds)


def count_quota_refusal(
    metrics: metrics_module.Metrics, pod: objects.PodInfo, plugins: frozenset[str], message: str
) -> None:
    """A failed attempt, reported with its ``plugins`` and ``message``: counted if
    CapacityScheduling's PreFilter refused the pod (only its refusals name the plugin), by the
    rule its words name (the sum of mins, else the quota's max)."""
    if capacityscheduling.NAME not in plugins:
        return
    over_min = capacityscheduling.over_min(pod) in message
    rule = metrics_module.OVER_MIN if over_min else metrics_module.OVER_MAX
    metrics.quota_refusal(pod.namespace, rule)
