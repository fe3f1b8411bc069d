"""``plumb bench``: per workload, the same run three times on identical fresh objects — plumb,
then kube-scheduler, then the raw binder's ceiling — then the kernel micro-benchmark, then the
report. ``--kernel-only`` runs the micro-benchmark alone and prints its table.

One run: a fresh namespace and a run-unique set of nodes; the initial pods created already
bound; the scheduler started (so it syncs with exactly that cluster); our watch started; the
measured pods created by many concurrent creators while the watch timestamps each binding; the
scheduler's CPU and peak RSS read; the scheduler stopped; the placement assessed; everything the
run created deleted, so the next scheduler sees none of it.

A dra run also publishes the nodes' devices and allocates the initial pods' claims before the
scheduler starts, and runs kube-controller-manager's resourceclaim controller beside it
(``claimcontroller``), which makes the measured pods' claims from their template; its CPU is
reported apart.

A gang run creates an upstream PodGroup for each group of measured pods before the pods
(``gangload``); the control plane serves that API (GenericWorkload on, for every run: it costs the
others nothing), and kube-scheduler runs with the gate for this workload only. Each group's time
to be placed whole, and any group left part placed, are reported.

A drain run turns the middle round: our watch starts, the measured pods are created and seen
pending, and only then does the scheduler (or the raw binder) start; its time, CPU included,
runs from that start.

A traced workload (``basic-traced``) is plumb alone on basic's workload, with tracing off and
on in turn (TRACING_PAIRS pairs, off on, on off, ...: a drift over the bench weighs on both
alike); on, at a 10% sampling ratio, its spans go to an OTLP/HTTP receiver on a thread of the
bench process (``otlpsink``). Its metrics port is on in both (read after the measured phase for
the spans dropped). The median CPU per pod on beside the median off is what tracing costs
(``tracingcost``); the workload's table shows the traced run of median CPU.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import plumb
from plumb import DEFAULT_SCHEDULER_NAME
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module
from plumb_dev.bench import (
    ceiling,
    claimcontroller,
    draload,
    gangload,
    kernelbench,
    measuring,
    otlpsink,
    populating,
    quality,
    report,
    schedulers,
    watching,
    workloads,
)
from plumb_dev.cluster.controlplane import building, processes
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders

JSON = dict[str, Any]
PLUMB = schedulers.PLUMB
KUBE_SCHEDULER = schedulers.KUBE_SCHEDULER
CEILING = "ceiling"
SCHEDULERS = (PLUMB, KUBE_SCHEDULER, CEILING)
CEILING_SCHEDULER_NAME = "bench-ceiling"
"""No scheduler takes these pods: the raw binder binds them."""
RUN_LABEL = "bench.plumb.dev/run"
STALL_SECONDS = 60.0
"""A run ends unfinished when no measured pod was bound for this long after the last create."""
SETTLE_SECONDS = 3.0
"""After the measurement, before the stop: lets a scheduler flush the events of its last pods,
and plumb with tracing on export its last spans (its exporter sends every 2 s). The scheduler's
CPU is read again at its end (``settled_cpu_seconds``)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings:
    out: Path
    quick: bool = False
    large: bool = False
    xlarge: bool = False
    workloads: list[str] | None = None
    command: str = "plumb bench"
    kernel_only: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunResult:
    """Everything one scheduler's run on one workload measured."""

    workload: str
    scheduler: str
    description: str
    nodes: int
    initial_pods: int
    drain: bool
    """The measured pods were pending before the scheduler started; times run from its start."""
    dra: bool
    """The nodes published devices and each pod claimed one (draload)."""
    timing: measuring.Timing
    quality: quality.Quality
    usage: measuring.ProcessUsage | None
    """None for the ceiling, which runs inside the bench process."""
    cpu_ms_per_pod: float | None
    """Scheduler CPU milliseconds per bound measured pod (None for the ceiling)."""
    api_cpu_seconds: float
    """kube-apiserver + etcd CPU over the measured phase: the cost on the other side."""
    harness_cpu_seconds: float
    """The bench process's own CPU (creators, watch, and the ceiling's binder) meanwhile."""
    bound_curve: list[float]
    latencies: list[float]
    log: dict[str, Any]
    """What the scheduler's log said: counts of warnings and errors, a few samples."""
    wall_seconds: float
    controller_cpu_seconds: float | None = None
    """The resourceclaim controller's CPU over the measured phase (dra workloads only)."""
    claim_made: dict[str, float] | None = None
    """p50 and p99 (seconds) from a measured pod's create to its claim recorded in its status by
    the resourceclaim controller: the wait every scheduler has before it can take the pod (dra
    workloads only)."""
    gang: int = 0
    """The size of each measured group (gangload), 0 for a workload without groups."""
    groups_placed: dict[str, float] | None = None
    """Gang workloads: groups, groups placed whole, and p50 and p99 (seconds) from a group's
    first member's create to its last member's binding (gangload.group_figures)."""
    settled_cpu_seconds: float | None = None
    """The scheduler's CPU over the measured phase and the SETTLE_SECONDS after it: what it did
    for the run's pods after the last was bound (events, a traced run's last exports) counted."""
    tracing: dict[str, Any] | None = None
    """A traced run: the sampling ratio, what the OTLP receiver got (requests, bytes, spans,
    unreadable) and plumb_trace_spans_dropped_total after the phase (None: not read)."""
    alternation: list[dict[str, Any]] | None = None
    """A traced workload: every run of plumb in the order run, tracing off and on in turn, each
    as ``alternated`` summarises it (this result is the traced run of median CPU)."""


