"""Prometheus metrics, kube-scheduler's vocabulary under ``plumb_``, served on their own port.

Values are read from the scheduler's state at scrape time (``gauge_from``, ``counter_from``),
and the page is rendered on the event loop (an aiohttp handler), the thread that owns that
state, so reading needs no locks. No label ever carries a pod name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

import prometheus_client
from aiohttp import web
from prometheus_client import core, registry

logger = logging.getLogger(__name__)

Reader = Callable[[], Mapping[tuple[str, ...], float]]
"""Returns the current value of a metric per tuple of label values."""


class _Read(registry.Collector):
    def __init__(
        self, kind: str, name: str, documentation: str, labels: tuple[str, ...], read: Reader
    ) -> None:
        self._kind, self._name, self._documentation = kind, name, documentation
        self._labels, self._read = labels, read

    def collect(self) -> Iterable[core.Metric]:
        family: core.GaugeMetricFamily | core.CounterMetricFamily
        if self._kind == "counter":
            family = core.CounterMetricFamily(self._name, self._documentation, labels=self._labels)
        else:
            family = core.GaugeMetricFamily(self._name, self._documentation, labels=self._labels)
        try:
            values = self._read()
        except Exception:  # a scrape must not break on the scheduler's state
            logger.exception("reading %s for /metrics failed", self._name)
            values = {}
        for label_values, value in sorted(values.items()):
            family.add_metric(list(label_values), value)
        return [family]


class Metrics:
    """plumb's metric registry (one per scheduler; tests make their own)."""

    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry()

    def gauge_from(
        self, name: str, documentation: str, labels: tuple[str, ...], read: Reader
    ) -> None:
        """A gauge whose values ``read`` returns at each scrape."""
        self.registry.register(_Read("gauge", name, documentation, labels, read))

    def counter_from(
        self, name: str, documentation: str, labels: tuple[str, ...], read: Reader
    ) -> None:
        """A counter (``name`` without ``_total``) whose running totals ``read`` returns."""
        self.registry.register(_Read("counter", name, documentation, labels, read))

    def render(self) -> bytes:
        return bytes(prometheus_client.generate_latest(self.registry))


async def serve(metrics: Metrics, host: str, port: int) -> web.AppRunner:
    """Serve /metrics on ``host:port``; the caller cleans the runner up."""

    async def page(_: web.Request) -> web.Response:
        return web.Response(
            body=metrics.render(), headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/metrics", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
