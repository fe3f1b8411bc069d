"""Parse Kubernetes resource quantities ("100m", "1.5Gi", "1e3") exactly, as the API server does.

This follows k8s.io/apimachinery/pkg/api/resource.Quantity:

    <quantity>        ::= <signedNumber><suffix>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <signedNumber>    ::= <number> | "+" <number> | "-" <number>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <integer> | "E" <integer>

(The Go doc writes <signedNumber> after "e", but ParseQuantity accepts only an integer there.)
"1E" is 10**18 (exa) while "1E3" is 1000. No whitespace is allowed. Like ParseQuantity, a
value is kept exactly down to nano (10**-9): a finer non-zero value is rounded away from zero
("0.9n" is 1n, "3.001n" is 4n), and a binarySI quantity is capped in magnitude at 2**63 - 1
("8Ei" is 2**63 - 1). Decimal quantities are not capped ("1e30" keeps its value); use
clamp_int64 before storing one in an int64. Unlike the Go scanner, a quantity needs at least one
digit ("Gi", "." and "-" are rejected, where Go quietly reads them as zero), and absurd values
(10**1000 or more, or more than 1000 significant digits) are rejected rather than computed.

value() and milli_value() round up (ceil), like Quantity.Value() and Quantity.MilliValue() do
for the non-negative quantities that resource requests are.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import Final, TypeAlias

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "QuantityError",
    "QuantityInput",
    "clamp_int64",
    "milli_value",
    "parse",
    "value",
]

INT64_MAX: Final = 2**63 - 1
INT64_MIN: Final = -(2**63)

QuantityInput: TypeAlias = str | int | float
"""What the API may hand over for a quantity: normally a string, leniently a JSON number."""

_NANO: Final = 10**9
_NANOS_PER_MILLI: Final = 10**6
_MAX_MAGNITUDE: Final = 1000  # reject |value| >= 10**1000
_MAX_SIGNIFICANT_DIGITS: Final = 1000
_INT32_MAX: Final = 2**31 - 1  # Go keeps the exponent in an int32
_CAP_NANOS: Final = INT64_MAX * _NANO

# Groups: sign, integer digits, fraction digits, binary suffix, exponent, decimal suffix.
# The lookahead demands at least one digit before or right after the point.
_QUANTITY_RE: Final = re.compile(
    r"([+-]?)(?=\.?[0-9])([0-9]*)(?:\.([0-9]*))?"
    r"(?:([KMGTPE])i|[eE]([+-]?[0-9]+)|([numkMGTPE]?))"
)

# Power of 10 of each decimalSI suffix, and power of 2 of each binarySI prefix letter.
_DECIMAL_EXPONENTS: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_EXPONENTS: Final = {"K": 10, "M": 20, "G": 30, "T": 40, "P": 50, "E": 60}

# Nanos per unit of each suffix when the number is a plain integer (the fast path).
_DECIMAL_NANOS: Final[dict[str, int]] = {s: 10 ** (e + 9) for s, e in _DECIMAL_EXPONENTS.items()}
_BINARY_NANOS: Final[dict[str, int]] = {p: (1 << e) * _NANO for p, e in _BINARY_EXPONENTS.items()}

_EXPECTED: Final = (
    "a quantity is a decimal number with an optional sign, like 2, 0.5, -1 or .5, followed by "
    "an optional suffix: n, u, m, k, M, G, T, P or E (powers of 1000), Ki, Mi, Gi, Ti, Pi or Ei "
    "(powers of 1024), or an exponent like e3 or E-2; no spaces (e.g. '100m', '1.5Gi', '1e3')"
)


class QuantityError(ValueError):
    """A value that is not a Kubernetes resource quantity; .text holds the offending value."""

    def __init__(self, text: object, reason: str = "not a valid quantity") -> None:
        super().__init__(f"invalid quantity {text!r}: {reason}; {_EXPECTED}")
        self.text = text


def parse(text: QuantityInput) -> Fraction:
    """Return the value of a quantity, exact to the nano; raise QuantityError if invalid."""
    return Fraction(_nanos(text), _NANO)


def milli_value(text: QuantityInput) -> int:
    """Return ceil(value * 1000), like Quantity.MilliValue(): cpu "100m" is 100 millicores."""
    return -(-_nanos(text) // _NANOS_PER_MILLI)


def value(text: QuantityInput) -> int:
    """Return ceil(value), like Quantity.Value(): memory "1Ki" is 1024 bytes."""
    return -(-_nanos(text) // _NANO)


def clamp_int64(n: int) -> int:
    """Clamp n to the int64 range, so huge legal quantities fit the scheduler's int64 arrays."""
    if n > INT64_MAX:
        return INT64_MAX
    if n < INT64_MIN:
        return INT64_MIN
    return n


