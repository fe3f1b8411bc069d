"""Zone health: a number h in [0, 1] per zone from what plumb observes there, and the score
factor exp(-2·(1-h)) that DESIGN §5 gives it.

**Formula.** h is the product of four terms, each 1 when that aspect of the zone is fine:

- ``ready``: the share of the zone's nodes that are Ready (the newest node count reported);
- ``binds``: the share of bindings to the zone's nodes that succeeded in the window, counted
  with one assumed success, ``(succeeded + 1) / (bindings + 1)``, so that a single failed
  binding halves the term instead of zeroing the zone;
- ``latency``: ``min(1, reference / mean binding latency)`` over the window, the reference being
  1 s: binds answered within a second cost nothing, 2 s on average halve the term;
- ``utilisation``: 1 up to 80 % of the zone's allocatable in use, then falling linearly to 0.5
  at 100 %: a nearly full zone is a worse place for the next pod, but never as bad as a broken
  one.

A product, not a mean, so that one thing going badly wrong is enough: a zone whose nodes are all
NotReady has h = 0 and the factor exp(-2) ≈ 0.14 whatever else is true of it, where a healthy
zone has h = 1 and the factor 1. A term with no observation in the window is 1.

**Staleness.** A zone none of whose observations (node counts, bindings, utilisation) is newer
than ``staleAfter`` has no fresh data: its health reads as 1 and its factor is exactly 1.0,
never a penalty. Observations older than ``window`` are forgotten.

Times are seconds on any one clock the caller keeps to (the scheduler's). Purely computational;
the metric ``plumb_zone_health{zone}`` is exported by the caller from ``healths``.
"""

from __future__ import annotations

import collections
import dataclasses
import math

from plumb.policy import spec as spec_module

__all__ = [
    "LATENCY_REFERENCE",
    "UTILISATION_KNEE",
    "ZoneHealthTracker",
    "ZoneReport",
    "factor_of",
]

LATENCY_REFERENCE = 1.0  # seconds of binding latency that cost nothing
UTILISATION_KNEE = 0.8  # utilisation above which the term falls
UTILISATION_FLOOR = 0.5  # the term at 100 % utilisation
MAX_BINDINGS = 4096  # per zone; the oldest go first (the window may hold more under load)


def factor_of(health: float) -> float:
    """The score factor of a health: exp(-2·(1-h)), 1 for a healthy zone, ≈0.14 for h = 0."""
    return math.exp(-2.0 * (1.0 - health))


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ZoneReport:
    """A zone's health and the terms it came from (for traces and tests)."""

    zone: str
    fresh: bool
    health: float
    factor: float
    ready: float = 1.0
    binds: float = 1.0
    latency: float = 1.0
    utilisation: float = 1.0


@dataclasses.dataclass(slots=True)
class _Zone:
    nodes: tuple[float, int, int] | None = None  # (time, ready, total)
    utilisation: tuple[float, float] | None = None  # (time, fraction)
    bindings: collections.deque[tuple[float, bool, float]] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=MAX_BINDINGS)
    )

    def newest(self) -> float | None:
        times = [t for t in (self.nodes, self.utilisation) if t is not None]
        stamps = [t[0] for t in times]
        if self.bindings:
            stamps.append(self.bindings[-1][0])
        return max(stamps) if stamps else None


class ZoneHealthTracker:
    """Observations per zone over one ``spec.ZoneHealth`` window; health and factor on demand."""

    def __init__(
        self,
        spec: spec_module.ZoneHealth | None = None,
        *,
        latency_reference: float = LATENCY_REFERENCE,
    ) -> None:
        self._spec = spec if spec is not None else spec_module.ZoneHealth()
        self._latency_reference = latency_reference
        self._zones: dict[str, _Zone] = {}

    @property
    def spec(self) -> spec_module.ZoneHealth:
        return self._spec

    def configure(self, spec: spec_module.ZoneHealth) -> None:
        self._spec = spec

    # Observing -----------------------------------------------------------------------------

    def observe_nodes(self, zone: str, *, ready: int, total: int, now: float) -> None:
        """The zone's node count and how many of them are Ready, as of ``now``."""
        total = max(0, total)
        self._zone(zone).nodes = (now, min(max(0, ready), total), total)

    def observe_bind(self, zone: str, *, success: bool, latency: float, now: float) -> None:
        """One binding to a node of the zone: whether it succeeded and how long it took (s)."""
        latency = latency if math.isfinite(latency) and latency > 0 else 0.0
        self._zone(zone).bindings.append((now, success, latency))

    def observe_utilisation(self, zone: str, fraction: float, *, now: float) -> None:
        """The share of the zone's allocatable in use (the most used resource), 0 to 1."""
        fraction = 0.0 if math.isnan(fraction) else min(1.0, max(0.0, fraction))
        self._zone(zone).utilisation = (now, fraction)

    def forget(self, zone: str) -> None:
        self._zones.pop(zone, None)

    # Reading -----------------------------------------------------------------------------------

    def zones(self) -> tuple[str, ...]:
        return tuple(sorted(self._zones))

    def fresh(self, zone: str, now: float) -> bool:
        state = self._zones.get(zone)
        newest = state.newest() if state is not None else None
        return newest is not None and now - newest <= self._spec.stale_after

    def health(self, zone: str, now: float) -> float:
        return self.report(zone, now).health

    def factor(self, zone: str, now: float) -> float:
        return self.report(zone, now).factor

    def healths(self, now: float) -> dict[str, float]:
        """h of every known zone (1 for stale ones): what ``plumb_zone_health`` exports."""
        return {zone: self.health(zone, now) for zone in self.zones()}

    def report(self, zone: str, now: float) -> ZoneReport:
        state = self._zones.get(zone)
        if state is None or not self.fresh(zone, now):
            return ZoneReport(zone=zone, fresh=False, health=1.0, factor=1.0)
        self._prune(state, now)
        horizon = now - self._spec.window
        ready = 1.0
        if state.nodes is not None and state.nodes[0] >= horizon and state.nodes[2] > 0:
            ready = state.nodes[1] / state.nodes[2]
        binds = latency = 1.0
        if state.bindings:
            succeeded = sum(1 for _, ok, _ in state.bindings if ok)
            binds = (succeeded + 1) / (len(state.bindings) + 1)
            mean = sum(seconds for _, _, seconds in state.bindings) / len(state.bindings)
            latency = min(1.0, self._latency_reference / mean) if mean > 0 else 1.0
        utilisation = 1.0
        if state.utilisation is not None and state.utilisation[0] >= horizon:
            over = (state.utilisation[1] - UTILISATION_KNEE) / (1.0 - UTILISATION_KNEE)
            utilisation = 1.0 - (1.0 - UTILISATION_FLOOR) * min(1.0, max(0.0, over))
        health = min(1.0, max(0.0, ready * binds * latency * utilisation))
        return ZoneReport(
            zone=zone,
            fresh=True,
            health=health,
            factor=factor_of(health),
            ready=ready,
            binds=binds,
            latency=latency,
            utilisation=utilisation,
        )

    def _zone(self, zone: str) -> _Zone:
        state = self._zones.get(zone)
        if state is None:
            state = self._zones[zone] = _Zone()
        return state

    def _prune(self, state: _Zone, now: float) -> None:
        horizon = now - self._spec.window
        while state.bindings and state.bindings[0][0] < horizon:
            state.bindings.popleft()
