"""``make metrics-plot``: plumb's /metrics through a short real run, drawn as the Grafana
dashboard's main panels, for docs/observability.md.

The run: a local control plane, 24 nodes in three zones, ``plumb run`` with its metrics port on,
and a workload with a steady stream of pods, a few that fit nowhere, a burst, then a node
joining and pods deleted (cluster events that send the waiting pods back for another try).
The page is scraped every second. The series are computed from the scrapes as the dashboard's
PromQL computes them (rates over a window, ``histogram_quantile``'s interpolation), so the
plot shows what the dashboard would.

The parsing and plotting (``parse``, ``rate``, ``quantile``, ``plot``) are pure and tested on
canned pages; ``main`` needs the control plane and is kept out of ``make test``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import math
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from prometheus_client import parser

from plumb import DEFAULT_SCHEDULER_NAME
from plumb.observability import metrics
from plumb_dev.bench import schedulers
from plumb_dev.cluster.controlplane import building
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, crds, kube

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
WINDOW = 5
"""Scrapes a rate or quantile looks back over (5 s at one scrape a second)."""
DEFAULT_OUT = Path("docs/observability/metrics.png")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scrape:
    at: float
    """Seconds since the run started."""
    samples: Samples


def parse(text: str) -> Samples:
    """Every sample of a /metrics page, by series name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in parser.text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of a series over the label values not given (PromQL's ``sum``)."""
    wanted = set(labels.items())
    return sum(v for (series, have), v in samples.items() if series == name and wanted <= have)


def rate(scrapes: Sequence[Scrape], name: str, **labels: str) -> list[float]:
    """Per second, at each scrape, over the last ``WINDOW`` scrapes (NaN at the first)."""
    out = []
    for i, now in enumerate(scrapes):
        then = scrapes[max(0, i - WINDOW)]
        if now.at <= then.at:
            out.append(math.nan)
            continue
        delta = total(now.samples, name, **labels) - total(then.samples, name, **labels)
        out.append(delta / (now.at - then.at))
    return out


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """PromQL's ``histogram_quantile`` over cumulative (upper bound, count) pairs: linear
    within the bucket that holds the rank, the highest finite bound when it is in +Inf, NaN
    with no observations."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return math.nan
    rank = q * ordered[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def quantile(scrapes: Sequence[Scrape], q: float, histogram: str, **labels: str) -> list[float]:
    """``histogram_quantile(q, sum by (le) (rate(histogram_bucket[window])))`` at each scrape."""
    name = f"{histogram}_bucket"
    out = []
    for i, now in enumerate(scrapes):
        then = scrapes[max(0, i - WINDOW)]
        bounds = {dict(have)["le"] for (series, have) in now.samples if series == name}
        buckets = [
            (
                float(le),
                total(now.samples, name, le=le, **labels)
                - total(then.samples, name, le=le, **labels),
            )
            for le in bounds
        ]
        out.append(histogram_quantile(q, buckets))
    return out


def ratio(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    return [n / d if d else math.nan for n, d in zip(numerators, denominators, strict=True)]


Panel = tuple[str, str, dict[str, list[float]]]
"""A panel's title, its unit, and its lines by legend."""


def panels(scrapes: Sequence[Scrape]) -> list[Panel]:
    """The dashboard's main panels, computed from the scrapes as its PromQL does."""

    def gauge(name: str, label: str, values: Sequence[str]) -> dict[str, list[float]]:
        return {v: [total(s.samples, name, **{label: v}) for s in scrapes] for v in values}

    def quantiles_ms(histogram: str, qs: Sequence[float], **labels: str) -> dict[str, list[float]]:
        return {
            f"p{round(q * 100)}": [v * 1000 for v in quantile(scrapes, q, histogram, **labels)]
            for q in qs
        }

    attempts, kernel = metrics.SCHEDULE_ATTEMPTS, metrics.KERNEL_DURATION
    kernel_mean = ratio(rate(scrapes, f"{kernel}_sum"), rate(scrapes, f"{kernel}_count"))
    return [
        ("Throughput", "pods/s", {"scheduled": rate(scrapes, attempts, result="scheduled")}),
        (
            "Attempts by result",
            "attempts/s",
            {r: rate(scrapes, attempts, result=r) for r in metrics.RESULTS},
        ),
        (
            "Attempt latency (scheduled)",
            "ms",
            quantiles_ms(metrics.ATTEMPT_DURATION, (0.5, 0.9, 0.99), result="scheduled"),
        ),
        (
            "Pod scheduling SLI latency",
            "s",
            {
                f"p{round(q * 100)}": quantile(scrapes, q, metrics.SLI_DURATION)
                for q in (0.5, 0.9, 0.99)
            },
        ),
        ("Pending pods by queue", "pods", gauge(metrics.PENDING_PODS, "queue", metrics.QUEUES)),
        ("Kernel time per run (mean)", "ms", {"mean": [v * 1000 for v in kernel_mean]}),
        (
            "Binding latency (bound)",
            "ms",
            quantiles_ms(metrics.BINDING_DURATION, (0.5, 0.99), result="bound"),
        ),
        ("Cache size", "objects", gauge(metrics.CACHE_SIZE, "type", metrics.CACHE_TYPES)),
    ]


def plot(
    scrapes: Sequence[Scrape], path: Path, *, title: str, marks: Sequence[tuple[float, str]] = ()
) -> Path:
    """The dashboard's main panels over the run, one PNG; ``marks`` label workload events."""
    # Imported here: matplotlib is slow to import and only this command needs it.
    import matplotlib

    matplotlib.use("Agg")  # no display: write PNG files only
    from matplotlib import pyplot

    at = [s.at for s in scrapes]
    figure, grid = pyplot.subplots(4, 2, figsize=(12, 13), sharex=True)
    for axes, (name, unit, series) in zip(grid.flat, panels(scrapes), strict=True):
        for label, values in series.items():
            axes.plot(at, values, label=label)
        for when, _ in marks:
            axes.axvline(when, color="grey", linestyle=":", linewidth=1)
        axes.set_title(name)
        axes.set_ylabel(unit)
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small", loc="best")
    for axes in grid[-1]:
        axes.set_xlabel("seconds into the run")
    for when, label in marks:
        grid[0][0].annotate(
            label,
            (when, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize="x-small",
            color="grey",
        )
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    pyplot.close(figure)
    return path


# The run -----------------------------------------------------------------------------------

NAMESPACE = "metrics-plot"
ZONES = ("zone-a", "zone-b", "zone-c")
NODES_PER_ZONE = 8
STREAM_SECONDS = 20
STREAM_PER_SECOND = 25
UNSCHEDULABLE = 6
BURST = 400
DELETED = 100
SETTLE_SECONDS = 10


class _Scraper:
    """GETs /metrics once a second, on a thread of its own, until stopped."""

    def __init__(self, port: int, started: float) -> None:
        self._url = f"http://127.0.0.1:{port}/metrics"
        self._started = started
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-scraper", daemon=True)
        self.scrapes: list[Scrape] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopping.is_set():
            at = time.monotonic() - self._started
            try:
                with urllib.request.urlopen(self._url, timeout=5) as page:
                    self.scrapes.append(Scrape(at=at, samples=parse(page.read().decode())))
            except OSError as error:  # a missed scrape is a gap in the plot, not the end
                print(f"scrape at {at:.1f} s failed: {error}", file=sys.stderr)
            self._stopping.wait(max(0.0, 1.0 - (time.monotonic() - self._started - at)))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _pod(name: str, cpu: str) -> builders.PodBuilder:
    return builders.make_pod(name, NAMESPACE).scheduler(DEFAULT_SCHEDULER_NAME).req(cpu=cpu)


def _workload(client: kube.Kube, started: float) -> list[tuple[float, str]]:
    """Create, wait, delete; returns (seconds into the run, what happened) for the plot."""
    marks: list[tuple[float, str]] = []

    def mark(what: str) -> None:
        marks.append((time.monotonic() - started, what))
        print(f"{marks[-1][0]:5.1f} s  {what}")

    mark(f"a stream of {STREAM_PER_SECOND} pods/s")
    for second in range(STREAM_SECONDS):
        tick = time.monotonic()
        for i in range(STREAM_PER_SECOND):
            client.create_pod(_pod(f"stream-{second}-{i}", "200m").obj())
        if second == STREAM_SECONDS // 3:
            for i in range(UNSCHEDULABLE):
                client.create_pod(_pod(f"huge-{i}", "64").obj())
            mark(f"{UNSCHEDULABLE} pods that fit nowhere")
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    time.sleep(3)
    mark(f"a burst of {BURST} pods")
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: client.create_pod(_pod(f"burst-{i}", "100m").obj()), range(BURST)))
    time.sleep(8)
    mark("2 nodes join")
    for i in range(2):
        client.create_node(builders.make_node(f"extra-{i}").zone(ZONES[i]).capacity(cpu="8").obj())
    time.sleep(5)
    mark(f"{DELETED} pods deleted")
    for i in range(DELETED):
        second, index = divmod(i, STREAM_PER_SECOND)
        # At once: there is no kubelet to finish a graceful deletion.
        client.core.delete_namespaced_pod(
            f"stream-{second}-{index}", NAMESPACE, grace_period_seconds=0
        )
    time.sleep(SETTLE_SECONDS)
    return marks