def main(settings: Settings) -> int:
    """Runs the benchmark and writes the report; 1 if a scheduler left pods unplaced, plumb
    broke a constraint or the numba kernel disagreed with the reference (the smoke check), else
    0. Speed never fails it."""
    if settings.kernel_only:
        return kernel_only(quick=settings.quick)
    selected = workloads.select(
        settings.workloads, quick=settings.quick, large=settings.large, xlarge=settings.xlarge
    )
    started = time.monotonic()
    load_at_start = os.getloadavg()[0]
    bin_dir = building.ensure_binaries()
    warm_kernel_cache()
    with tempfile.TemporaryDirectory(prefix="plumb-bench-") as scratch:
        work = Path(scratch)
        print("starting etcd and kube-apiserver on 127.0.0.1 ...", file=sys.stderr)
        plane = controlplane.start(
            work / "cluster",
            bin_dir=bin_dir,
            parts=controlplane.BENCHMARK,
            feature_gates=gangload.GATES if any(w.gang for w in selected) else None,
        )
        try:
            pairs = TRACING_PAIRS[settings.quick]
            results = asyncio.run(_run_all(plane, work, selected, pairs))
        finally:
            controlplane.stop(work / "cluster")
    # After the control plane has stopped: the micro-benchmark wants the CPUs to itself.
    kernel, kernel_problem = _kernel(quick=settings.quick)
    context = report.context(bin_dir=bin_dir, command=settings.command, quick=settings.quick)
    # Other work on the machine competes for the same CPUs; the load says whether there was any.
    context["machine"]["load_average"] = {
        "at_start": round(load_at_start, 2),
        "at_end": round(os.getloadavg()[0], 2),
    }
    context["creators"] = populating.CREATORS
    context["settle_seconds"] = SETTLE_SECONDS
    context["dra"] = {"devices": len(draload.DEVICES), "matching": len(draload.MATCHING)}
    context["binder_concurrency"] = ceiling.CONCURRENCY
    context["event_concurrency"] = ceiling.EVENT_CONCURRENCY
    context["total_seconds"] = round(time.monotonic() - started, 1)
    rows = [kernelbench.as_dict(figures) for figures in kernel]
    written = report.write(settings.out, [_as_dict(r) for r in results], context, rows)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    problems = smoke_problems(results) + ([kernel_problem] if kernel_problem else [])
    for problem in problems:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0


