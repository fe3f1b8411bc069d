"""The policy store: every SchedulingPolicy's compiled generations, the one in force, and which
policy governs a pod.

Per policy it keeps the generation last read (``observed_generation``), the generation in force
(``active``), why the observed one is not in force (``problem``: a malformed spec, or ``reverted``)
and a short history of the generations that compiled, so that a Revert can go back to the last
one that was Ready and not failing. The rules:

- A generation that compiles comes into force at once and clears any problem or revert.
- A generation that does not compile leaves the previous good generation in force (if there is
  one) and records the ``PolicyError`` message as the problem; the status shows Ready=False.
- ``revert`` marks the generation in force as failing and puts the newest earlier good one in
  force; it stays there until the spec changes (a new generation is applied).
- ``match`` picks, among the policies in force in the pod's namespace whose selector matches,
  the highest priority; a tie goes to the name that sorts first.

Owned by the event loop like the cache: no locks. Purely computational; no I/O, no kopf.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from plumb.policy import spec as spec_module

__all__ = ["HISTORY", "PolicyState", "PolicyStore", "Reversion"]

HISTORY = 8  # compiled generations kept per policy for Revert


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Reversion:
    """A revert: from the failing generation to the good one now in force, when and why."""

    from_generation: int
    to_generation: int
    at: float
    message: str


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PolicyState:
    """What the store knows of one policy: all the status needs from it."""

    namespace: str
    name: str
    uid: str
    observed_generation: int
    active: spec_module.Policy | None
    problem: str | None = None  # why the observed generation did not compile
    reverted: Reversion | None = None
    spec_changed_at: float | None = None  # when a changed spec (not the first seen) came in force
    history: tuple[spec_module.Policy, ...] = ()  # compiled generations, oldest first
    failing: frozenset[int] = frozenset()  # generations reverted away from
    revert_lost: int | None = None  # a reverted-to generation a restart left no spec for

    @property
    def key(self) -> spec_module.Key:
        return (self.namespace, self.name)

    @property
    def active_generation(self) -> int | None:
        return self.active.generation if self.active is not None else None

    def last_good(self) -> spec_module.Policy | None:
        """The newest compiled generation older than the one in force and not failing."""
        current = self.active_generation
        if current is None:
            return None
        candidates = [
            p for p in self.history if p.generation < current and p.generation not in self.failing
        ]
        return candidates[-1] if candidates else None


class PolicyStore:
    """Compiled SchedulingPolicies by (namespace, name)."""

    def __init__(self) -> None:
        self._states: dict[spec_module.Key, PolicyState] = {}
        # Per namespace, the policies in force in match order: priority down, then name up.
        self._ranked: dict[str, list[spec_module.Policy]] = {}
        self._revision = 0

    @property
    def revision(self) -> int:
        """Goes up on every change of what is in force: a cheap staleness check for readers."""
        return self._revision

    def __len__(self) -> int:
        return len(self._states)

    def __iter__(self) -> Iterator[PolicyState]:
        return iter(list(self._states.values()))

    def get(self, namespace: str, name: str) -> PolicyState | None:
        return self._states.get((namespace, name))

    # Changes -----------------------------------------------------------------------------------

    def apply(self, obj: Any, now: float) -> PolicyState | None:
        """Read one SchedulingPolicy object (create, update or resume). Returns its new state,
        or None when the object has no namespace and name to file it under. Never raises."""
        key = spec_module.object_key(obj)
        if key is None:
            return None
        generation = spec_module.object_generation(obj)
        uid = spec_module.object_uid(obj)
        previous = self._states.get(key)
        if previous is not None and previous.uid and uid and previous.uid != uid:
            previous = None  # deleted and created again under the same name while we looked away
        try:
            policy = spec_module.compile_policy(obj)
        except spec_module.PolicyError as error:
            return self._put(self._refused(key, uid, generation, str(error), previous))
        if (
            previous is not None
            and previous.observed_generation == generation
            and previous.active is not None
            and previous.problem is None
        ):
            return previous  # the same generation again (resume, a repeated event)
        changed = previous is not None and previous.active is not None
        history = previous.history if previous is not None else ()
        return self._put(
            PolicyState(
                namespace=key[0],
                name=key[1],
                uid=uid,
                observed_generation=generation,
                active=policy,
                spec_changed_at=now if changed else None,
                history=_remember(history, policy),
                failing=previous.failing if previous is not None else frozenset(),
            )
        )

    def delete(self, namespace: str, name: str) -> bool:
        """Forget a policy: its pods go back to the default behaviour. False if unknown."""
        if self._states.pop((namespace, name), None) is None:
            return False
        self._rank(namespace)
        return True

    def revert(self, namespace: str, name: str, now: float, message: str) -> PolicyState | None:
        """Put the last good generation back in force, marking the current one as failing.
        Returns the new state, or None when there is nothing to go back to (the policy then
        stays as it is; the caller reports that)."""
        state = self._states.get((namespace, name))
        if state is None or state.active is None:
            return None
        target = state.last_good()
        if target is None:
            return None
        reversion = Reversion(
            from_generation=state.active.generation,
            to_generation=target.generation,
            at=now,
            message=message,
        )
        return self._put(
            dataclasses.replace(
                state,
                active=target,
                reverted=reversion,
                spec_changed_at=None,
                failing=state.failing | {state.active.generation},
            )
        )

    def resume(
        self, obj: Any, status: Any, now: float, *, earlier: Iterable[Any] = ()
    ) -> PolicyState | None:
        """``apply`` after a restart, taking up a revert that ``status`` records.

        ``earlier`` are objects of earlier generations the caller kept (the API server keeps
        only the current spec); those that compile join the history. When ``status`` says
        Reverted=True for this very generation and the reverted-to generation is among them,
        it goes back in force; without it, the current generation is in force and
        ``revert_lost`` names the generation that could not be restored. Never raises."""
        state = self.apply(obj, now)
        if state is None:
            return None
        for other in earlier:
            try:
                policy = spec_module.compile_policy(other)
            except spec_module.PolicyError:
                continue
            if policy.key == state.key and policy.generation < state.observed_generation:
                state = dataclasses.replace(state, history=_remember(state.history, policy))
        self._states[state.key] = state
        if state.active is None or not isinstance(status, Mapping):
            return state
        target = status.get("activeGeneration")
        observed = status.get("observedGeneration")
        conditions = status.get("conditions")
        said = [
            c
            for c in (conditions if isinstance(conditions, list) else [])
            if isinstance(c, Mapping) and c.get("type") == "Reverted"
        ]
        reverted = any(c.get("status") == "True" for c in said)
        if not (
            reverted
            and isinstance(target, int)
            and observed == state.observed_generation
            and target < state.observed_generation
        ):
            return state
        failing = state.failing | {state.observed_generation}
        candidates = [p for p in state.history if p.generation == target]
        if not candidates:
            return self._put(dataclasses.replace(state, failing=failing, revert_lost=target))
        message = str(said[0].get("message") or "")
        reversion = Reversion(
            from_generation=state.observed_generation,
            to_generation=target,
            at=now,
            message=message,
        )
        return self._put(
            dataclasses.replace(
                state,
                active=candidates[0],
                reverted=reversion,
                spec_changed_at=None,
                failing=failing,
            )
        )

    # Reading -----------------------------------------------------------------------------------

    def match(self, namespace: str, labels: Mapping[str, str]) -> spec_module.Policy | None:
        """The policy in force that governs a pod: highest priority, ties to the first name."""
        for policy in self._ranked.get(namespace, ()):
            if policy.selector.matches(labels):
                return policy
        return None

    def active(self, namespace: str | None = None) -> tuple[spec_module.Policy, ...]:
        """Policies in force (of one namespace, or all), in match order within a namespace."""
        if namespace is not None:
            return tuple(self._ranked.get(namespace, ()))
        return tuple(p for ns in sorted(self._ranked) for p in self._ranked[ns])

    # Internals ---------------------------------------------------------------------------------

    def _refused(
        self,
        key: spec_module.Key,
        uid: str,
        generation: int,
        message: str,
        previous: PolicyState | None,
    ) -> PolicyState:
        if previous is None:
            return PolicyState(
                namespace=key[0],
                name=key[1],
                uid=uid,
                observed_generation=generation,
                active=None,
                problem=message,
            )
        return dataclasses.replace(
            previous,
            uid=uid or previous.uid,
            observed_generation=generation,
            problem=message,
            reverted=None,
            revert_lost=None,
            spec_changed_at=None,
        )

    def _put(self, state: PolicyState) -> PolicyState:
        before = self._states.get(state.key)
        self._states[state.key] = state
        if before is None or before.active is not state.active:
            self._rank(state.namespace)
        return state

    def _rank(self, namespace: str) -> None:
        policies = [
            s.active for s in self._states.values() if s.namespace == namespace and s.active
        ]
        policies.sort(key=lambda p: (-p.priority, p.name))
        if policies:
            self._ranked[namespace] = policies
        else:
            self._ranked.pop(namespace, None)
        self._revision += 1


def _remember(
    history: tuple[spec_module.Policy, ...], policy: spec_module.Policy
) -> tuple[spec_module.Policy, ...]:
    kept = [p for p in history if p.generation != policy.generation] + [policy]
    kept.sort(key=lambda p: p.generation)
    return tuple(kept[-HISTORY:])
