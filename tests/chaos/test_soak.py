"""Scenario 7: a soak: pods created and deleted without pause, plumb's footprint sampled every
second. RSS, queue depth, open sockets and asyncio tasks must stay flat: what the last third of
the run holds is compared with the first third (after a warm-up), with room for noise but none
for a leak that grows with the pods seen.

``make test-chaos`` soaks for 3 minutes; PLUMB_SOAK_SECONDS=1800 for 30; ``make test`` for 6 s.
The samples go to build/chaos/soak.json, which tests/chaos/reliabilityreport.py draws for
docs/reliability.md.

Rejected: a build that leaks one asyncio task per binding fails with "asyncio tasks grew from
744 to 1456" (run once, in a scratch clone).
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import pytest

from plumb_dev.testing import kube
from tests.chaos import harness, invariant
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.long]  # make test-long

SECONDS = float(os.environ.get("PLUMB_SOAK_SECONDS", harness.size(6, 180)))
POPULATION = 150  # pods alive at once: each round deletes the oldest bound, creates as many new
ROUND = 40
RSS_SLACK = 40 * 2**20


def test_a_soak_of_create_and_delete_churn_keeps_the_footprint_flat(
    client: kube.Kube, namespace: str, node_prefix: str, start_plumb: RestartablePlumbFactory
) -> None:
    harness.create_nodes(client, harness.nodes(6, prefix=node_prefix))
    plumb = start_plumb()
    samples: list[dict[str, float]] = []
    created = deleted = 0
    began = time.monotonic()
    next_sample = began
    while time.monotonic() - began < SECONDS:
        listed = client.pods(namespace)
        bound = sorted(
            (p for p in listed if p["spec"].get("nodeName")),
            key=lambda p: int(p["metadata"]["name"].rsplit("-", 1)[1]),
        )
        for pod in bound[: max(0, len(listed) + ROUND - POPULATION)]:
            client.core.delete_namespaced_pod(
                pod["metadata"]["name"], namespace, grace_period_seconds=0
            )
            deleted += 1
        bodies = harness.pods(namespace, ROUND, prefix=f"s{created // ROUND}")
        burst = harness.Burst(plumb.kubeconfig, namespace, bodies).start()
        burst.join()
        created += ROUND
        if time.monotonic() >= next_sample:
            samples.append(_sample(plumb, time.monotonic() - began))
            next_sample += 1.0
    verdict = invariant.check(client, [namespace], plumb)
    harness.RESULTS.mkdir(parents=True, exist_ok=True)
    (harness.RESULTS / "soak-samples.json").write_text(json.dumps(samples) + "\n")
    first, last = _third(samples, 0), _third(samples, 2)
    harness.record(
        "soak",
        pods=created,
        deleted=deleted,
        seconds=round(SECONDS),
        faults="continuous create/delete churn",
        violations=len(verdict.violations),
        recovery_s=verdict.cache_matched_after,
        rss_mb=[round(_mean(first, "rss") / 2**20, 1), round(_mean(last, "rss") / 2**20, 1)],
        sockets=[max(s["sockets"] for s in first), max(s["sockets"] for s in last)],
        tasks=[max(s["tasks"] for s in first), max(s["tasks"] for s in last)],
        pending_max=max(s["pending"] for s in samples),
    )
    assert not verdict.violations, verdict.summary()
    assert len(samples) >= 3, f"only {len(samples)} samples in {SECONDS} s"
    for key, grows, slack in (("rss", 1.15, RSS_SLACK), ("sockets", 1.0, 10), ("tasks", 1.0, 20)):
        before, after = max(s[key] for s in first), max(s[key] for s in last)
        if key == "rss":
            before, after = _mean(first, key), _mean(last, key)
        assert after <= before * grows + slack, f"{key} grew from {before:.0f} to {after:.0f}"


def _sample(plumb: harness.RestartablePlumb, at: float) -> dict[str, float]:
    _, body = plumb.get(plumb.metrics_port, "/metrics")
    text = body.decode()
    return {
        "t": round(at, 1),
        "rss": float(plumb.rss_bytes()),
        "sockets": float(plumb.open_sockets()),
        "pending": _metric(text, "plumb_pending_pods"),
        "tasks": _metric(text, "plumb_asyncio_tasks"),
    }


def _metric(text: str, name: str) -> float:
    total = 0.0
    for match in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE):
        total += float(match.group(1))
    return total


def _third(samples: list[dict[str, float]], which: int) -> list[dict[str, float]]:
    # The first sixth is warm-up (the kernel's first batches, pools filling): left out.
    usable = samples[len(samples) // 6 :]
    size = max(1, len(usable) // 3)
    return usable[which * size : (which + 1) * size] or usable[-1:]


def _mean(samples: list[dict[str, Any]], key: str) -> float:
    return sum(float(s[key]) for s in samples) / len(samples)
