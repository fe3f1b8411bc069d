"""The deviation budget: spent after maxViolations deviations in a window, full again in the
next; tripped by the failure rate only after enough attempts; Revert only after a spec change
and above the threshold; and the accounting taken up again from status after a restart."""

from __future__ import annotations

from typing import Any

import pytest

from plumb.policy import budget as budget_module
from plumb.policy import spec, timestamps

T0 = 1_800_000_000.0  # epoch seconds: 2027-01-15T08:00:00Z
WINDOW = 600.0


def _budget(
    max_violations: int = 3,
    threshold: float = 0.15,
    on_exhausted: spec.OnExhausted = spec.OnExhausted.BLOCK,
) -> budget_module.Budget:
    limits = spec.DeviationBudget(
        max_violations=max_violations,
        window=WINDOW,
        failure_rate_threshold=threshold,
        on_exhausted=on_exhausted,
    )
    return budget_module.Budget(limits, now=T0)


def _attempts(budget: budget_module.Budget, *, ok: int, failed: int, now: float) -> None:
    for _ in range(ok):
        budget.record_attempt(True, now)
    for _ in range(failed):
        budget.record_attempt(False, now)


def test_the_budget_is_spent_after_max_violations_and_full_again_in_the_next_window() -> None:
    budget = _budget(3)
    assert [budget.record_deviation(T0 + t) for t in (10, 20, 30, 40)] == [
        True,
        True,
        True,
        False,
    ]
    state = budget.state(T0 + 599)
    assert (state.used, state.remaining, state.exhausted) == (3, 0, "BudgetSpent")
    assert not budget.allows_deviation(T0 + 599)
    # The next window starts exactly one window after the first, with the whole budget.
    state = budget.state(T0 + 600)
    assert (state.used, state.remaining, state.exhausted) == (0, 3, None)
    assert state.window_start == T0 + 600
    assert budget.record_deviation(T0 + 601)


def test_windows_stay_on_their_cadence_after_a_quiet_spell() -> None:
    budget = _budget(3)
    budget.record_deviation(T0)
    assert budget.window_start(T0 + 3 * WINDOW + 42) == T0 + 3 * WINDOW
    assert budget.used(T0 + 3 * WINDOW + 42) == 0


def test_one_early_failure_does_not_trip_the_budget() -> None:
    budget = _budget(3, threshold=0.15)
    _attempts(budget, ok=0, failed=1, now=T0 + 1)
    assert budget.failure_rate(T0 + 1) == 1.0
    assert budget.exhausted(T0 + 1) is None
    assert budget.record_deviation(T0 + 2)


def test_a_failure_rate_above_the_threshold_stops_deviation_until_the_next_window() -> None:
    budget = _budget(3, threshold=0.15)
    _attempts(budget, ok=4, failed=1, now=T0 + 1)  # 0.2 > 0.15 after 5 attempts
    assert budget.exhausted(T0 + 1) == "FailureRateExceeded"
    assert not budget.record_deviation(T0 + 2)
    assert budget.remaining(T0 + 2) == 3  # nothing spent; deviation is blocked by the rate
    assert budget.record_deviation(T0 + WINDOW)


def test_a_rate_at_the_threshold_does_not_trip_it() -> None:
    budget = _budget(3, threshold=0.2)
    _attempts(budget, ok=4, failed=1, now=T0 + 1)
    assert budget.failure_rate(T0 + 1) == pytest.approx(0.2)
    assert budget.exhausted(T0 + 1) is None


def test_zero_max_violations_never_deviates_and_is_not_reported_exhausted() -> None:
    budget = _budget(0)
    assert not budget.record_deviation(T0)
    assert budget.exhausted(T0) is None
    assert budget.remaining(T0) == 0


def test_a_spec_edit_neither_refills_nor_empties_the_budget() -> None:
    budget = _budget(3)
    budget.record_deviation(T0)
    budget.record_deviation(T0)
    budget.configure(spec.DeviationBudget(max_violations=5, window=WINDOW), now=T0 + 1)
    assert (budget.used(T0 + 1), budget.remaining(T0 + 1)) == (2, 3)
    budget.configure(spec.DeviationBudget(max_violations=1, window=WINDOW), now=T0 + 2)
    assert budget.remaining(T0 + 2) == 0


# Revert ----------------------------------------------------------------------------------------


