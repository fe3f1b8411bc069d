"""plumb's asyncio exception handler: kopf's watch generator finalised at exit is logged without
a traceback; anything else goes to asyncio's default handler."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from plumb.app import runtime


async def infinite_watch() -> AsyncIterator[int]:  # named as kopf's generator
    yield 1


async def other_stream() -> AsyncIterator[int]:
    yield 1


def _context(generator: Any) -> dict[str, Any]:
    return {
        "message": "an error occurred during closing of asynchronous generator",
        "exception": RuntimeError("generator didn't stop after athrow()"),
        "asyncgen": generator,
    }


def test_kopf_watch_closed_at_exit_is_logged_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.new_event_loop()
    seen: list[dict[str, Any]] = []
    loop.default_exception_handler = seen.append  # type: ignore[method-assign,assignment]
    try:
        with caplog.at_level(logging.INFO, logger="plumb"):
            runtime._exception_handler(loop, _context(infinite_watch()))
            runtime._exception_handler(loop, _context(other_stream()))
    finally:
        loop.close()
    quiet = [r for r in caplog.records if "watch stream closed at exit" in r.getMessage()]
    assert len(quiet) == 1
    assert quiet[0].exc_info is None
    # Another generator's failure is not hidden: asyncio's own handler gets it.
    assert [c["asyncgen"].__name__ for c in seen] == ["other_stream"]
