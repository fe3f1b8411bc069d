"""The kernel micro-benchmark in ``plumb bench``: µs per pod of the numba kernel (one pod per call
and batches) and of the pure-Python reference at 500, 5,000 and 15,000 nodes, and at 5,000 nodes
with the Python score plugins' score too, where the installed example plugins' own calls are
timed and counted as well (``plumb_dev.bench.plugintimings``, in the same child).

The measuring is ``plumb_dev.bench.kerneltimings`` (read its docstring for the cluster and the
method), run as a child process like the schedulers under test: the bench never imports the
scheduler's layers. Each size comes back as one JSON line, read here into a ``KernelFigures``.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from typing import Any

MODULE = "plumb_dev.bench.kerneltimings"
EXTENSION = "extension"  # kerneltimings.EXTENSION: the bench does not import the child's module
EXTENSION_WEIGHT = 2  # kerneltimings.EXTENSION_WEIGHT, for the words
EXTENSION_LABEL = ", with a Python plugin's score"  # after the nodes of such a row
TIMEOUT_SECONDS = 1800.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Size:
    """One size to measure: nodes, pods timed with numba, and the first of them timed with the
    reference too (two to three orders of magnitude slower, so fewer at the larger sizes);
    ``extension``: with a Python score plugin's score (kerneltimings.EXTENSION_WEIGHT)."""

    nodes: int
    pods: int
    reference_pods: int
    extension: bool = False


# The row with the extension score follows the same size without (and the largest size comes
# last: the report says what its filters rejected).
FULL = (
    Size(nodes=500, pods=256, reference_pods=32),
    Size(nodes=5000, pods=256, reference_pods=8),
    Size(nodes=5000, pods=256, reference_pods=8, extension=True),
    Size(nodes=15000, pods=256, reference_pods=4),
)
QUICK = (Size(nodes=500, pods=64, reference_pods=8),)
REPEATS = {True: 3, False: 10}  # by quick: enough runs for each call to find a quiet moment


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelFigures:
    """One size's figures (kerneltimings.Measurement's fields): µs per pod, each call at its
    fastest of ``repeats`` runs, and what the filters did."""

    nodes: int
    resident_pods: int
    pods: int
    batch_size: int
    reference_pods: int
    repeats: int
    numba_single_us: float
    numba_batch_us: float
    reference_us: float
    placed: int
    feasible_share: float
    rejected_share: dict[str, float]
    extension: bool = False  # (the figures of earlier runs have none)
    # With the extension: each example plugin's calls (plugintimings.CallTimings' fields).
    plugins: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def single_speedup(self) -> float:
        return self.reference_us / self.numba_single_us

    @property
    def batch_speedup(self) -> float:
        return self.reference_us / self.numba_batch_us


class KernelBenchError(RuntimeError):
    """The micro-benchmark failed: numba and the reference disagreed, or the child broke."""


def sizes(*, quick: bool) -> tuple[Size, ...]:
    return QUICK if quick else FULL


def run(
    selected: tuple[Size, ...] | list[Size],
    *,
    repeats: int,
    batch_size: int | None = None,
    timeout: float = TIMEOUT_SECONDS,
) -> list[KernelFigures]:
    """Measure every size in a child process; the child's stderr passes through to ours."""
    command = [sys.executable, "-m", MODULE, "--repeats", str(repeats)]
    if batch_size is not None:  # else the scheduler's batch, which the child knows
        command += ["--batch-size", str(batch_size)]
    for size in selected:
        extension = f":{EXTENSION}" if size.extension else ""
        command += ["--size", f"{size.nodes}:{size.pods}:{size.reference_pods}{extension}"]
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as error:
        raise KernelBenchError(
            f"the kernel micro-benchmark took longer than {timeout:.0f} s: {' '.join(command)}"
        ) from error
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-5:]
        raise KernelBenchError(
            f"the kernel micro-benchmark exited with {done.returncode} after "
            f"{time.monotonic() - started:.0f} s: {' / '.join(said) or 'no message'} "
            f"(command: {' '.join(command)})"
        )
    return [KernelFigures(**json.loads(line)) for line in done.stdout.splitlines() if line]


def as_dict(figures: KernelFigures) -> dict[str, Any]:
    """The record with its speed-ups, as the report and benchmarks.json take it."""
    return {
        **dataclasses.asdict(figures),
        "single_speedup": figures.single_speedup,
        "batch_speedup": figures.batch_speedup,
    }


