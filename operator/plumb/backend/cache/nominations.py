"""Pods nominated to a node by preemption, whose room is held while their victims terminate.

kube-scheduler's nominator: a pending pod that preempted others is nominated to the node it
made room on (``status.nominatedNodeName``). Until it is bound, deleted or loses the
nomination, every scheduling cycle of a pod with no higher priority counts it as placed on
that node, so the freed room is not taken by a less important pod meanwhile.

Nominations come from plumb's own preemptions and from the watch (a pending pod of plumb's
that carries ``status.nominatedNodeName``, as after a restart or a change of leader). Only the
event loop calls this class; it holds no locks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from plumb.backend.records import objects


@dataclasses.dataclass(frozen=True, slots=True)
class Nomination:
    pod: objects.PodInfo
    node: str


class Nominations:
    """The nominated pods by uid, and by node."""

    def __init__(self) -> None:
        self._by_uid: dict[str, Nomination] = {}

    def nominate(self, pod: objects.PodInfo, node: str) -> None:
        """Hold room on ``node`` for ``pod`` (replacing an earlier nomination of the pod)."""
        self._by_uid[pod.uid] = Nomination(pod, node)

    def update(self, pod: objects.PodInfo) -> str | None:
        """A newer record of a pending pod from the watch; returns the node now held for it.

        kube-scheduler's ``UpdateNominatedPod``: the nomination follows the pod's
        ``status.nominatedNodeName`` whenever the status sets, changes or clears it. Only when
        both the record held and this one have none is the node held in memory kept: a
        nomination made here whose status write the watch has not shown yet."""
        held = self._by_uid.pop(pod.uid, None)
        node = pod.nominated_node
        if not node and held is not None and not held.pod.nominated_node:
            node = held.node
        if not node:
            return None
        self._by_uid[pod.uid] = Nomination(pod, node)
        return node

    def remove(self, uid: str) -> Nomination | None:
        return self._by_uid.pop(uid, None)

    def get(self, uid: str) -> Nomination | None:
        return self._by_uid.get(uid)

    def node_of(self, uid: str) -> str | None:
        held = self._by_uid.get(uid)
        return held.node if held is not None else None

    def on(self, node: str) -> list[Nomination]:
        """The pods nominated to ``node``, in uid order."""
        return sorted(
            (held for held in self._by_uid.values() if held.node == node),
            key=lambda held: held.pod.uid,
        )

    def holding(self, priority: int, excluding: Iterable[str] = ()) -> list[Nomination]:
        """The nominations a pod of ``priority`` must leave room for: pods of at least its
        priority (kube-scheduler's addGENominatedPods), other than ``excluding``; uid order."""
        skip = set(excluding)
        return sorted(
            (
                held
                for uid, held in self._by_uid.items()
                if held.pod.priority >= priority and uid not in skip
            ),
            key=lambda held: held.pod.uid,
        )

    def all(self) -> list[Nomination]:
        """Every nomination held, in uid order."""
        return sorted(self._by_uid.values(), key=lambda held: held.pod.uid)

    def __len__(self) -> int:
        return len(self._by_uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._by_uid
