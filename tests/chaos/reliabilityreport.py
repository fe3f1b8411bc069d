"""Writes the figures of the last chaos run (build/chaos/*.json) into docs/reliability.md, between
its ``<!-- chaos:begin -->`` and ``<!-- chaos:end -->`` markers, and draws the soak's samples
to docs/reliability/soak.png. ``make test-chaos`` runs it after the suite:

    python -m tests.chaos.reliabilityreport --results build/chaos --doc docs/reliability.md
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

BEGIN = "<!-- chaos:begin -->"
END = "<!-- chaos:end -->"
ORDER = (
    "sigkill",
    "sigkill-dra",
    "sigkill-gangs",
    "sigkill-quotas",
    "handover-quotas",
    "restart-kube-apiserver",
    "restart-etcd",
    "watch-expiry",
    "api-faults",
    "leadership-stall",
    "deviation-bind-fault",
    "node-churn",
    "fuzz",
    "soak",
    "security",
)
KEYS = ("scenario", "full", "at", "pods", "faults", "violations", "recovery_s")


def table(results: list[dict[str, Any]]) -> str:
    """One row per scenario: pods, faults, violations, recovery, then its other figures."""
    lines = [
        "| scenario | pods | faults injected | violations | cache matched after (s) "
        "| other figures |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        recovery = result.get("recovery_s")
        recovered = "-" if recovery is None else f"{float(recovery):.1f}"
        others = ", ".join(
            f"{k}={_short(v)}"
            for k, v in result.items()
            if k not in KEYS and not isinstance(v, dict)  # breakdowns stay in the JSON files
        )
        lines.append(
            f"| {result['scenario']} | {result.get('pods', '-')} | {result.get('faults', '-')} "
            f"| {result.get('violations', '-')} | {recovered} | {others} |"
        )
    return "\n".join(lines)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return str(value)


def plot(samples: list[dict[str, float]], out: Path) -> None:
    # Imported here: matplotlib is a benchmark extra, slow to import, only the plot needs it.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(4, 1, figsize=(8, 8), sharex=True)
    times = [s["t"] for s in samples]
    panels = (
        ("rss", "RSS (MiB)", 1 / 2**20),
        ("pending", "queue depth (pods)", 1.0),
        ("sockets", "open sockets", 1.0),
        ("tasks", "asyncio tasks", 1.0),
    )
    for axis, (key, label, scale) in zip(axes, panels, strict=True):
        axis.plot(times, [s[key] * scale for s in samples])
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    axes[-1].set_xlabel("seconds of churn")
    figure.suptitle("plumb under create/delete churn (make test-chaos)")
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=80)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=Path, default=Path("build/chaos"))
    parser.add_argument("--doc", type=Path, default=Path("docs/reliability.md"))
    parser.add_argument("--command", default="make test-chaos")
    args = parser.parse_args(argv)
    found = {p.stem: json.loads(p.read_text()) for p in args.results.glob("*.json")}
    results = [found[name] for name in ORDER if name in found]
    if not results:
        print(f"no results in {args.results}; run the chaos suite first", file=sys.stderr)
        return 1
    samples_file = args.results / "soak-samples.json"
    if samples_file.exists():
        plot(json.loads(samples_file.read_text()), args.doc.parent / "reliability" / "soak.png")
    machine = f"{platform.machine()}, Python {platform.python_version()}, {_cpus()} CPUs"
    block = "\n".join(
        [
            BEGIN,
            f"From `{args.command}` on {results[0].get('at', '?')} ({machine}); "
            f"{'full' if results[0].get('full') else 'short'} sizes.",
            "",
            table(results),
            END,
        ]
    )
    text = args.doc.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    args.doc.write_text(head + block + tail)
    print(f"wrote {len(results)} scenarios into {args.doc}")
    return 0


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    sys.exit(main())
