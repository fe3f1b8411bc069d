"""Consumable capacity: what a request takes of a shareable device's capacities, as DRA does.

A device with ``allowMultipleAllocations`` is shared by several allocations; each takes an
amount of each of the device's capacities: the request's amount rounded up to what the
capacity's ``requestPolicy`` allows (its valid values, or its range: min, then steps), the
policy's default when the request names none, or the whole capacity when there is no default.
The amounts of all allocations must fit the capacity
(k8s.io/dynamic-resource-allocation structured/internal/incubating/consumable_capacity.go).

The amounts carry the text kube-scheduler writes for them (``consumedCapacity``): the text of
the quantity they were copied from, or the canonical form of a computed one in the format of
the range's step (Quantity.String()).

Pure: no I/O. ``CapacityError`` carries the words that stop the pod (v1.37).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from fractions import Fraction

from plumb.backend.records import draobjects

INT64_MAX = 2**63 - 1
Consumed = Mapping[str, Fraction]

_NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"
_NEGATIVE = "capacity value is negative"


class CapacityError(Exception):
    """A capacity request the allocator refuses outright: Go's error text after "capacity"."""


# --- quantity text -------------------------------------------------------------------------

BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT = "BinarySI", "DecimalSI", "DecimalExponent"
_SUFFIX = re.compile(r"^[+-]?[0-9.]*(?P<suffix>.*)$")
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T"}
_DECIMAL_SUFFIXES.update({15: "P", 18: "E"})
_BINARY_SUFFIXES = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}


def quantity_format(text: str) -> str:
    """The format ParseQuantity gives a quantity's text: BinarySI, DecimalSI or
    DecimalExponent (by its suffix)."""
    found = _SUFFIX.match(text.strip())
    suffix = found.group("suffix") if found else ""
    if suffix.endswith("i"):
        return BINARY_SI
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return DECIMAL_EXPONENT
    return DECIMAL_SI


def canonical(value: Fraction, fmt: str) -> str:
    """Quantity.String() of a value in a format: "1536Mi", "500m", "2e3" (CanonicalizeBytes)."""
    if value == 0:
        return "0"
    if fmt == BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
        fmt = DECIMAL_SI
    if fmt == BINARY_SI:
        amount, power = int(value), 0
        while abs(amount) >= 1024 and amount % 1024 == 0 and power < 6:
            amount //= 1024
            power += 1
        return f"{amount}{_BINARY_SUFFIXES[power]}"
    # value * 10**9 is an integer: quantities are exact to the nano.
    amount, exponent = int(value * 10**9), -9
    while abs(amount) >= 10 and amount % 10 == 0:
        amount //= 10
        exponent += 1
    while exponent % 3:
        amount *= 10
        exponent -= 1
    if fmt == DECIMAL_EXPONENT:
        return f"{amount}e{exponent}" if exponent else str(amount)
    while exponent > 18:
        amount *= 1000
        exponent -= 3
    return f"{amount}{_DECIMAL_SUFFIXES[exponent]}"


def _made(value: Fraction, like: draobjects.Quantity) -> draobjects.Quantity:
    """A computed quantity, written in the format of ``like`` (NewQuantity(v, like.Format))."""
    return draobjects.Quantity(value, canonical(value, quantity_format(like.text)))


def _text(q: draobjects.Quantity) -> str:
    """Quantity.String() of a quantity read from the API."""
    return canonical(q.value, quantity_format(q.text))


# --- consumed capacity ---------------------------------------------------------------------


def _ceil(value: Fraction) -> int:
    return math.ceil(value)


def _milli(q: draobjects.Quantity) -> int | None:
    """The quantity in thousandths if that is exact and fits an int64 (safeMilliValue)."""
    milli = q.value * 1000
    if milli.denominator != 1 or not -(2**63) <= int(milli) <= INT64_MAX:
        return None
    return int(milli)


def _use_milli(policy: draobjects.CapacityPolicy, fractional: bool) -> bool:
    if not fractional:
        return False
    for q in (policy.minimum, policy.maximum, policy.step):
        if q is not None and _milli(q) is None:
            return False
    return policy.step is None or (_milli(policy.step) or 0) >= 1