METHOD = (
    "How it measures (`python -m plumb_dev.bench.kerneltimings`, a child process of the bench): "
    "the kernel's own input arrays for one cluster at every size, the ones the framework "
    "compiles for it (a unit test holds them equal): nodes in 5 zones and of 4 sizes, some "
    "tainted, 4 running pods on each from 6 apps; then replicas of a web pod with requests, a "
    "toleration, required and preferred node affinity, spread over zones (DoNotSchedule) and "
    "hosts (ScheduleAnyway), required anti-affinity to cache pods on the host, preferred "
    "affinity to api pods in the zone and a host port, which database pods keep off their "
    "hosts: every filter rejects some nodes and every score plugin has something to score. "
    "Pods are decided in order, each on the cluster the earlier ones left: one pod per call "
    "(`compiled.run` on a batch of one, as for a pod with host ports), in batches of "
    "{batch} (as the scheduler pops them), and one pod per call of the pure-Python reference "
    "for the first pods only. Each call is timed alone, the Python wrapper and its output "
    "arrays included; each mode runs {repeats} times after an untimed warm-up run and each "
    "call counts at its fastest (other processes share the CPUs; every run does the same "
    "work). The numba kernel's arrays must equal the reference's for every pod the reference "
    "decides, and the batches must choose the nodes the single calls chose, or the bench "
    "fails. The row marked with a Python plugin's score measures the same pods with the score of "
    f"one Python score plugin weighing {EXTENSION_WEIGHT} (random, 0-100 per node) added to each "
    "feasible node's total, as the compile step hands it to the kernel (`Batch.extension_score`). "
    "At that size the same child then calls the installed example plugins through plumb's own "
    "path (`python -m plumb_dev.bench.plugintimings`): PriceLabel at Score (weight "
    f"{EXTENSION_WEIGHT}) and MaintenanceWindow at Filter, each enabled alone, over the same "
    "number of nodes as API node bodies (a price label on most, a maintenance-window annotation "
    "on every 10th, open on half of those) read into plumb's cache, for the same number of pods "
    "in cycles of {batch} pods, each cycle with one NodeView of the snapshot as the scheduler "
    "makes one per batch. Each pod's `judgements.judge(pod_view, node_view, plugins, checked)` "
    "is timed alone, each call at its fastest of the runs after an untimed one; a cycle's first "
    "call (with its NodeView made) builds the columns the cycle keeps and is reported apart, "
    "per cycle; the others are the steady cost per pod. The PodView plumb makes per pod for all "
    "its plugins is timed apart too. The untimed run counts the calls into each plugin's method "
    "(once per pod, not per node: calls = pods) and fails the bench on a wrong judgement. An "
    "example not installed is not measured."
)


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table of the micro-benchmark's figures (as_dict's), a row per size."""
    batch = rows[0]["batch_size"] if rows else "-"
    lines = [
        f"| nodes | numba, one pod per call (µs/pod) | numba, batches of {batch} (µs/pod) "
        "| reference (µs/pod) | speed-up vs reference, one pod per call | "
        "speed-up vs reference, batches | pods timed: numba / reference | "
        "feasible nodes per pod (%) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        nodes = f"{row['nodes']:,}" + (EXTENSION_LABEL if row.get("extension") else "")
        lines.append(
            f"| {nodes} | {row['numba_single_us']:.1f} | {row['numba_batch_us']:.1f} "
            f"| {row['reference_us']:,.0f} | {row['single_speedup']:,.0f}x "
            f"| {row['batch_speedup']:,.0f}x | {row['pods']} / {row['reference_pods']} "
            f"| {100 * row['feasible_share']:.1f} |"
        )
    return lines


def extension_cost(rows: list[dict[str, Any]]) -> list[str]:
    """What the Python score plugins' score adds, per size measured with and without it, and
    what calling the example plugins costs, in words: a sentence and a blank line per size
    (none when no size was measured both ways), then the plugins' calls as a list."""
    lines = []
    for row in rows:
        plain = next(
            (r for r in rows if r["nodes"] == row["nodes"] and not r.get("extension")), None
        )
        if not row.get("extension") or plain is None:
            continue
        # The differences of the figures as printed (report.py's issue-30 target takes these).
        single, batch = (
            float(f"{row[key]:.1f}") - float(f"{plain[key]:.1f}")
            for key in ("numba_single_us", "numba_batch_us")
        )
        lines += [
            f"At {row['nodes']:,} nodes, a Python plugin's score adds {single:+.1f} µs per pod "
            f"one pod per call ({plain['numba_single_us']:.1f} → {row['numba_single_us']:.1f}) "
            f"and {batch:+.1f} in batches of {row['batch_size']} "
            f"({plain['numba_batch_us']:.1f} → {row['numba_batch_us']:.1f}).",
            "",
            *plugin_calls(row),
        ]
    return lines


def plugin_calls(row: dict[str, Any]) -> list[str]:
    """The example plugins' calls measured with a row (its ``plugins``), in words: an
    introduction, a list item per plugin and a blank line (none when the row has none)."""
    plugins = row.get("plugins") or []
    if not plugins:
        return []
    first = plugins[0]
    lines = [
        f"The example plugins called through plumb's path at {first['nodes']:,} nodes, each "
        f"enabled alone (`judgements.judge`, {first['pods']} pods in cycles of "
        f"{first['cycle']}, one NodeView per cycle):",
        "",
    ]
    for plugin in plugins:
        if plugin.get("version") is None:
            lines.append(f"- {plugin['plugin']} ({plugin['point']}): not installed, not measured.")
            continue
        calls = ", ".join(f"{count} {point} calls" for point, count in plugin["calls"].items())
        steady = plugin["steady_us"]
        lines.append(
            f"- {plugin['plugin']} {plugin['version']} ({plugin['point']}): "
            + (f"{steady:.1f} µs per pod; " if steady is not None else "")
            + f"the first call of a cycle {plugin['first_us']:,.0f} µs (its columns built, "
            f"{plugin['first_us'] / plugin['cycle']:.1f} µs per pod of a full cycle); "
            f"{calls} for {plugin['pods']} pods; the pod's PodView, made apart, "
            f"{plugin['pod_view_us']:.1f} µs."
        )
    return [*lines, ""]


def rejections(row: dict[str, Any]) -> str:
    """What the filters rejected at one size, in words."""
    shares = [
        f"{name.replace('_', ' ')} {100 * share:.1f}%"
        for name, share in row["rejected_share"].items()
        if share > 0
    ]
    return (
        f"At {row['nodes']:,} nodes ({row['resident_pods']:,} running pods), the share of "
        f"(pod, node) pairs each filter rejected: {', '.join(shares)}; "
        f"{row['placed']} of {row['pods']} pods placed."
    )
