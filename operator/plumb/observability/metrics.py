"""Prometheus metrics, kube-scheduler's vocabulary under ``plumb_``, served on their own port.

Two kinds, so that scheduling pays only for what must be counted as it happens:

- recorded as things happen (``Metrics.attempt``, ``pod_scheduled``, ``kernel_run``,
  ``binding``, ``set_leader``, ``preemption_attempt``, ``preemption_victims``,
  ``watch_restart``, ``plugin_execution``):
  prometheus_client counters and histograms whose labelled children are looked up once, here,
  so the scheduler's hot path only increments and observes;
- read from the scheduler's state at scrape time (``gauge_from``, ``counter_from``,
  ``quotas_from``): pending pods, cache size, policy budgets, zone health, each tenant quota's
  use and bounds. They cost nothing between scrapes.

A tenant quota's refusals are counted as they happen (``quota_refusal``, a dict increment) and
shown by the collector that reads the quotas, so that each quota namespace has its refusal
series from 0 before its first refusal (``increase()`` then sees that one too).

The page is rendered on the event loop (an aiohttp handler), the thread that owns the state
the readers look at, so reading needs no locks. No label ever carries a pod name: every label
value comes from a small fixed set (results, queues, cache types, attempt counts capped at
``15+``, quota rules) or names a zone, a SchedulingPolicy, or a quota's namespace and resource.

The names are constants here, and ``SERIES`` lists every series name PromQL can use, so the
Grafana dashboard's test breaks when a metric is renamed.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

import prometheus_client
from aiohttp import http_exceptions, web
from prometheus_client import core, exposition, registry

logger = logging.getLogger(__name__)

# Metric names, as PromQL spells them (kube-scheduler's, with plumb_ for scheduler_).
SCHEDULE_ATTEMPTS = "plumb_schedule_attempts_total"
ATTEMPT_DURATION = "plumb_scheduling_attempt_duration_seconds"
PENDING_PODS = "plumb_pending_pods"
SLI_DURATION = "plumb_pod_scheduling_sli_duration_seconds"
KERNEL_DURATION = "plumb_kernel_duration_seconds"
BINDING_DURATION = "plumb_binding_duration_seconds"
CACHE_SIZE = "plumb_cache_size"
LEADER = "plumb_leader"
POLICY_BUDGET_REMAINING = "plumb_policy_budget_remaining"
POLICY_DEVIATIONS = "plumb_policy_deviations_total"
ZONE_HEALTH = "plumb_zone_health"
PREEMPTION_ATTEMPTS = "plumb_preemption_attempts_total"
PREEMPTION_VICTIMS = "plumb_preemption_victims"
CONFIG_RELOAD_SUCCESSFUL = "plumb_config_last_reload_successful"
CONFIG_RELOADS = "plumb_config_reloads_total"
WATCH_RESTARTS = "plumb_watch_restarts_total"
ASYNCIO_TASKS = "plumb_asyncio_tasks"
BUILD_INFO = "plumb_build_info"
PLUGIN_EXECUTION = "plumb_plugin_execution_duration_seconds"
PODGROUP_ATTEMPTS = "plumb_podgroup_schedule_attempts_total"
PODGROUP_DURATION = "plumb_podgroup_scheduling_duration_seconds"
QUOTA_USED = "plumb_quota_used"
QUOTA_MIN = "plumb_quota_min"
QUOTA_MAX = "plumb_quota_max"
QUOTA_REFUSALS = "plumb_quota_refusals_total"
QUOTA_LIMIT = "plumb_quota_limit"
QUOTA_ATTAINMENT = "plumb_quota_slo_attainment"
PLUGIN_FAILURES = "plumb_plugin_failures_total"
SPANS_DROPPED = "plumb_trace_spans_dropped_total"

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"
KINDS: Mapping[str, str] = {
    SCHEDULE_ATTEMPTS: COUNTER,
    ATTEMPT_DURATION: HISTOGRAM,
    PENDING_PODS: GAUGE,
    SLI_DURATION: HISTOGRAM,
    KERNEL_DURATION: HISTOGRAM,
    BINDING_DURATION: HISTOGRAM,
    CACHE_SIZE: GAUGE,
    LEADER: GAUGE,
    POLICY_BUDGET_REMAINING: GAUGE,
    POLICY_DEVIATIONS: COUNTER,
    ZONE_HEALTH: GAUGE,
    PREEMPTION_ATTEMPTS: COUNTER,
    PREEMPTION_VICTIMS: HISTOGRAM,
    CONFIG_RELOAD_SUCCESSFUL: GAUGE,
    CONFIG_RELOADS: COUNTER,
    WATCH_RESTARTS: COUNTER,
    ASYNCIO_TASKS: GAUGE,
    BUILD_INFO: GAUGE,
    PLUGIN_EXECUTION: HISTOGRAM,
    PODGROUP_ATTEMPTS: COUNTER,
    PODGROUP_DURATION: HISTOGRAM,
    QUOTA_USED: GAUGE,
    QUOTA_MIN: GAUGE,
    QUOTA_MAX: GAUGE,
    QUOTA_REFUSALS: COUNTER,
    QUOTA_LIMIT: GAUGE,
    QUOTA_ATTAINMENT: GAUGE,
    PLUGIN_FAILURES: COUNTER,
    SPANS_DROPPED: COUNTER,
}
"""Every metric plumb exports, by kind."""

LABELS: Mapping[str, tuple[str, ...]] = {
    SCHEDULE_ATTEMPTS: ("result",),
    ATTEMPT_DURATION: ("result",),
    PENDING_PODS: ("queue",),
    SLI_DURATION: ("attempts",),
    KERNEL_DURATION: (),
    BINDING_DURATION: ("result",),
    CACHE_SIZE: ("type",),
    LEADER: (),
    POLICY_BUDGET_REMAINING: ("namespace", "policy"),
    POLICY_DEVIATIONS: ("namespace", "policy"),
    ZONE_HEALTH: ("zone",),
    PREEMPTION_ATTEMPTS: (),
    PREEMPTION_VICTIMS: (),
    CONFIG_RELOAD_SUCCESSFUL: (),
    CONFIG_RELOADS: ("result",),
    WATCH_RESTARTS: ("resource",),
    ASYNCIO_TASKS: (),
    BUILD_INFO: ("version", "emulated_version", "server_version"),
    PLUGIN_EXECUTION: ("plugin", "extension_point", "status"),
    PODGROUP_ATTEMPTS: ("result",),
    PODGROUP_DURATION: (),
    QUOTA_USED: ("namespace", "resource"),
    QUOTA_MIN: ("namespace", "resource"),
    QUOTA_MAX: ("namespace", "resource"),
    QUOTA_REFUSALS: ("namespace", "rule"),
    QUOTA_LIMIT: ("namespace", "resource"),
    QUOTA_ATTAINMENT: ("namespace",),
    PLUGIN_FAILURES: ("plugin", "extension_point", "reason"),
    SPANS_DROPPED: ("reason",),
}
"""Each metric's labels (histograms add ``le`` to their buckets)."""


