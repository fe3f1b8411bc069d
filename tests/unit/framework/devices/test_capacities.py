"""Consumable capacity's arithmetic and the quantities it writes (Quantity.String())."""

from __future__ import annotations

from fractions import Fraction

import pytest

from plumb.backend.records import draobjects
from plumb.framework.devices import capacities
from plumb.k8s import quantities


def q(text: str) -> draobjects.Quantity:
    return draobjects.Quantity(quantities.parse(text), text)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("0", "0"),
        ("2", "2"),
        ("1024", "1024"),
        ("2048Mi", "2Gi"),
        ("1.5Gi", "1536Mi"),
        ("1025Ki", "1025Ki"),
        ("0.5Ki", "512"),
        ("1500m", "1500m"),
        ("0.5", "500m"),
        ("1e3", "1e3"),
        ("1.5e3", "1500"),
        ("100M", "100M"),
        ("12k", "12k"),
        ("1000000000000000000000", "1000E"),
        ("-5", "-5"),
    ],
)
def test_quantities_are_written_as_kubernetes_writes_them(text: str, canonical: str) -> None:
    value = quantities.parse(text)
    assert capacities.canonical(value, capacities.quantity_format(text)) == canonical


def fits(requests: dict[str, str], capacity: dict[str, draobjects.Capacity], **kw: object) -> bool:
    return capacities.fits(
        {k: q(v) for k, v in requests.items()},
        capacity,
        allocated=kw.get("allocated", {}),  # type: ignore[arg-type]
        allocating={},
        fractional=bool(kw.get("fractional", False)),
        strict=True,
    )


FRACTIONAL = draobjects.CapacityPolicy(
    default=q("200m"), minimum=q("200m"), step=q("100m"), maximum=q("1")
)


def test_a_fractional_range_rounds_in_thousandths_only_with_its_gate() -> None:
    capacity = {"c": draobjects.Capacity(q("1"), FRACTIONAL)}
    amounts = capacities.consumed({"c": q("250m")}, capacity, fractional=True, strict=True)
    assert (amounts["c"].value, amounts["c"].text) == (Fraction(3, 10), "300m")
    # Without DRAFractionalCapacityRange the arithmetic is in whole units (Value() rounds
    # 200m, 100m and 200m up to 1): the request takes 1, the whole capacity.
    whole = capacities.consumed({"c": q("200m")}, capacity, fractional=False, strict=True)
    assert (whole["c"].value, whole["c"].text) == (Fraction(1), "1")
    assert fits({"c": "250m"}, capacity, fractional=True)
    assert not fits({"c": "1100m"}, capacity, fractional=True)  # over the maximum


def test_what_others_consume_counts() -> None:
    capacity = {"c": draobjects.Capacity(q("4"))}
    assert fits({"c": "2"}, capacity, allocated={"c": Fraction(2)})
    assert not fits({"c": "3"}, capacity, allocated={"c": Fraction(2)})
