"""docs/benchmarks.md from the results: the machine, the versions, the exact command, whether
each target of issues 4, 16, 27, 28, 30 and 31 is met, a table of every figure for each
workload with the ratio plumb / kube-scheduler, plots (pods bound over time, latency CDF), the
cost growth with the cluster's size, what tracing costs (``tracingcost``) and the kernel
micro-benchmark (the example plugins' calls included); the raw results go to benchmarks.json
beside it.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import plumb
from plumb_dev.bench import costplot, kernelbench, measuring, tracingcost

JSON = dict[str, Any]
MARKDOWN = "benchmarks.md"
RAW = "benchmarks.json"
PLOTS = "benchmarks"
"""The directory beside the markdown that holds its PNG plots."""
SCHEDULERS = ("plumb", "kube-scheduler", "ceiling")
MISSING = "-"


def context(*, bin_dir: Path, command: str, quick: bool) -> JSON:
    """The machine and versions a run happened on, and the command that produced it."""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "mode": "quick" if quick else "full",
        "machine": {
            "cpu": _cpu_model(),
            "cpus": os.cpu_count(),
            "memory_gib": _memory_gib(),
            "os": platform.platform(),
        },
        "versions": {
            "plumb": plumb.__version__,
            "python": platform.python_version(),
            "numba": _module_version("numba"),
            "kube-scheduler": _binary_version(bin_dir / "kube-scheduler"),
            "kube-apiserver": _binary_version(bin_dir / "kube-apiserver"),
            "etcd": _binary_version(bin_dir / "etcd"),
        },
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def _module_version(name: str) -> str:
    module = sys.modules.get(name)
    if module is None:
        try:
            module = __import__(name)
        except ImportError:
            return "not installed"
    return str(getattr(module, "__version__", "unknown"))


def _binary_version(binary: Path) -> str:
    try:
        result = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unknown ({error})"
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"


# --- the figures ----------------------------------------------------------------------------------

Getter = Callable[[JSON], float | None]


def _timing(key: str, scale: float = 1.0) -> Getter:
    return lambda r: _scaled(r["timing"][key], scale)


def _quality(key: str, scale: float = 1.0) -> Getter:
    return lambda r: _scaled(r["quality"][key], scale)


def _usage(key: str, scale: float = 1.0) -> Getter:
    return lambda r: _scaled((r["usage"] or {}).get(key), scale)


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def _max_skew(result: JSON) -> float | None:
    return max(result["quality"]["spread_skew"].values(), default=None)


def _violations(result: JSON) -> float:
    return float(sum(result["quality"]["violations"].values()))


def cpu_ms_per_pod(result: JSON) -> float | None:
    """Scheduler CPU milliseconds per bound measured pod (None for the ceiling)."""
    usage = result.get("usage") or {}
    return measuring.cpu_ms_per_pod(usage.get("cpu_seconds"), result["timing"]["bound"])


def _claim_made(key: str) -> Getter:
    return lambda r: _scaled((r.get("claim_made") or {}).get(key), 1000)


def _groups_placed(key: str, scale: float = 1.0) -> Getter:
    return lambda r: _scaled((r.get("groups_placed") or {}).get(key), scale)


def _timing_optional(key: str, scale: float = 1.0) -> Getter:
    return lambda r: _scaled(r["timing"].get(key), scale)


# (label, how to read it from a result, its format): one table row each, in this order.
ROWS: list[tuple[str, Getter, str]] = [
    ("measured pods bound", _quality("placed"), "{:.0f}"),
    ("throughput (pods/s)", _timing("throughput"), "{:.1f}"),
    ("steady-state throughput, 10-90% (pods/s)", _timing("steady_throughput"), "{:.1f}"),
    ("throughput, first bind → last bind (pods/s)", _timing_optional("bind_throughput"), "{:.1f}"),
    ("first bind after the start (ms)", _timing_optional("first_bind", 1000), "{:.0f}"),
    ("latency p50 (ms)", _timing("latency_p50", 1000), "{:.0f}"),
    ("latency p90 (ms)", _timing("latency_p90", 1000), "{:.0f}"),
    ("latency p99 (ms)", _timing("latency_p99", 1000), "{:.0f}"),
    ("pod creation rate (pods/s)", _timing("creation_rate"), "{:.0f}"),
    ("claim made by the controller, p50 after create (ms)", _claim_made("p50"), "{:.0f}"),
    ("claim made by the controller, p99 after create (ms)", _claim_made("p99"), "{:.0f}"),
    ("groups placed whole", _groups_placed("whole"), "{:.0f}"),
    ("group placed whole, p50 after its first create (ms)", _groups_placed("p50", 1000), "{:.0f}"),
    ("group placed whole, p99 after its first create (ms)", _groups_placed("p99", 1000), "{:.0f}"),
    ("max spread skew", _max_skew, "{:.0f}"),
    ("nodes used by measured pods (%)", _quality("nodes_used_share", 100), "{:.1f}"),
    ("stddev of cpu utilisation across nodes", _quality("cpu_utilisation_stddev"), "{:.4f}"),
    ("on a preferred node (%)", _quality("preferred_share", 100), "{:.1f}"),
    ("constraint violations", _violations, "{:.0f}"),
    ("scheduler CPU seconds (measured phase)", _usage("cpu_seconds"), "{:.2f}"),
    ("scheduler CPU ms per bound pod", cpu_ms_per_pod, "{:.2f}"),
    ("scheduler peak RSS (MiB)", _usage("peak_rss_bytes", 1 / 1024**2), "{:.0f}"),
    (
        "plumb: kernel ready after its start (s)",
        lambda r: (r.get("log") or {}).get("kernel_ready_seconds"),
        "{:.1f}",
    ),
    ("kube-apiserver + etcd CPU seconds", lambda r: r.get("api_cpu_seconds"), "{:.2f}"),
    (
        "resourceclaim controller CPU seconds",
        lambda r: r.get("controller_cpu_seconds"),
        "{:.2f}",
    ),
    ("bench harness CPU seconds", lambda r: r.get("harness_cpu_seconds"), "{:.2f}"),
    ("share of the ceiling's throughput (%)", lambda r: r.get("ceiling_share"), "{:.1f}"),
    (
        "share of the ceiling's first → last bind throughput (%)",
        lambda r: r.get("bind_ceiling_share"),
        "{:.1f}",
    ),
]


def _finite(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value)


def _cell(value: float | None, fmt: str) -> str:
    return fmt.format(value) if _finite(value) else MISSING


def ratio(plumb_value: float | None, kube_value: float | None) -> str:
    """plumb / kube-scheduler as "1.23x"; MISSING when either is missing or kube's is zero."""
    if plumb_value is None or kube_value is None:
        return MISSING
    if not (math.isfinite(plumb_value) and math.isfinite(kube_value)) or kube_value == 0:
        return MISSING
    return f"{plumb_value / kube_value:.2f}x"