_KERNEL_READY = re.compile(r"kernel ready in ([0-9.]+) s")


def kernel_ready_seconds(log: str) -> float | None:
    """How long plumb's kernel took to load (or compile) at start, from its log: a cold numba
    cache shows here, and in a drain's time, which counts from the spawn."""
    found = _KERNEL_READY.search(log)
    return float(found.group(1)) if found else None


def warm_kernel_cache() -> None:
    """Compiles plumb's modules to bytecode and its kernel into numba's cache in a throwaway
    process, as the image build does (pip compiles the bytecode of what it installs, the
    Dockerfile the kernel), so each ``plumb run`` measured here starts as a deployed plumb does:
    a compile inside the run would count in its start-up time, CPU and peak RSS. (An editable
    install has no bytecode, and PYTHONDONTWRITEBYTECODE keeps Python from writing it.)"""
    _status("compiling plumb's bytecode and kernel cache (as the image build does) ...")
    package = str(Path(plumb.__file__).parent)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", package], check=True, stdout=subprocess.DEVNULL
    )
    subprocess.run(
        [sys.executable, "-c", "from plumb.kernel import compiled; compiled.warm_up()"],
        check=True,
    )


def smoke_problems(results: list[RunResult]) -> list[str]:
    """What the quick-mode smoke check refuses: unplaced pods anywhere, plumb violations."""
    problems = []
    for result in results:
        q = result.quality
        if q.placed != q.measured_pods:
            problems.append(
                f"{result.scheduler} placed {q.placed} of {q.measured_pods} measured pods in "
                f"{result.workload}"
            )
        if result.scheduler == PLUMB and q.total_violations:
            problems.append(f"plumb made violations in {result.workload}: {q.violations}")
    return problems


def kernel_only(*, quick: bool) -> int:
    """``plumb bench --kernel-only``: the micro-benchmark alone, its table on stdout."""
    kernel, problem = _kernel(quick=quick)
    if problem:
        print(f"FAILED: {problem}", file=sys.stderr)
        return 1
    rows = [kernelbench.as_dict(figures) for figures in kernel]
    cost = kernelbench.extension_cost(rows)
    print("\n".join([*kernelbench.table(rows), "", *cost, kernelbench.rejections(rows[-1])]))
    return 0


def _kernel(*, quick: bool) -> tuple[list[kernelbench.KernelFigures], str | None]:
    """The micro-benchmark's figures, or none and what went wrong."""
    sizes = kernelbench.sizes(quick=quick)
    nodes = ", ".join(dict.fromkeys(f"{size.nodes:,}" for size in sizes))
    _status(f"kernel micro-benchmark at {nodes} nodes ...")
    try:
        figures = kernelbench.run(sizes, repeats=kernelbench.REPEATS[quick])
    except kernelbench.KernelBenchError as error:
        return [], str(error)
    for row in figures:
        label = kernelbench.EXTENSION_LABEL if row.extension else ""
        _status(
            f"kernel {row.nodes:>6} nodes{label}: numba {row.numba_single_us:.1f} µs/pod "
            "one per call, "
            f"{row.numba_batch_us:.1f} in batches of {row.batch_size}; reference "
            f"{row.reference_us:,.0f} µs/pod ({row.batch_speedup:,.0f}x)"
        )
        for plugin in row.plugins:
            if plugin.get("version") is None:
                _status(f"  plugin {plugin['plugin']}: not installed, not measured")
                continue
            _status(
                f"  plugin {plugin['plugin']} ({plugin['point']}): {plugin['steady_us']} µs/pod, "
                f"first call of a cycle {plugin['first_us']:,.0f} µs; calls {plugin['calls']} "
                f"for {plugin['pods']} pods"
            )
    return figures, None