def _series(name: str, kind: str) -> tuple[str, ...]:
    if kind == HISTOGRAM:
        return (f"{name}_bucket", f"{name}_sum", f"{name}_count")
    return (name,)


SERIES = frozenset(s for name, kind in KINDS.items() for s in _series(name, kind))
"""Every series name a PromQL query over plumb's metrics can use."""

# Label values.
SCHEDULED, UNSCHEDULABLE, ERROR = "scheduled", "unschedulable", "error"
RESULTS = (SCHEDULED, UNSCHEDULABLE, ERROR)
"""An attempt's result, as kube-scheduler counts it: ``error`` is plumb's own failure or a
binding the API server did not accept."""
QUEUES = ("active", "backoff", "unschedulable", "gated")
CACHE_TYPES = ("nodes", "pods", "assumed_pods")
BOUND, CONFLICT, GONE = "bound", "conflict", "gone"
BIND_RESULTS = (BOUND, CONFLICT, GONE, ERROR)
"""A binding's result: accepted, 409 (bound already), 404 (pod gone), anything else."""
SUCCESS, FAILURE = "success", "failure"
RELOAD_RESULTS = (SUCCESS, FAILURE)
"""A configuration reload's result: applied, or refused (the running configuration stays)."""
OVER_MAX, OVER_MIN = "max", "min"
QUOTA_RULES = (OVER_MAX, OVER_MIN)
"""The CapacityScheduling PreFilter rule that refused a pod: its quota's ``max``, or the sum
of every quota's ``min``."""
MAX_ATTEMPTS_LABEL = 15
"""SLI ``attempts`` label values: 1 to 14, then ``15+`` (kube-scheduler's cap)."""


def exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    """``count`` bucket bounds from ``start``, each ``factor`` times the one before."""
    return tuple(start * factor**i for i in range(count))


ATTEMPT_BUCKETS = exponential(0.001, 2, 15)
"""1 ms doubling to 16.384 s: kube-scheduler's buckets, for attempts, kernel runs and binds."""
SLI_BUCKETS = exponential(0.01, 2, 20)
"""10 ms doubling to ~87 min: kube-scheduler's SLI buckets (a pod may wait minutes)."""
VICTIM_BUCKETS = exponential(1, 2, 7)
"""1 doubling to 64 victims: kube-scheduler's (more than 64 is rare: one bucket, +Inf)."""
PLUGIN_BUCKETS = exponential(0.00001, 1.5, 20)
"""10 µs growing by half to ~22 ms: kube-scheduler's plugin execution buckets."""


def attempts_label(attempts: int) -> str:
    return f"{MAX_ATTEMPTS_LABEL}+" if attempts >= MAX_ATTEMPTS_LABEL else str(max(1, attempts))


Reader = Callable[[], Mapping[tuple[str, ...], float]]
"""Returns the current value of a metric per tuple of label values."""


class _Read(registry.Collector):
    def __init__(
        self, kind: str, name: str, documentation: str, labels: tuple[str, ...], read: Reader
    ) -> None:
        self._kind, self._name, self._documentation = kind, name, documentation
        self._labels, self._read = labels, read

    def collect(self) -> Iterable[core.Metric]:
        family: core.GaugeMetricFamily | core.CounterMetricFamily
        if self._kind == COUNTER:
            family = core.CounterMetricFamily(self._name, self._documentation, labels=self._labels)
        else:
            family = core.GaugeMetricFamily(self._name, self._documentation, labels=self._labels)
        try:
            values = self._read()
        except Exception:  # a scrape must not break on the scheduler's state
            logger.exception("reading %s for /metrics failed", self._name)
            values = {}
        for label_values, value in sorted(values.items()):
            family.add_metric(list(label_values), value)
        return [family]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QuotaRow:
    """One resource of the quota that governs a namespace, in base units (cpu in cores, memory
    in bytes): what plumb counts its pods use (bound or assumed), its ``min`` and its ``max``
    (None: unlimited, so no series)."""

    namespace: str
    resource: str
    used: float
    min: float
    max: float | None
    # The max in force: the quota's own, or the limit its SLO rule set (None: unlimited).
    limit: float | None = None
    # The tenant's SLO attainment last read by the rule (None: no SLO-elastic policy).
    attainment: float | None = None


QuotaReader = Callable[[], Iterable[QuotaRow]]
"""Returns a row per quota namespace and resource, read at each scrape."""


