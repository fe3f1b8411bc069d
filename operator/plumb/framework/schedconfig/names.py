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


_DURATION_RE = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(text: str) -> float | None:
    """Go's time.ParseDuration, in seconds; None where Go would refuse the text."""
    body = text
    sign = 1.0
    if body[:1] in "+-" and body:
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        return None
    total = 0.0
    position = 0
    while position < len(body):
        match = _DURATION_RE.match(body, position)
        if match is None or match.group(1) in ("", "."):
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return sign * total