def _nanos(text: object) -> int:
    """The quantity's value in units of 10**-9, already rounded as ParseQuantity rounds it."""
    if type(text) is str:  # the API server's own form; exact type keeps the cache key honest
        return _nanos_of_str(text)
    if isinstance(text, bool):
        raise QuantityError(text, "a boolean is not a quantity")
    if isinstance(text, int):
        return int(text) * _NANO
    if isinstance(text, float):
        # A JSON number means its decimal literal; repr gives the shortest one that round-trips
        # (0.1 is "0.1", not the binary fraction), and "inf"/"nan" are rejected by the grammar.
        try:
            return _nanos_of_str(repr(text))
        except QuantityError:
            raise QuantityError(text, "not a finite number") from None
    if isinstance(text, str):  # a str subclass: normalise so it cannot pollute the cache
        return _nanos_of_str(str(text))
    raise QuantityError(text, f"expected a string or a number, got {type(text).__name__}")


@functools.lru_cache(maxsize=4096)
def _nanos_of_str(text: str) -> int:
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise QuantityError(text)
    sign, int_digits, frac_digits, binary, exponent, decimal = match.groups()
    negative = sign == "-"
    if not frac_digits and exponent is None and len(int_digits) <= 18:
        # Fast path: a plain integer with a common suffix ("2", "100m", "512Mi").
        mantissa = int(int_digits)
        if binary is None:
            nanos = mantissa * _DECIMAL_NANOS[decimal]
        else:
            nanos = min(mantissa * _BINARY_NANOS[binary], _CAP_NANOS)
        return -nanos if negative else nanos
    nanos = _nanos_slow(text, int_digits, frac_digits or "", binary, exponent, decimal)
    return -nanos if negative else nanos


def _nanos_slow(
    text: str,
    int_digits: str,
    frac_digits: str,
    binary: str | None,
    exponent: str | None,
    decimal: str | None,
) -> int:
    """The unsigned value in nanos of a quantity with a fraction, an exponent or many digits."""
    # Normalise to digits * 10**e10 with no leading or trailing zeros in digits.
    padded = (int_digits + frac_digits).lstrip("0")
    if not padded:
        return 0
    digits = padded.rstrip("0")
    e10 = len(padded) - len(digits) - len(frac_digits)
    if exponent is not None:
        e10 += _parse_exponent(text, exponent)
    elif decimal is not None:
        e10 += _DECIMAL_EXPONENTS[decimal]
    if len(digits) > _MAX_SIGNIFICANT_DIGITS:
        raise QuantityError(text, f"more than {_MAX_SIGNIFICANT_DIGITS} significant digits")
    magnitude = e10 + len(digits)  # 10**(magnitude - 1) <= digits * 10**e10 < 10**magnitude

    if binary is not None:
        if magnitude >= 20:  # at least 10**19, beyond the int64 cap
            return _CAP_NANOS
        if magnitude <= -28:  # below 10**-28 * 2**60 * 10**9 < 1 nano: rounds up to 1n
            return 1
        scaled = int(digits) * (1 << _BINARY_EXPONENTS[binary]) * _NANO
        power: int = 10 ** abs(e10)  # int ** int is typed Any, for a negative exponent
        nanos = scaled * power if e10 >= 0 else -(-scaled // power)
        return min(nanos, _CAP_NANOS)

    if magnitude > _MAX_MAGNITUDE:
        raise QuantityError(text, f"magnitude of 10**{_MAX_MAGNITUDE} or more is not supported")
    if e10 >= -9:
        scale: int = 10 ** (e10 + 9)
        return int(digits) * scale
    # Finer than a nano. digits ends in a non-zero digit, so the dropped part is never zero and
    # rounding away from zero adds one to what is kept.
    kept = len(digits) - (-9 - e10)
    return (int(digits[:kept]) if kept > 0 else 0) + 1


def _parse_exponent(text: str, exponent: str) -> int:
    sign = -1 if exponent[0] == "-" else 1
    magnitude_digits = exponent.lstrip("+-").lstrip("0")
    if len(magnitude_digits) > 10 or (magnitude_digits and int(magnitude_digits) > _INT32_MAX):
        raise QuantityError(text, "exponent out of range")
    return sign * int(magnitude_digits or "0")