def _as_dict(result: RunResult) -> dict[str, Any]:
    return dataclasses.asdict(result)


async def _run_all(
    plane: controlplane.ControlPlane,
    work: Path,
    selected: list[workloads.Workload],
    pairs: int,
) -> list[RunResult]:
    api = k8s_client.ApiClient(
        credentials_module.load(plane.kubeconfig), connections=128, user_agent="plumb-bench"
    )
    results = []
    try:
        for workload in selected:
            if workload.trace_ratio is not None:
                results.append(await _traced_runs(plane, api, work, workload, pairs))
                continue
            for scheduler in schedulers_for(workload):
                results.append(await _run_one(plane, api, work, workload, scheduler))
    finally:
        await api.close()
    return results


async def _traced_runs(
    plane: controlplane.ControlPlane,
    api: k8s_client.ApiClient,
    work: Path,
    workload: workloads.Workload,
    pairs: int,
) -> RunResult:
    """plumb on a traced workload with tracing off and on in turn (``tracing_order``); the
    traced run of median CPU per pod, carrying every run's figures."""
    runs: list[tuple[bool, RunResult]] = []
    for index, traced in enumerate(tracing_order(pairs)):
        directory = work / f"{workload.name}-{index}"
        directory.mkdir()
        runs.append((traced, await _run_one(plane, api, directory, workload, PLUMB, traced)))
    on = sorted(
        (r for traced, r in runs if traced),
        key=lambda r: alternated(r, True)["settled_cpu_ms_per_pod"] or 0.0,
    )
    return dataclasses.replace(
        on[(len(on) - 1) // 2], alternation=[alternated(r, traced) for traced, r in runs]
    )


TRACING_PAIRS = {False: 5, True: 1}
"""Pairs of plumb runs, tracing off and on, that a traced workload alternates: full, quick."""


def tracing_order(pairs: int) -> list[bool]:
    """Whether each run of a traced workload has tracing on: off on, on off, off on, ..."""
    return [
        on for pair in range(pairs) for on in ((False, True) if pair % 2 == 0 else (True, False))
    ]


def alternated(result: RunResult, traced: bool) -> dict[str, Any]:
    """One run of a traced workload's alternation, in short."""
    bound = result.timing.bound
    settled = result.settled_cpu_seconds
    return {
        "tracing": traced,
        "cpu_ms_per_pod": result.cpu_ms_per_pod,
        "settled_cpu_ms_per_pod": 1000 * settled / bound if settled is not None and bound else None,
        "latency_p99": result.timing.latency_p99,
        "throughput": result.timing.throughput,
        "creation_rate": result.timing.creation_rate,
        "spans": (result.tracing or {}).get("spans"),
        "dropped": (result.tracing or {}).get("dropped"),
    }


def schedulers_for(workload: workloads.Workload) -> tuple[str, ...]:
    """Who runs a workload: plumb alone for a traced variant (the comparison is plumb with
    tracing against plumb without), else plumb, kube-scheduler and the ceiling."""
    return (PLUMB,) if workload.trace_ratio is not None else SCHEDULERS


async def _run_one(
    plane: controlplane.ControlPlane,
    api: k8s_client.ApiClient,
    work: Path,
    workload: workloads.Workload,
    scheduler: str,
    tracing: bool = True,
) -> RunResult:
    """One scheduler's run of a workload; ``tracing`` False: a traced workload's run with
    tracing off (its metrics port on all the same)."""
    began = time.monotonic()
    run_id = secrets.token_hex(3)
    namespace = f"bench-{workload.name}-{scheduler}-{run_id}"[:63]
    node_selector = f"{RUN_LABEL}={run_id}"
    scheduler_name = {
        PLUMB: DEFAULT_SCHEDULER_NAME,
        KUBE_SCHEDULER: schedulers.KUBE_SCHEDULER_NAME,
        CEILING: CEILING_SCHEDULER_NAME,
    }[scheduler]
    node_names = [f"{scheduler[:4]}-{run_id}-n{i:05d}" for i in range(workload.nodes)]
    label = f"{workload.name:<18} {scheduler:<14}"
    _status(f"{label} creating {workload.nodes} nodes, {workload.initial_pods} initial pods")

    def pod(name: str, index: int) -> builders.PodBuilder:
        """The index-th pod of the run (initial pods first)."""
        base = builders.make_pod(name, namespace).scheduler(scheduler_name)
        shaped = workload.shape(index)(base.label(workloads.APP_LABEL, workload.name))
        measured_index = index - workload.initial_pods
        if workload.gang and measured_index >= 0:
            return gangload.member(shaped, measured_index, workload.gang)
        return shaped

    await populating.create_namespace(api, namespace)
    await populating.create_nodes(
        api,
        [
            workload.node(builders.make_node(name), i).label(RUN_LABEL, run_id).obj()
            for i, name in enumerate(node_names)
        ],
    )
    dra = None
    if workload.dra:
        dra = draload.DraRun(namespace=namespace, run_id=run_id, node_names=node_names)
        await draload.create_devices(api, dra)
        await draload.create_initial_claims(api, dra, workload.initial_pods)
    if workload.gang:
        await gangload.create_groups(api, namespace, workload.measured_pods, workload.gang)
    initial = [
        pod(f"init-{i:05d}", i).node(node_names[workload.ceiling_node(i)])
        for i in range(workload.initial_pods)
    ]
    if dra is not None:
        initial = [draload.initial_pod(body, dra) for body in initial]
    await populating.create_pods(api, namespace, [body.obj() for body in initial])
    if dra is not None:
        created = await populating.list_pods(api, namespace)
        index_of = {f"init-{i:05d}": i for i in range(workload.initial_pods)}
        await draload.allocate_initial(api, dra, created, index_of)
    measured = [
        pod(f"pod-{i:05d}", workload.initial_pods + i) for i in range(workload.measured_pods)
    ]
    if dra is not None:
        measured = [draload.measured_pod(body) for body in measured]
    measured_bodies = [body.obj() for body in measured]
    measured_names = [body["metadata"]["name"] for body in measured_bodies]
    measured_set = set(measured_names)

    def index_of_pod(name: str) -> int:
        return workload.initial_pods + int(name.split("-")[1])

    def node_for(name: str) -> str:
        return node_names[workload.ceiling_node(index_of_pod(name))]

    async def reserve(body: JSON, node: str) -> str | None:
        """The ceiling's PreBind: the pod's claim given the device round-robin gives it."""
        assert dra is not None
        name, uid = body["metadata"]["name"], body["metadata"]["uid"]
        claim = draload.claim_of(body)
        if claim is None:
            return "no claim yet"
        allocation = dra.allocation(node, dra.device_of(index_of_pod(name)))
        return await draload.reserve(
            api, namespace, claim, pod=name, uid=uid, allocation=allocation
        )

    def new_binder() -> ceiling.RawBinder:
        if dra is None:
            return ceiling.RawBinder(api, namespace, node_for)

        def has_claim(body: JSON) -> bool:
            return draload.claim_of(body) is not None

        return ceiling.RawBinder(api, namespace, node_for, reserve=reserve, ready=has_claim)

    directory = work / f"{workload.name}-{scheduler}"
    directory.mkdir()
    metered = workload.trace_ratio is not None and scheduler == PLUMB
    traced = metered and tracing
    sink = otlpsink.OtlpSink() if traced else None
    metrics_port = processes.free_ports(1)[0] if metered else 0
    dropped: float | None = None
    process: schedulers.SchedulerProcess | None = None
    controller: claimcontroller.ClaimController | None = None
    controller_meter: measuring.ProcessMeter | None = None
    binder: ceiling.RawBinder | None = None
    sent: dict[str, float] = {}
    answered: dict[str, float] = {}
    started = math.nan
    creating: asyncio.Task[None] | None = None
    try:
        if dra is not None:
            _status(f"{label} starting the resourceclaim controller")
            controller = await claimcontroller.start(plane, directory)
        if workload.drain:
            # The backlog first: every measured pod created and seen pending by our watch, then
            # the scheduler (or the raw binder) starts, and time runs from there.
            watch = watching.PodWatch(api, namespace)
            await watch.start()
            _status(f"{label} creating the backlog of {workload.measured_pods} pending pods")
            try:
                await populating.create_pods(
                    api, namespace, measured_bodies, sent=sent, answered=answered
                )
                await _wait_pending(label, watch, measured_set)
            except BaseException:
                await watch.stop()
                raise
            _status(f"{label} starting {scheduler}")
            api_meters, harness = _side_meters(plane)
            controller_meter = measuring.ProcessMeter(controller.pid) if controller else None
            started = time.monotonic()
            if scheduler == CEILING:
                binder = new_binder()
                await binder.warm_up()
                for name in measured_names:
                    binder.submit(name, watch.pending[name])
            else:
                process = await _start(
                    plane, directory, scheduler, scheduler_name, workload, sink, metrics_port
                )
            meter = measuring.ProcessMeter(process.pid, since_start=True) if process else None
        else:
            _status(f"{label} starting {scheduler}")
            on_added: watching.OnAdded | None = None
            on_modified: watching.OnAdded | None = None
            if scheduler == CEILING:
                binder = new_binder()
                await binder.warm_up()
                on_added, on_modified = binder.on_added, binder.on_modified
            else:
                process = await _start(
                    plane, directory, scheduler, scheduler_name, workload, sink, metrics_port
                )
            watch = watching.PodWatch(
                api, namespace, on_added=on_added, on_modified=on_modified if dra else None
            )
            await watch.start()
            meter = measuring.ProcessMeter(process.pid) if process else None
            api_meters, harness = _side_meters(plane)
            controller_meter = measuring.ProcessMeter(controller.pid) if controller else None
            creating = asyncio.create_task(
                populating.create_pods(
                    api, namespace, measured_bodies, sent=sent, answered=answered
                )
            )
        try:
            await _wait_bound(label, watch, measured_set, creating, process, controller)
        finally:
            if creating is not None and not creating.done():
                creating.cancel()
            await watch.stop()
        usage = meter.usage() if meter else None
        api_cpu = sum(m.usage().cpu_seconds for m in api_meters)
        harness_cpu = harness.usage().cpu_seconds
        controller_cpu = controller_meter.usage().cpu_seconds if controller_meter else None
        # Let the scheduler flush the events of its last bindings before it is stopped, so its
        # log shows no shutdown noise; none of this is in the figures above, only in the
        # scheduler's CPU read again after it (a traced plumb exports its last spans here).
        await asyncio.sleep(SETTLE_SECONDS)
        settled_cpu = meter.usage().cpu_seconds if meter else None
        if traced:
            dropped = await asyncio.to_thread(schedulers.spans_dropped, metrics_port)
    finally:
        if binder is not None:
            await binder.stop()
        log = process.stop() if process else {}
        received = sink.stop() if sink is not None else None
        if process is not None and scheduler == PLUMB:
            log["kernel_ready_seconds"] = kernel_ready_seconds(process.log.read_text("utf-8"))
        controller_log = controller.stop() if controller else None
    if binder is not None and binder.failures:
        log = {"bind_failures": len(binder.failures), "samples": binder.failures[:5]}
    if controller_log is not None:
        log["resourceclaim_controller"] = controller_log
    bound = {name: at for name, at in watch.bound.items() if name in measured_set}
    pods = await populating.list_pods(api, namespace)
    nodes = await populating.list_nodes(api, node_selector)
    class_label = workloads.CLASS_LABEL if workload.mix else None
    assessed = quality.assess(nodes, pods, measured_set, class_label=class_label)
    if dra is not None:
        problems = draload.device_violations(nodes, pods, await draload.list_claims(api, namespace))
        for problem in problems[:5]:
            _status(f"{label} device violation: {problem}")
        violations = {**assessed.violations, "devices": len(problems)}
        assessed = dataclasses.replace(assessed, violations=violations)
    groups_placed = None
    if workload.gang:
        problems = gangload.part_placed(pods, workload.gang)
        for problem in problems[:5]:
            _status(f"{label} gang violation: {problem}")
        violations = {**assessed.violations, "gangs": len(problems)}
        assessed = dataclasses.replace(assessed, violations=violations)
        member_of = {
            name: gangload.group_of(index_of_pod(name) - workload.initial_pods, workload.gang)
            for name in measured_names
        }
        spans = gangload.placed_whole(sent, bound, member_of)
        groups_placed = gangload.group_figures(spans, workload.measured_pods // workload.gang)
    if workload.drain:
        timed = measuring.drain_timing(started, len(measured), bound)
        curve = latencies = sorted(at - started for at in bound.values())
    else:
        timed = measuring.timing(sent, bound, answered)
        curve = measuring.bound_curve(sent, bound)
        latencies = measuring.latencies(sent, bound)
    claim_made = None
    if dra is not None:
        claimed = measuring.latencies(sent, watch.claimed)
        claim_made = {
            "p50": measuring.percentile(claimed, 0.5),
            "p99": measuring.percentile(claimed, 0.99),
        }
    _status(f"{label} cleaning up")
    await populating.delete_run(api, namespace, node_selector)
    if dra is not None:
        await draload.delete_devices(api, dra)
    if workload.gang:
        await gangload.delete_groups(api, namespace)
    _finish(label, timed, assessed)
    return RunResult(
        workload=workload.name,
        scheduler=scheduler,
        description=workload.description,
        nodes=workload.nodes,
        initial_pods=workload.initial_pods,
        drain=workload.drain,
        dra=workload.dra,
        timing=timed,
        quality=assessed,
        usage=usage,
        cpu_ms_per_pod=measuring.cpu_ms_per_pod(usage.cpu_seconds if usage else None, timed.bound),
        api_cpu_seconds=api_cpu,
        harness_cpu_seconds=harness_cpu,
        bound_curve=curve,
        latencies=latencies,
        log=log,
        wall_seconds=round(time.monotonic() - began, 1),
        controller_cpu_seconds=controller_cpu,
        claim_made=claim_made,
        gang=workload.gang,
        groups_placed=groups_placed,
        settled_cpu_seconds=settled_cpu,
        tracing=None
        if received is None
        else {"ratio": workload.trace_ratio, **dataclasses.asdict(received), "dropped": dropped},
    )


async def _start(
    plane: controlplane.ControlPlane,
    directory: Path,
    scheduler: str,
    scheduler_name: str,
    workload: workloads.Workload,
    sink: otlpsink.OtlpSink | None = None,
    metrics_port: int = 0,
) -> schedulers.SchedulerProcess:
    """The scheduler, started; plumb's spans go to ``sink`` if one is given."""
    if scheduler == PLUMB:
        ratio = workload.trace_ratio
        extra = schedulers.tracing_flags(sink.endpoint, ratio) if sink and ratio is not None else []
        return await schedulers.start_plumb(
            plane, directory, scheduler_name, workload.nodes, metrics_port=metrics_port, extra=extra
        )
    # The gate for the gang workload only: the others measure kube-scheduler as it is by default.
    gates = gangload.GATES if workload.gang else {}
    return await schedulers.start_kube_scheduler(plane, directory, feature_gates=gates)


def _side_meters(
    plane: controlplane.ControlPlane,
) -> tuple[list[measuring.ProcessMeter], measuring.ProcessMeter]:
    """Meters on the API server and etcd, and on this process (creators, watch, raw binder)."""
    api_meters = [measuring.ProcessMeter(pid) for pid in (plane.apiserver_pid, plane.etcd_pid)]
    return api_meters, measuring.ProcessMeter(os.getpid())


async def _wait_pending(label: str, watch: watching.PodWatch, measured: set[str]) -> None:
    """Until the watch has seen every measured pod pending: the backlog has settled."""
    last_progress = time.monotonic()
    seen = 0
    while True:
        watch.check()
        pending = sum(1 for name in measured if name in watch.pending)
        if pending >= len(measured):
            return
        now = time.monotonic()
        if pending != seen:
            seen, last_progress = pending, now
        if now - last_progress > STALL_SECONDS:
            raise RuntimeError(
                f"{label}: the watch saw {pending} of {len(measured)} backlog pods pending, "
                f"none more for {STALL_SECONDS:.0f} s; is a scheduler already running?"
            )
        await asyncio.sleep(0.05)


async def _wait_bound(
    label: str,
    watch: watching.PodWatch,
    measured: set[str],
    creating: asyncio.Task[None] | None,
    process: schedulers.SchedulerProcess | None,
    controller: claimcontroller.ClaimController | None = None,
) -> None:
    """Until every measured pod is bound, or none was for STALL_SECONDS after the last create
    (creating: the creators' task; None when the pods were all created beforehand)."""
    total = len(measured)
    started = last_progress = time.monotonic()
    seen = 0
    bar = _Progress(label, total)
    while True:
        await asyncio.sleep(0.1)
        created = creating is None or creating.done()
        if creating is not None and creating.done():
            creating.result()
        watch.check()
        if process is not None:
            process.check()
        if controller is not None:
            controller.check()
        bound = sum(1 for name in watch.bound if name in measured)
        now = time.monotonic()
        if bound != seen:
            seen, last_progress = bound, now
        bar.show(bound, now - started)
        if bound >= total:
            bar.done()
            return
        if created and now - last_progress > STALL_SECONDS:
            bar.done()
            _status(f"{label} gave up: {total - bound} pods unbound for {STALL_SECONDS:.0f} s")
            return


# --- progress on stderr ---------------------------------------------------------------------------


def _status(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class _Progress:
    """A bar updating in place on a terminal; a line every few seconds elsewhere (CI logs)."""

    def __init__(self, label: str, total: int) -> None:
        self._label = label
        self._total = total
        self._tty = sys.stderr.isatty()
        self._last = 0.0

    def show(self, bound: int, elapsed: float) -> None:
        if not self._tty and elapsed - self._last < 5.0:
            return
        self._last = elapsed
        filled = int(30 * bound / self._total)
        rate = bound / elapsed if elapsed > 0 else 0.0
        line = (
            f"{self._label} [{'#' * filled}{'.' * (30 - filled)}] {bound}/{self._total} bound "
            f"{rate:7.1f} pods/s {elapsed:6.1f} s"
        )
        print(f"\r{line}" if self._tty else line, end="" if self._tty else "\n", file=sys.stderr)

    def done(self) -> None:
        if self._tty:
            print(file=sys.stderr)


def _finish(label: str, timed: measuring.Timing, assessed: quality.Quality) -> None:
    if timed.origin == "start":
        first = (timed.first_bind or math.nan) * 1000
        source = f"first bind {first:.0f} ms after the start, then {timed.bind_throughput or 0:.1f}"
        source += " pods/s"
    else:
        source = f"created at {timed.creation_rate:.0f} pods/s"
    _status(
        f"{label} {timed.bound}/{timed.pods} bound, {timed.throughput:.1f} pods/s "
        f"(steady {timed.steady_throughput:.1f}), p50 {timed.latency_p50 * 1000:.0f} ms, "
        f"p99 {timed.latency_p99 * 1000:.0f} ms, {source}, "
        f"violations {assessed.total_violations}"
    )