def test_revert_trips_only_after_a_spec_change_and_above_the_threshold() -> None:
    budget = _budget(3, threshold=0.15, on_exhausted=spec.OnExhausted.REVERT)
    _attempts(budget, ok=0, failed=10, now=T0 + 1)
    assert not budget.should_revert(T0 + 1)  # failing, but no spec change to blame
    budget.spec_changed(T0 + 10)
    _attempts(budget, ok=5, failed=0, now=T0 + 11)
    assert not budget.should_revert(T0 + 11)  # failures before the change do not count
    _attempts(budget, ok=0, failed=1, now=T0 + 12)  # 1 of 6 = 0.17 > 0.15
    assert budget.should_revert(T0 + 12)
    budget.spec_settled()
    assert not budget.should_revert(T0 + 13)


def test_revert_needs_enough_attempts_after_the_change() -> None:
    budget = _budget(3, threshold=0.15, on_exhausted=spec.OnExhausted.REVERT)
    budget.spec_changed(T0)
    _attempts(budget, ok=0, failed=4, now=T0 + 1)
    assert not budget.should_revert(T0 + 1)
    _attempts(budget, ok=0, failed=1, now=T0 + 2)
    assert budget.should_revert(T0 + 2)


def test_failures_more_than_a_window_after_the_change_are_not_blamed_on_it() -> None:
    budget = _budget(3, threshold=0.15, on_exhausted=spec.OnExhausted.REVERT)
    budget.spec_changed(T0)
    _attempts(budget, ok=0, failed=5, now=T0 + WINDOW + 1)
    assert not budget.should_revert(T0 + WINDOW + 1)


def test_block_never_reverts() -> None:
    budget = _budget(3, threshold=0.15, on_exhausted=spec.OnExhausted.BLOCK)
    budget.spec_changed(T0)
    _attempts(budget, ok=0, failed=10, now=T0 + 1)
    assert not budget.should_revert(T0 + 1)
    assert budget.exhausted(T0 + 1) == "FailureRateExceeded"


# Restart -----------------------------------------------------------------------------------


def _status(used: Any, start: float | str, rate: Any = 0.0) -> dict[str, Any]:
    window_start = start if isinstance(start, str) else timestamps.format_time(start)
    return {"used": used, "remaining": 0, "windowStart": window_start, "failureRate": rate}


def test_restore_keeps_what_was_spent_in_the_running_window() -> None:
    before = _budget(3)
    for t in (1, 2):
        before.record_deviation(T0 + t)
    written = _status(before.used(T0 + 5), before.window_start(T0 + 5))
    after = _budget(3)  # a new process, created later
    after_now = T0 + 300
    assert after.restore(written, after_now)
    state = after.state(after_now)
    assert (state.used, state.remaining, state.window_start) == (2, 1, T0)
    assert after.record_deviation(after_now)
    assert not after.record_deviation(after_now)
    assert after.remaining(T0 + WINDOW) == 3  # the restored window still ends on time


def test_restore_of_an_elapsed_window_starts_on_its_cadence_with_a_full_budget() -> None:
    budget = _budget(3)
    assert budget.restore(_status(3, T0 - WINDOW - 10), T0)
    assert (budget.used(T0), budget.window_start(T0)) == (0, T0 - 10)


def test_a_restored_failure_rate_keeps_the_budget_tripped() -> None:
    budget = _budget(3, threshold=0.15)
    assert budget.restore(_status(0, T0, rate=0.5), T0 + 1)
    assert budget.exhausted(T0 + 1) == "FailureRateExceeded"
    _attempts(budget, ok=45, failed=0, now=T0 + 2)  # fresh successes outweigh it
    assert budget.exhausted(T0 + 2) is None


@pytest.mark.parametrize(
    "status",
    [
        None,
        "budget",
        {},
        {"used": 2},
        _status(2, "yesterday"),
        _status(2, "2027-01-15T08:00:00"),  # no offset
    ],
)
def test_a_status_without_a_usable_window_start_restores_nothing(status: Any) -> None:
    budget = _budget(3)
    budget.record_deviation(T0)
    assert not budget.restore(status, T0 + 1)
    assert budget.used(T0 + 1) == 1


def test_malformed_counts_in_status_are_read_as_nothing_spent() -> None:
    budget = _budget(3)
    assert budget.restore(_status("two", T0, rate="high"), T0 + 1)
    state = budget.state(T0 + 1)
    assert (state.used, state.failure_rate, state.window_start) == (0, 0.0, T0)
