"""Name and value checks kube-scheduler's validation applies (apimachinery's IsQualifiedName,
IsValidLabelValue, IsDNS1123Subdomain, extended resource names) and Go's duration syntax."""

from __future__ import annotations

import re

_QNAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile(f"^{_QNAME}$")
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_QNAME}')"
)
_LABEL_VALUE_RE = re.compile(f"^({_QNAME})?$")
_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_RE = re.compile(f"^{_DNS_LABEL}(\\.{_DNS_LABEL})*$")
_QUALIFIED_NAME_MAX = 63
_LABEL_VALUE_MAX = 63
_DNS_SUBDOMAIN_MAX = 253


def qualified_name_errors(value: str) -> list[str]:
    """IsQualifiedName: an optional DNS subdomain prefix and '/', then a name of at most 63
    alphanumerics, '-', '_' or '.' starting and ending alphanumeric."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > _DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN_RE.match(prefix):
            errors.append(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character"
            )
    else:
        return [f"a qualified name {_QNAME_MSG} with an optional DNS subdomain prefix and '/'"]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _QUALIFIED_NAME_MAX:
        errors.append(f"name part must be no more than {_QUALIFIED_NAME_MAX} characters")
    if not _QNAME_RE.match(name):
        errors.append(f"name part {_QNAME_MSG}")
    return errors


def label_value_errors(value: str) -> list[str]:
    errors: list[str] = []
    if len(value) > _LABEL_VALUE_MAX:
        errors.append(f"must be no more than {_LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE_RE.match(value):
        errors.append(
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return errors


def is_extended_resource_name(name: str) -> bool:
    """core/v1 helper IsExtendedResourceName: a qualified name with a domain outside
    kubernetes.io, and not a ``requests.`` quota name."""
    native = "/" not in name or "kubernetes.io/" in name
    if native or name.startswith("requests."):
        return False
    return not qualified_name_errors("requests." + name)


_NANOSECONDS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # µ, the micro sign
    "\u03bcs": 1_000,  # μ, the Greek letter
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX = 1 << 63
_DIGITS = "0123456789"


def parse_nanoseconds(text: str) -> int | None:
    """Go's time.ParseDuration, in nanoseconds; None where Go would refuse the text (bad
    syntax, an unknown unit, past int64)."""
    body = text
    negative = False
    if body[:1] in ("-", "+"):
        negative = body[0] == "-"
        body = body[1:]
    if body == "0":
        return 0
    if not body:
        return None
    total = 0
    while body:
        if body[0] != "." and body[0] not in _DIGITS:
            return None
        digits = len(body) - len(body.lstrip(_DIGITS))
        whole_text, body = body[:digits], body[digits:]
        whole = int(whole_text) if whole_text else 0
        if whole > _MAX:
            return None
        fraction, scale, has_fraction = 0, 1.0, False
        if body[:1] == ".":
            body = body[1:]
            digits = len(body) - len(body.lstrip(_DIGITS))
            fraction, scale = _leading_fraction(body[:digits])
            has_fraction = digits > 0
            body = body[digits:]
        if not whole_text and not has_fraction:
            return None
        end = 0
        while end < len(body) and body[end] != "." and body[end] not in _DIGITS:
            end += 1
        unit = _NANOSECONDS.get(body[:end])
        if unit is None:
            return None
        body = body[end:]
        if whole > _MAX // unit:
            return None
        value = whole * unit
        if fraction:
            # Go adds the fraction through float64, truncated (nanosecond-exact for hours).
            value += int(float(fraction) * (float(unit) / scale))
            if value > _MAX:
                return None
        total += value
        if total > _MAX:
            return None
    if negative:
        return -total
    return None if total > _MAX - 1 else total


def _leading_fraction(digits: str) -> tuple[int, float]:
    """time's leadingFraction: the digits as an integer and their scale (10 ** digits read),
    ignoring those past what uint64 holds."""
    value, scale = 0, 1.0
    for char in digits:
        if value > (_MAX - 1) // 10:
            break
        following = value * 10 + int(char)
        if following > _MAX:
            break
        value, scale = following, scale * 10
    return value, scale


def parse_duration(text: str) -> float | None:
    """Go's time.ParseDuration, in seconds; None where Go would refuse the text."""
    nanoseconds = parse_nanoseconds(text)
    return None if nanoseconds is None else nanoseconds / 1e9


def go_duration(nanoseconds: int) -> str:
    """A duration as Go's time.Duration.String prints it: "0s", "500ms", "1.5µs", "10m0s",
    "1h0m0s" (and so as kube-scheduler prints a metav1.Duration in its messages)."""
    negative = nanoseconds < 0
    magnitude = -nanoseconds if negative else nanoseconds
    if magnitude == 0:
        return "0s"
    if magnitude < 1_000_000_000:
        if magnitude < 1_000:
            text = f"{magnitude}ns"
        elif magnitude < 1_000_000:
            text = _fraction(magnitude, 3) + "\u00b5s"
        else:
            text = _fraction(magnitude, 6) + "ms"
    else:
        seconds, rest = divmod(magnitude, 1_000_000_000)
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        text = _fraction(seconds * 1_000_000_000 + rest, 9) + "s"
        if minutes or hours:
            text = f"{minutes}m{text}"
        if hours:
            text = f"{hours}h{text}"
    return f"-{text}" if negative else text


def _fraction(value: int, precision: int) -> str:
    """value / 10**precision with its fraction's trailing zeros (and a bare point) dropped."""
    whole, rest = divmod(value, 10**precision)
    digits = f"{rest:0{precision}d}".rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)