class _Quotas(registry.Collector):
    """The tenant quota families from one read of the quotas per scrape, and the refusals
    counted as they happened, at 0 for each quota namespace and rule until the first; the
    SLO-elastic limit in force and the attainment it was set from."""

    def __init__(self) -> None:
        self.read: QuotaReader = lambda: ()
        self.refusals: dict[tuple[str, str], int] = {}

    def collect(self) -> Iterable[core.Metric]:
        labels = LABELS[QUOTA_USED]
        used = core.GaugeMetricFamily(
            QUOTA_USED,
            "Resources the pods of a namespace with an ElasticQuota request, bound or assumed: "
            "the use CapacityScheduling's rules hold against the quota (cpu in cores, memory "
            "and storage in bytes).",
            labels=labels,
        )
        lower = core.GaugeMetricFamily(
            QUOTA_MIN,
            "An ElasticQuota's min, the guaranteed share (cpu in cores, memory and storage in "
            "bytes; 0 for a resource a listed min leaves out).",
            labels=labels,
        )
        upper = core.GaugeMetricFamily(
            QUOTA_MAX,
            "An ElasticQuota's max, the ceiling (cpu in cores, memory and storage in bytes); "
            "no series for a resource it leaves unlimited.",
            labels=labels,
        )
        refusals = core.CounterMetricFamily(
            QUOTA_REFUSALS,
            "Pods CapacityScheduling's PreFilter refused, once per attempt, by namespace and "
            "rule: 'max' (the namespace's use would pass its quota's max) or 'min' (the use of "
            "every quota would pass the sum of their mins).",
            labels=LABELS[QUOTA_REFUSALS],
        )
        limit = core.GaugeMetricFamily(
            QUOTA_LIMIT,
            "The max an ElasticQuota enforces now: its own, or the limit its SLO-elastic "
            "SchedulingPolicy set (cpu in cores, memory and storage in bytes); no series when "
            "unlimited.",
            labels=LABELS[QUOTA_LIMIT],
        )
        attainment = core.GaugeMetricFamily(
            QUOTA_ATTAINMENT,
            "A tenant's SLO attainment (0 to 1) as its SLO-elastic SchedulingPolicy last read "
            "it; no series for a namespace without one.",
            labels=LABELS[QUOTA_ATTAINMENT],
        )
        try:
            rows = list(self.read())
        except Exception:  # a scrape must not break on the scheduler's state
            logger.exception("reading the ElasticQuotas for /metrics failed")
            rows = []
        counted = dict.fromkeys(((row.namespace, rule) for row in rows for rule in QUOTA_RULES), 0)
        counted.update(self.refusals)
        for row in rows:
            key = [row.namespace, row.resource]
            used.add_metric(key, row.used)
            lower.add_metric(key, row.min)
            if row.max is not None:
                upper.add_metric(key, row.max)
            if row.limit is not None:
                limit.add_metric(key, row.limit)
        for namespace, attained in sorted(
            {r.namespace: r.attainment for r in rows if r.attainment is not None}.items()
        ):
            attainment.add_metric([namespace], attained)
        for (namespace, rule), count in sorted(counted.items()):
            refusals.add_metric([namespace, rule], float(count))
        return [used, lower, upper, refusals, limit, attainment]


