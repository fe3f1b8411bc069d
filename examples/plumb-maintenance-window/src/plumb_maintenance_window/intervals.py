"""Maintenance windows read from an annotation value: RFC 3339 ``start/end`` intervals.

A value is one or more intervals separated by commas, each ``start/end`` with both ends full
RFC 3339 date-times carrying their offset (``2026-12-05T02:00:00Z/2026-12-05T04:00:00Z``,
``2026-12-05T03:00:00+01:00/2026-12-05T05:00:00+01:00``); spaces around an interval are
allowed. A value that does not read so (a missing offset, a date alone, an empty interval
between two commas, an end not after its start) is unreadable as a whole: ``Schedule.problem``
says why, and no interval of it is kept.

Each distinct value is parsed once per process (``schedule`` is cached by the value string),
so a call over thousands of nodes parses only the few values they carry.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import logging
import re

logger = logging.getLogger(__name__)

# RFC 3339's date-time (section 5.6): "T" (or "t", or a space, as its note allows) between the
# date and the time, fractional seconds of any length, and "Z" or a numeric offset.
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


@dataclasses.dataclass(frozen=True, slots=True)
class Schedule:
    """One annotation value read: its intervals as (start, end) seconds since the epoch, each
    end after its start, or the ``problem`` that makes the value unreadable ("" if none)."""

    windows: tuple[tuple[float, float], ...] = ()
    problem: str = ""

    def covers(self, now: float, lead: float = 0.0) -> bool:
        """Whether ``now`` is in a window, or within ``lead`` seconds before one starts
        (each window is [start - lead, end): the end itself is outside)."""
        return any(start - lead <= now < end for start, end in self.windows)


def instant(text: str) -> float:
    """One RFC 3339 date-time as seconds since the epoch; ValueError if it is not one."""
    if not _DATE_TIME.fullmatch(text):
        raise ValueError(f"{text!r} is not an RFC 3339 date-time with an offset")
    # fromisoformat (3.11) takes "Z" and any number of fractional digits (it keeps 6).
    return datetime.datetime.fromisoformat(text.upper().replace(" ", "T")).timestamp()


@functools.lru_cache(maxsize=4096)
def schedule(value: str) -> Schedule:
    """The annotation value ``value`` read ("" reads as no window). An unreadable value is
    logged once, when it is first read (while it stays in this cache)."""
    if not value.strip():
        return Schedule()
    windows = []
    for number, item in enumerate(value.split(","), start=1):
        text = item.strip()
        ends = text.split("/")
        if len(ends) != 2:
            return _unreadable(value, f"interval {number} ({text!r}) is not start/end")
        try:
            start, end = instant(ends[0].strip()), instant(ends[1].strip())
        except ValueError as error:
            return _unreadable(value, f"interval {number}: {error}")
        if end <= start:
            return _unreadable(value, f"interval {number} ({text!r}) does not end after it starts")
        windows.append((start, end))
    return Schedule(windows=tuple(sorted(windows)))


def _unreadable(value: str, problem: str) -> Schedule:
    logger.warning("maintenance window %r is unreadable: %s", value, problem)
    return Schedule(problem=problem)
