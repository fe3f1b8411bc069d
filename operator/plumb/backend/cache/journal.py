"""The cache's recent writes, each kept as how to undo it, so a dump can go back in time.

Every write to the cache (a pod placed, unplaced or confirmed, a node upserted or removed, a
namespace's labels, a Service's or controller's selector, a DRA object or an allocation plumb
assumed) notes its *undo* here with the next sequence number. A snapshot dump writes the cache
as it is now plus these undos; ``plumb replay`` applies them newest first down to the sequence
number a decision saw, and so rebuilds the cache that decision was made on. The journal keeps
the last ``limit`` writes: a decision older than that can no longer be replayed from a dump
(the dump says so).

Undo records hold references to the immutable records the cache held, nothing copied. A
Service's or controller's write is kept as the few selectors it replaced (``Reselect``); the
dump, which writes the selectors whole for each such write (``Reworkload``), gets them rebuilt
from the selectors as they are now when it is taken (``entries``).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from plumb.backend.records import draobjects, objects, specs

DEFAULT_LIMIT = 20_000
_V = TypeVar("_V")

Services = Mapping[str, Mapping[str, Mapping[str, str]]]
"""Service selectors by namespace and name."""
Controllers = Mapping[str, specs.LabelSelector]
"""Controller selectors by "kind/namespace/name"."""
ServiceKey = tuple[str, str]
"""A Service's (namespace, name)."""
ControllerKey = tuple[str, str, str]
"""A controller's (kind, namespace, name)."""


class PodState(enum.Enum):
    ASSUMED = "Assumed"  # decided by plumb, the binding not yet seen by the watch
    ADDED = "Added"  # bound, as the watch reported


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Placed:
    """A pod on a node, as the cache holds it."""

    pod: objects.PodInfo
    node: str
    state: PodState


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Unplace:
    """Undo a placement: the pod was not in the cache."""

    uid: str


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Replace:
    """Undo an unplacement or a move: the pod was placed as ``placed``."""

    placed: Placed


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Restate:
    """Undo the watch confirming an assumed pod on the node it was assumed on: it was
    ``state`` (the confirmed record stands in for the assumed one; they differ only in
    spec.nodeName and resourceVersion, which no filter or score reads of a placed pod)."""

    uid: str
    state: PodState


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Renode:
    """Undo a node write: the node was ``node`` (None: absent)."""

    name: str
    node: objects.NodeInfo | None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Renamespace:
    """Undo a namespace write: its labels were ``labels`` (None: unknown)."""

    name: str
    labels: Mapping[str, str] | None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Reworkload:
    """Undo a Service or controller write: the selectors were these."""

    services: Services
    controllers: Controllers


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Reselect:
    """Undo a Service or controller write as the journal keeps it: only the selectors it
    changed, each as it was (None: absent). ``entries`` hands it out as a ``Reworkload``."""

    services: Mapping[ServiceKey, Mapping[str, str] | None]
    controllers: Mapping[ControllerKey, specs.LabelSelector | None]

    def undone(self, state: Reworkload) -> Reworkload:
        """The selectors ``state`` had before this write (``state``: those right after it)."""
        services = dict(state.services)
        for namespace in {namespace for namespace, _name in self.services}:
            by_name = dict(services.get(namespace, {}))
            for (in_namespace, name), selector in self.services.items():
                if in_namespace == namespace:
                    _put(by_name, name, selector)
            _put(services, namespace, by_name or None)
        controllers = dict(state.controllers)
        for key, before in self.controllers.items():
            _put(controllers, "/".join(key), before)
        return Reworkload(services=services, controllers=controllers)


def _put(into: dict[str, _V], key: str, value: _V | None) -> None:
    if value is None:
        into.pop(key, None)
    else:
        into[key] = value


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Pending:
    """An allocation plumb decided for a claim (DynamicResources' Reserve) that the watch has
    not shown yet: its devices are taken meanwhile. ``written``: the claim as PreBind's API
    write returned it (allocation and reservedFor), which stands for the watched one until
    the watch brings that version or a newer one."""

    claim: str  # namespace/name
    allocation: draobjects.Allocation
    pod_uid: str
    written: draobjects.ResourceClaim | None = None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Reslice:
    """Undo a ResourceSlice write: it was ``slice`` (None: absent)."""

    name: str
    slice: draobjects.ResourceSlice | None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Reclass:
    """Undo a DeviceClass write: it was ``device_class`` (None: absent)."""

    name: str
    device_class: draobjects.DeviceClass | None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Reclaim:
    """Undo a ResourceClaim write (the watch's): it was ``claim`` (None: absent)."""

    key: str
    claim: draobjects.ResourceClaim | None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Retemplate:
    """Undo a ResourceClaimTemplate write: it was ``template`` (None: absent)."""

    key: str
    template: draobjects.ClaimTemplate | None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Repend:
    """Undo an assumed allocation's write (assumed, forgotten, written or confirmed): it was
    ``pending`` (None: none)."""

    key: str
    pending: Pending | None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DraState:
    """The DRA store's objects and assumed allocations at one instant (a dump's), each kind
    in name (or namespace/name) order."""

    slices: tuple[draobjects.ResourceSlice, ...] = ()
    classes: tuple[draobjects.DeviceClass, ...] = ()
    claims: tuple[draobjects.ResourceClaim, ...] = ()
    templates: tuple[draobjects.ClaimTemplate, ...] = ()
    pending: tuple[Pending, ...] = ()


Undo = (
    Unplace
    | Replace
    | Restate
    | Renode
    | Renamespace
    | Reworkload
    | Reslice
    | Reclass
    | Reclaim
    | Retemplate
    | Repend
)
UNDO_KINDS: Mapping[str, type[Undo]] = {
    kind.__name__: kind
    for kind in (
        Unplace,
        Replace,
        Restate,
        Renode,
        Renamespace,
        Reworkload,
        Reslice,
        Reclass,
        Reclaim,
        Retemplate,
        Repend,
    )
}


class Journal:
    """The last ``limit`` undo records, each with its sequence number."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        # Sequence numbers are consecutive, so only the undos are kept: the last is ``seq``.
        self._undos: collections.deque[Undo | Reselect] = collections.deque(maxlen=limit)
        self._seq = 0
        # The selectors as they are now, to rebuild each Reselect's whole Reworkload from.
        self.workloads_now: Callable[[], Reworkload] = lambda: Reworkload(
            services={}, controllers={}
        )

    @property
    def seq(self) -> int:
        """The number of writes so far: the state a reader sees now is ``seq``."""
        return self._seq

    @property
    def oldest(self) -> int:
        """The earliest state the journal can go back to."""
        return self._seq - len(self._undos)

    def note(self, undo: Undo | Reselect) -> None:
        self._seq += 1
        self._undos.append(undo)

    def entries(self) -> Iterator[tuple[int, Undo]]:
        """Each undo with its sequence number, oldest first; a Service's or controller's write
        as the whole selectors it undoes to (rebuilt now, newest first, from ``workloads_now``:
        one copy of them per such write, only while a dump is taken)."""
        undos: list[Undo | Reselect] = list(self._undos)
        state: Reworkload | None = None
        for index in reversed(range(len(undos))):
            undo = undos[index]
            if isinstance(undo, Reselect):
                state = undo.undone(state if state is not None else self.workloads_now())
                undos[index] = state
        whole: list[Undo] = [u for u in undos if not isinstance(u, Reselect)]
        return enumerate(whole, self.oldest + 1)
