"""Deviation budget accounting for one policy: deviations, attempts and failures per window.

**Window.** Fixed windows of ``deviationBudget.window``, back to back: the first starts when the
budget is created (or at the ``windowStart`` restored from status), and each later one starts
exactly one window after the previous, so ``status.budget.windowStart`` always names the start
of the window the counts belong to. When a window elapses, ``used``, attempts and failures start
again from zero and the whole of ``maxViolations`` is available. A fixed window (rather than a
sliding one) is what the status can describe with one timestamp, and what can be rebuilt after a
restart from that timestamp and two numbers.

**Exhausted.** The budget is exhausted when ``used`` has reached a non-zero ``maxViolations``,
or when the window's failure rate (failed attempts / attempts) is above
``failureRateThreshold`` after at least ``MIN_ATTEMPTS`` attempts, so that one early failure
does not trip it. An exhausted budget allows no deviation until the next window. A budget with
``maxViolations: 0`` allows none either, but is not reported as exhausted: nothing was spent.

**Revert.** ``should_revert`` is true when ``onExhausted`` is Revert and, counting only attempts
since the last spec change (``spec_changed``), at least ``MIN_ATTEMPTS`` were made and their
failure rate is above the threshold, while the change is at most one window old. Failures that
come later than a window after a change are not blamed on it. ``spec_settled`` ends the watch
(after a revert, the policy stays reverted until the spec changes again).

**Charged once.** A deviation is charged to the pod it placed (``record_deviation`` with its
uid): the same pod deviating again in the window is not charged again, and ``refund`` gives the
deviation back when its placement did not stand (the binding failed or was abandoned, or the pod
was placed within the rules after all). The uids charged are written to status
(``chargedPods``), so a new leader that places a pod the old one charged does not charge it
again.

**Restart.** ``restore`` reads ``status.budget``: ``used``, ``chargedPods`` and ``windowStart``
exactly (if that window is still running, the deviations spent in it stay spent), and
``failureRate`` as if it had
come from ``MIN_ATTEMPTS`` attempts, because the status keeps the rate, not the count: a budget
tripped by its rate stays tripped after a restart, and fresh attempts soon outweigh the
carried rate. A restart does not start a revert watch: that needs a spec change.

What counts as an attempt is the caller's choice: one scheduling attempt of a governed pod,
successful when the pod was placed and bound, failed when it stayed unschedulable or its binding
failed. A deviation is also a (successful) attempt. Times are epoch seconds (wall clock), since
window starts are written to status and read back by another process. Purely computational.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from plumb.policy import spec as spec_module
from plumb.policy import timestamps

__all__ = ["MIN_ATTEMPTS", "Budget", "BudgetState", "Exhaustion"]

MIN_ATTEMPTS = 5


class Exhaustion:
    """Why a budget allows no more deviations (the BudgetExhausted condition's reasons)."""

    SPENT = "BudgetSpent"
    FAILURE_RATE = "FailureRateExceeded"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class BudgetState:
    """The budget as the status shows it, at one moment."""

    max_violations: int
    used: int
    remaining: int
    charged: tuple[str, ...]  # the uids of the pods charged in this window, sorted
    window: float
    window_start: float
    attempts: int
    failure_rate: float
    failure_rate_threshold: float
    exhausted: str | None  # an Exhaustion reason, None while deviations are allowed

    @property
    def window_end(self) -> float:
        return self.window_start + self.window


class Budget:
    """The deviation budget of one policy; every query takes ``now`` and first moves the window
    on if it has elapsed."""

    def __init__(self, spec: spec_module.DeviationBudget, now: float) -> None:
        self._spec = spec
        self._start = now
        self._used = 0
        self._charged: set[str] = set()  # uids of the pods charged in this window
        self._attempts = 0.0  # floats: a restored rate is carried as a fractional count
        self._failures = 0.0
        self._changed_at: float | None = None
        self._since_attempts = 0
        self._since_failures = 0

    @property
    def spec(self) -> spec_module.DeviationBudget:
        return self._spec

    def configure(self, spec: spec_module.DeviationBudget, now: float) -> None:
        """New limits for the same accounting: a spec edit neither refills nor empties the
        budget (else editing the policy would be a way to get more deviations)."""
        self._roll(now)
        self._spec = spec
        self._roll(now)

    # Recording --------------------------------------------------------------------------------

    def record_attempt(self, success: bool, now: float) -> None:
        self._roll(now)
        self._attempts += 1
        self._failures += 0 if success else 1
        if self._changed_at is not None and now >= self._changed_at:
            self._since_attempts += 1
            self._since_failures += 0 if success else 1

    def record_deviation(self, now: float, pod: str = "") -> bool:
        """Spend one deviation on the pod with uid ``pod`` if the budget allows it; False (and
        nothing spent) if not. A pod already charged in this window is not charged again."""
        self._roll(now)
        if pod and pod in self._charged:
            return True
        if not self.allows_deviation(now):
            return False
        self._used += 1
        if pod:
            self._charged.add(pod)
        return True

    def refund(self, pod: str, now: float) -> bool:
        """Give back the deviation charged to ``pod`` in this window (its placement did not
        stand); False when none is (never charged, or charged in a window now over)."""
        self._roll(now)
        if pod not in self._charged:
            return False
        self._charged.discard(pod)
        self._used = max(0, self._used - 1)
        return True

    def charged(self, pod: str, now: float) -> bool:
        """Whether a deviation of this window is charged to ``pod``."""
        self._roll(now)
        return pod in self._charged

    def spec_changed(self, now: float) -> None:
        """A new spec generation came into force: watch its failure rate for a revert."""
        self._changed_at = now
        self._since_attempts = 0
        self._since_failures = 0

    def spec_settled(self) -> None:
        """Stop watching the last change (it was reverted, or is no longer in question)."""
        self._changed_at = None
        self._since_attempts = 0
        self._since_failures = 0

    # Queries -------------------------------------------------------------------------------

    def allows_deviation(self, now: float) -> bool:
        return self.remaining(now) > 0 and self.exhausted(now) is None

    def remaining(self, now: float) -> int:
        self._roll(now)
        return max(0, self._spec.max_violations - self._used)

    def failure_rate(self, now: float) -> float:
        """Failed attempts / attempts in the current window; 0 with no attempts."""
        self._roll(now)
        return self._failures / self._attempts if self._attempts > 0 else 0.0

    def exhausted(self, now: float) -> str | None:
        """Why no deviation is allowed (an ``Exhaustion`` reason), or None."""
        self._roll(now)
        if self._spec.max_violations > 0 and self._used >= self._spec.max_violations:
            return Exhaustion.SPENT
        rate = self._failures / self._attempts if self._attempts > 0 else 0.0
        if self._attempts >= MIN_ATTEMPTS and rate > self._spec.failure_rate_threshold:
            return Exhaustion.FAILURE_RATE
        return None

    def should_revert(self, now: float) -> bool:
        """Whether the last spec change failed enough to go back (only with onExhausted
        Revert; see the module docstring for the rule)."""
        if self._spec.on_exhausted is not spec_module.OnExhausted.REVERT:
            return False
        if self._changed_at is None or now - self._changed_at > self._spec.window:
            return False
        if self._since_attempts < MIN_ATTEMPTS:
            return False
        return self._since_failures / self._since_attempts > self._spec.failure_rate_threshold

    def window_start(self, now: float) -> float:
        self._roll(now)
        return self._start

    def used(self, now: float) -> int:
        self._roll(now)
        return self._used

    def state(self, now: float) -> BudgetState:
        self._roll(now)
        return BudgetState(
            max_violations=self._spec.max_violations,
            used=self._used,
            remaining=self.remaining(now),
            charged=tuple(sorted(self._charged)),
            window=self._spec.window,
            window_start=self._start,
            attempts=round(self._attempts),
            failure_rate=self.failure_rate(now),
            failure_rate_threshold=self._spec.failure_rate_threshold,
            exhausted=self.exhausted(now),
        )

    # Restart -----------------------------------------------------------------------------------

    def restore(self, status_budget: Any, now: float) -> bool:
        """Take up the accounting written in ``status.budget`` before a restart; False (and
        nothing changed) when it has no usable ``windowStart``. Never raises."""
        if not isinstance(status_budget, Mapping):
            return False
        start = timestamps.parse_time(status_budget.get("windowStart"))
        if start is None:
            return False
        used = status_budget.get("used")
        rate = status_budget.get("failureRate")
        self._start = start
        self._used = used if isinstance(used, int) and not isinstance(used, bool) else 0
        self._used = max(0, self._used)
        charged = status_budget.get("chargedPods")
        self._charged = (
            {uid for uid in charged if isinstance(uid, str) and uid}
            if isinstance(charged, list)
            else set()
        )
        if isinstance(rate, int | float) and not isinstance(rate, bool) and 0 <= rate <= 1:
            self._attempts = float(MIN_ATTEMPTS)
            self._failures = float(rate) * MIN_ATTEMPTS
        else:
            self._attempts = self._failures = 0.0
        self._roll(now)
        return True

    # Windows -----------------------------------------------------------------------------------

    def _roll(self, now: float) -> None:
        window = self._spec.window
        if now < self._start - window:
            # The clock went back by more than a window (or status came from a skewed clock):
            # what was counted cannot be placed in time any more; start afresh.
            self._reset(now)
        elif now >= self._start + window:
            self._reset(self._start + math.floor((now - self._start) / window) * window)

    def _reset(self, start: float) -> None:
        self._start = start
        self._used = 0
        self._charged = set()
        self._attempts = self._failures = 0.0
