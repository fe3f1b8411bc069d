"""Trace lines captured as plumb writes them: a handler that keeps each formatted line, on a
logger of the trace logger's name outside logging's tree (so its lines are one test's)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from plumb.observability import trace


class Lines(logging.Handler):
    """The lines a logger writes, formatted as plumb writes them."""

    def __init__(self, formatter: logging.Formatter) -> None:
        super().__init__()
        self.setFormatter(formatter)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def capture(formatter: logging.Formatter) -> Iterator[tuple[logging.Logger, Lines]]:
    """A trace logger whose lines ``Lines`` keeps, in ``formatter``'s format."""
    log = logging.Logger(trace.LOGGER)
    handler = Lines(formatter)
    log.addHandler(handler)
    yield log, handler