class Metrics:
    """plumb's metric registry (one per scheduler; tests make their own)."""

    def __init__(self) -> None:
        # kube-scheduler exports no *_created series, and plumb's process has no other
        # prometheus_client user that could want them (the switch is process-wide).
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = prometheus_client.CollectorRegistry()
        attempts = prometheus_client.Counter(
            SCHEDULE_ATTEMPTS,
            "Number of attempts to schedule pods, by the result. 'unschedulable' means no node "
            "fits the pod, while 'error' means a failure of plumb's own or a binding the API "
            "server did not accept.",
            LABELS[SCHEDULE_ATTEMPTS],
            registry=self.registry,
        )
        durations = prometheus_client.Histogram(
            ATTEMPT_DURATION,
            "Scheduling attempt latency in seconds, from the pod's pop off the queue to its "
            "result (the kernel, and the binding for a scheduled pod).",
            LABELS[ATTEMPT_DURATION],
            buckets=ATTEMPT_BUCKETS,
            registry=self.registry,
        )
        # The children are looked up once: the hot path must not build label tuples.
        self._attempts = {result: attempts.labels(result) for result in RESULTS}
        self._durations = {result: durations.labels(result) for result in RESULTS}
        self._sli = prometheus_client.Histogram(
            SLI_DURATION,
            "End-to-end latency of a scheduled pod in seconds, from its first entry into the "
            "scheduling queue until it is bound, over all its attempts.",
            LABELS[SLI_DURATION],
            buckets=SLI_BUCKETS,
            registry=self.registry,
        )
        # One child per attempts label, made the first time a pod needs it.
        self._sli_children: list[prometheus_client.Histogram | None] = [None] * (
            MAX_ATTEMPTS_LABEL + 1
        )
        self._kernel = prometheus_client.Histogram(
            KERNEL_DURATION,
            "Duration in seconds of one kernel run (filter, score and select for a batch of "
            "pods over every node).",
            buckets=ATTEMPT_BUCKETS,
            registry=self.registry,
        )
        bindings = prometheus_client.Histogram(
            BINDING_DURATION,
            "Binding latency in seconds: the POST of a pod's Binding to the API server, by "
            "the result ('bound', 'conflict': 409, 'gone': 404, 'error': anything else).",
            LABELS[BINDING_DURATION],
            buckets=ATTEMPT_BUCKETS,
            registry=self.registry,
        )
        self._bindings = {result: bindings.labels(result) for result in BIND_RESULTS}
        self._leader = prometheus_client.Gauge(
            LEADER,
            "1 while this replica runs the scheduling loop (the leader), else 0.",
            registry=self.registry,
        )
        self._build_info = prometheus_client.Gauge(
            BUILD_INFO,
            "1, labelled with plumb's version, the kube-scheduler release whose decisions it "
            "makes (emulated_version, from the API server's version or --emulated-version) and "
            "the API server's version.",
            LABELS[BUILD_INFO],
            registry=self.registry,
        )
        # kube-scheduler's help texts, word for word (pkg/scheduler/metrics/metrics.go).
        self._preemption_attempts = prometheus_client.Counter(
            PREEMPTION_ATTEMPTS,
            "Total preemption attempts in the cluster till now",
            registry=self.registry,
        )
        self._preemption_victims = prometheus_client.Histogram(
            PREEMPTION_VICTIMS,
            "Number of selected preemption victims",
            buckets=VICTIM_BUCKETS,
            registry=self.registry,
        )

        self._podgroup_attempts = prometheus_client.Counter(
            PODGROUP_ATTEMPTS,
            "Number of attempts to schedule pod groups, by the result: 'scheduled' (the "
            "group's minimum placed together), 'unschedulable' (none of it placed) or 'error'.",
            LABELS[PODGROUP_ATTEMPTS],
            registry=self.registry,
        )
        self._podgroup_duration = prometheus_client.Histogram(
            PODGROUP_DURATION,
            "Seconds from the first member of a pod group entering the scheduling queue to "
            "the group's minimum being placed, over all its attempts.",
            buckets=SLI_BUCKETS,
            registry=self.registry,
        )
        self._reload_ok = prometheus_client.Gauge(
            CONFIG_RELOAD_SUCCESSFUL,
            "1 if the last reload of the configuration file (--config) succeeded or none was "
            "tried, 0 if the last one was refused and the configuration before it still runs.",
            registry=self.registry,
        )
        self._reload_ok.set(1.0)
        reloads = prometheus_client.Counter(
            CONFIG_RELOADS,
            "Reloads of the configuration file (--config), by the result: 'success' (applied "
            "between two batches) or 'failure' (refused; the running configuration stays).",
            LABELS[CONFIG_RELOADS],
            registry=self.registry,
        )
        self._reloads = {result: reloads.labels(result) for result in RELOAD_RESULTS}
        # kube-scheduler's name, labels and buckets; plumb observes only DynamicResources'
        # extension points, each run, where kube-scheduler samples one cycle in ten of every
        # plugin (docs/observability.md says how plumb's runs compare).
        self._plugin_execution = prometheus_client.Histogram(
            PLUGIN_EXECUTION,
            "Duration for running a plugin at a specific extension point.",
            LABELS[PLUGIN_EXECUTION],
            buckets=PLUGIN_BUCKETS,
            registry=self.registry,
        )
        self._plugin_children: dict[tuple[str, str, str], prometheus_client.Histogram] = {}
        self._plugin_failures = prometheus_client.Counter(
            PLUGIN_FAILURES,
            "Calls into a Python plugin that failed a pod's attempt, by plugin, extension point "
            "and reason: 'raised', 'malformed' (an answer of the wrong shape or range), "
            "'timeout' (no answer within the plugin's timeout), 'busy' (an earlier call that "
            "timed out still running).",
            LABELS[PLUGIN_FAILURES],
            registry=self.registry,
        )
        self._spans_dropped = prometheus_client.Counter(
            SPANS_DROPPED,
            "Spans of kept scheduling attempts that were not exported, by reason: 'queue_full' "
            "(the export queue held its limit; the newest are dropped, the loop never waits) or "
            "'export_failed' (the collector refused them or could not be reached).",
            LABELS[SPANS_DROPPED],
            registry=self.registry,
        )
        self._watch_restarts = prometheus_client.Counter(
            WATCH_RESTARTS,
            "Watches restarted from a fresh list after an unexpected error (a bug handling an "
            "event, a payload plumb did not expect), by the resource watched. Network errors "
            "and expired resourceVersions, which a watch resumes from, are not counted.",
            LABELS[WATCH_RESTARTS],
            registry=self.registry,
        )
        self._quotas = _Quotas()
        self.registry.register(self._quotas)

    # Recorded as it happens ----------------------------------------------------------------

    def config_reload(self, *, success: bool) -> None:
        """A changed configuration file was applied (``success``) or refused."""
        self._reloads[SUCCESS if success else FAILURE].inc()
        self._reload_ok.set(1.0 if success else 0.0)

    def watch_restart(self, resource: str) -> None:
        """The watch of ``resource`` (its plural name: ``pods``) failed and is listed again."""
        self._watch_restarts.labels(resource).inc()

    def podgroup_attempt(self, result: str) -> None:
        """A pod group's cycle ended with ``result``: "scheduled" (its minimum placed
        together), "unschedulable" (none of it placed) or "error" (kube-scheduler's
        scheduler_podgroup_schedule_attempts_total)."""
        self._podgroup_attempts.labels(result).inc()

    def podgroup_placed(self, seconds: float) -> None:
        """A pod group's minimum was placed ``seconds`` after its first member entered the
        queue (the time to full placement)."""
        self._podgroup_duration.observe(seconds)

    def quota_refusal(self, namespace: str, rule: str) -> None:
        """CapacityScheduling's PreFilter refused a pod of ``namespace`` by ``rule`` (one of
        ``QUOTA_RULES``), once per attempt."""
        key = (namespace, rule)
        self._quotas.refusals[key] = self._quotas.refusals.get(key, 0) + 1

    def watching(self, resource: str) -> None:
        """``resource`` is watched: its restart count is on the page from 0, so that
        ``increase()`` and the dashboard have a series before the first restart."""
        self._watch_restarts.labels(resource)

    def attempt(self, result: str, seconds: float, trace_id: str = "") -> None:
        """A scheduling attempt ended with ``result`` (one of ``RESULTS``) after ``seconds``;
        ``trace_id``: its OpenTelemetry trace, kept by tracing (the observation's exemplar)."""
        self._attempts[result].inc()
        self._durations[result].observe(seconds, _exemplar(trace_id))

    def pod_scheduled(self, seconds: float, attempts: int, trace_id: str = "") -> None:
        """A pod was bound ``seconds`` after it first entered the queue, in ``attempts``
        (``trace_id`` as ``attempt``'s)."""
        index = min(max(1, attempts), MAX_ATTEMPTS_LABEL)
        child = self._sli_children[index]
        if child is None:
            child = self._sli_children[index] = self._sli.labels(attempts_label(index))
        child.observe(seconds, _exemplar(trace_id))

    def kernel_run(self, seconds: float) -> None:
        self._kernel.observe(seconds)

    def binding(self, result: str, seconds: float, trace_id: str = "") -> None:
        """A binding request ended with ``result`` (one of ``BIND_RESULTS``); ``trace_id`` as
        ``attempt``'s."""
        self._bindings[result].observe(seconds, _exemplar(trace_id))

    def plugin_execution(self, plugin: str, point: str, status: str, seconds: float) -> None:
        """``plugin`` ran at extension point ``point`` ("Filter") for one pod, ending with
        ``status`` (kube-scheduler's code: "Success", "Error", "UnschedulableAndUnresolvable")."""
        key = (plugin, point, status)
        child = self._plugin_children.get(key)
        if child is None:
            child = self._plugin_children[key] = self._plugin_execution.labels(*key)
        child.observe(seconds)

    def spans_dropped(self, reason: str, count: int) -> None:
        """Spans tracing kept but could not export: its queue full, or the exporter failing
        (observability/spans.py). Called from the exporter's thread: a counter's increment
        takes its own lock."""
        self._spans_dropped.labels(reason).inc(count)

    def plugin_failure(self, plugin: str, point: str, reason: str) -> None:
        """A Python plugin's call failed a pod's attempt (extensions/judgements.py's reasons)."""
        self._plugin_failures.labels(plugin, point, reason).inc()

    def set_build_info(self, *, version: str, emulated_version: str, server_version: str) -> None:
        """1 under plumb's version, the kube-scheduler release it decides as ("1.37") and the
        API server's gitVersion ("" when it could not be read)."""
        self._build_info.clear()
        self._build_info.labels(version, emulated_version, server_version).set(1.0)

    def set_leader(self, leading: bool) -> None:
        self._leader.set(1.0 if leading else 0.0)

    def preemption_attempt(self) -> None:
        """PostFilter's preemption ran for a pod that fit no node: one per such attempt,
        whatever came of it (a node nominated, no candidate, a pod not eligible to preempt, an
        error), as kube-scheduler's DefaultPreemption.PostFilter counts it (deferred, so on
        every return)."""
        self._preemption_attempts.inc()

    def preemption_victims(self, count: int) -> None:
        """A candidate node was chosen and its ``count`` victims are being evicted: observed
        only when a candidate was chosen, never for an attempt that found none (a candidate
        always has at least one victim). kube-scheduler observes it when it acts on the chosen
        candidate: as the evictions start (async preemption, its default since v1.33), or once
        they all succeeded (synchronous preemption)."""
        self._preemption_victims.observe(count)

    # Read at scrape time -------------------------------------------------------------------

    def gauge_from(
        self, name: str, documentation: str, labels: tuple[str, ...], read: Reader
    ) -> None:
        """A gauge whose values ``read`` returns at each scrape."""
        self.registry.register(_Read(GAUGE, name, documentation, labels, read))

    def counter_from(
        self, name: str, documentation: str, labels: tuple[str, ...], read: Reader
    ) -> None:
        """A counter whose running totals ``read`` returns (``name`` with or without
        ``_total``; the page shows it with)."""
        self.registry.register(_Read(COUNTER, name, documentation, labels, read))

    def quotas_from(self, read: QuotaReader) -> None:
        """The tenant quota gauges (``QUOTA_USED``, ``QUOTA_MIN``, ``QUOTA_MAX``) from the rows
        ``read`` returns at each scrape; their namespaces get refusal series from 0."""
        self._quotas.read = read

    def render(self) -> bytes:
        return bytes(prometheus_client.generate_latest(self.registry))

    def negotiated(self, accept: str) -> tuple[bytes, str]:
        """The page in the format an ``Accept`` header asks for, and its content type:
        OpenMetrics (which carries exemplars) for a scraper that asks for it, as Prometheus
        does, else the text format."""
        encoder, content_type = exposition.choose_encoder(accept)
        return bytes(encoder(self.registry)), content_type


