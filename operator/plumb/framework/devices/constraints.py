"""A claim's constraints across its devices, as the DRA allocator checks them while it searches.

``matchAttribute``: every device of the requests it names (all requests when it names none)
has the attribute, with one value; ``distinctAttribute``: every one has it, with a value no
other has. The search adds each device it tries and removes it when it backtracks; a
constraint refuses a device that breaks it. kube-scheduler's own quirks are kept: a value of a
list type (DRAListTypeAttributes, not in plumb) never matches, v1.34 compared distinct values
by identity (no two devices' values ever equal), and up to v1.36 distinctAttribute remembered
only the latest device of each request (``emulation.DeviceFeatures``).

Pure: no I/O.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence

from plumb.backend.records import draobjects
from plumb.framework import emulation

DeviceId = tuple[str, str, str]
_SCALARS = (bool, int, str, draobjects.SemVer)


def lookup(device: draobjects.Device, driver: str, name: str) -> draobjects.AttributeValue | None:
    """A device's attribute by its fully qualified name, as lookupAttribute: the name as
    published, or its id alone when the domain is the driver's."""
    value = device.attributes.get(name)
    if value is not None:
        return value
    domain, slash, ident = name.partition("/")
    if not slash or domain != driver:
        return None
    return device.attributes.get(ident)


def _kind(value: draobjects.AttributeValue) -> type | None:
    for kind in _SCALARS:  # bool first: a bool is an int to Python
        if isinstance(value, kind):
            return kind
    return None  # a list type: Go's "unknown value type"


def _same(a: draobjects.AttributeValue, b: draobjects.AttributeValue) -> bool:
    kind = _kind(a)
    return kind is not None and _kind(b) is kind and a == b


class Constraint(abc.ABC):
    """One constraint of a claim: ``add`` a device (False: it breaks the constraint), and
    ``remove`` it again with the same arguments when the search backtracks."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute

    def applies(self, request: str, subrequest: str) -> bool:
        if not self.requests:
            return True
        if request in self.requests:
            return True
        return bool(subrequest) and f"{request}/{subrequest}" in self.requests

    @abc.abstractmethod
    def add(
        self, request: str, subrequest: str, device: draobjects.Device, device_id: DeviceId
    ) -> bool: ...

    @abc.abstractmethod
    def remove(self, request: str, subrequest: str, device_id: DeviceId) -> None: ...


class MatchAttribute(Constraint):
    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: draobjects.AttributeValue | None = None
        self.count = 0

    def add(
        self, request: str, subrequest: str, device: draobjects.Device, device_id: DeviceId
    ) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = lookup(device, device_id[0], self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.value, self.count = value, 1
            return True
        if self.value is None or not _same(value, self.value):
            return False
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str, device_id: DeviceId) -> None:
        if self.applies(request, subrequest):
            self.count -= 1


@dataclasses.dataclass(frozen=True, slots=True)
class _Seen:
    device_id: DeviceId
    value: draobjects.AttributeValue


class DistinctAttribute(Constraint):
    def __init__(
        self, requests: Sequence[str], attribute: str, features: emulation.DeviceFeatures
    ) -> None:
        super().__init__(requests, attribute)
        self.by_value = features.distinct_values
        self.per_request = features.distinct_per_request
        self.seen: list[_Seen] = []
        self.latest: dict[str, _Seen] = {}
        self.count = 0

    def _distinct(self, new: _Seen) -> bool:
        for old in self.latest.values() if self.per_request else self.seen:
            if _kind(new.value) is None:
                return False
            if self.by_value and _same(new.value, old.value):
                return False
            if not self.by_value and new.device_id == old.device_id:
                return False
        return True

    def add(
        self, request: str, subrequest: str, device: draobjects.Device, device_id: DeviceId
    ) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = lookup(device, device_id[0], self.attribute)
        if value is None:
            return False
        new = _Seen(device_id, value)
        if self.per_request:
            if self.count and not self._distinct(new):
                return False
            self.latest[request] = new
            self.count += 1
            return True
        if not self._distinct(new):
            return False
        self.seen.append(new)
        return True

    def remove(self, request: str, subrequest: str, device_id: DeviceId) -> None:
        if not self.applies(request, subrequest):
            return
        if self.per_request:
            self.latest.pop(request, None)
            self.count -= 1
        else:
            self.seen.pop()


def taint_prevents(
    device: draobjects.Device, spec: draobjects.RequestSpec, features: emulation.DeviceFeatures
) -> bool:
    """Whether an untolerated taint keeps the device from this request: NoSchedule and
    NoExecute ones (v1.34: any)."""
    for taint in device.taints:
        if features.known_taint_effects_only and taint.effect not in (
            draobjects.NO_SCHEDULE,
            draobjects.NO_EXECUTE,
        ):
            continue
        if not any(t.tolerates(taint) for t in spec.tolerations):
            return True
    return False
