"""plumb's /metrics page as the integration tests read it (every sample by name and labels), and
the attempts its debug endpoint counts for a pod it has not placed."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from prometheus_client import parser

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample on the page at 127.0.0.1:``port``, by (name, sorted labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
        text = page.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parser.text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The sample of that name and exactly those labels, None when the page has none."""
    return samples.get((name, tuple(sorted(labels.items()))))


def tried(port: int, namespace: str, name: str) -> int | None:
    """The attempts plumb made at a pod it has not placed, from its debug endpoint on
    ``port`` (None: no decision yet)."""
    url = f"http://127.0.0.1:{port}/debug/pods/{namespace}/{name}"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            record: dict[str, Any] = json.loads(answer.read())
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise
    assert record["result"] == "Unschedulable", record
    return int(record["tried"])
