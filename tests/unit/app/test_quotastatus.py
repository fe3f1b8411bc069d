"""ElasticQuota status.used as scheduler-plugins' controller computes and formats it."""

from __future__ import annotations

from fractions import Fraction

import pytest

from plumb.app import quotastatus
from plumb.backend.records import quotaobjects
from plumb_dev.testing.builders import make_pod


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Fraction(0), "0"),
        (Fraction(3, 2), "1500m"),
        (Fraction(2), "2"),
        (Fraction(2_000_000_000), "2G"),
        (Fraction(1024**3), "1073741824"),
        (Fraction(1, 10**9), "1n"),
    ],
)
def test_quantities_are_written_in_canonical_decimal_form(value: Fraction, text: str) -> None:
    assert quotastatus.decimal(value) == text


def test_used_sums_running_pods_from_zeros_for_the_names_of_min_and_max() -> None:
    quota = quotaobjects.parse_quota(
        {
            "metadata": {"namespace": "team-a", "name": "q"},
            "spec": {"min": {"cpu": "1"}, "max": {"cpu": "4", "nvidia.com/gpu": "2"}},
            "status": {"used": {"cpu": "500m"}},
        }
    )
    pod = make_pod("p", "team-a").req(cpu="500m", memory="1Gi").obj()
    pod["spec"]["initContainers"] = [
        {"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}
    ]
    pod["spec"]["overhead"] = {"cpu": "1"}  # the controller leaves it out
    used = quotastatus.used_of(quota, [pod])
    assert used == {"cpu": Fraction(2), "nvidia.com/gpu": Fraction(0), "memory": Fraction(1024**3)}
    assert quotastatus.written(quota) == {"cpu": Fraction(1, 2)}
