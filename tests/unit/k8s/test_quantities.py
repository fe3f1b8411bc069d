"""Tests for plumb.k8s.quantities: Kubernetes resource quantities parsed as the API server does."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plumb.k8s import quantities
from plumb.k8s.quantities import (
    INT64_MAX,
    INT64_MIN,
    QuantityError,
    clamp_int64,
    milli_value,
    parse,
    value,
)

BINARY_SUFFIXES = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
DECIMAL_SUFFIXES |= {"P": 15, "E": 18}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", 100),
        ("1", 1000),
        ("0.5", 500),
        ("250m", 250),
        ("2", 2000),
        ("1.5", 1500),
        ("1e-3", 1),
        ("1E-3", 1),
        ("1n", 1),  # 0.000001 millicores, rounded up
        ("1u", 1),
        ("999999n", 1),
        ("1000001n", 2),
        ("1500u", 2),
        ("+1", 1000),
        ("-1", -1000),
        ("-100m", -100),
        ("0", 0),
        ("-0", 0),
        ("0m", 0),
        (".5", 500),
        ("5.", 5000),
        ("+.5", 500),
        ("-.5", -500),
        ("1.G", 10**12),
        ("1e3", 10**6),
        ("1k", 10**6),
        ("0.1", 100),
        ("0.0001", 1),
        ("-0.0001", 0),  # ceil, as for Quantity.MilliValue
        ("1e30", 10**33),
    ],
)
def test_milli_value(text: str, expected: int) -> None:
    assert milli_value(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1Ki", 1024),
        ("1Mi", 1024**2),
        ("1Gi", 1024**3),
        ("1.5Gi", 3 * 2**29),
        ("0.5Mi", 512 * 1024),
        ("100.035Ki", 102436),  # 102435.84 rounded up
        ("128Mi", 128 * 2**20),
        ("1k", 1000),
        ("1M", 10**6),
        ("1G", 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),
        ("12E", 12 * 10**18),
        ("1.01E", 101 * 10**16),
        ("1E3", 1000),
        ("1e3", 1000),
        ("1E+3", 1000),
        ("1e03", 1000),
        ("1.2e3", 1200),
        ("1.3E+6", 1_300_000),
        ("100.035k", 100035),
        ("7.123456M", 7123456),
        ("1", 1),
        ("110", 110),
        ("0.5", 1),
        ("1.1", 2),
        ("1m", 1),
        ("1n", 1),
        ("-1.5", -1),  # ceil
        ("-1Ki", -1024),
        ("0", 0),
        ("0Gi", 0),
        ("000123", 123),
        ("5.", 5),
        (".5", 1),
        ("1e30", 10**30),
        ("18446744073709551616", 2**64),  # decimal quantities are not capped
    ],
)
def test_value(text: str, expected: int) -> None:
    assert value(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Fraction(1, 10)),
        ("0.5", Fraction(1, 2)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("0.05Gi", Fraction(536870912, 10)),
        ("0.025Ti", Fraction(274877906944, 10)),
        ("5n", Fraction(5, 10**9)),
        ("4u", Fraction(4, 10**6)),
        ("1e-3", Fraction(1, 1000)),
        ("0.5e-2", Fraction(5, 1000)),
        ("0.0005k", Fraction(1, 2)),
        ("6.987654321G", Fraction(6987654321)),
        ("-9.01", Fraction(-901, 100)),
        ("1e30", Fraction(10**30)),
        ("1e-9", Fraction(1, 10**9)),
        # Like ParseQuantity: precision is kept down to nano, finer values round away from zero.
        ("3.001n", Fraction(4, 10**9)),
        ("1.1E-9", Fraction(2, 10**9)),
        ("0.0000000001", Fraction(1, 10**9)),
        ("0.5e-9", Fraction(1, 10**9)),
        ("0.9n", Fraction(1, 10**9)),
        ("-0.9n", Fraction(-1, 10**9)),
        ("0.00000012345", Fraction(124, 10**9)),
        ("0.000000000001Ki", Fraction(2, 10**9)),
        ("1e-2147483647", Fraction(1, 10**9)),
        ("0e999999", Fraction(0)),
        ("0.000", Fraction(0)),
        # Like ParseQuantity: binarySI quantities are capped in magnitude at 2**63 - 1.
        ("8Ei", Fraction(INT64_MAX)),
        ("9Ei", Fraction(INT64_MAX)),
        ("-9Ei", Fraction(-INT64_MAX)),
        ("9223372036854775807Ki", Fraction(INT64_MAX)),
        ("123456789012345678901234567890Ki", Fraction(INT64_MAX)),
        ("7.99999Ei", Fraction(799999 * 2**60, 100000)),  # just below the cap
    ],
)
def test_parse_exact(text: str, expected: Fraction) -> None:
    got = parse(text)
    assert isinstance(got, Fraction)
    assert got == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (2, Fraction(2)),
        (0, Fraction(0)),
        (-3, Fraction(-3)),
        (10**30, Fraction(10**30)),
        (0.5, Fraction(1, 2)),
        (0.1, Fraction(1, 10)),  # the decimal literal, not the binary float
        (2.0, Fraction(2)),
        (1e30, Fraction(10**30)),
        (1e-5, Fraction(1, 10**5)),
        (-0.0, Fraction(0)),
    ],
)
def test_parse_numbers(raw: int | float, expected: Fraction) -> None:
    assert parse(raw) == expected


def test_numbers_through_the_int_accessors() -> None:
    assert milli_value(2) == 2000
    assert milli_value(0.25) == 250
    assert value(3) == 3
    assert value(1.5) == 2


def test_str_subclass_is_parsed_like_str() -> None:
    class Text(str):
        pass

    assert milli_value(Text("100m")) == 100


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "lots",
        "1.2.3",
        "1KiB",
        "Gi",
        "Ki",
        "1 Gi",
        " 1",
        "1 ",
        "1\n",
        "1ki",
        "1mi",
        "1i",
        ".5i",
        "1.1.M",
        "1+1.0M",
        "0.1am",
        "-3.01e-",
        "1e",
        "1E+",
        "1e1.5",
        "1Ee3",
        "1µ",
        "1K",
        ".",
        "+",
        "-",
        "+-1",
        "--1",
        "1,5",
        "٣",  # a non-ASCII digit
        "inf",
        "nan",
        "0x10",
        "1_000",
    ],
)
def test_invalid_strings(bad: str) -> None:
    with pytest.raises(QuantityError) as excinfo:
        parse(bad)
    message = str(excinfo.value)
    assert repr(bad) in message
    assert "Gi" in message  # says what a valid quantity looks like
    assert excinfo.value.text == bad
    with pytest.raises(QuantityError):
        milli_value(bad)
    with pytest.raises(QuantityError):
        value(bad)


@pytest.mark.parametrize(
    "bad",
    [True, False, None, float("inf"), float("-inf"), float("nan"), [1], {"cpu": 1}, b"1"],
)
def test_invalid_values(bad: object) -> None:
    with pytest.raises(QuantityError) as excinfo:
        parse(bad)  # type: ignore[arg-type]
    assert repr(bad) in str(excinfo.value)
    with pytest.raises(QuantityError):
        milli_value(bad)  # type: ignore[arg-type]
    with pytest.raises(QuantityError):
        value(bad)  # type: ignore[arg-type]


def test_bool_is_rejected_even_after_1_is_cached() -> None:
    assert value(1) == 1
    assert value("1") == 1
    with pytest.raises(QuantityError):
        value(True)


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("1e1000", "10**1000"),
        ("9" + "0" * 1000, "10**1000"),
        ("1" * 1001, "significant digits"),
        ("0." + "1" * 1001, "significant digits"),
        ("1e99999999999", "exponent out of range"),
        ("1e2147483648", "exponent out of range"),
    ],
)
def test_absurd_quantities_are_rejected_not_computed(bad: str, reason: str) -> None:
    with pytest.raises(QuantityError, match=re.escape(reason)):
        parse(bad)


def test_long_but_reasonable_quantities() -> None:
    # Leading and trailing zeros do not count against any limit (or int()'s digit limit).
    assert value("0" * 5000 + "1") == 1
    assert parse("1." + "0" * 5000) == 1
    assert parse("0." + "0" * 5000 + "1") == Fraction(1, 10**9)
    assert value("1e999") == 10**999
    assert value("1e" + "0" * 5000 + "3") == 1000
    assert milli_value("0." + "0" * 5000 + "1Ki") == 1


def test_int64_bounds() -> None:
    assert INT64_MAX == 2**63 - 1
    assert INT64_MIN == -(2**63)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, 0),
        (1, 1),
        (-1, -1),
        (INT64_MAX, INT64_MAX),
        (INT64_MAX + 1, INT64_MAX),
        (INT64_MIN, INT64_MIN),
        (INT64_MIN - 1, INT64_MIN),
        (10**40, INT64_MAX),
        (-(10**40), INT64_MIN),
    ],
)
def test_clamp_int64(n: int, expected: int) -> None:
    assert clamp_int64(n) == expected


def test_huge_cpu_quantity_clamps_to_int64() -> None:
    assert milli_value("1e30") == 10**33
    assert clamp_int64(milli_value("1e30")) == INT64_MAX
    assert clamp_int64(value("1e30")) == INT64_MAX
    assert clamp_int64(milli_value("-1e30")) == INT64_MIN
    assert clamp_int64(milli_value(10**30)) == INT64_MAX


def test_repeated_parsing_is_cached_and_stable() -> None:
    assert [milli_value("100m") for _ in range(3)] == [100, 100, 100]
    assert [value("1.5Gi") for _ in range(3)] == [3 * 2**29] * 3


def test_module_docstring_states_purpose() -> None:
    assert quantities.__doc__ is not None
    assert "quantities" in quantities.__doc__.splitlines()[0]


# ---- properties ----


@given(n=st.integers(), k=st.integers(min_value=1, max_value=6))
def test_binary_suffix_multiplies_by_powers_of_1024(n: int, k: int) -> None:
    expected = n * 1024**k
    if abs(expected) > INT64_MAX:  # ParseQuantity caps binarySI quantities at 2**63 - 1
        expected = INT64_MAX if expected > 0 else -INT64_MAX
    assert value(f"{n}{BINARY_SUFFIXES[k - 1]}") == expected


@given(n=st.integers(min_value=-(INT64_MAX // 1024**6), max_value=INT64_MAX // 1024**6))
def test_binary_suffixes_are_exact_within_int64(n: int) -> None:
    for k, suffix in enumerate(BINARY_SUFFIXES, start=1):
        assert value(f"{n}{suffix}") == n * 1024**k
        assert milli_value(f"{n}{suffix}") == n * 1024**k * 1000


@given(n=st.integers(), suffix=st.sampled_from(sorted(DECIMAL_SUFFIXES)))
def test_decimal_suffix_multiplies_by_powers_of_1000(n: int, suffix: str) -> None:
    exact = Fraction(n) * Fraction(10) ** DECIMAL_SUFFIXES[suffix]
    assert parse(f"{n}{suffix}") == exact
    assert milli_value(f"{n}{suffix}") == math.ceil(exact * 1000)
    assert value(f"{n}{suffix}") == math.ceil(exact)


def _round_to_nano(x: Fraction) -> Fraction:
    """ParseQuantity's rounding: keep nanos, round anything finer away from zero."""
    nanos = x * 10**9
    whole = math.ceil(abs(nanos))
    return Fraction(whole if x >= 0 else -whole, 10**9)


