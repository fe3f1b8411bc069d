"""The cache's recent writes, each kept as how to undo it, so a dump can go back in time.

Every write to the cache (a pod placed, unplaced or confirmed, a node upserted or removed, a
namespace's labels, a Service's or controller's selector) notes its *undo* here with the next
sequence number. A snapshot dump writes the cache as it is now plus these undos; ``plumb
replay`` applies them newest first down to the sequence number a decision saw, and so rebuilds
the cache that decision was made on. The journal keeps the last ``limit`` writes: a decision
older than that can no longer be replayed from a dump (the dump says so).

Undo records hold references to the immutable records the cache held, nothing copied, except
for the selectors of Services and controllers (rarely written), which are kept whole.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
from collections.abc import Iterator, Mapping

from plumb.backend import objects, specs

DEFAULT_LIMIT = 20_000

Services = Mapping[str, Mapping[str, Mapping[str, str]]]
"""Service selectors by namespace and name."""
Controllers = Mapping[str, specs.LabelSelector]
"""Controller selectors by "kind/namespace/name"."""


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


Undo = Unplace | Replace | Restate | Renode | Renamespace | Reworkload
UNDO_KINDS: Mapping[str, type[Undo]] = {
    kind.__name__: kind for kind in (Unplace, Replace, Restate, Renode, Renamespace, Reworkload)
}


class Journal:
    """The last ``limit`` undo records, each with its sequence number."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        # Sequence numbers are consecutive, so only the undos are kept: the last is ``seq``.
        self._undos: collections.deque[Undo] = collections.deque(maxlen=limit)
        self._seq = 0

    @property
    def seq(self) -> int:
        """The number of writes so far: the state a reader sees now is ``seq``."""
        return self._seq

    @property
    def oldest(self) -> int:
        """The earliest state the journal can go back to."""
        return self._seq - len(self._undos)

    def note(self, undo: Undo) -> None:
        self._seq += 1
        self._undos.append(undo)

    def entries(self) -> Iterator[tuple[int, Undo]]:
        """Each undo with its sequence number, oldest first."""
        return enumerate(self._undos, self.oldest + 1)
