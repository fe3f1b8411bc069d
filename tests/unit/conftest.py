"""Fixtures of the unit tests: trace lines captured in either of plumb's log formats."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from plumb.observability import logs
from tests.support.log_capture import Lines, capture


@pytest.fixture
def json_lines() -> Iterator[tuple[logging.Logger, Lines]]:
    yield from capture(logs.JsonFormatter())


@pytest.fixture
def plain_lines() -> Iterator[tuple[logging.Logger, Lines]]:
    yield from capture(logs.PlainFormatter())