def _round_up_range(
    requested: draobjects.Quantity,
    policy: draobjects.CapacityPolicy,
    fractional: bool,
    strict: bool,
) -> draobjects.Quantity:
    minimum, step = policy.minimum, policy.step
    assert minimum is not None
    if requested.value < minimum.value:
        return minimum
    if step is None:
        return requested
    if _use_milli(policy, fractional):
        wanted = _milli(requested)
        if wanted is None:
            raise CapacityError(
                f"{_NOT_REPRESENTABLE}: request {_text(requested)} is not a representable "
                "milli value"
            )
        step_milli, min_milli = _ceil(step.value * 1000), _ceil(minimum.value * 1000)
        n = -(-(wanted - min_milli) // step_milli)
        if strict and n > (INT64_MAX - min_milli) // step_milli:
            raise CapacityError(
                f"{_NOT_REPRESENTABLE}: rounding request {_text(requested)} up to the next "
                "step passes the milli-value range"
            )
        return _made(Fraction(min_milli + step_milli * n, 1000), step)
    if strict and requested.value > INT64_MAX:
        raise CapacityError(f"{_NOT_REPRESENTABLE}: request {_text(requested)} exceeds MaxInt64")
    wanted, step_int, min_int = _ceil(requested.value), _ceil(step.value), _ceil(minimum.value)
    n = -(-(wanted - min_int) // step_int)
    if strict and min_int >= 0 and n > (INT64_MAX - min_int) // step_int:
        raise CapacityError(
            f"{_NOT_REPRESENTABLE}: rounding request {_text(requested)} up to the next step "
            "passes MaxInt64"
        )
    return _made(Fraction(min_int + step_int * n), step)


def _consumed(
    requested: draobjects.Quantity | None,
    capacity: draobjects.Capacity,
    fractional: bool,
    strict: bool,
) -> draobjects.Quantity:
    """What one allocation takes of one capacity (calculateConsumedCapacity)."""
    policy = capacity.policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return capacity.value
    if policy is None:
        return requested
    if policy.minimum is not None:
        return _round_up_range(requested, policy, fractional, strict)
    if policy.valid_values:
        return next((v for v in policy.valid_values if requested.value <= v.value), requested)
    return requested


def _violates(value: Fraction, policy: draobjects.CapacityPolicy | None, fractional: bool) -> bool:
    if policy is None:
        return False
    if policy.default is not None and value == policy.default.value:
        return False
    if policy.minimum is not None or policy.maximum is not None or policy.step is not None:
        if policy.maximum is not None and value > policy.maximum.value:
            return True
        if policy.step is not None:
            minimum = policy.minimum.value if policy.minimum is not None else Fraction(0)
            if _use_milli(policy, fractional):
                wanted = _milli(draobjects.Quantity(value, ""))
                if wanted is None:
                    return True
                return (wanted - _ceil(minimum * 1000)) % _ceil(policy.step.value * 1000) != 0
            return (_ceil(value) - _ceil(minimum)) % _ceil(policy.step.value) != 0
        return False
    if policy.valid_values:
        return all(value != v.value for v in policy.valid_values)
    return False


def fits(
    requests: Mapping[str, draobjects.Quantity],
    capacity: Mapping[str, draobjects.Capacity],
    *,
    allocated: Consumed,
    allocating: Consumed,
    fractional: bool,
    strict: bool,
) -> bool:
    """Whether one more allocation with these capacity requests fits a device whose
    capacities already carry ``allocated`` (committed) and ``allocating`` (this pod's other
    allocations): every requested capacity exists, every amount is one its policy allows,
    and the sums stay within the capacities (CmpRequestOverCapacity). ``strict`` (v1.37):
    an unrepresentable or negative amount raises CapacityError instead of skipping."""
    if any(name not in capacity for name in requests):
        return False
    amounts: dict[str, Fraction] = {}
    for name in sorted(capacity):
        amount = _named(name, requests.get(name), capacity[name], fractional, strict).value
        if strict and amount < 0:
            raise CapacityError(f"capacity {json.dumps(name)}: {_NEGATIVE}")
        amounts[name] = amount
    for name, cap in capacity.items():
        amount = amounts[name]
        if _violates(amount, cap.policy, fractional):
            return False
        total = allocated.get(name, Fraction(0)) + amount + allocating.get(name, Fraction(0))
        if total > cap.value.value:
            return False
    return True


def consumed(
    requests: Mapping[str, draobjects.Quantity],
    capacity: Mapping[str, draobjects.Capacity],
    *,
    fractional: bool,
    strict: bool,
) -> dict[str, draobjects.Quantity]:
    """What an allocation of a shareable device takes of each of its capacities
    (GetConsumedCapacityFromRequest): the results' ``consumedCapacity``."""
    return {
        name: _named(name, requests.get(name), cap, fractional, strict)
        for name, cap in capacity.items()
    }


def _named(
    name: str,
    requested: draobjects.Quantity | None,
    capacity: draobjects.Capacity,
    fractional: bool,
    strict: bool,
) -> draobjects.Quantity:
    try:
        return _consumed(requested, capacity, fractional, strict)
    except CapacityError as error:
        raise CapacityError(f"capacity {json.dumps(name)}: {error}") from None
