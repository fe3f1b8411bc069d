"""Go durations in a KubeSchedulerConfiguration: read as time.ParseDuration reads them and
printed as time.Duration.String prints them (kube-scheduler's messages show a metav1.Duration
that way). The expected values were printed by Go 1.26's time package."""

from __future__ import annotations

import pytest

from plumb.framework.schedconfig import names


@pytest.mark.parametrize(
    ("text", "nanoseconds", "printed"),
    [
        ("10s", 10_000_000_000, "10s"),
        ("10m", 600_000_000_000, "10m0s"),
        ("600s", 600_000_000_000, "10m0s"),
        ("1h", 3_600_000_000_000, "1h0m0s"),
        ("0.5s", 500_000_000, "500ms"),
        ("1500us", 1_500_000, "1.5ms"),
        ("1.5μs", 1_500, "1.5µs"),  # the Greek mu reads, the micro sign prints
        ("-1.5m", -90_000_000_000, "-1m30s"),
        ("+5s", 5_000_000_000, "5s"),
        ("0", 0, "0s"),
        ("-0", 0, "0s"),
        ("1h2m3.004s", 3_723_004_000_000, "1h2m3.004s"),
        (".5s", 500_000_000, "500ms"),
        ("1.0000000001s", 1_000_000_000, "1s"),  # the fraction goes through float64
        ("1.123456789123h", 4_044_444_440_842, "1h7m24.444440842s"),
        ("0.3333333333333333333333333h", 1_200_000_000_000, "20m0s"),
        ("9223372036854775807ns", 2**63 - 1, "2562047h47m16.854775807s"),
        ("-9223372036854775808ns", -(2**63), "-2562047h47m16.854775808s"),
    ],
)
def test_durations_read_and_print_as_go(text: str, nanoseconds: int, printed: str) -> None:
    assert names.parse_nanoseconds(text) == nanoseconds
    assert names.go_duration(nanoseconds) == printed
    assert names.parse_duration(text) == nanoseconds / 1e9


@pytest.mark.parametrize(
    "text",
    ["", "1", "1.", ".s", "1x", "1e3s", "1h-1m", "5 s", "9223372036854775808ns", "2562048h"],
)
def test_what_go_refuses_is_refused(text: str) -> None:
    assert names.parse_nanoseconds(text) is None
    assert names.parse_duration(text) is None
