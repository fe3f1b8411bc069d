"""What tracing costs plumb: its runs of a workload with tracing on beside its runs of the same
workload with tracing off (issue 31), in CPU per bound pod and p99 latency, with the spans the
bench's OTLP receiver got and those plumb dropped.

The traced workload alternates the two (off on, on off, ...; ``benchruns.tracing_order``) and
the medians are compared: a single pair differs by several percent with nothing changed (the
pods' creation rate, and so plumb's batch sizes, vary from run to run on 2 shared CPUs). A
result without that alternation (an older benchmarks.json) is compared with the baseline
workload's run.

The CPU compared counts the settle after the measured phase as well (``settled_cpu_seconds``):
plumb exports its spans every 2 s, so the spans of the phase's last seconds leave after it, and
a run of a few seconds would otherwise leave a good share of the export out. The measured phase
alone is shown beside. Pure: it reads benchmarks.json's results.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Any

JSON = dict[str, Any]
MAX_INCREASE_PERCENT = 10.0
"""Issue 31: tracing on at 10% adds at most this much scheduler CPU per bound pod."""
TEST = "tests/unit/observability/test_spans_off.py"
"""Where "tracing off: no exporter thread, OpenTelemetry not imported" is checked."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TracingCost:
    """plumb with tracing off (the baseline workload's run) and on (the traced one's)."""

    baseline: str
    traced: str
    ratio: float
    cpu_off: float
    """Scheduler CPU ms per bound pod, the settle included when both runs have it."""
    cpu_on: float
    settled: bool
    """Whether cpu_off and cpu_on count the settle after the measured phase."""
    phase_off: float | None
    """The measured phase alone (the per-workload tables' figure)."""
    phase_on: float | None
    p99_off_ms: float | None
    p99_on_ms: float | None
    throughput_off: float
    throughput_on: float
    spans: int | None
    requests: int | None
    kib: float | None
    unreadable: int | None
    dropped: float | None
    """plumb_trace_spans_dropped_total after the phase; None when /metrics was not read."""
    runs: tuple[JSON, ...] = ()
    """The alternation's runs in order (``benchruns.alternated``); empty: one run each."""

    @property
    def increase_percent(self) -> float:
        """On over off, as printed (2 decimals), in percent (rounded to 0.1)."""
        off, on = float(f"{self.cpu_off:.2f}"), float(f"{self.cpu_on:.2f}")
        return round(100 * (on / off - 1), 1) if off > 0 else math.inf

    @property
    def met(self) -> bool:
        return self.increase_percent <= MAX_INCREASE_PERCENT


def _cpu_ms(result: JSON, *, settled: bool) -> float | None:
    bound = result["timing"]["bound"]
    seconds = (
        result.get("settled_cpu_seconds")
        if settled
        else (result.get("usage") or {}).get("cpu_seconds")
    )
    if seconds is None or not bound:
        return None
    return 1000.0 * float(seconds) / int(bound)


def _p99_ms(result: JSON) -> float | None:
    value = result["timing"].get("latency_p99")
    return 1000 * value if value is not None and math.isfinite(value) else None


def _median(values: Sequence[float | None]) -> float | None:
    found = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(found) if found else None


def _alternated(traced: JSON) -> TracingCost | None:
    """The medians of a traced workload's runs with tracing off and on."""
    runs = tuple(traced["alternation"])
    sides = [[run for run in runs if run["tracing"] is on] for on in (False, True)]
    settled = all(run.get("settled_cpu_ms_per_pod") is not None for run in runs)
    key = "settled_cpu_ms_per_pod" if settled else "cpu_ms_per_pod"
    off, on = (_median([run.get(key) for run in side]) for side in sides)
    if off is None or on is None:
        return None
    phase_off, phase_on = (_median([run.get("cpu_ms_per_pod") for run in side]) for side in sides)
    p99_off, p99_on = (_median([run.get("latency_p99") for run in side]) for side in sides)
    rate_off, rate_on = (_median([run.get("throughput") for run in side]) for side in sides)
    tracing = traced.get("tracing") or {}
    received = tracing.get("bytes")
    return TracingCost(
        baseline=f"{traced['workload']}, tracing off",
        traced=traced["workload"],
        ratio=tracing.get("ratio", math.nan),
        cpu_off=off,
        cpu_on=on,
        settled=settled,
        phase_off=phase_off,
        phase_on=phase_on,
        p99_off_ms=1000 * p99_off if p99_off is not None else None,
        p99_on_ms=1000 * p99_on if p99_on is not None else None,
        throughput_off=rate_off or math.nan,
        throughput_on=rate_on or math.nan,
        spans=tracing.get("spans"),
        requests=tracing.get("requests"),
        kib=received / 1024 if received is not None else None,
        unreadable=tracing.get("unreadable"),
        dropped=tracing.get("dropped"),
        runs=runs,
    )


