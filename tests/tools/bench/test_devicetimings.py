"""Tests for the DRA micro-benchmark (plumb_dev.bench.devicetimings): a tiny run places every
pod that fits, counting agrees with the allocator on every node (``--check``), the cycle mode
decides claim pods in batches. No timing is asserted: only that the figures exist."""

from __future__ import annotations

import json

import pytest

from plumb_dev.bench import devicetimings


@pytest.mark.parametrize("minor", [34, 37])
def test_a_tiny_run_places_a_pod_per_big_gpu_and_agrees_with_the_allocator(
    minor: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # 3 nodes with 2 big GPUs each: 6 pods placed, the other 2 fit nowhere.
    assert (
        devicetimings.main(
            ["--nodes", "3", "--devices", "4", "--pods", "8", "--minor", str(minor), "--check"]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["placed"] == 6
    assert result["filter_us_mean"] > 0
    assert result["filter_after_slice_change_us"] > 0


def test_filter_as_before_gives_the_same_placements() -> None:
    before = devicetimings.measure(3, 4, 8, fast=False)
    assert before["placed"] == 6
    assert before["filter"] == "the allocator on every node"


def test_the_cycle_decides_claim_pods_in_batches() -> None:
    result = devicetimings.measure_cycle(4, 4, 10, 32)
    assert result["placed"] == 8
    assert result["kernel runs"] == 1
    assert result["cycle_us_per_pod"] > 0
