"""The pod groups the cluster has (upstream PodGroups and scheduler-plugins' PodGroups) and,
for each group, the members placed (assumed or bound) on nodes.

The cache keeps the placed members in step as it places and unplaces pods, so a group's
count of scheduled members is exact at every assume and forget; the pending members are the
queue's (SchedulingQueue.group_size). Not journalled: a replayed gang reads its groups as
they are now.
"""

from __future__ import annotations

from plumb.backend.records import groupobjects, objects
from plumb.backend.records.groupobjects import GroupRef, PodGroup


class GroupStore:
    """PodGroups by reference, and their placed members."""

    def __init__(self) -> None:
        self._groups: dict[GroupRef, PodGroup] = {}
        self._placed: dict[GroupRef, dict[str, objects.PodInfo]] = {}
        self.generation = 0  # moves on at every change of a PodGroup

    # PodGroups ---------------------------------------------------------------------------

    def put(self, group: PodGroup) -> PodGroup | None:
        """Hold ``group`` (added or modified); returns the version it replaces."""
        before = self._groups.get(group.ref)
        self._groups[group.ref] = group
        if before != group:
            self.generation += 1
        return before

    def remove(self, ref: GroupRef) -> PodGroup | None:
        before = self._groups.pop(ref, None)
        if before is not None:
            self.generation += 1
        return before

    def replace(
        self, api: str, groups: list[PodGroup]
    ) -> list[tuple[PodGroup | None, PodGroup | None]]:
        """A full list of one API's PodGroups: returns each (before, after) that changed."""
        listed = {group.ref: group for group in groups}
        changes: list[tuple[PodGroup | None, PodGroup | None]] = []
        for ref in [ref for ref in self._groups if ref.api == api and ref not in listed]:
            changes.append((self.remove(ref), None))
        for group in listed.values():
            before = self.put(group)
            if before != group:
                changes.append((before, group))
        return changes

    def get(self, ref: GroupRef) -> PodGroup | None:
        return self._groups.get(ref)

    def of(self, pod: objects.PodInfo) -> tuple[GroupRef | None, PodGroup | None]:
        """The group the pod names, and the PodGroup if it exists."""
        ref = groupobjects.group_of(pod)
        return ref, (None if ref is None else self._groups.get(ref))

    # Members placed ------------------------------------------------------------------------

    def place(self, pod: objects.PodInfo) -> None:
        """The cache placed ``pod`` (assumed or bound)."""
        ref = groupobjects.group_of(pod)
        if ref is not None:
            self._placed.setdefault(ref, {})[pod.uid] = pod

    def unplace(self, pod: objects.PodInfo) -> None:
        """The cache unplaced ``pod`` (forgotten, deleted, finished)."""
        ref = groupobjects.group_of(pod)
        if ref is None:
            return
        placed = self._placed.get(ref)
        if placed is not None:
            placed.pop(pod.uid, None)
            if not placed:
                del self._placed[ref]

    def placed(self, ref: GroupRef) -> dict[str, objects.PodInfo]:
        """The group's members placed (assumed or bound), by uid."""
        return dict(self._placed.get(ref, {}))

    def placed_count(self, ref: GroupRef) -> int:
        return len(self._placed.get(ref, ()))
