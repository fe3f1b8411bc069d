"""``plumb run``: build the scheduler, hand its handlers to kopf, run both until a signal."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import gc
import logging
import os
import signal
import socket
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import kopf
from aiohttp import web

from plumb import __version__, binder, events, leader, runs
from plumb import scheduler as scheduler_module
from plumb.app import configuring, debug, handlers, leading, probes, quotagauges
from plumb.backend import queue as queue_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import journal as journal_module
from plumb.framework import emulation
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module
from plumb.k8s import gates
from plumb.kernel import compiled_jit, executor
from plumb.observability import metrics, trace, tracing
from plumb.observability import spans as spans_module

logger = logging.getLogger("plumb.app.running")  # the name log readers and plumb bench filter on


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What ``plumb run`` was asked to do."""

    kubeconfig: Path | None
    context: str | None
    served: scheduler_module.Served  # the profiles (kube-scheduler's defaults, or --config's)
    config: Path | None = None  # --config: watched for changes, reloaded on SIGHUP
    config_bytes: bytes = b""  # its content as read at start
    # --emulated-version's minor release (None: the API server's) and --feature-gates
    emulated_version: int | None = None
    feature_gates: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    bind_concurrency: int = 64
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 10251  # 0: no metrics endpoint
    debug_port: int = debug.DEFAULT_PORT  # on 127.0.0.1; 0: no debug endpoint
    trace_candidates: int = trace.TOP  # top candidates each trace line shows (0 to TOP)
    snapshot_dir: Path = Path(tempfile.gettempdir())  # where SIGUSR1 writes snapshot dumps
    journal: int = journal_module.DEFAULT_LIMIT  # cache writes a snapshot dump can rewind
    leader_elect: bool = False  # off: this process schedules on its own, no Lease
    leader_timings: leader.Timings = leader.DEFAULT_TIMINGS
    leader_name: str = "plumb"
    # None: the pod's namespace in a cluster, else DEFAULT_LEADER_NAMESPACE
    leader_namespace: str | None = None
    # OpenTelemetry spans: the OTEL_* environment and the --otlp-*/--trace-* flags (off unless
    # an endpoint is set).
    spans: spans_module.SpanSettings = spans_module.NO_SPANS


DEFAULT_LEADER_NAMESPACE = "plumb-system"


class StartError(Exception):
    """plumb cannot start against this cluster (the message says why); exit code 1."""


class VersionApi(Protocol):
    """What reading the server's version needs of the API client (``ApiClient.request``)."""

    async def request(self, method: str, path: str) -> k8s_client.ApiResponse: ...


async def server_version(api: VersionApi) -> str:
    """The API server's gitVersion (GET /version), "" when it cannot be read."""
    try:
        response = await api.request("GET", "/version")
    except (OSError, TimeoutError, aiohttp.ClientError) as error:
        logger.warning("cannot read the API server's version: %s", error)
        return ""
    if not response.ok or not isinstance(response.body, dict):
        logger.warning("cannot read the API server's version: %s", response.message)
        return ""
    return str(response.body.get("gitVersion") or "")


async def emulation_for(api: VersionApi, settings: RunSettings) -> emulation.Emulation:
    """The kube-scheduler release plumb decides as: the server's, or --emulated-version's."""
    version = await server_version(api)
    try:
        kube = emulation.for_server(
            version, pinned=settings.emulated_version, gates=settings.feature_gates
        )
    except emulation.EmulationError as error:
        raise StartError(str(error)) from error
    if not version and settings.emulated_version is None:
        logger.warning(
            "the API server's version is unknown: deciding as kube-scheduler v%s; "
            "--emulated-version picks the release",
            kube.version,
        )
    return kube


def served_for(settings: RunSettings, kube: emulation.Emulation) -> scheduler_module.Served:
    """The profiles as the release ``kube`` has them: the configuration file read again for
    it, or kube-scheduler's defaults. A field of a later release is refused with a message
    that names both releases (the log has said which release plumb decides as already)."""
    if settings.config is None:
        return scheduler_module.defaults(settings.served.profiles[0].name, kube)
    try:
        return configuring.served_from(settings.config_bytes, settings.config, kube)
    except configuring.ConfigFileError as error:
        raise StartError(str(error)) from error


