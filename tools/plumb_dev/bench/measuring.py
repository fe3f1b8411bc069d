"""What a run measured: create and bound times per pod turned into throughput and latency (for a
drain, from the scheduler's start), the CPU seconds and peak RSS of the scheduler process read
from /proc, and what one bound pod cost.

The timing math is pure; only ProcessMeter reads /proc.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

STEADY_FROM = 0.10
STEADY_TO = 0.90
"""The steady-state window: from the 10% to the 90% bound pod, past start-up and the tail."""


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (fraction in [0, 1]) of values; nan when there are none."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction={fraction} must lie in [0, 1] (0.99 is p99)")
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timing:
    """Throughput and latency of one run over its measured pods (seconds, pods per second)."""

    pods: int
    bound: int
    duration: float
    """First create sent → last pod bound."""
    throughput: float
    """Bound pods / duration."""
    steady_throughput: float
    """Pods bound per second between the STEADY_FROM and STEADY_TO bound pod."""
    steady_window: tuple[float, float]
    """That window, in seconds after the first create."""
    latency_p50: float
    latency_p90: float
    latency_p99: float
    creation_rate: float
    """Measured pods created per second: if near throughput, creation was the bottleneck
    (nan for a drain, whose pods were all created before the scheduler started)."""
    origin: str = "create"
    """What times run from: "create" (each pod's create request; the first one for the
    throughput) or "start" (a drain: the scheduler's start, for every pod)."""
    bind_throughput: float | None = None
    """A drain's pods bound per second from the first bind to the last (the start-up left out):
    (bound - 1) / (last bind - first bind). None for the other workloads."""
    first_bind: float | None = None
    """A drain's seconds from the scheduler's start to its first bind."""


def timing(
    created: Mapping[str, float], bound: Mapping[str, float], created_done: Mapping[str, float]
) -> Timing:
    """Timing from per-pod times: created (create request sent), bound (the watch saw
    spec.nodeName), created_done (create answered). Bound pods not in created are ignored."""
    if not created:
        raise ValueError("no measured pods were created; nothing to time")
    start = min(created.values())
    latencies = [bound[name] - created[name] for name in created if name in bound]
    bound_times = sorted(bound[name] - start for name in created if name in bound)
    last_created = max(created_done.values()) - start if created_done else math.nan
    creation_rate = len(created_done) / last_created if last_created > 0 else math.inf
    return _timed(len(created), bound_times, latencies, creation_rate=creation_rate)


def drain_timing(started: float, pods: int, bound: Mapping[str, float]) -> Timing:
    """Timing of a drain: pods measured pods were pending before the scheduler started at
    ``started`` (monotonic); bound holds each measured pod's bound time. Every pod's latency
    and the throughput run from started."""
    if pods <= 0:
        raise ValueError(f"pods={pods}: a drain needs measured pods to time")
    bound_times = sorted(at - started for at in bound.values())
    bind_throughput = None
    if len(bound_times) > 1:
        span = bound_times[-1] - bound_times[0]
        bind_throughput = (len(bound_times) - 1) / span if span > 0 else math.inf
    return _timed(
        pods,
        bound_times,
        bound_times,
        creation_rate=math.nan,
        origin="start",
        bind_throughput=bind_throughput,
        first_bind=bound_times[0] if bound_times else None,
    )


def _timed(
    pods: int,
    bound_times: Sequence[float],
    latencies: Sequence[float],
    *,
    creation_rate: float,
    origin: str = "create",
    bind_throughput: float | None = None,
    first_bind: float | None = None,
) -> Timing:
    """The figures every run has, from its sorted bound times (seconds after its origin) and
    its pods' latencies, with those that depend on how the run was timed."""
    duration = bound_times[-1] if bound_times else math.nan
    throughput = len(bound_times) / duration if bound_times and duration > 0 else 0.0
    steady, window = _steady(bound_times, pods)
    return Timing(
        pods=pods,
        bound=len(bound_times),
        duration=duration,
        throughput=throughput,
        steady_throughput=steady,
        steady_window=window,
        latency_p50=percentile(latencies, 0.50),
        latency_p90=percentile(latencies, 0.90),
        latency_p99=percentile(latencies, 0.99),
        creation_rate=creation_rate,
        origin=origin,
        bind_throughput=bind_throughput,
        first_bind=first_bind,
    )


def _steady(bound_times: Sequence[float], pods: int) -> tuple[float, tuple[float, float]]:
    first = max(0, math.ceil(STEADY_FROM * pods) - 1)
    last = max(0, math.ceil(STEADY_TO * pods) - 1)
    if last >= len(bound_times) or last <= first:
        return 0.0, (math.nan, math.nan)
    begin, end = bound_times[first], bound_times[last]
    if end <= begin:
        # Everything in the window bound within one clock tick: no meaningful rate.
        return math.inf, (begin, end)
    return (last - first) / (end - begin), (begin, end)


def bound_curve(created: Mapping[str, float], bound: Mapping[str, float]) -> list[float]:
    """Seconds after the first create at which each measured pod was bound, ascending."""
    if not created:
        return []
    start = min(created.values())
    return sorted(bound[name] - start for name in created if name in bound)


def latencies(created: Mapping[str, float], bound: Mapping[str, float]) -> list[float]:
    """Create → bound seconds of each bound measured pod, ascending."""
    return sorted(bound[name] - created[name] for name in created if name in bound)


# --- the scheduler process ------------------------------------------------------------------------


def cpu_ms_per_pod(cpu_seconds: float | None, bound: int) -> float | None:
    """Scheduler CPU milliseconds per bound pod; None without a process or a bound pod."""
    if cpu_seconds is None or bound <= 0:
        return None
    return 1000.0 * cpu_seconds / bound


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProcessUsage:
    cpu_seconds: float
    """User + system CPU of the process (all its threads) over the measured phase."""
    peak_rss_bytes: int
    """VmHWM: the resident set's high-water mark since the process started."""


class ProcessMeter:
    """Reads one process's CPU time and peak RSS from /proc/<pid>/stat and status."""

    def __init__(self, pid: int, proc: Path = Path("/proc"), *, since_start: bool = False) -> None:
        """since_start: count the CPU from the process's start (a drain times the scheduler
        from its spawn), not from now."""
        self._dir = proc / str(pid)
        self._ticks = os.sysconf("SC_CLK_TCK")
        self._start_cpu = 0.0 if since_start else self.cpu_seconds()

    def cpu_seconds(self) -> float:
        return parse_cpu_seconds((self._dir / "stat").read_text(), self._ticks)

    def peak_rss_bytes(self) -> int:
        return parse_peak_rss((self._dir / "status").read_text())

    def usage(self) -> ProcessUsage:
        """CPU since this meter was made (or since the process started), and the peak RSS so
        far; call before the process ends."""
        return ProcessUsage(
            cpu_seconds=self.cpu_seconds() - self._start_cpu, peak_rss_bytes=self.peak_rss_bytes()
        )


def parse_cpu_seconds(stat: str, ticks_per_second: int) -> float:
    """utime + stime of a /proc/<pid>/stat line, in seconds.

    The command name (field 2) sits in parentheses and may hold spaces, so fields are counted
    from the last closing parenthesis: utime and stime are fields 14 and 15.
    """
    rest = stat[stat.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state), so field n is rest[n - 3].
    return (int(rest[11]) + int(rest[12])) / ticks_per_second


def parse_peak_rss(status: str) -> int:
    """VmHWM of a /proc/<pid>/status text, in bytes."""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            value, unit = line.split()[1:3]
            if unit != "kB":
                raise ValueError(f"VmHWM in unexpected unit {unit!r}: {line!r}")
            return int(value) * 1024
    raise ValueError("no VmHWM line in /proc/<pid>/status; is this a kernel thread?")
