"""The scheduling queue: activeQ, backoffQ and the unschedulable pool, one entry per pod.

- activeQ pops by (priority desc, time in line asc, place in line asc), as kube-scheduler's
  PrioritySort: a pod's time in line is its creationTimestamp until an attempt fails, then the
  time it failed (kube-scheduler refreshes its queue timestamp on each failure), so a pod tried
  again goes behind the pods that arrived before it failed, and a flood of unschedulable pods
  tried over and over cannot starve newer ones. Both times have whole seconds, so pods of one
  second go in the order they entered the line (arrived from the watch, or failed), as
  kube-scheduler's nanosecond queue timestamps order them; never by uid, which would pop the
  pods a burst creates within a second in a random order.
- backoffQ holds pods whose last attempt failed for a reason that may pass by itself (a failed
  bind); they wait 1 s, doubling per attempt up to 10 s (``Backoff``: a configuration's
  podInitialBackoffSeconds and podMaxBackoffSeconds), then go back to activeQ.
- the unschedulable pool holds pods no node fits; a cluster event that could help them
  (``move_all``) sends them back, and after 5 minutes they go back regardless.
- pods with scheduling gates wait, outside the queues, until an update removes the gates; so do
  pods a PreEnqueue check turns away (``pre_enqueue``: DynamicResources', for a pod whose
  claims do not exist yet), until an event that may help the plugin that turned them away
  (``move_all``, ``move_claim_users``) or an update of the pod lets them through. No attempt
  is made for them, so no FailedScheduling event either, as in kube-scheduler.
- a pod popped and not yet finished is "in flight": an update arriving meanwhile is kept and,
  if the attempt fails, the pod is retried at once instead of waiting for a cluster event. An
  attempt cut short by the loss of leadership puts its pods back (``recall``).
- a pod placed has left the queue while its binding is in flight (assumed in the cache): an
  update arriving meanwhile is kept aside (``update_assumed``), and if the binding fails the
  retry decides that newest version, not the one the failed attempt decided. kube-scheduler
  does the same: it ignores updates of assumed pods, and its failure handler requeues the pod
  as its informer last saw it (schedule_one.go handleSchedulingFailure).

Only the event loop calls this class; it holds no locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import enum
import heapq
import time
from collections.abc import Callable, Hashable
from typing import TypeVar

from plumb.backend.records import groupobjects, objects

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0
UNSCHEDULABLE_TIMEOUT = 300.0
SCHEDULING_GATES = "SchedulingGates"
"""The plugin that holds pods with spec.schedulingGates (``Entry.gated_by``)."""

PreEnqueue = Callable[[objects.PodInfo], str | None]
"""The PreEnqueue checks other than scheduling gates: the name of the plugin that turns the
pod away, None when it may be tried."""


def _nothing_turned_away(pod: objects.PodInfo) -> str | None:
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Backoff:
    """How long a pod waits after its n-th failed attempt: ``initial`` seconds doubling per
    attempt, up to ``maximum``."""

    initial: float = INITIAL_BACKOFF
    maximum: float = MAX_BACKOFF

    def duration(self, attempts: int) -> float:
        # The exponent stops growing long after the cap: 2.0 ** 1024 overflows a float.
        return min(self.maximum, self.initial * 2.0 ** min(64, max(0, attempts - 1)))


DEFAULT_BACKOFF = Backoff()


class Where(enum.Enum):
    ACTIVE = "active"
    BACKOFF = "backoff"
    UNSCHEDULABLE = "unschedulable"
    GATED = "gated"
    IN_FLIGHT = "in_flight"


@dataclasses.dataclass(kw_only=True, slots=True)
class Entry:
    """A pod's place in the queue. Mutable, owned by the queue; callers read it only."""

    pod: objects.PodInfo
    where: Where
    attempts: int = 0
    first_enqueued: float = 0.0
    since: float = 0.0
    ready_at: float = 0.0
    seq: int = 0
    updated_in_flight: bool = False
    popped_at_event: int = 0
    activated_at: float = 0.0  # when it last entered activeQ (the trace's queue wait)
    # A member of a gang some of whose pods are bound, fewer than its minimum (a binding lost
    # with a crash): it goes ahead of the pods of its priority, so that its group is finished
    # with the room it was placed with, before another group takes that room.
    resumes: bool = False
    popped_at: float = 0.0  # when it was last popped
    # Filter plugins that rejected nodes in the last attempt (empty: unknown, any event helps).
    plugins: frozenset[str] = frozenset()
    # When its last attempt failed (creationTimestamp's form), "" before any: its time in line.
    failed_at: str = ""
    # Its place in line among pods of the same time in line: taken on arrival and on a failure.
    line: int = 0
    # The plugin keeping it gated (SCHEDULING_GATES, or a PreEnqueue plugin's name), "" if none.
    gated_by: str = ""