def identity(environ: dict[str, str] | None = None) -> str:
    """Who this replica is in the Lease: the pod's name (unique in its namespace), else the
    hostname and a random suffix, as kube-scheduler does, so two processes on one host differ."""
    env = os.environ if environ is None else environ
    pod = env.get("POD_NAME")
    if pod:
        return pod
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def operator_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # kopf would otherwise post its own log lines as events on the pods it sees.
    settings.posting.enabled = False
    # plumb watches fixed core resources; no need to scan CRDs or namespaces (or RBAC for it).
    settings.scanning.disabled = True
    settings.peering.standalone = True
    settings.peering.clusterwide = True
    return settings


async def run(settings: RunSettings) -> None:
    """Run the scheduler until SIGINT/SIGTERM (kopf handles the signals)."""
    creds = credentials_module.load(settings.kubeconfig, context=settings.context)
    k8s_client.limit_tls_buffers()
    kernel = executor.KernelExecutor()
    started = time.monotonic()
    # LLVM's code is needed to load the kernel and never after: what the imports and the load
    # left resident is dropped before the cache and the batches grow (see compiled_jit). The
    # `plumb run` command has loaded the kernel before importing this module (plumb.entry).
    compiled_jit.release_compiler_pages()
    loaded_in = await kernel.warm_up()
    compiled_jit.release_compiler_pages()
    spans_module.preload(settings.spans)
    # What the imports and the kernel made lives as long as the process: out of the garbage
    # collector's sight, a full collection walks only what scheduling made, not all of numba's
    # objects too, and holds the loop far less (docs/performance.md#cpu-per-pod).
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 10, 10)
    took = time.monotonic() - started if loaded_in is None else loaded_in
    logger.info("kernel ready in %.1f s", took)
    names = ",".join(profile.name for profile in settings.served.profiles)
    first = settings.served.profiles[0].name
    api = k8s_client.ApiClient(creds, user_agent=f"plumb/{first}")
    try:
        kube = await emulation_for(api, settings)
        logger.info("%s", kube.describe())
        settings = dataclasses.replace(settings, served=served_for(settings, kube))
    except StartError:
        await api.close()
        raise
    elector = _elector(settings, api)
    gate: gates.Gate = gates.always if elector is None else elector.may_act
    # Events name the replica that posted them (kube-scheduler: its name and host).
    who = socket.gethostname() if elector is None else elector.settings.identity
    instance = f"{first}-{who}"
    recorder = events.Recorder(api, instance=instance, gate=gate)
    meters = metrics.Metrics()
    spans = (
        spans_module.Exporting(settings.spans, dropped=meters.spans_dropped)
        if settings.spans.enabled
        else spans_module.OFF
    )
    tracer = tracing.Tracer(candidates=settings.trace_candidates, spans=spans)
    meters.set_build_info(
        version=__version__, emulated_version=kube.version, server_version=kube.server
    )
    scheduler = scheduler_module.Scheduler(
        served=settings.served,
        binder=binder.Binder(api, concurrency=settings.bind_concurrency, gate=gate),
        recorder=recorder,
        kernel=kernel.run,
        tracer=tracer,
        journal=settings.journal,
        metrics=meters,
        may_act=gate,
        offload=kernel.offload,
        volume_api=api,
        claim_api=api,
        group_api=api,
    )
    leadership = leading.Leadership(scheduler, api, elector)
    health = probes.Probes(scheduler, api, leadership)
    registry = kopf.OperatorRegistry()
    handlers.register(registry, scheduler=scheduler, api=api, creds=creds, probes=health)
    exporter = await _serve_metrics(scheduler, settings, health)
    debug_server = await debug.start(
        tracer, settings.debug_port, dump=functools.partial(capture_snapshot, scheduler)
    )
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_exception_handler)
    writing: set[asyncio.Task[None]] = set()  # snapshots being written (SIGUSR1)
    loop.add_signal_handler(
        signal.SIGUSR1, _write_snapshot, scheduler, settings.snapshot_dir, writing
    )
    background: list[asyncio.Task[None]] = []  # stopped, in this order, at shutdown
    if settings.config is not None:
        reloader = configuring.Reloader(
            settings.config, scheduler, scheduler.metrics, settings.config_bytes
        )
        loop.add_signal_handler(signal.SIGHUP, reloader.request)
        background.append(asyncio.create_task(reloader.run(), name="plumb-config-reload"))
    if elector is None:
        leadership.start()
    else:
        elector.on_change = leadership.on_change
        logger.info(
            "leader election on: %s campaigns for Lease %s/%s",
            elector.settings.identity,
            elector.settings.namespace,
            elector.settings.name,
        )
        background.append(asyncio.create_task(elector.run(), name="plumb-leader-election"))

    @kopf.on.cleanup(registry=registry)
    async def stop_loop(**_: Any) -> None:
        # Stop our own tasks inside kopf's shutdown: left running, kopf would count them as
        # hung and wait its 5 s grace period before exiting. The lease is released here, so
        # a standby takes over while this process is still exiting.
        await stop_leading(background, leadership, scheduler)

    try:
        logger.info(
            "plumb scheduling pods with schedulerName=%s on %s: %s",
            names,
            creds.server,
            settings.served.describe(),
        )
        await kopf.operator(
            registry=registry,
            settings=operator_settings(),
            standalone=True,
            clusterwide=True,
        )
    finally:
        await stop_leading(background, leadership, scheduler)
        await api.close()
        if exporter is not None:
            await exporter.cleanup()
        await debug.stop(debug_server, tracer)
        loop.remove_signal_handler(signal.SIGUSR1)
        loop.remove_signal_handler(signal.SIGHUP)
        # A snapshot asked for just before the stop is still written (its thread cannot be
        # cancelled anyway).
        await asyncio.gather(*writing, return_exceptions=True)
        kernel.close()
        await asyncio.to_thread(spans.close)  # the spans queued, exported within seconds
        logger.info("plumb stopped")


