"""The Lease as plumb reads and writes it, and the election's timings: records only, no I/O."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

__all__ = [
    "DEFAULT_TIMINGS",
    "ElectionSettings",
    "Record",
    "Timings",
    "micro_time",
    "parse_duration",
]

JSON = dict[str, Any]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration ("15s", "500ms", "1m30s"; a bare number is seconds)."""
    value = text.strip()
    try:
        return float(value)
    except ValueError:
        pass
    total, number, rest = 0.0, "", value
    while rest:
        char = rest[0]
        if char.isdigit() or char == ".":
            number += char
            rest = rest[1:]
            continue
        unit = next((u for u in ("ms", "h", "m", "s") if rest.startswith(u)), None)
        if unit is None or not number:
            break
        total += float(number) * _UNITS[unit]
        number, rest = "", rest[len(unit) :]
    if rest or number or not value:
        raise ValueError(f"{text!r} is not a duration; write it as 15s, 500ms or 1m30s")
    return total


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timings:
    """kube-scheduler's defaults: a 15 s lease, renewed every 2 s, given up after 10 s."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"leader election needs 0 < retry period ({self.retry_period} s) < renew "
                f"deadline ({self.renew_deadline} s) < lease duration ({self.lease_duration} s):"
                " a leader must give up before its lease can expire"
            )
        if self.lease_duration < 1:
            raise ValueError(
                f"the lease duration ({self.lease_duration} s) must be at least 1 s: the "
                "Lease counts it in whole seconds"
            )


DEFAULT_TIMINGS = Timings()


@dataclasses.dataclass(frozen=True, kw_only=True)
class ElectionSettings:
    """Which Lease, who we are, and how fast."""

    namespace: str
    name: str = "plumb"
    identity: str
    timings: Timings = DEFAULT_TIMINGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
    """The Lease's spec: who holds it, since when, last renewed when, for how long."""

    holder: str = ""
    lease_duration: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def of(cls, lease: JSON) -> Record:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> JSON:
        return {
            "holderIdentity": self.holder or None,
            "leaseDurationSeconds": self.lease_duration,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


def micro_time(epoch: float) -> str:
    """A Kubernetes MicroTime ("2026-01-02T03:04:05.123456Z")."""
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