class SchedulingQueue:
    """Pending pods waiting for a scheduling attempt."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        backoff: Backoff = DEFAULT_BACKOFF,
        wall: Callable[[], float] = time.time,
        pre_enqueue: PreEnqueue = _nothing_turned_away,
    ) -> None:
        self._clock = clock
        # Run before a pod may enter activeQ (set by the feed, which knows the cluster).
        self.pre_enqueue = pre_enqueue
        self._wall = wall  # the failure times activeQ orders by, comparable to creationTimestamp
        self.backoff_policy = backoff  # replaced on a configuration reload
        self._entries: dict[str, Entry] = {}
        self._active: list[tuple[int, int, str, int, str, int]] = []
        self._backoff: list[tuple[float, int, str]] = []
        # Insertion order is the order pods became unschedulable, so the oldest is first.
        self._unschedulable: dict[str, Entry] = {}
        # Cluster events seen while pods were in flight: (sequence number, plugins helped).
        self._event_seq = 0
        self._flight_events: list[tuple[int, frozenset[str] | None]] = []
        self._in_flight: set[str] = set()
        # The newest version the watch reported of pods being bound (see update_assumed).
        self._assumed_updates: dict[str, objects.PodInfo] = {}
        # Pods a PreEnqueue plugin turned away, and the pods of each DRA claim (namespace/name),
        # for the events that may let them in.
        self._turned_away: dict[str, Entry] = {}
        self._claim_users: dict[str, set[str]] = {}
        # The pods of each pod group (either API), pending here, in flight included.
        self._group_members: dict[groupobjects.GroupRef, set[str]] = {}
        self._seq = 0
        self._line = 0  # the last place in line given
        self._wakeup = asyncio.Event()

    # Feeding -------------------------------------------------------------------------------

    def add(self, pod: objects.PodInfo) -> None:
        """Add a pending pod, or update it in place if it is already here."""
        now = self._clock()
        entry = self._entries.get(pod.uid)
        if entry is None:
            entry = Entry(pod=pod, where=Where.GATED, first_enqueued=now, since=now)
            entry.line = self._next_in_line()
            self._entries[pod.uid] = entry
            self._index_claims(pod, +1)
            self._index_group(pod, +1)
            self._to_active_or_gated(entry)
            return
        unchanged = entry.pod == pod
        if pod.resource_claim_names != entry.pod.resource_claim_names:
            self._index_claims(entry.pod, -1)
            self._index_claims(pod, +1)
        if groupobjects.group_of(pod) != groupobjects.group_of(entry.pod):
            self._index_group(entry.pod, -1)
            self._index_group(pod, +1)
        entry.pod = pod
        if unchanged:
            return  # a status-only change (our own condition patch, say) is not an update
        if entry.where is Where.IN_FLIGHT:
            entry.updated_in_flight = True
        elif entry.where is Where.ACTIVE:
            self._push_active(entry)  # priority may have changed; the old heap item goes stale
        elif entry.where in (Where.GATED, Where.UNSCHEDULABLE):
            # The update may be what the pod was waiting for (gates removed, spec changed).
            self._to_active_or_gated(entry)

    def update_assumed(self, pod: objects.PodInfo) -> None:
        """An update of a pod that left the queue placed, its binding in flight: kept for
        ``retry`` should the binding fail. The placement itself stands (the cache keeps the
        version it assumed until the watch shows the pod bound, as kube-scheduler's does)."""
        self._assumed_updates[pod.uid] = pod

    def delete(self, uid: str) -> None:
        """Forget a pod: deleted, bound elsewhere, or no longer ours. Heap items go stale."""
        self._assumed_updates.pop(uid, None)
        entry = self._entries.pop(uid, None)
        if entry is not None:
            self._index_claims(entry.pod, -1)
            self._index_group(entry.pod, -1)
        self._unschedulable.pop(uid, None)
        self._turned_away.pop(uid, None)
        self._landed(uid)

    def move_all(
        self, plugins: frozenset[str] | None = None, *, namespace: str | None = None
    ) -> None:
        """A cluster event that could make pods schedulable: retry the unschedulable pool.

        With ``plugins``, only pods rejected by one of those plugins are moved (the event
        cannot change what the other plugins decided); None moves every pod. With
        ``namespace``, only that namespace's pods (a SchedulingPolicy governs no other).
        Pods in flight decide on a snapshot from before the event: it is remembered so that,
        should they fail, they are retried instead of waiting for the next event.
        """
        self._event_seq += 1
        if self._in_flight:
            self._flight_events.append((self._event_seq, plugins))
        if plugins is None and namespace is None:
            waiting, self._unschedulable = self._unschedulable, {}
        else:
            waiting = {
                uid: entry
                for uid, entry in self._unschedulable.items()
                if (plugins is None or not entry.plugins or entry.plugins & plugins)
                and (namespace is None or entry.pod.namespace == namespace)
            }
            for uid in waiting:
                del self._unschedulable[uid]
        for entry in waiting.values():
            self._after_backoff(entry)
        let_in = [
            entry
            for entry in self._turned_away.values()
            if (plugins is None or entry.gated_by in plugins)
            and (namespace is None or entry.pod.namespace == namespace)
        ]
        for entry in let_in:
            self._to_active_or_gated(entry)  # asks its PreEnqueue check again

    def move_claim_users(self, namespace: str, name: str, plugins: frozenset[str]) -> None:
        """A DRA claim was created or its status changed: the pods naming it that ``plugins``
        rejected or turned away may be tried (kube-scheduler's preQueueingHint: the pods by
        claim, not every pod)."""
        self._move(self._claim_users.get(f"{namespace}/{name}", set()), plugins)

    def move_group(self, ref: groupobjects.GroupRef, plugins: frozenset[str]) -> None:
        """A change of a pod group (a member added, the PodGroup added or its minimum
        lowered): its pods that ``plugins`` rejected or turned away may be tried."""
        self._move(self._group_members.get(ref, set()), plugins)

    def _move(self, uids: set[str], plugins: frozenset[str]) -> None:
        """An event that concerns the pods ``uids`` only: those ``plugins`` rejected or turned
        away may be tried."""
        self._event_seq += 1
        if self._in_flight:
            self._flight_events.append((self._event_seq, plugins))
        for uid in sorted(uids):
            entry = self._entries[uid]
            if entry.where is Where.GATED and entry.gated_by in plugins:
                self._to_active_or_gated(entry)
            elif entry.where is Where.UNSCHEDULABLE and (
                not entry.plugins or entry.plugins & plugins
            ):
                del self._unschedulable[uid]
                self._after_backoff(entry)

    # Consuming -----------------------------------------------------------------------------

    async def pop(self) -> Entry:
        """The next pod to schedule, waiting while there is none; it is then in flight."""
        while True:
            now = self._clock()
            self._flush(now)
            entry = self._pop_active()
            if entry is not None:
                return entry
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), self._next_deadline(now))

    async def pop_batch(
        self,
        limit: int,
        *,
        alone: Callable[[objects.PodInfo], bool] = lambda pod: False,
        group: Callable[[objects.PodInfo], Hashable] = lambda pod: None,
        together: Callable[[objects.PodInfo], groupobjects.GroupRef | None] = lambda pod: None,
    ) -> list[Entry]:
        """Up to ``limit`` pods in queue order, waiting for the first only.

        A pod for which ``alone`` is true is returned in a batch of its own (the kernel cannot
        account for what it needs between pods of one batch); a batch ends before a pod whose
        ``group`` differs from the first pod's (pods scored with other weights). A pod for
        which ``together`` names a pod group comes with every member of that group the queue
        holds but those gated, whatever their place (kube-scheduler queues a group as one
        entity), and with no other pod; ``limit`` does not cut a group.
        """
        first = await self.pop()
        batch = [first]
        ref = together(first.pod)
        if ref is not None:
            return batch + self._pop_members(ref, first.pod.uid)
        if alone(first.pod):
            return batch
        first_group = group(first.pod)
        while len(batch) < limit:
            entry = self._peek_active()
            if entry is None or alone(entry.pod) or group(entry.pod) != first_group:
                break
            if together(entry.pod) is not None:
                break  # a group's member: its group is a batch of its own
            popped = self._pop_active()
            assert popped is entry
            batch.append(entry)
        return batch

    def _pop_members(self, ref: groupobjects.GroupRef, popped: str) -> list[Entry]:
        """The group's other members, out of whichever queue holds them, in flight."""
        members = []
        for uid in sorted(self._group_members.get(ref, ())):
            entry = self._entries[uid]
            if uid == popped or entry.where in (Where.GATED, Where.IN_FLIGHT):
                continue
            self._unschedulable.pop(uid, None)
            self._seq += 1  # the heap items it had (active, backoff) go stale
            entry.seq = self._seq
            self._take(entry)
            members.append(entry)
        return members

    def resume_group(self, ref: groupobjects.GroupRef) -> None:
        """The group's pending members go ahead of the other pods of their priority
        (``Entry.resumes``)."""
        for uid in self._group_members.get(ref, ()):
            entry = self._entries.get(uid)
            if entry is None or entry.resumes:
                continue
            entry.resumes = True
            if entry.where is Where.ACTIVE:
                self._push_active(entry)

    def group_size(self, ref: groupobjects.GroupRef) -> int:
        """How many of the group's pods the queue holds (pending, gated or in flight)."""
        return len(self._group_members.get(ref, ()))

    def _peek_active(self) -> Entry | None:
        while self._active:
            *_, uid, seq = self._active[0]
            entry = self._entries.get(uid)
            if entry is not None and entry.seq == seq and entry.where is Where.ACTIVE:
                return entry
            heapq.heappop(self._active)
        return None

    def _pop_active(self) -> Entry | None:
        entry = self._peek_active()
        if entry is None:
            return None
        heapq.heappop(self._active)
        self._take(entry)
        return entry

    def _take(self, entry: Entry) -> None:
        """The pod is popped: in flight, one attempt more."""
        entry.where = Where.IN_FLIGHT
        entry.attempts += 1
        entry.updated_in_flight = False
        entry.popped_at_event = self._event_seq
        entry.popped_at = self._clock()
        self._in_flight.add(entry.pod.uid)

    def requeue(self, entry: Entry) -> None:
        """Put a popped pod straight back (its decision went stale before it could be used)."""
        if entry.pod.uid in self._entries and entry.where is Where.IN_FLIGHT:
            entry.attempts = max(0, entry.attempts - 1)
            self._push_active(entry)

    def recall(self) -> int:
        """Leadership was lost mid-attempt: every pod in flight goes back to activeQ as if it
        had not been popped (its attempt was cut short, not failed); returns how many. Without
        this, a replica that leads again would never pop them, and no other replica would
        either while this one leads."""
        cut = [entry for entry in self._entries.values() if entry.where is Where.IN_FLIGHT]
        for entry in cut:
            self.requeue(entry)
        return len(cut)

    def done(self, uid: str) -> None:
        """The attempt placed the pod; it leaves the queue."""
        self.delete(uid)

    def unschedulable(self, uid: str, plugins: frozenset[str] = frozenset()) -> None:
        """No node fits: wait for a cluster event, unless the pod changed meanwhile."""
        entry = self._entries.get(uid)
        if entry is None or entry.where is not Where.IN_FLIGHT:
            return
        entry.plugins = plugins
        self._failed(entry)
        if entry.updated_in_flight or self._helped_in_flight(entry):
            self._after_backoff(entry)
            return
        entry.where = Where.UNSCHEDULABLE
        entry.since = self._clock()
        self._unschedulable[uid] = entry
        self._landed(uid)

    def backoff(self, uid: str) -> None:
        """The attempt failed for a passing reason (a failed bind): retry after a backoff."""
        entry = self._entries.get(uid)
        if entry is not None and entry.where is Where.IN_FLIGHT:
            self._failed(entry)
            self._after_backoff(entry)

    def retry(self, entry: Entry) -> None:
        """A pod that left the queue (assumed) failed to bind: back it off, keeping its count.

        The retry decides the newest version the watch reported while the pod was being bound
        (``update_assumed``); a pod that version shows terminating or finished is not retried.
        Nothing happens if the pod is already back in the queue through a watch update.
        """
        newest = self._assumed_updates.pop(entry.pod.uid, None)
        if entry.pod.uid in self._entries:
            return
        if newest is not None:
            if newest.deleting or newest.terminal:
                return  # its deletion (or end) is on its way; nothing to schedule
            entry.pod = newest
        self._entries[entry.pod.uid] = entry
        self._index_claims(entry.pod, +1)
        self._index_group(entry.pod, +1)
        entry.where = Where.IN_FLIGHT
        self._failed(entry)
        self._after_backoff(entry)

    def sweep(self, listed: set[str], started: float) -> list[objects.PodInfo]:
        """Drop pods a full list started at ``started`` (this queue's clock) no longer has:
        deleted while the watch was down; returns them. Pods queued after the list started
        stay. A pod in flight goes too, as on a deletion the watch reports: its attempt finds
        it gone and ends (else an attempt that failed would keep a ghost waiting for ever)."""
        gone = [
            entry.pod
            for uid, entry in self._entries.items()
            if uid not in listed and entry.first_enqueued < started
        ]
        for pod in gone:
            self.delete(pod.uid)
        for uid in [uid for uid in self._assumed_updates if uid not in listed]:
            del self._assumed_updates[uid]  # deleted while bound: no retry will come for it
        return gone

    def now(self) -> float:
        return self._clock()

    # Reading -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, uid: object) -> bool:
        return uid in self._entries

    def pod(self, uid: str) -> objects.PodInfo | None:
        """The pod as the queue holds it, if it does."""
        entry = self._entries.get(uid)
        return entry.pod if entry is not None else None

    def where(self, uid: str) -> Where | None:
        entry = self._entries.get(uid)
        return entry.where if entry else None

    def waiting(self, namespace: str) -> list[tuple[objects.PodInfo, float]]:
        """The namespace's pending pods (in flight included), each with when it first came
        into the queue (the ``now`` clock)."""
        return [
            (e.pod, e.first_enqueued)
            for e in self._entries.values()
            if e.pod.namespace == namespace
        ]

    def counts(self) -> dict[Where, int]:
        counts = dict.fromkeys(Where, 0)
        for entry in self._entries.values():
            counts[entry.where] += 1
        return counts

    def backoff_duration(self, attempts: int) -> float:
        """The backoff after ``attempts`` failed attempts, under the configured policy."""
        return self.backoff_policy.duration(attempts)

    # Internals -----------------------------------------------------------------------------

    def _helped_in_flight(self, entry: Entry) -> bool:
        """Whether a cluster event that may help this pod came while it was in flight."""
        return any(
            seq > entry.popped_at_event
            and (plugins is None or not entry.plugins or bool(plugins & entry.plugins))
            for seq, plugins in self._flight_events
        )

    def _landed(self, uid: str) -> None:
        """The pod is no longer in flight; forget events no pod in flight can need."""
        self._in_flight.discard(uid)
        if not self._in_flight:
            self._flight_events.clear()

    def _to_active_or_gated(self, entry: Entry) -> None:
        uid = entry.pod.uid
        self._landed(uid)
        self._unschedulable.pop(uid, None)
        gate = SCHEDULING_GATES if entry.pod.gated else self.pre_enqueue(entry.pod)
        if gate is None:
            entry.gated_by = ""
            self._turned_away.pop(uid, None)
            self._push_active(entry)
            return
        entry.where = Where.GATED
        entry.gated_by = gate
        self._turned_away.pop(uid, None)
        if gate != SCHEDULING_GATES:  # spec gates: only an update of the pod lets it in
            # Asked again after UNSCHEDULABLE_TIMEOUT at the latest, as kube-scheduler's flush
            # of its unschedulable pool asks its PreEnqueue plugins again: oldest first.
            entry.since = self._clock()
            self._turned_away[uid] = entry

    def _index_claims(self, pod: objects.PodInfo, sign: int) -> None:
        for name in pod.resource_claim_names:
            _index(self._claim_users, f"{pod.namespace}/{name}", pod.uid, sign)

    def _index_group(self, pod: objects.PodInfo, sign: int) -> None:
        ref = groupobjects.group_of(pod)
        if ref is not None:
            _index(self._group_members, ref, pod.uid, sign)

    def _push_active(self, entry: Entry) -> None:
        self._seq += 1
        entry.seq = self._seq
        if entry.where is not Where.ACTIVE:  # an update in place keeps its place in line
            entry.activated_at = self._clock()
        entry.where = Where.ACTIVE
        self._landed(entry.pod.uid)
        pod = entry.pod
        in_line = entry.failed_at or pod.creation_timestamp
        behind = 0 if entry.resumes else 1
        heapq.heappush(
            self._active, (-pod.priority, behind, in_line, entry.line, pod.uid, entry.seq)
        )
        self._wakeup.set()

    def _next_in_line(self) -> int:
        self._line += 1
        return self._line

    def _failed(self, entry: Entry) -> None:
        """The attempt failed: the pod's time in line is now, behind every pod already in line."""
        entry.failed_at = self._stamp()
        entry.line = self._next_in_line()

    def _stamp(self) -> str:
        """Now, in the form the API server writes creationTimestamp (whole seconds, UTC)."""
        now = datetime.datetime.fromtimestamp(self._wall(), datetime.UTC)
        return now.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _after_backoff(self, entry: Entry) -> None:
        now = self._clock()
        # The backoff counts from the failed attempt: now for a pod in flight, else when it
        # became unschedulable.
        start = now if entry.where is Where.IN_FLIGHT else entry.since
        entry.ready_at = start + self.backoff_duration(entry.attempts)
        if entry.ready_at <= now or entry.pod.gated or self.pre_enqueue(entry.pod) is not None:
            # A pod turned away waits gated rather than in backoffQ (kube-scheduler runs
            # PreEnqueue on the way into backoffQ under SchedulerPopFromBackoffQ).
            self._to_active_or_gated(entry)
            return
        self._seq += 1
        entry.seq = self._seq
        entry.where = Where.BACKOFF
        self._landed(entry.pod.uid)
        heapq.heappush(self._backoff, (entry.ready_at, entry.seq, entry.pod.uid))
        self._wakeup.set()

    def _flush(self, now: float) -> None:
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, uid = heapq.heappop(self._backoff)
            entry = self._entries.get(uid)
            if entry is not None and entry.seq == seq and entry.where is Where.BACKOFF:
                self._push_active(entry)
        while self._unschedulable:
            entry = next(iter(self._unschedulable.values()))
            if now - entry.since < UNSCHEDULABLE_TIMEOUT:
                break
            self._to_active_or_gated(entry)
        while self._turned_away:
            entry = next(iter(self._turned_away.values()))
            if now - entry.since < UNSCHEDULABLE_TIMEOUT:
                break
            self._to_active_or_gated(entry)  # let in, or turned away again (then last)

    def _next_deadline(self, now: float) -> float | None:
        deadlines = [self._backoff[0][0]] if self._backoff else []
        for waiting in (self._unschedulable, self._turned_away):
            if waiting:
                oldest = next(iter(waiting.values()))
                deadlines.append(oldest.since + UNSCHEDULABLE_TIMEOUT)
        return max(0.0, min(deadlines) - now) if deadlines else None


_Key = TypeVar("_Key", str, groupobjects.GroupRef)


def _index(table: dict[_Key, set[str]], key: _Key, uid: str, sign: int) -> None:
    """Add (``sign`` > 0) or remove a pod's uid under ``key``; an empty set goes."""
    if sign > 0:
        table.setdefault(key, set()).add(uid)
        return
    uids = table.get(key)
    if uids is not None:
        uids.discard(uid)
        if not uids:
            del table[key]