async def stop_leading(
    background: list[asyncio.Task[None]],
    leadership: leading.Leadership,
    scheduler: scheduler_module.Scheduler,
) -> None:
    """Stop the background tasks (the configuration's reload, the election), then leading: a
    last status write, the Lease released, the binds in flight waited for.

    A task that had already died is logged, never raised: shutdown must not depend on how a
    task ended. Called twice at exit (kopf's cleanup, then run's ``finally``); each task is
    stopped once, as ``background`` is emptied.
    """
    while background:
        task = background.pop(0)
        task.cancel()
        await asyncio.wait([task])
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "%s had stopped on an error before shutdown; shutting down all the same",
                task.get_name(),
                exc_info=task.exception(),
            )
    await leadership.shutdown()
    await scheduler.drain()


def _exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's handler, except for kopf's watch generator closed at exit: when the process
    stops while a watch request is still open, ``asyncio.run`` finalises kopf's
    ``infinite_watch`` generator and its ``streaming_block`` raises "generator didn't stop
    after athrow()". Nothing is lost (the process is exiting); it is logged without a
    traceback."""
    generator = context.get("asyncgen")
    if generator is not None and getattr(generator, "__name__", "") == "infinite_watch":
        logger.info("kopf's watch stream closed at exit: %s", context.get("exception"))
        return
    loop.default_exception_handler(context)


def _elector(settings: RunSettings, api: k8s_client.ApiClient) -> leader.Elector | None:
    """The replica's side of the Lease election; None when ``--leader-elect`` is off."""
    if not settings.leader_elect:
        return None
    namespace = (
        settings.leader_namespace or credentials_module.pod_namespace() or DEFAULT_LEADER_NAMESPACE
    )
    return leader.Elector(
        api,
        leader.ElectionSettings(
            namespace=namespace,
            name=settings.leader_name,
            identity=identity(),
            timings=settings.leader_timings,
        ),
    )


def capture_snapshot(scheduler: scheduler_module.Scheduler) -> runs.Capture:
    """``Scheduler.dump``'s document, captured on the loop but not encoded: the endpoint and
    SIGUSR1 encode it in a worker thread (encoding a large cache is slow, and the loop would
    schedule nothing and read no watch meanwhile)."""
    return runs.capture(scheduler.cache, scheduler.runs, ",".join(sorted(scheduler.served.names)))


