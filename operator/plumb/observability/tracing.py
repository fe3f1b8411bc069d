"""Writing trace lines without flooding the log, and keeping each pod's last decision.

Every ``Scheduled`` record is written: one line per bound pod, so the pods bound the lines.
Every other result (``Unschedulable``, ``BindFailed``) is rate-capped twice:

- per pod: a line that repeats the pod's last written result and message within
  ``repeat_after`` seconds (the scheduler passes the pod's backoff step, the rule
  FailedScheduling events follow) is held back;
- overall: a token bucket, ``rate`` lines a second and ``burst`` at once, holds back the rest of
  a storm of distinct failures.

Held-back lines are counted and reported in one summary line per ``summary_every`` seconds
(from a timer on the event loop, so a storm that stops is still reported). So a pod that fails
10,000 times in a minute writes a few lines, and any storm writes at most ``burst`` plus
``rate`` lines a second plus one summary per window.

The last record of every pod is kept for the debug endpoint: the last written one, or a newer
one the overall cap held back (a different answer the log lacks); a repeat held back per pod
leaves the record as the log has it, so ``plumb explain`` reads the same from either. At most
``keep`` pods, the oldest dropped first, and a pod's record goes when the pod is deleted.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import Callable

from plumb.observability import logs, trace
from plumb.observability import spans as spans_module

DEFAULT_RATE = 50.0
DEFAULT_BURST = 200
DEFAULT_SUMMARY_EVERY = 10.0
DEFAULT_KEEP = 10_000

logger = logging.getLogger(trace.LOGGER)


class _Bucket:
    """A token bucket: ``rate`` tokens a second, ``burst`` at most."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self._rate, self._burst = rate, float(burst)
        self._tokens, self._at = float(burst), now

    def take(self, now: float) -> bool:
        self._tokens = min(self._burst, self._tokens + max(0.0, now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


class Tracer:
    """Writes trace lines within the volume limits and keeps each pod's last record.

    Only the event loop calls it (the scheduler, the debug endpoint); it holds no locks.
    ``candidates`` is how many of the top candidates a record keeps (0 to ``trace.TOP``).
    """

    def __init__(
        self,
        *,
        candidates: int = trace.TOP,
        rate: float = DEFAULT_RATE,
        burst: int = DEFAULT_BURST,
        summary_every: float = DEFAULT_SUMMARY_EVERY,
        keep: int = DEFAULT_KEEP,
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger = logger,
        spans: spans_module.Spans = spans_module.OFF,
    ) -> None:
        if not 0 <= candidates <= trace.TOP:
            raise ValueError(f"trace candidates must be 0 to {trace.TOP}, not {candidates}")
        if rate <= 0 or burst < 1:
            raise ValueError(f"the trace rate limit needs rate > 0 and burst >= 1: {rate}, {burst}")
        self.candidates = candidates
        # The attempts' OpenTelemetry spans, made as their lines are written (off: nothing).
        self.spans = spans
        self._clock = clock
        self._log = log
        self._keep = keep
        self._rate = rate
        self._summary_every = summary_every
        self._bucket = _Bucket(rate, burst, clock())
        self._last: collections.OrderedDict[str, trace.Trace] = collections.OrderedDict()
        # A pod's latest attempt when newer than its record's (a repeat held back); else the
        # record's own ``attempts`` (no entry: one dict entry less per pod kept).
        self._tried: dict[str, int] = {}
        # Per pod uid: the result and message last written, and when.
        self._written: collections.OrderedDict[str, tuple[str, str, float]] = (
            collections.OrderedDict()
        )
        self._repeats = 0
        self._over_rate = 0
        self._window_start = clock()
        self._timer: asyncio.TimerHandle | None = None

    def emit(
        self, record: trace.Trace, *, repeat_after: float = 0.0, level: int = logging.INFO
    ) -> bool:
        """Keep ``record`` as its pod's last and write its line unless a limit holds it back;
        True when written."""
        if len(record.candidates) > self.candidates:
            record = dataclasses.replace(record, candidates=record.candidates[: self.candidates])
        now = self._clock()
        if record.result == trace.SCHEDULED:
            self._written.pop(record.uid, None)
        else:
            last = self._written.get(record.uid)
            if (
                last is not None
                and last[:2] == (record.result, record.message)
                and now - last[2] < repeat_after
            ):
                # The same answer again: the pod's record stays the one the log has, so the
                # debug endpoint and the log explain it alike.
                self._held_back(now, repeat=True)
                if record.pod in self._last:
                    self._tried[record.pod] = record.attempts
                return False
            self._remember(record)
            if not self._bucket.take(now):
                self._held_back(now, repeat=False)
                return False
            record = self._traced(record)
            self._remember(record)
            self._written[record.uid] = (record.result, record.message, now)
            self._written.move_to_end(record.uid)
            while len(self._written) > self._keep:
                self._written.popitem(last=False)
        if record.result == trace.SCHEDULED:
            record = self._traced(record)
            self._remember(record)
        if self._held() and now - self._window_start >= self._summary_every:
            self.flush()
        self._log.log(level, record.summary(), extra={logs.FIELDS: record.fields()})
        return True

    def _traced(self, record: trace.Trace) -> trace.Trace:
        """The record with its attempt's trace id, once its spans are made (a line written:
        a pod failing again and again is traced as often as it is logged)."""
        if not self.spans.enabled or record.trace_id:
            return record
        trace_id = self.spans.finish(record)
        return dataclasses.replace(record, trace_id=trace_id) if trace_id else record

    def last(self, pod: str) -> trace.Trace | None:
        """The last decision for ``pod`` (namespace/name) that the debug endpoint shows."""
        return self._last.get(pod)

    def tried(self, pod: str) -> int | None:
        """How many attempts the pod has had, counting those whose repeat was held back."""
        tried = self._tried.get(pod)
        if tried is not None:
            return tried
        kept = self._last.get(pod)
        return None if kept is None else kept.attempts

    def records(self) -> list[trace.Trace]:
        """The last record of every pod kept, oldest first."""
        return list(self._last.values())

    def forget(self, pod: str, uid: str) -> None:
        """The pod was deleted: its records go (a pod recreated under its name keeps its own)."""
        kept = self._last.get(pod)
        if kept is not None and kept.uid == uid:
            del self._last[pod]
            self._tried.pop(pod, None)
        self._written.pop(uid, None)

    def flush(self) -> None:
        """Write the summary of the lines held back since the last one, if any (also called
        at shutdown)."""
        now = self._clock()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        held = self._held()
        if held:
            self._log.info(
                "suppressed %d trace lines in %.1f s: %d repeated a pod's last line within its "
                "backoff, %d were over the limit of %g lines/s; the debug endpoint has every "
                "pod's last decision",
                held,
                now - self._window_start,
                self._repeats,
                self._over_rate,
                self._rate,
                extra={
                    logs.FIELDS: {
                        "suppressed": held,
                        "repeats": self._repeats,
                        "over_rate": self._over_rate,
                    }
                },
            )
        self._repeats = self._over_rate = 0
        self._window_start = now

    def _held(self) -> int:
        return self._repeats + self._over_rate

    def _remember(self, record: trace.Trace) -> None:
        self._last[record.pod] = record
        self._last.move_to_end(record.pod)
        self._tried.pop(record.pod, None)
        while len(self._last) > self._keep:
            dropped, _ = self._last.popitem(last=False)
            self._tried.pop(dropped, None)

    def _held_back(self, now: float, *, repeat: bool) -> None:
        if not self._held():
            self._window_start = now  # a window opens with its first held-back line
            self._start_timer()
        elif now - self._window_start >= self._summary_every:
            self.flush()
            self._start_timer()
        if repeat:
            self._repeats += 1
        else:
            self._over_rate += 1

    def _start_timer(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a test driving the tracer): the next line or flush() reports
        self._timer = loop.call_later(self._summary_every, self.flush)