def with_ceiling_share(results: Sequence[JSON]) -> list[JSON]:
    """Each result with ceiling_share: its throughput as a percentage of the ceiling's on the
    same workload (None for the ceiling itself, or when there is no ceiling run); and
    bind_ceiling_share, the same for a drain's first → last bind throughput."""
    ceilings = {r["workload"]: r["timing"] for r in results if r["scheduler"] == "ceiling"}

    def share(result: JSON, key: str) -> float | None:
        limit = (ceilings.get(result["workload"]) or {}).get(key)
        ours = result["timing"].get(key)
        if result["scheduler"] == "ceiling" or not _finite(limit) or not limit:
            return None
        return 100 * ours / limit if _finite(ours) else None

    return [
        {
            **result,
            "ceiling_share": share(result, "throughput"),
            "bind_ceiling_share": share(result, "bind_throughput"),
        }
        for result in results
    ]


def table(by_scheduler: dict[str, JSON]) -> list[str]:
    """The markdown table of one workload: a row per figure, a column per scheduler."""
    lines = [
        "| | plumb | kube-scheduler | plumb / kube-scheduler | ceiling (raw binder) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, get, fmt in ROWS:
        values = {name: get(r) for name, r in by_scheduler.items()}
        if not any(_finite(v) for v in values.values()):
            continue
        lines.append(
            f"| {label} | {_cell(values.get('plumb'), fmt)} | "
            f"{_cell(values.get('kube-scheduler'), fmt)} | "
            f"{ratio(values.get('plumb'), values.get('kube-scheduler'))} | "
            f"{_cell(values.get('ceiling'), fmt)} |"
        )
    return lines


_NUMBER_LIST = re.compile(r"\[\s+((?:-?[0-9.eE+-]+|null)(?:,\s+(?:-?[0-9.eE+-]+|null))*)\s+\]")


def dumps(data: Any) -> str:
    """Indented JSON, but each list of numbers on one line: the per-pod times of a full run are
    tens of thousands of values, one per line they would make the file several megabytes."""
    text = json.dumps(_clean(data), indent=1)
    return _NUMBER_LIST.sub(lambda m: "[" + "".join(m.group(1).split()) + "]", text)


def _clean(value: Any) -> Any:
    """JSON without NaN or Infinity (not JSON), floats rounded to 0.1 ms (or its equivalent)."""
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write(out: Path, results: Sequence[JSON], ctx: JSON, kernel: Sequence[JSON] = ()) -> list[Path]:
    """Writes benchmarks.md, benchmarks.json and the plots into out; returns their paths.

    ``kernel``: the micro-benchmark's figures, one per size (kernelbench.as_dict's)."""
    out.mkdir(parents=True, exist_ok=True)
    plots = out / PLOTS
    plots.mkdir(exist_ok=True)
    results = with_ceiling_share(results)
    raw = out / RAW
    raw.write_text(
        dumps({"context": ctx, "results": results, "kernel": list(kernel)}) + "\n",
        encoding="utf-8",
    )
    written = [raw]
    workload_names = list(dict.fromkeys(r["workload"] for r in results))
    sections = []
    for name in workload_names:
        by_scheduler = {r["scheduler"]: r for r in results if r["workload"] == name}
        written += _plots(plots, name, by_scheduler)
        sections.append((name, by_scheduler))
    growth = costplot.points(results)
    if growth:
        written.append(costplot.plot(growth, plots / costplot.FILE))
    markdown = out / MARKDOWN
    markdown.write_text(render(ctx, sections, kernel), encoding="utf-8")
    return [markdown, *written]


_METHOD = (
    "How it measures: for each workload, plumb, then kube-scheduler (client QPS and burst 5000, "
    "leader election off, as in Kubernetes' scheduler_perf), then a raw binder run on identical "
    "fresh objects: a new namespace and a run-unique node set, the previous run's nodes and pods "
    "deleted first. Initial pods are created already bound; the measured pods are created by "
    "{creators} concurrent creators while the scheduler runs. A pod's latency runs from its "
    "create request to the moment the bench's own watch sees spec.nodeName set; throughput is "
    "measured pods over first create → last bound, and over the steady-state window from the "
    "10% to the 90% bound pod. CPU seconds (user + system, all threads, measured phase only) and "
    "peak RSS (VmHWM) come from /proc of the scheduler process; CPU ms per bound pod is those "
    "CPU seconds over the measured pods bound. The ceiling does the API work every scheduler "
    "must do for a pod and nothing else: it binds each pod to a precomputed node the moment the "
    "watch sees it, then posts the `Scheduled` event (events.k8s.io/v1, as plumb posts it), "
    "with plumb's concurrency: {binders} bindings and {events} events in flight. "
    "Everything (etcd, kube-apiserver, the scheduler and the bench itself) "
    "shares the machine's CPUs, so the CPU seconds of the API server and of the bench harness "
    "are listed too: when a scheduler's throughput is close to the pod creation rate, creation "
    "(the API server) was the limit, not the scheduler."
)
_DRAIN = (
    "A drain: every measured pod was created and seen pending by the bench's watch before the "
    "scheduler (or the raw binder) started. Times, latencies included, run from the start: the "
    "scheduler's process spawn (the raw binder's start), to each pod's bind; its CPU seconds "
    "count from the spawn too, start-up and initial sync included. The first bind → last bind "
    "throughput leaves the start-up out."
)


_GANG = (
    "Gangs: the measured pods come in groups of {size} consecutive pods, each group an upstream "
    "PodGroup (scheduling.k8s.io/v1beta1, gang minCount {size}) created before its pods, which "
    "name it in spec.schedulingGroup.podGroupName. The control plane serves that API "
    "(GenericWorkload on) and kube-scheduler runs with the gate, so its GangScheduling plugin "
    "places each group; the raw binder ignores groups. A group is placed whole when its last "
    "member is bound: the group rows time that from its first member's create request. A group "
    "with some but not all members bound counts as a violation (gangs)."
)


_DRA = (
    "Devices: each node publishes {devices} devices in a ResourceSlice of its own (API objects "
    "only: no driver runs, as no kubelet does), and every pod claims one device through a "
    "request whose CEL selector picks by attribute (the model) and capacity (the memory): "
    "{matching} of each node's devices qualify. Each initial pod's claim is allocated (and "
    "reserved for it) before the scheduler starts; each measured pod names a "
    "ResourceClaimTemplate, from which kube-controller-manager's resourceclaim controller, run "
    "alone beside each scheduler (client QPS and burst 5000), makes its claim. A scheduler can "
    "take a pod only once its claim exists, so the claim rows are a floor under every latency. "
    "The ceiling waits for the claim too, then writes what PreBind writes (the claim's "
    "finalizer, then its allocation and reservation) before the binding."
)


def _load_line(machine: JSON) -> str:
    load = machine.get("load_average") or {}
    return (
        f"- 1-minute load average: {load.get('at_start', '?')} at the start, "
        f"{load.get('at_end', '?')} at the end (everything here shares {machine['cpus']} CPUs)"
    )


def render(
    ctx: JSON, sections: Sequence[tuple[str, dict[str, JSON]]], kernel: Sequence[JSON] = ()
) -> str:
    machine, versions = ctx["machine"], ctx["versions"]
    quick = ctx["mode"] == "quick"
    lines = [
        "# Benchmarks: plumb beside kube-scheduler",
        "",
        "Written by `plumb bench`; do not edit by hand: rerun the command below instead.",
        "",
    ]
    if quick:
        lines += [
            "> **Quick run** (`--quick`): every workload shrunk to a smoke-test size, so the "
            "figures show start-up and small-batch behaviour more than steady-state speed. "
            "Run `make bench` for the full sizes.",
            "",
        ]
    else:
        lines += ["> **Full run**: the workloads at their full sizes.", ""]
    lines += [
        f"- date: {ctx['date']}",
        f"- command: `{ctx['command']}`",
        f"- machine: {machine['cpu']}, {machine['cpus']} CPUs, {machine['memory_gib']} GiB, "
        f"{machine['os']}",
        _load_line(machine),
        "- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        f"- total time: {ctx.get('total_seconds', '?')} s",
        "",
        _METHOD.format(
            creators=ctx.get("creators", "?"),
            binders=ctx.get("binder_concurrency", "?"),
            events=ctx.get("event_concurrency", "?"),
        ),
        "",
        *_targets_section(targets(sections, kernel, ctx.get("settle_seconds")), quick=quick),
    ]
    for name, by_scheduler in sections:
        any_result = next(iter(by_scheduler.values()))
        description = any_result.get("description")
        lines += [
            f"## {name}",
            "",
            (f"{description}. " if description else "")
            + f"{any_result['nodes']} nodes, {any_result['initial_pods']} initial pods, "
            f"{any_result['timing']['pods']} measured pods.",
            "",
        ]
        if any_result.get("drain"):
            lines += [_DRAIN, ""]
        if any_result.get("dra"):
            lines += [_DRA.format(**ctx.get("dra", {"devices": "?", "matching": "?"})), ""]
        if any_result.get("gang"):
            lines += [_GANG.format(size=any_result["gang"]), ""]
        lines += [
            *table(by_scheduler),
            "",
            *class_table(by_scheduler),
            f"![pods bound over time, {name}]({PLOTS}/{name}-bound.png)",
            f"![latency CDF, {name}]({PLOTS}/{name}-latency.png)",
            "",
        ]
        logs = {s: r["log"] for s, r in by_scheduler.items() if r.get("log")}
        for scheduler, log in logs.items():
            if log.get("warnings") or log.get("errors") or log.get("bind_failures"):
                samples = "; ".join(f"`{s[:160]}`" for s in log.get("samples", []))
                lines.append(
                    f"- {scheduler} log: {log.get('warnings', 0)} warnings, "
                    f"{log.get('errors', 0)} errors. {samples}"
                )
        lines.append("")
    lines += _growth_section([r for _, by in sections for r in by.values()])
    lines += tracingcost.section(_tracing_cost(sections), ctx.get("settle_seconds"))
    lines += _kernel_section(kernel)
    lines.append(f"Raw results, per-pod bound times and latencies included: [{RAW}]({RAW}).")
    return "\n".join(lines) + "\n"


def class_table(by_scheduler: dict[str, JSON]) -> list[str]:
    """Per pod class of a mixed workload: placed, the class's own max skew and preferred-node
    share, plumb beside kube-scheduler; nothing for a workload of one shape."""
    classes = list(
        dict.fromkeys(c for r in by_scheduler.values() for c in r["quality"].get("classes", {}))
    )
    if not classes:
        return []
    shown = [s for s in SCHEDULERS if s in by_scheduler]
    figures = ("placed", "max skew", "on a preferred node (%)")
    header = " | ".join(f"{s} {figure}" for figure in figures for s in shown)
    lines = [
        "Per pod class (the classes take turns, pod by pod):",
        "",
        f"| class | measured pods | {header} |",
        "|---|---:|" + "---:|" * (3 * len(shown)),
    ]
    for name in classes:
        of = {s: by_scheduler[s]["quality"].get("classes", {}).get(name) or {} for s in shown}
        measured = next((c["measured_pods"] for c in of.values() if c), None)
        cells = [_cell(of[s].get("placed"), "{:.0f}") for s in shown]
        cells += [_cell(of[s].get("max_skew"), "{:.0f}") for s in shown]
        cells += [_cell(_scaled(of[s].get("preferred_share"), 100), "{:.1f}") for s in shown]
        lines.append(f"| {name} | {_cell(measured, '{:.0f}')} | {' | '.join(cells)} |")
    return [*lines, ""]


def _growth_section(results: Sequence[JSON]) -> list[str]:
    points = costplot.points(results)
    lines = ["## Cost growth", ""]
    if not points:
        return [*lines, "No basic-shaped workload (basic, large, xlarge) in this run.", ""]
    return [
        *lines,
        costplot.METHOD,
        "",
        *costplot.table(points),
        "",
        f"![cost per pod against node count]({PLOTS}/{costplot.FILE})",
        "",
    ]


def _kernel_section(kernel: Sequence[JSON]) -> list[str]:
    lines = ["## Kernel micro-benchmark", ""]
    if not kernel:
        return [*lines, "Not run, or it failed: see the command's output.", ""]
    first = kernel[0]
    lines += [
        kernelbench.METHOD.format(batch=first["batch_size"], repeats=first["repeats"]),
        "",
        *kernelbench.table(list(kernel)),
        "",
        *kernelbench.extension_cost(list(kernel)),
        kernelbench.rejections(kernel[-1]),
        "",
    ]
    return lines


# --- the targets of issues 4, 16, 27, 28, 30 and 31 -----------------------------------------------

MET = "met"
NOT_MET = "not met"
NOT_MEASURED = "not measured in this run"
KERNEL_NODES = 5000
KERNEL_MAX_US = 20.0
KERNEL_MIN_SPEEDUP = 100.0


ISSUE_4_WORKLOADS = ("basic", "zone-spread", "anti-affinity", "preferred-affinity", "large")
"""The workloads issue 4's per-workload targets were set on."""
EVERY_WORKLOAD = (
    "basic",
    "drain",
    "zone-spread",
    "anti-affinity",
    "preferred-affinity",
    "large",
    "xlarge",
)
"""What issue 16's "on every workload" covers (the workloads there were then): a full `make
bench` runs all of them."""
DRA_WORKLOAD = "dra"
"""Issue 27's workload, judged by its own targets."""
GANG_WORKLOAD = "gang"
"""Issue 28's workload, judged by its own targets."""
DRAIN_VERSUS = 1.5
DRAIN_CEILING_PERCENT = 90.0
CPU_RATIO = 0.5
XLARGE_KERNEL_NODES = 15000
XLARGE_KERNEL_MAX_US = 60.0
PLUGIN_NODES = 5000
PLUGIN_MAX_US = 5.0
PLUGIN_SCORE = "PriceLabel"
"""Issue 30's vectorised example Score plugin, whose call counts in its cost target."""
TRACED_WORKLOAD, UNTRACED_WORKLOAD = "basic-traced", "basic"
"""Issue 31's runs: plumb with tracing on at 10%, and the same workload with it off."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TargetVerdict:
    """One target: what it asks, the figures of this run it was judged on, and the verdict."""

    target: str
    figures: str
    status: str
    issue: int = 4
    """The issue that set the target."""


def _check(target: str, figures: str, ok: bool, *, issue: int = 4) -> TargetVerdict:
    return TargetVerdict(target=target, figures=figures, status=MET if ok else NOT_MET, issue=issue)


def _unmeasured(target: str, *, issue: int = 4) -> TargetVerdict:
    return TargetVerdict(target=target, figures=MISSING, status=NOT_MEASURED, issue=issue)


def targets(
    sections: Sequence[tuple[str, dict[str, JSON]]],
    kernel: Sequence[JSON],
    settle_seconds: float | None = None,
) -> list[TargetVerdict]:
    """Every target, judged from these figures (each compared as the report prints it, so a
    verdict never contradicts the numbers beside it); missing figures are not measured.

    Issue 4's first, on its own workloads; then issue 16's; then issue 27's, 28's, 30's and
    31's (``settle_seconds``: the settle its CPU figures count, to name it)."""
    workloads = dict(sections)
    old = [(name, by) for name, by in sections if name in ISSUE_4_WORKLOADS]
    verdicts = _throughput(workloads.get("basic", {}))
    verdicts += [_latency(name, by_scheduler) for name, by_scheduler in old]
    verdicts += [_placement(name, by_scheduler) for name, by_scheduler in old]
    verdicts += _kernel(_kernel_row(kernel, KERNEL_NODES))
    verdicts.append(_memory(workloads.get("large", {})))
    verdicts += _issue_16(sections, kernel) + _issue_27(workloads.get(DRA_WORKLOAD, {}))
    verdicts += _issue_28(workloads.get(GANG_WORKLOAD, {})) + _issue_30(kernel)
    return [*verdicts, _issue_31(_tracing_cost(sections), settle_seconds)]


def _kernel_row(kernel: Sequence[JSON], nodes: int) -> JSON | None:
    """The micro-benchmark's figures at ``nodes`` nodes without the Python plugins' score."""
    return next((k for k in kernel if k["nodes"] == nodes and not k.get("extension")), None)


def _issue_16(
    sections: Sequence[tuple[str, dict[str, JSON]]], kernel: Sequence[JSON]
) -> list[TargetVerdict]:
    workloads = dict(sections)
    xlarge = workloads.get("xlarge", {})
    rss = _usage("peak_rss_bytes", 1 / 1024**2)
    verdicts = _drain(workloads.get("drain", {}))
    verdicts += [
        _every(
            sections,
            f"every workload: scheduler CPU ms per bound pod at most {CPU_RATIO}x kube-scheduler's",
            cpu_ms_per_pod,
            "{:.2f}",
            " ms",
            lambda ours, theirs: ours <= CPU_RATIO * theirs,
        ),
        _every(
            sections,
            "every workload: scheduler peak RSS at most kube-scheduler's",
            rss,
            "{:.0f}",
            " MiB",
            lambda ours, theirs: ours <= theirs,
        ),
        _every(
            sections,
            "every workload: p99 latency at most kube-scheduler's",
            _p99_ms,
            "{:.0f}",
            " ms",
            lambda ours, theirs: ours <= theirs,
        ),
        *_xlarge(xlarge),
        _xlarge_kernel(_kernel_row(kernel, XLARGE_KERNEL_NODES)),
    ]
    return verdicts


def _drain(drain: dict[str, JSON]) -> list[TargetVerdict]:
    versus = f"drain: throughput (start → last bind) at least {DRAIN_VERSUS}x kube-scheduler's"
    ceiling = (
        f"drain: throughput (start → last bind) at least {DRAIN_CEILING_PERCENT:.0f}% of the "
        "ceiling's (binding + Scheduled event)"
    )
    plumb_run, kube_run, ceiling_run = (drain.get(s) for s in SCHEDULERS)
    verdicts = [_unmeasured(versus, issue=16), _unmeasured(ceiling, issue=16)]
    if plumb_run is None:
        return verdicts
    ours = plumb_run["timing"]["throughput"]
    ours_bind = plumb_run["timing"].get("bind_throughput")
    if kube_run is not None and kube_run["timing"]["throughput"] > 0:
        theirs = kube_run["timing"]["throughput"]
        ratio = round(ours / theirs, 2)
        figures = f"{ours:.1f} vs {theirs:.1f} pods/s: {ratio:.2f}x"
        theirs_bind = kube_run["timing"].get("bind_throughput")
        if _finite(ours_bind) and _finite(theirs_bind):
            figures += f" (first → last bind {ours_bind:.1f} vs {theirs_bind:.1f})"
        verdicts[0] = _check(versus, figures, ratio >= DRAIN_VERSUS, issue=16)
    share = plumb_run.get("ceiling_share")
    if ceiling_run is not None and _finite(share):
        limit = ceiling_run["timing"]["throughput"]
        figures = f"{ours:.1f} of {limit:.1f} pods/s: {share:.1f}%"
        bind_share = plumb_run.get("bind_ceiling_share")
        if _finite(bind_share):
            figures += f" (first → last bind: {bind_share:.1f}%)"
        ok = round(share, 1) >= DRAIN_CEILING_PERCENT
        verdicts[1] = _check(ceiling, figures, ok, issue=16)
    return verdicts


def _every(
    sections: Sequence[tuple[str, dict[str, JSON]]],
    target: str,
    get: Getter,
    fmt: str,
    unit: str,
    ok: Callable[[float, float], bool],
) -> TargetVerdict:
    """One target judged on every workload of this run that measured both schedulers, each
    compared as printed; the workloads a full run has and this one lacks are named."""
    parts, failed = [], []
    for name, by_scheduler in sections:
        if name not in EVERY_WORKLOAD:
            continue
        runs = [by_scheduler.get(s) for s in SCHEDULERS[:2]]
        ours, theirs = (get(r) if r is not None else None for r in runs)
        if not (_finite(ours) and _finite(theirs)):
            continue
        shown, shown_other = fmt.format(ours), fmt.format(theirs)
        parts.append(f"{name} {shown} vs {shown_other}{unit}")
        if not ok(float(shown), float(shown_other)):
            failed.append(name)
    if not parts:
        return _unmeasured(target, issue=16)
    missing = [name for name in EVERY_WORKLOAD if name not in dict(sections)]
    figures = "; ".join(parts)
    if failed:
        figures += f" (not met on: {', '.join(failed)})"
    if missing:
        figures += f" (not run: {', '.join(missing)})"
    return _check(target, figures, not failed, issue=16)


def _issue_27(dra: dict[str, JSON]) -> list[TargetVerdict]:
    """The dra workload: every pod placed with its device, throughput and p99 at least as good
    as kube-scheduler's, less CPU per pod (each compared as printed)."""
    name = DRA_WORKLOAD
    placed = _unmeasured(f"{name}: every pod placed, no violations (devices included)", issue=27)
    ours = dra.get("plumb")
    if ours is not None:
        q = ours["quality"]
        violations = _violations(ours)
        devices = q["violations"].get("devices", 0)
        figures = (
            f"placed {q['placed']} of {q['measured_pods']}; violations {violations:.0f} "
            f"(devices {devices})"
        )
        ok = q["placed"] == q["measured_pods"] and violations == 0
        placed = _check(placed.target, figures, ok, issue=27)
    latency = f"{name}: p99 latency at most kube-scheduler's"
    return [placed, *_head_to_head(dra, name, latency, _p99_ms, issue=27)]


def _issue_28(gang: dict[str, JSON]) -> list[TargetVerdict]:
    """The gang workload: every group placed whole and none part placed, throughput at least
    kube-scheduler's, p99 to a group's last member at most kube-scheduler's, less CPU per pod
    (each compared as printed)."""
    name = GANG_WORKLOAD
    placed = _unmeasured(f"{name}: every group placed whole, none part placed", issue=28)
    ours = gang.get("plumb")
    if ours is not None:
        groups = ours.get("groups_placed") or {}
        violations = _violations(ours)
        part = ours["quality"]["violations"].get("gangs", 0)
        figures = (
            f"{groups.get('whole', 0)} of {groups.get('groups', 0)} groups whole; violations "
            f"{violations:.0f} (part placed groups {part})"
        )
        whole = groups.get("groups", 0) > 0 and groups.get("whole") == groups.get("groups")
        placed = _check(placed.target, figures, whole and violations == 0, issue=28)
    latency = (
        f"{name}: p99 from a group's first create to its last member bound at most kube-scheduler's"
    )
    return [placed, *_head_to_head(gang, name, latency, _groups_placed("p99", 1000), issue=28)]


def _head_to_head(
    by_scheduler: dict[str, JSON], name: str, latency: str, p99: Getter, *, issue: int
) -> list[TargetVerdict]:
    """A workload's throughput at least kube-scheduler's, its p99 (ms, read by ``p99``) at most
    kube-scheduler's, and less scheduler CPU per bound pod."""
    versus = f"{name}: throughput at least kube-scheduler's"
    cpu = f"{name}: scheduler CPU ms per bound pod lower than kube-scheduler's"
    verdicts = [_unmeasured(t, issue=issue) for t in (versus, latency, cpu)]
    ours, theirs = by_scheduler.get("plumb"), by_scheduler.get("kube-scheduler")
    if ours is None or theirs is None:
        return verdicts
    mine, other = f"{ours['timing']['throughput']:.1f}", f"{theirs['timing']['throughput']:.1f}"
    ok = float(mine) >= float(other)
    verdicts[0] = _check(versus, f"{mine} vs {other} pods/s", ok, issue=issue)
    waits = [p99(ours), p99(theirs)]
    if _finite(waits[0]) and _finite(waits[1]):
        mine, other = f"{waits[0]:.0f}", f"{waits[1]:.0f}"
        ok = float(mine) <= float(other)
        verdicts[1] = _check(latency, f"{mine} vs {other} ms", ok, issue=issue)
    per_pod = [cpu_ms_per_pod(ours), cpu_ms_per_pod(theirs)]
    if _finite(per_pod[0]) and _finite(per_pod[1]):
        mine, other = f"{per_pod[0]:.2f}", f"{per_pod[1]:.2f}"
        ok = float(mine) < float(other)
        verdicts[2] = _check(cpu, f"{mine} vs {other} ms", ok, issue=issue)
    return verdicts


def _xlarge(xlarge: dict[str, JSON]) -> list[TargetVerdict]:
    placed = "xlarge: every pod placed, no violations"
    versus = "xlarge: throughput at least kube-scheduler's"
    quality = "xlarge: placement quality at least as good as kube-scheduler's on every figure"
    ours, theirs = xlarge.get("plumb"), xlarge.get("kube-scheduler")
    verdicts = [_unmeasured(t, issue=16) for t in (placed, versus, quality)]
    if ours is not None:
        q = ours["quality"]
        violations = _violations(ours)
        figures = f"placed {q['placed']} of {q['measured_pods']}; violations {violations:.0f}"
        ok = q["placed"] == q["measured_pods"] and violations == 0
        verdicts[0] = _check(placed, figures, ok, issue=16)
    if ours is not None and theirs is not None:
        mine, other = ours["timing"]["throughput"], theirs["timing"]["throughput"]
        shown, shown_other = f"{mine:.1f}", f"{other:.1f}"
        figures = f"{shown} vs {shown_other} pods/s"
        verdicts[1] = _check(versus, figures, float(shown) >= float(shown_other), issue=16)
        figures, worse = _compare_placement(ours, theirs)
        verdicts[2] = _check(quality, figures, not worse, issue=16)
    return verdicts


def _issue_30(kernel: Sequence[JSON]) -> list[TargetVerdict]:
    """The Python plugins' cost at 5,000 nodes: what the kernel's batches gain with a plugin's
    score (the row with it beside the row without; a negative difference counts as 0) plus the
    example Score plugin's steady call per pod (each part compared as printed; a cycle's first
    call and the PodView are shown beside, not in the sum); and every measured example plugin
    called once per pod."""
    cost = (
        f"a vectorised example plugin adds at most {PLUGIN_MAX_US:.0f} µs per pod at "
        f"{PLUGIN_NODES:,} nodes"
    )
    once = "a vectorised example plugin is called once per pod, not per node"
    verdicts = [_unmeasured(cost, issue=30), _unmeasured(once, issue=30)]
    plain = _kernel_row(kernel, PLUGIN_NODES)
    scored = next((k for k in kernel if k["nodes"] == PLUGIN_NODES and k.get("extension")), None)
    if scored is None:
        return verdicts
    plugins = scored.get("plugins") or []
    measured = [p for p in plugins if p.get("version") is not None]
    score = next((p for p in measured if p["plugin"] == PLUGIN_SCORE), None)
    if plain is not None and score is not None and score["steady_us"] is not None:
        before, after = (float(f"{r['numba_batch_us']:.1f}") for r in (plain, scored))
        difference = round(after - before, 1)
        kernel_part = max(difference, 0.0)
        call = round(score["steady_us"], 1)
        total = round(kernel_part + call, 1)
        counted = f"{kernel_part:.1f}" if difference >= 0 else f"{difference:+.1f}, counted 0.0"
        figures = (
            f"{total:.1f} µs/pod = kernel {counted} (batches of {scored['batch_size']}: "
            f"{before:.1f} → {after:.1f}) + {PLUGIN_SCORE}'s "
            f"call {call:.1f}; beside the sum: its first call of a cycle "
            f"{score['first_us']:,.0f} µs ({score['first_us'] / score['cycle']:.1f} per pod of "
            f"a cycle of {score['cycle']}), the PodView {score['pod_view_us']:.1f} per pod"
        )
        verdicts[0] = _check(cost, figures, total <= PLUGIN_MAX_US, issue=30)
    if measured:
        parts = [
            f"{p['plugin']} {count} {point} calls for {p['pods']} pods"
            for p in measured
            for point, count in p["calls"].items()
        ]
        ok = all(p["calls"] and set(p["calls"].values()) == {p["pods"]} for p in measured)
        missing = [p["plugin"] for p in plugins if p.get("version") is None]
        figures = "; ".join(parts) + f" ({PLUGIN_NODES:,} nodes)"
        if missing:
            figures += f" (not installed: {', '.join(missing)})"
        verdicts[1] = _check(once, figures, ok, issue=30)
    return verdicts


def _tracing_cost(
    sections: Sequence[tuple[str, dict[str, JSON]]],
) -> tracingcost.TracingCost | None:
    workloads = dict(sections)
    return tracingcost.cost(
        workloads.get(UNTRACED_WORKLOAD, {}).get("plumb"),
        workloads.get(TRACED_WORKLOAD, {}).get("plumb"),
    )


def _issue_31(found: tracingcost.TracingCost | None, settle_seconds: float | None) -> TargetVerdict:
    """Tracing on at 10% adds at most 10% scheduler CPU per bound pod in the basic workload
    (the settle after the phase counted in both runs: the last spans are exported in it)."""
    target = (
        f"tracing on at 10% adds at most {tracingcost.MAX_INCREASE_PERCENT:.0f}% CPU per pod in "
        "the basic workload"
    )
    if found is None:
        return _unmeasured(target, issue=31)
    return _check(target, tracingcost.figures(found, settle_seconds), found.met, issue=31)


def _xlarge_kernel(row: JSON | None) -> TargetVerdict:
    target = (
        f"kernel: at most {XLARGE_KERNEL_MAX_US:.0f} µs per pod at {XLARGE_KERNEL_NODES:,} nodes"
    )
    if row is None:
        return _unmeasured(target, issue=16)
    batch = row["numba_batch_us"]
    figures = (
        f"{batch:.1f} µs/pod in batches of {row['batch_size']} "
        f"({row['numba_single_us']:.1f} one pod per call)"
    )
    return _check(target, figures, round(batch, 1) <= XLARGE_KERNEL_MAX_US, issue=16)


def _throughput(basic: dict[str, JSON]) -> list[TargetVerdict]:
    versus = "basic: throughput at least 1.5x kube-scheduler's"
    ceiling = "basic: throughput at least 70% of the ceiling's"
    plumb_run, kube_run, ceiling_run = (basic.get(s) for s in SCHEDULERS)
    verdicts = [_unmeasured(versus), _unmeasured(ceiling)]
    if plumb_run is None:
        return verdicts
    ours = plumb_run["timing"]["throughput"]
    if kube_run is not None and kube_run["timing"]["throughput"] > 0:
        theirs = kube_run["timing"]["throughput"]
        ratio = round(ours / theirs, 2)
        figures = f"{ours:.1f} vs {theirs:.1f} pods/s: {ratio:.2f}x"
        verdicts[0] = _check(versus, figures, ratio >= 1.5)
    share = plumb_run.get("ceiling_share")
    if ceiling_run is not None and _finite(share):
        limit = ceiling_run["timing"]["throughput"]
        figures = f"{ours:.1f} of {limit:.1f} pods/s: {share:.1f}%"
        verdicts[1] = _check(ceiling, figures, round(share, 1) >= 70.0)
    return verdicts


def _latency(name: str, by_scheduler: dict[str, JSON]) -> TargetVerdict:
    target = f"{name}: p99 latency at most kube-scheduler's"
    ours, theirs = (_p99_ms(by_scheduler.get(s)) for s in SCHEDULERS[:2])
    if ours is None or theirs is None:
        return _unmeasured(target)
    return _check(target, f"{ours:.0f} vs {theirs:.0f} ms", round(ours) <= round(theirs))


def _p99_ms(result: JSON | None) -> float | None:
    value = None if result is None else result["timing"]["latency_p99"]
    return value * 1000 if _finite(value) else None


def _placement(name: str, by_scheduler: dict[str, JSON]) -> TargetVerdict:
    target = f"{name}: placement at least as good as kube-scheduler's, no violations"
    ours, theirs = by_scheduler.get("plumb"), by_scheduler.get("kube-scheduler")
    if ours is None or theirs is None:
        return _unmeasured(target)
    figures, worse = _compare_placement(ours, theirs)
    return _check(target, figures, not worse)


def _compare_placement(ours: JSON, theirs: JSON) -> tuple[str, list[str]]:
    """The placement figures side by side (as printed), and those on which plumb's is worse
    (plumb's violations count as worse unless zero)."""
    # (figure, plumb, kube-scheduler, format, True when higher is better)
    compared: list[tuple[str, float | None, float | None, str, bool]] = [
        ("placed", ours["quality"]["placed"], theirs["quality"]["placed"], "{:.0f}", True),
        ("max skew", _max_skew(ours), _max_skew(theirs), "{:.0f}", False),
        (
            "on a preferred node (%)",
            _scaled(ours["quality"]["preferred_share"], 100),
            _scaled(theirs["quality"]["preferred_share"], 100),
            "{:.1f}",
            True,
        ),
        (
            "cpu utilisation stddev",
            ours["quality"]["cpu_utilisation_stddev"],
            theirs["quality"]["cpu_utilisation_stddev"],
            "{:.4f}",
            False,
        ),
    ]
    violations = _violations(ours)
    parts, worse = [f"violations {violations:.0f}"], [] if violations == 0 else ["violations"]
    for label, mine, other, fmt, higher in compared:
        if not (_finite(mine) and _finite(other)):
            continue
        shown, shown_other = fmt.format(mine), fmt.format(other)
        parts.append(f"{label} {shown} vs {shown_other}")
        if float(shown) != float(shown_other) and (float(shown) > float(shown_other)) != higher:
            worse.append(label)
    figures = "; ".join(parts) + (f" (worse: {', '.join(worse)})" if worse else "")
    return figures, worse


def _kernel(row: JSON | None) -> list[TargetVerdict]:
    speed = f"kernel: at most {KERNEL_MAX_US:.0f} µs per pod at {KERNEL_NODES:,} nodes"
    versus = f"kernel: at least {KERNEL_MIN_SPEEDUP:.0f}x the reference at {KERNEL_NODES:,} nodes"
    if row is None:
        return [_unmeasured(speed), _unmeasured(versus)]
    batch, single = row["numba_batch_us"], row["numba_single_us"]
    speedup = row["batch_speedup"]
    return [
        _check(
            speed,
            f"{batch:.1f} µs/pod in batches of {row['batch_size']} ({single:.1f} one pod per call)",
            round(batch, 1) <= KERNEL_MAX_US,
        ),
        _check(
            versus,
            f"{speedup:,.0f}x in batches ({row['single_speedup']:,.0f}x one pod per call; "
            f"reference {row['reference_us']:,.0f} µs/pod)",
            round(speedup) >= KERNEL_MIN_SPEEDUP,
        ),
    ]


def _memory(large: dict[str, JSON]) -> TargetVerdict:
    target = "large (5,000 nodes, 10,000 pods): plumb's peak RSS at most kube-scheduler's"
    rss = _usage("peak_rss_bytes", 1 / 1024**2)
    ours, theirs = (rss(large[s]) if s in large else None for s in SCHEDULERS[:2])
    if ours is None or theirs is None:
        return _unmeasured(target)
    return _check(target, f"{ours:.0f} vs {theirs:.0f} MiB", round(ours) <= round(theirs))


def _targets_section(verdicts: Sequence[TargetVerdict], *, quick: bool) -> list[str]:
    statuses = (MET, NOT_MET, NOT_MEASURED)
    counts = {status: sum(1 for v in verdicts if v.status == status) for status in statuses}
    lines = [
        "## Targets",
        "",
        "Each target of issues 4, 16, 27, 28, 30 and 31, judged from this run's figures below "
        f"({counts[MET]} met, {counts[NOT_MET]} not met, {counts[NOT_MEASURED]} not measured).",
        "",
    ]
    if quick:
        lines += [
            "A quick run judges smoke-test sizes: these verdicts say little about the full-size "
            "targets.",
            "",
        ]
    lines += ["| issue | target | this run | verdict |", "|---|---|---|---|"]
    for verdict in verdicts:
        status = verdict.status if verdict.status == NOT_MEASURED else f"**{verdict.status}**"
        lines.append(f"| {verdict.issue} | {verdict.target} | {verdict.figures} | {status} |")
    return [*lines, ""]


def _plots(directory: Path, name: str, by_scheduler: dict[str, JSON]) -> list[Path]:
    # Imported here, not at the top: `plumb run` imports the CLI, and the CLI imports this
    # module, so a top-level import would put matplotlib on the scheduler's start-up path.
    import matplotlib

    matplotlib.use("Agg")  # no display: write PNG files only
    from matplotlib import pyplot

    bound_path = directory / f"{name}-bound.png"
    figure, axes = pyplot.subplots(figsize=(7, 4))
    for scheduler in SCHEDULERS:
        result = by_scheduler.get(scheduler)
        if result is None:
            continue
        curve = result["bound_curve"]
        axes.step(curve, range(1, len(curve) + 1), where="post", label=scheduler)
    drain = any(r.get("drain") for r in by_scheduler.values())
    axes.set_xlabel(
        "seconds after the scheduler started"
        if drain
        else "seconds after the first measured pod was created"
    )
    axes.set_ylabel("measured pods bound")
    axes.set_title(f"{name}: pods bound over time")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(bound_path, dpi=100)
    pyplot.close(figure)

    latency_path = directory / f"{name}-latency.png"
    figure, axes = pyplot.subplots(figsize=(7, 4))
    for scheduler in SCHEDULERS:
        result = by_scheduler.get(scheduler)
        if result is None or not result["latencies"]:
            continue
        values = [v * 1000 for v in result["latencies"]]
        count = len(values)
        axes.step(values, [(i + 1) / count for i in range(count)], where="post", label=scheduler)
    axes.set_xlabel("scheduler start → bound (ms)" if drain else "create → bound latency (ms)")
    axes.set_ylabel("share of measured pods")
    axes.set_title(f"{name}: latency CDF")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(latency_path, dpi=100)
    pyplot.close(figure)
    return [bound_path, latency_path]