def _write_snapshot(
    scheduler: scheduler_module.Scheduler, directory: Path, writing: set[asyncio.Task[None]]
) -> None:
    """SIGUSR1: write the scheduler's snapshot (cache, journal, recent runs) to a file, as
    captured now; it is encoded and written in a worker thread while plumb goes on."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    path = directory / f"plumb-snapshot-{stamp}.json"
    task = asyncio.get_running_loop().create_task(
        _save_snapshot(capture_snapshot(scheduler), path), name=f"plumb-snapshot {path.name}"
    )
    # The loop keeps only a weak reference to a task: hold it until it is done.
    writing.add(task)
    task.add_done_callback(writing.discard)


async def _save_snapshot(taken: debug.Encodable, path: Path) -> None:
    try:
        await asyncio.to_thread(_write_bytes, path, taken)
    except OSError as error:
        logger.error("cannot write the snapshot to %s: %s", path, error)
        return
    logger.info(
        "snapshot written to %s; replay a pod with: plumb replay --snapshot %s --pod FILE",
        path,
        path,
    )


def _write_bytes(path: Path, taken: debug.Encodable) -> None:
    path.write_bytes(debug.serialise(taken))


def register_metrics(registry: metrics.Metrics, scheduler: scheduler_module.Scheduler) -> None:
    """The metrics read from the scheduler's state at each scrape (the others the scheduler
    records as it goes)."""
    queue, cache, policies = scheduler.queue, scheduler.cache, scheduler.policies
    registry.gauge_from(
        metrics.PENDING_PODS,
        "Number of pending pods, by the queue: 'active' waits for its turn, 'backoff' for its "
        "backoff to pass, 'unschedulable' for a cluster event that may help it, 'gated' for its "
        "scheduling gates to go (pods being scheduled are in none).",
        metrics.LABELS[metrics.PENDING_PODS],
        lambda: _pending(queue),
    )
    registry.gauge_from(
        metrics.CACHE_SIZE,
        "Number of nodes, pods, and assumed (decided, binding not yet seen) pods in the cache.",
        metrics.LABELS[metrics.CACHE_SIZE],
        lambda: _cache_size(cache),
    )
    registry.gauge_from(
        metrics.ASYNCIO_TASKS,
        "Number of asyncio tasks in plumb's event loop (binds in flight, watches, writers): "
        "flat under a steady load; a climb is a leak.",
        metrics.LABELS[metrics.ASYNCIO_TASKS],
        # Read during a scrape, which the event loop serves, so its tasks are the current ones.
        lambda: {(): float(len(asyncio.all_tasks()))},
    )
    registry.gauge_from(
        metrics.ZONE_HEALTH,
        "Health h in [0, 1] of each zone a SchedulingPolicy scores (1: healthy or no fresh data).",
        metrics.LABELS[metrics.ZONE_HEALTH],
        lambda: {(zone,): h for zone, h in policies.zone_healths().items()},
    )
    registry.gauge_from(
        metrics.POLICY_BUDGET_REMAINING,
        "Deviations a SchedulingPolicy still allows in its current budget window.",
        metrics.LABELS[metrics.POLICY_BUDGET_REMAINING],
        lambda: {key: float(left) for key, left in policies.budgets_remaining().items()},
    )
    registry.counter_from(
        metrics.POLICY_DEVIATIONS,
        "Placements beyond a SchedulingPolicy's DoNotSchedule maxSkew, on its budget.",
        metrics.LABELS[metrics.POLICY_DEVIATIONS],
        lambda: {key: float(count) for key, count in policies.deviations().items()},
    )
    registry.quotas_from(lambda: quotagauges.rows(cache.quotas))


def _pending(queue: queue_module.SchedulingQueue) -> dict[tuple[str, ...], float]:
    counts = queue.counts()
    return {(where.value,): float(counts[where]) for where in _QUEUES}


_QUEUES = tuple(queue_module.Where(name) for name in metrics.QUEUES)


def _cache_size(cache: cache_module.Cache) -> dict[tuple[str, ...], float]:
    return {
        ("nodes",): float(len(cache.nodes)),
        ("pods",): float(cache.pod_count()),
        ("assumed_pods",): float(cache.assumed_count()),
    }


async def _serve_metrics(
    scheduler: scheduler_module.Scheduler, settings: RunSettings, health: probes.Probes
) -> web.AppRunner | None:
    if not settings.metrics_port:
        return None
    register_metrics(scheduler.metrics, scheduler)
    try:
        runner = await metrics.serve(
            scheduler.metrics, settings.metrics_host, settings.metrics_port, health.routes()
        )
    except OSError as error:
        # Scheduling matters more than its metrics: say so loudly and go on without them.
        logger.error(
            "cannot serve metrics on %s:%d (%s); running without them",
            settings.metrics_host,
            settings.metrics_port,
            error,
        )
        return None
    logger.info(
        "metrics on http://%s:%d/metrics, probes on /healthz and /readyz",
        settings.metrics_host,
        settings.metrics_port,
    )
    return runner
