"""What plumb observes about zones, fed into the zone-health tracker of each policy that scores
zone health: node readiness from node events, bindings from the binder, utilisation from the
cache; and the per-zone factors a batch under such a policy is scored with.

Freshness comes from the cluster, not from plumb's clock ticking: a zone's readiness counts only
nodes whose Ready condition was heard within ``staleAfter`` (its lastHeartbeatTime or, for a
node controller marking it Unknown, its lastTransitionTime), and utilisation is recorded only
for zones that are fresh otherwise. A zone nobody has heard from therefore has no fresh data and
scores with the neutral factor 1, as DESIGN §5 asks; nodes without a Ready condition at all
(API-only nodes, as in the benchmark) leave their zone neutral.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from plumb.backend.cache import snapshot
from plumb.backend.records import objects
from plumb.policy import spec as spec_module
from plumb.policy import timestamps, zonehealth


@dataclasses.dataclass(frozen=True, slots=True)
class _Node:
    labels: Mapping[str, str]
    ready: bool
    heard: float | None  # epoch seconds of the newest Ready condition news; None: never


def readiness(body: Mapping[str, Any]) -> tuple[bool, float] | None:
    """(Ready, when last heard) from a node's Ready condition; None without one."""
    conditions = (body.get("status") or {}).get("conditions") or []
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            times = [
                timestamps.parse_time(condition.get(field))
                for field in ("lastHeartbeatTime", "lastTransitionTime")
            ]
            heard = max((t for t in times if t is not None), default=None)
            if heard is None:
                return None
            return condition.get("status") == "True", heard
    return None


class ZoneFeed:
    """Zone-health trackers by policy, and the observations that feed them."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {}
        self._trackers: dict[spec_module.Key, zonehealth.ZoneHealthTracker] = {}
        # Zones (by label key) whose nodes changed since their readiness was last counted: a
        # node event only marks its zone, and the zone is counted once before it is read, so
        # 5,000 node events cost one pass over the nodes, not one pass each.
        self._dirty: dict[str, set[str]] = {}

    def track(self, policy: spec_module.Policy | None, key: spec_module.Key) -> None:
        """Keep a tracker for a policy that scores zone health; drop it otherwise."""
        if policy is None or policy.scoring.weights.zone_health == 0:
            self._trackers.pop(key, None)
            return
        tracker = self._trackers.get(key)
        if tracker is None:
            tracker = self._trackers[key] = zonehealth.ZoneHealthTracker(policy.zone_health)
            label = policy.zone_health.topology_key
            zones = {n.labels[label] for n in self._nodes.values() if label in n.labels}
            self._observe_zones(tracker, zones)
        else:
            tracker.configure(policy.zone_health)

    def forget(self, key: spec_module.Key) -> None:
        self._trackers.pop(key, None)

    def observe_node(self, name: str, body: Mapping[str, Any] | None) -> None:
        """A node event (None: deleted); its zone's readiness is counted again before it is
        next read."""
        before = self._nodes.pop(name, None)
        if body is not None:
            heard = readiness(body)
            labels = dict((body.get("metadata") or {}).get("labels") or {})
            self._nodes[name] = _Node(
                labels=labels,
                ready=heard is not None and heard[0],
                heard=heard[1] if heard is not None else None,
            )
        for key in {tracker.spec.topology_key for tracker in self._trackers.values()}:
            for node in (before, self._nodes.get(name)):
                if node is not None and key in node.labels:
                    self._dirty.setdefault(key, set()).add(node.labels[key])

    def _flush(self) -> None:
        """Count the readiness of the zones whose nodes changed, for every tracker."""
        dirty, self._dirty = self._dirty, {}
        for tracker in self._trackers.values():
            zones = dirty.get(tracker.spec.topology_key)
            if zones:
                self._observe_zones(tracker, zones)

    def _observe_zones(self, tracker: zonehealth.ZoneHealthTracker, zones: set[str]) -> None:
        """Each zone's fresh nodes and how many are Ready, in one pass over the nodes."""
        key = tracker.spec.topology_key
        heard: dict[str, list[_Node]] = {}
        for node in self._nodes.values():
            zone = node.labels.get(key)
            if zone in zones and node.heard is not None:
                heard.setdefault(zone, []).append(node)
        for zone, nodes in heard.items():
            newest = max(n.heard for n in nodes if n.heard is not None)
            fresh = [
                n
                for n in nodes
                if n.heard is not None and newest - n.heard <= tracker.spec.stale_after
            ]
            ready = sum(1 for n in fresh if n.ready)
            tracker.observe_nodes(zone, ready=ready, total=len(fresh), now=newest)

    def observe_bind(
        self,
        policy: spec_module.Policy,
        zone: str | None,
        *,
        success: bool,
        latency: float,
        now: float,
    ) -> None:
        tracker = self._trackers.get(policy.key)
        if tracker is not None and zone is not None:
            tracker.observe_bind(zone, success=success, latency=latency, now=now)

    def factors(
        self, policy: spec_module.Policy, snap: snapshot.Snapshot, now: float
    ) -> tuple[str, dict[str, float]]:
        """(zone label key, factor per zone) for a batch under ``policy``; fresh zones have
        their utilisation recorded first."""
        self._flush()
        tracker = self._trackers.get(policy.key)
        key = policy.zone_health.topology_key
        if tracker is None:
            return key, {}
        ids = snap.statics.label_ids(key)
        values = snap.statics.values(key)
        if values:
            share = _utilisation(snap, ids, len(values))
            for zone_id, zone in enumerate(values):
                if tracker.fresh(zone, now):
                    tracker.observe_utilisation(zone, float(share[zone_id]), now=now)
        return key, {zone: tracker.factor(zone, now) for zone in values}

    def healths(self, now: float) -> dict[str, float]:
        """h per zone of every node carrying a tracked zone key (1 where nothing fresh is
        known), the lowest any tracker gives it: what ``plumb_zone_health`` exports."""
        self._flush()
        out: dict[str, float] = {}
        for tracker in self._trackers.values():
            key = tracker.spec.topology_key
            zones = {n.labels[key] for n in self._nodes.values() if key in n.labels}
            for zone in zones | set(tracker.zones()):
                out[zone] = min(tracker.health(zone, now), out.get(zone, 1.0))
        return out


def _utilisation(
    snap: snapshot.Snapshot, ids: np.ndarray[Any, np.dtype[np.int32]], zones: int
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Per zone, the share of cpu or memory in use, whichever is higher."""
    present = ids >= 0
    shares = np.zeros(zones, dtype=np.float64)
    for resource in (objects.CPU, objects.MEMORY):
        column = snap.resources.index(resource)
        used = np.bincount(ids[present], weights=snap.requested[present, column], minlength=zones)
        room = np.bincount(ids[present], weights=snap.allocatable[present, column], minlength=zones)
        share = np.divide(used, room, out=np.zeros(zones), where=room > 0)
        shares = np.maximum(shares, share)
    return shares