def run(out: Path) -> Path:
    bin_dir = building.ensure_binaries()
    with tempfile.TemporaryDirectory(prefix="plumb-metrics-plot-") as scratch:
        directory = Path(scratch) / "cluster"
        plane = controlplane.start(directory, bin_dir=bin_dir, parts=controlplane.BENCHMARK)
        try:
            client = kube.Kube(plane.kubeconfig)
            crds.install(crds.Kubectl.of(plane, cache_dir=Path(scratch) / "kubectl-cache"))
            client.create_namespace(NAMESPACE, account=False)
            for zone in ZONES:
                for i in range(NODES_PER_ZONE):
                    node = builders.make_node(f"{zone}-{i}").zone(zone).capacity(cpu="8")
                    client.create_node(node.obj())
            port = _free_port()
            log = Path(scratch) / "plumb.log"
            process = _start_plumb(plane, port, log)
            started = time.monotonic()
            scraper = _Scraper(port, started)
            scraper.start()
            try:
                time.sleep(2)  # a baseline before the first pod
                marks = _workload(client, started)
            finally:
                scraper.stop()
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
            client.close()
        finally:
            controlplane.stop(directory)
    last = scraper.scrapes[-1].samples
    for name, label, values in (
        (metrics.SCHEDULE_ATTEMPTS, "result", metrics.RESULTS),
        (metrics.PENDING_PODS, "queue", metrics.QUEUES),
        (metrics.CACHE_SIZE, "type", metrics.CACHE_TYPES),
    ):
        for value in values:
            count = total(last, name, **{label: value})
            print(f'{name}{{{label}="{value}"}} {count:.0f}')
    title = (
        f"plumb /metrics, scraped every second: {len(ZONES) * NODES_PER_ZONE} nodes, "
        f"{STREAM_SECONDS * STREAM_PER_SECOND + BURST + UNSCHEDULABLE} pods"
    )
    return plot(scraper.scrapes, out, title=title, marks=marks)


def _start_plumb(plane: controlplane.ControlPlane, port: int, log: Path) -> subprocess.Popen[bytes]:
    process = schedulers.spawn_plumb(plane, log, DEFAULT_SCHEDULER_NAME, metrics_port=port)

    def synced() -> bool:
        return "synced" in log.read_text(errors="replace") or process.poll() is not None

    kube.wait_for("plumb to sync", synced, timeout=180)
    if process.poll() is not None:
        raise RuntimeError(f"plumb exited early:\n{log.read_text(errors='replace')[-4000:]}")
    return process


def main(argv: Sequence[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(prog="python -m plumb_dev.bench.metricsplot")
    arguments.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the PNG to write")
    args = arguments.parse_args(argv)
    print(f"wrote {run(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
