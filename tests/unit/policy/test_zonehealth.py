"""Zone health: a zone without fresh data is never penalised, a zone whose nodes are all NotReady
is scored clearly below a healthy one, and each observed trouble lowers the factor."""

from __future__ import annotations

import math

import pytest

from plumb.policy import spec, zonehealth

NOW = 10_000.0


def _tracker() -> zonehealth.ZoneHealthTracker:
    return zonehealth.ZoneHealthTracker(spec.ZoneHealth(window=300.0, stale_after=120.0))


def _healthy(tracker: zonehealth.ZoneHealthTracker, zone: str, now: float = NOW) -> None:
    tracker.observe_nodes(zone, ready=4, total=4, now=now)
    tracker.observe_bind(zone, success=True, latency=0.05, now=now)
    tracker.observe_utilisation(zone, 0.5, now=now)


def test_a_healthy_zone_has_the_factor_one() -> None:
    tracker = _tracker()
    _healthy(tracker, "a")
    assert tracker.health("a", NOW) == 1.0
    assert tracker.factor("a", NOW) == 1.0


def test_a_zone_whose_nodes_are_all_not_ready_is_scored_clearly_lower() -> None:
    tracker = _tracker()
    _healthy(tracker, "a")
    _healthy(tracker, "b")
    tracker.observe_nodes("b", ready=0, total=4, now=NOW)
    assert tracker.health("b", NOW) == 0.0
    assert tracker.factor("b", NOW) == pytest.approx(math.exp(-2))
    assert tracker.factor("b", NOW) < 0.2 * tracker.factor("a", NOW)


def test_a_stale_zone_gets_exactly_the_neutral_factor() -> None:
    tracker = _tracker()
    tracker.observe_nodes("a", ready=0, total=4, now=NOW)
    tracker.observe_bind("a", success=False, latency=9.0, now=NOW)
    assert tracker.factor("a", NOW + 120) < 0.2  # still fresh at exactly staleAfter
    report = tracker.report("a", NOW + 121)
    assert (report.fresh, report.health, report.factor) == (False, 1.0, 1.0)
    assert tracker.factor("never-seen", NOW) == 1.0


def test_one_fresh_observation_keeps_the_older_ones_in_the_window_counting() -> None:
    tracker = _tracker()
    tracker.observe_nodes("a", ready=1, total=2, now=NOW)
    tracker.observe_utilisation("a", 0.1, now=NOW + 200)  # newer than staleAfter after NOW
    assert tracker.health("a", NOW + 250) == pytest.approx(0.5)
    assert tracker.health("a", NOW + 301) == 1.0  # node count left the window


@pytest.mark.parametrize(
    ("binds", "term", "expected"),
    [
        ([(False, 0.1)], "binds", 0.5),  # one failure halves, never zeroes
        ([(True, 0.1)] * 3 + [(False, 0.1)], "binds", 0.8),
        ([(True, 2.0)] * 2, "latency", 0.5),  # twice the 1 s reference
        ([(True, 0.9)] * 2, "latency", 1.0),
    ],
)
def test_bindings_count_by_success_share_and_latency(
    binds: list[tuple[bool, float]], term: str, expected: float
) -> None:
    tracker = _tracker()
    for success, latency in binds:
        tracker.observe_bind("a", success=success, latency=latency, now=NOW)
    report = tracker.report("a", NOW)
    assert getattr(report, term) == pytest.approx(expected)
    assert report.health == pytest.approx(report.binds * report.latency)


@pytest.mark.parametrize(("used", "term"), [(0.5, 1.0), (0.8, 1.0), (0.9, 0.75), (1.0, 0.5)])
def test_a_nearly_full_zone_is_a_worse_place_but_never_a_broken_one(
    used: float, term: float
) -> None:
    tracker = _tracker()
    tracker.observe_utilisation("a", used, now=NOW)
    assert tracker.health("a", NOW) == pytest.approx(term)


def test_bindings_that_left_the_window_are_forgotten() -> None:
    tracker = _tracker()
    tracker.observe_bind("a", success=False, latency=5.0, now=NOW)
    tracker.observe_bind("a", success=True, latency=0.1, now=NOW + 301)
    report = tracker.report("a", NOW + 301)
    assert (report.binds, report.latency) == (1.0, 1.0)


def test_healths_report_every_known_zone_for_the_metric() -> None:
    tracker = _tracker()
    _healthy(tracker, "a")
    tracker.observe_nodes("b", ready=1, total=4, now=NOW)
    tracker.observe_nodes("c", ready=0, total=4, now=NOW - 1000)
    assert tracker.healths(NOW) == {"a": 1.0, "b": 0.25, "c": 1.0}
    tracker.forget("b")
    assert tracker.zones() == ("a", "c")


def test_nonsense_observations_are_clamped_not_raised() -> None:
    tracker = _tracker()
    tracker.observe_nodes("a", ready=9, total=-1, now=NOW)
    tracker.observe_bind("a", success=True, latency=float("nan"), now=NOW)
    tracker.observe_utilisation("a", float("inf"), now=NOW)
    assert 0.0 <= tracker.health("a", NOW) <= 1.0