@given(
    negative=st.booleans(),
    int_part=st.text("0123456789", max_size=25),
    frac_part=st.text("0123456789", max_size=25),
    exponent=st.none() | st.integers(min_value=-40, max_value=40),
    suffix=st.sampled_from(sorted(DECIMAL_SUFFIXES)),
)
def test_decimal_quantities_match_a_decimal_oracle(
    negative: bool, int_part: str, frac_part: str, exponent: int | None, suffix: str
) -> None:
    if not int_part and not frac_part:
        int_part = "0"
    number = f"{'-' if negative else ''}{int_part}.{frac_part}"
    if exponent is None:
        text = number + suffix
        scale = DECIMAL_SUFFIXES[suffix]
    else:
        text = f"{number}e{exponent}"
        scale = exponent
    exact = Fraction(Decimal(number)) * Fraction(10) ** scale
    expected = _round_to_nano(exact)
    assert parse(text) == expected
    assert milli_value(text) == math.ceil(expected * 1000)
    assert value(text) == math.ceil(expected)


@given(
    int_part=st.integers(min_value=0, max_value=10**12),
    frac_part=st.text("0123456789", max_size=20),
    k=st.integers(min_value=1, max_value=6),
)
def test_fractional_binary_quantities_match_an_oracle(
    int_part: int, frac_part: str, k: int
) -> None:
    text = f"{int_part}.{frac_part}{BINARY_SUFFIXES[k - 1]}"
    exact = Fraction(Decimal(f"{int_part}.{frac_part}")) * 1024**k
    expected = min(_round_to_nano(exact), Fraction(INT64_MAX))
    assert parse(text) == expected


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_mean_their_shortest_decimal_literal(x: float) -> None:
    assert parse(x) == _round_to_nano(Fraction(Decimal(repr(x))))