def _exemplar(trace_id: str) -> dict[str, str] | None:
    """An observation's exemplar: the trace it belongs to (None: tracing did not keep it)."""
    return {"trace_id": trace_id} if trace_id else None


async def serve(
    metrics: Metrics, host: str, port: int, routes: Sequence[web.RouteDef] = ()
) -> web.AppRunner:
    """Serve /metrics (and ``routes``: the probes) on ``host:port``; the caller cleans the
    runner up. A malformed request is answered 400 and logged on one debug line
    (``SERVER_LOG``), not with aiohttp's ERROR traceback."""

    async def page(request: web.Request) -> web.Response:
        body, content_type = metrics.negotiated(request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/metrics", page)
    app.router.add_routes(routes)
    runner = web.AppRunner(app, access_log=None, logger=SERVER_LOG)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


class _ClientErrors(logging.Filter):
    """Turns aiohttp's report of a request its parser refused (400: not HTTP, a line or a
    header too long, too many headers, a bad Content-Length) into one debug line. aiohttp logs
    each at ERROR with its traceback, so anyone who reaches a port (the metrics port listens on
    every interface) could fill plumb's log with tracebacks and trip alerts on errors; the
    fault is the client's and the answer already says what it was. A handler's own exception
    (a 500) is left as it is, traceback and all."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, http_exceptions.HttpProcessingError):
            return True
        # The parser's message quotes the offending bytes on lines of their own.
        why = " ".join(error.message.split())[:200]
        record.msg, record.args = f"{record.getMessage()}: {error.code} {why}", ()
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return SERVER_LOG.isEnabledFor(logging.DEBUG)


SERVER_LOG = logging.getLogger("plumb.http")
"""aiohttp's server log for plumb's endpoints (``logger=`` of an ``AppRunner``): a request the
parser refused is one debug line, a handler's exception an ERROR with its traceback."""
SERVER_LOG.addFilter(_ClientErrors())
