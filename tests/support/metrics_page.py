"""plumb's /metrics page as the integration tests read it: every sample by name and labels."""

from __future__ import annotations

import urllib.request

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