def cost(baseline: JSON | None, traced: JSON | None) -> TracingCost | None:
    """The comparison of plumb's runs (benchmarks.json results): the traced workload's runs
    with tracing off and on (their medians) when it alternated them, else ``baseline`` (tracing
    off) beside ``traced``; None when a run is missing or has no CPU figure."""
    if traced is not None and traced.get("alternation"):
        return _alternated(traced)
    if baseline is None or traced is None:
        return None
    runs = (baseline, traced)
    settled = all(_cpu_ms(r, settled=True) is not None for r in runs)
    off, on = (_cpu_ms(r, settled=settled) for r in runs)
    if off is None or on is None:
        return None
    tracing = traced.get("tracing") or {}
    received = tracing.get("bytes")
    return TracingCost(
        baseline=baseline["workload"],
        traced=traced["workload"],
        ratio=tracing.get("ratio", math.nan),
        cpu_off=off,
        cpu_on=on,
        settled=settled,
        phase_off=_cpu_ms(baseline, settled=False),
        phase_on=_cpu_ms(traced, settled=False),
        p99_off_ms=_p99_ms(baseline),
        p99_on_ms=_p99_ms(traced),
        throughput_off=baseline["timing"]["throughput"],
        throughput_on=traced["timing"]["throughput"],
        spans=tracing.get("spans"),
        requests=tracing.get("requests"),
        kib=received / 1024 if received is not None else None,
        unreadable=tracing.get("unreadable"),
        dropped=tracing.get("dropped"),
    )


def figures(found: TracingCost, settle_seconds: float | None = None) -> str:
    """The target row's figures: CPU per pod off and on, the difference, p99, spans, drops."""
    what = "phase + settle" if found.settled else "measured phase"
    if found.settled and settle_seconds is not None:
        what = f"phase + {settle_seconds:g} s settle"
    if found.runs:
        what += f", medians of {len(found.runs) // 2} runs each"
    text = (
        f"{found.cpu_off:.2f} → {found.cpu_on:.2f} ms/pod ({what}): {found.increase_percent:+.1f}%"
    )
    if found.settled and found.phase_off is not None and found.phase_on is not None:
        text += f" (measured phase alone {found.phase_off:.2f} → {found.phase_on:.2f})"
    text += f"; p99 {_whole(found.p99_off_ms)} → {_whole(found.p99_on_ms)} ms"
    text += f"; {_whole(found.spans)} spans received, {_whole(found.dropped)} dropped"
    return text


def _whole(value: float | None) -> str:
    return f"{value:.0f}" if value is not None else "-"


def _fixed(value: float | None, fmt: str) -> str:
    return fmt.format(value) if value is not None and math.isfinite(value) else "-"


def _scaled(value: float | None, factor: float) -> float | None:
    return value * factor if value is not None else None


def _change(off: float | None, on: float | None, fmt: str) -> str:
    if off is None or on is None:
        return "-"
    shown_off, shown_on = float(fmt.format(off)), float(fmt.format(on))
    if not shown_off:
        return "-"
    return f"{100 * (shown_on / shown_off - 1):+.1f}%"


