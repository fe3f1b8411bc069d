"""The leadership gate: whether this replica may act on the cluster now.

The scheduling loop asks it before it schedules, the binder before every binding POST, the event
recorder before every event and status write: only the leader acts (``leader.Elector.may_act``).
A replica run without leader election is always let through (``always``).
"""

from __future__ import annotations

from typing import Protocol


class Gate(Protocol):
    """Whether this replica may act now (``leader.Elector.may_act``)."""

    def __call__(self) -> bool: ...


def always() -> bool:
    """The gate of a replica that elects no leader: it may always act."""
    return True
