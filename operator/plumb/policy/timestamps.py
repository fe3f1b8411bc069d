"""RFC 3339 timestamps as the API server writes them, to and from epoch seconds."""

from __future__ import annotations

import datetime
import math
from typing import Any

__all__ = ["format_time", "parse_time"]


def format_time(epoch: float) -> str:
    """``2026-01-31T12:00:00Z``: whole seconds, UTC, as metav1.Time serialises."""
    moment = datetime.datetime.fromtimestamp(math.floor(epoch), datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> float | None:
    """Epoch seconds from an RFC 3339 string; None for anything that is not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None  # RFC 3339 requires an offset; guessing one would shift the window
    return moment.timestamp()