def section(found: TracingCost | None, settle_seconds: float | None = None) -> list[str]:
    """The report's section: the two runs side by side, what the receiver got, what plumb
    dropped; a line saying it was not measured when a run is missing."""
    lines = ["## Tracing cost", ""]
    if found is None:
        return [
            *lines,
            "Not measured in this run: it needs basic (tracing off) and basic-traced (tracing "
            f"on) both. Tracing off (no exporter thread, OpenTelemetry not imported) is "
            f"checked by `{TEST}`.",
            "",
        ]
    settle = f"{settle_seconds:g} s" if settle_seconds is not None else "the settle"
    rows: list[tuple[str, float | None, float | None, str]] = []
    if found.settled:
        label = f"scheduler CPU ms per bound pod, phase + {settle} after"
        rows.append((label, found.cpu_off, found.cpu_on, "{:.2f}"))
    rows += [
        (
            "scheduler CPU ms per bound pod, measured phase",
            found.phase_off,
            found.phase_on,
            "{:.2f}",
        ),
        ("latency p99 (ms)", found.p99_off_ms, found.p99_on_ms, "{:.0f}"),
        ("throughput (pods/s)", found.throughput_off, found.throughput_on, "{:.1f}"),
    ]
    receiver = (
        f"head sampling ratio {found.ratio:g}, spans over OTLP/HTTP to a receiver on a thread of "
        "the bench process, so its work is the harness's CPU, not plumb's"
    )
    settling = (
        "plumb exports every 2 s, so the CPU judged counts the settle after the measured phase "
        "as well, in every run; the measured phase alone is beside it."
    )
    off_test = (
        f"Tracing off (no exporter thread, OpenTelemetry not imported) is checked by `{TEST}`."
    )
    if found.runs:
        each = len(found.runs) // 2
        lines += [
            f"plumb on {found.traced}'s workload {len(found.runs)} times, tracing off and on in "
            f"turn (off on, on off, ...: a drift over the bench weighs on both alike; on: "
            f"{receiver}); the medians of the {each} runs each way are compared: one pair alone "
            f"differs by several percent with nothing changed. {settling} {off_test}",
            "",
            "| | tracing off (median) | tracing on (median) | change |",
        ]
    else:
        lines += [
            f"plumb on {found.baseline}'s workload twice: tracing off (the {found.baseline} run "
            f"above) and on ({found.traced}: {receiver}). {settling} One run each: a few percent "
            f"either way is noise. {off_test}",
            "",
            f"| | {found.baseline} (tracing off) | {found.traced} (tracing on) | change |",
        ]
    lines.append("|---|---:|---:|---:|")
    for label, off, on, fmt in rows:
        lines.append(
            f"| {label} | {_fixed(off, fmt)} | {_fixed(on, fmt)} | {_change(off, on, fmt)} |"
        )
    if found.runs:
        lines += [
            "",
            "| run | tracing | CPU ms/pod, phase + settle | measured phase | p99 (ms) | "
            "throughput (pods/s) | pods created/s | spans received |",
            "|---:|---|---:|---:|---:|---:|---:|---:|",
        ]
        for index, run in enumerate(found.runs, start=1):
            lines.append(
                f"| {index} | {'on' if run['tracing'] else 'off'} "
                f"| {_fixed(run.get('settled_cpu_ms_per_pod'), '{:.2f}')} "
                f"| {_fixed(run.get('cpu_ms_per_pod'), '{:.2f}')} "
                f"| {_fixed(_scaled(run.get('latency_p99'), 1000), '{:.0f}')} "
                f"| {_fixed(run.get('throughput'), '{:.1f}')} "
                f"| {_fixed(run.get('creation_rate'), '{:.0f}')} "
                f"| {_whole(run.get('spans')) if run['tracing'] else '-'} |"
            )
    kib = f"{found.kib:.0f} KiB" if found.kib is not None else "- KiB"
    which = " (the traced run of median CPU)" if found.runs else ""
    lines += [
        "",
        f"- spans received{which}: {_whole(found.spans)} in {_whole(found.requests)} requests "
        f"({kib}); requests unreadable or refused: {_whole(found.unreadable)}",
        f"- plumb_trace_spans_dropped_total after the phase: {_whole(found.dropped)}",
        "",
    ]
    return lines
