"""The policy store: which policy governs a pod, what a malformed update leaves in force, what a
delete gives back, and how Revert walks back through the compiled generations."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from plumb.policy import store as store_module
from tests.support.policy_builders import ZONE, make_policy

WEB = {"app": "web"}


def _store(*bodies: dict[str, Any]) -> store_module.PolicyStore:
    store = store_module.PolicyStore()
    for body in bodies:
        assert store.apply(body, now=0.0) is not None
    return store


def _governing(store: store_module.PolicyStore, labels: dict[str, str]) -> str | None:
    policy = store.match("shop", labels)
    return None if policy is None else f"{policy.name}@{policy.generation}"


def test_the_highest_priority_governs_a_pod_several_policies_select() -> None:
    store = _store(
        make_policy("low").labels(app="web").priority(-10).obj(),
        make_policy("high").labels(app="web").priority(100).obj(),
        make_policy("middle").labels(app="web").obj(),
    )
    assert _governing(store, WEB) == "high@1"


def test_a_priority_tie_goes_to_the_name_that_sorts_first_whatever_the_order_of_arrival() -> None:
    beta = make_policy("beta").labels(app="web").priority(5).obj()
    alpha = make_policy("alpha").labels(app="web").priority(5).obj()
    assert _governing(_store(beta, alpha), WEB) == "alpha@1"
    assert _governing(_store(alpha, beta), WEB) == "alpha@1"


def test_a_policy_governs_only_pods_of_its_namespace_that_it_selects() -> None:
    store = _store(make_policy("web", namespace="shop").labels(app="web").obj())
    assert _governing(store, {"app": "api"}) is None
    assert store.match("other", WEB) is None
    assert _governing(store, {"app": "web", "tier": "x"}) == "web@1"


def test_a_malformed_update_keeps_the_last_good_generation_in_force() -> None:
    store = _store(make_policy("web").spread(ZONE, 1).obj())
    bad = make_policy("web").spread(ZONE, 1).set("spec.topology[0].maxSkew", 0).generation(2)
    state = store.apply(bad.obj(), now=10.0)
    assert state is not None
    assert (state.observed_generation, state.active_generation) == (2, 1)
    assert state.problem == "spec.topology[0].maxSkew: must be at least 1, got 0"
    assert _governing(store, WEB) == "web@1"
    fixed = store.apply(make_policy("web").spread(ZONE, 2).generation(3).obj(), now=20.0)
    assert fixed is not None
    assert (fixed.active_generation, fixed.problem) == (3, None)
    assert _governing(store, WEB) == "web@3"


def test_a_malformed_first_generation_governs_nothing_but_is_known() -> None:
    store = _store(make_policy("web").set("spec.priority", "high").obj())
    state = store.get("shop", "web")
    assert state is not None
    assert state.active is None
    assert state.problem == 'spec.priority: must be an integer, got "high"'
    assert _governing(store, WEB) is None


def test_deleting_a_policy_returns_its_pods_to_the_defaults() -> None:
    store = _store(
        make_policy("web").labels(app="web").priority(9).obj(),
        make_policy("fallback").labels(app="web").obj(),
    )
    assert store.delete("shop", "web")
    assert _governing(store, WEB) == "fallback@1"
    assert store.delete("shop", "fallback")
    assert _governing(store, WEB) is None
    assert not store.delete("shop", "fallback")
    assert len(store) == 0


def test_only_a_changed_spec_opens_a_revert_watch() -> None:
    store = store_module.PolicyStore()
    first = store.apply(make_policy("web").obj(), now=5.0)
    assert first is not None
    assert first.spec_changed_at is None  # a new policy has nothing to go back to
    again = store.apply(make_policy("web").obj(), now=6.0)
    assert again is first  # the same generation (a resume, a repeated event) changes nothing
    changed = store.apply(make_policy("web").priority(3).generation(2).obj(), now=7.0)
    assert changed is not None
    assert changed.spec_changed_at == 7.0


def test_revert_goes_back_to_the_last_good_generation_and_stays_until_the_spec_changes() -> None:
    store = _store(make_policy("web").spread(ZONE, 1).obj())
    store.apply(make_policy("web").spread(ZONE, 5).generation(2).obj(), now=10.0)
    reverted = store.revert("shop", "web", now=20.0, message="failure rate 0.60")
    assert reverted is not None
    assert (reverted.observed_generation, reverted.active_generation) == (2, 1)
    assert reverted.reverted == store_module.Reversion(
        from_generation=2, to_generation=1, at=20.0, message="failure rate 0.60"
    )
    assert _governing(store, WEB) == "web@1"
    # The same generation again (kopf resuming, a repeated event) does not undo the revert.
    store.apply(make_policy("web").spread(ZONE, 5).generation(2).obj(), now=30.0)
    assert _governing(store, WEB) == "web@1"
    # A new spec is taken at its word; reverting it skips generation 2, known to fail.
    newer = store.apply(make_policy("web").spread(ZONE, 3).generation(3).obj(), now=40.0)
    assert newer is not None
    assert (newer.active_generation, newer.reverted) == (3, None)
    again = store.revert("shop", "web", now=50.0, message="")
    assert again is not None
    assert again.active_generation == 1


def test_there_is_nothing_to_revert_to_on_the_first_generation() -> None:
    store = _store(make_policy("web").obj())
    assert store.revert("shop", "web", now=1.0, message="") is None
    assert store.revert("shop", "nope", now=1.0, message="") is None
    assert _governing(store, WEB) == "web@1"


def test_a_policy_recreated_under_the_same_name_starts_afresh() -> None:
    store = _store(make_policy("web").obj())
    store.apply(make_policy("web").generation(2).obj(), now=1.0)
    recreated = store.apply(make_policy("web").uid("uid-other").obj(), now=2.0)
    assert recreated is not None
    assert [p.generation for p in recreated.history] == [1]
    assert recreated.spec_changed_at is None


def test_resume_takes_up_a_revert_written_in_status() -> None:
    status = {
        "observedGeneration": 2,
        "activeGeneration": 1,
        "conditions": [{"type": "Reverted", "status": "True", "message": "rate 0.5"}],
    }
    current = make_policy("web").spread(ZONE, 5).generation(2).obj()
    earlier = make_policy("web").spread(ZONE, 1).obj()
    store = store_module.PolicyStore()
    state = store.resume(current, status, now=100.0, earlier=[earlier])
    assert state is not None
    assert (state.observed_generation, state.active_generation) == (2, 1)
    assert state.reverted is not None
    assert state.reverted.message == "rate 0.5"
    assert _governing(store, WEB) == "web@1"


def test_resume_without_the_earlier_spec_says_the_revert_was_lost() -> None:
    status = {
        "observedGeneration": 2,
        "activeGeneration": 1,
        "conditions": [{"type": "Reverted", "status": "True"}],
    }
    store = store_module.PolicyStore()
    state = store.resume(make_policy("web").generation(2).obj(), status, now=100.0)
    assert state is not None
    assert (state.active_generation, state.revert_lost, state.reverted) == (2, 1, None)


def test_resume_after_a_spec_change_ignores_an_old_revert() -> None:
    status = {
        "observedGeneration": 2,
        "activeGeneration": 1,
        "conditions": [{"type": "Reverted", "status": "True"}],
    }
    store = store_module.PolicyStore()
    state = store.resume(make_policy("web").generation(3).obj(), status, now=100.0)
    assert state is not None
    assert (state.active_generation, state.revert_lost, state.reverted) == (3, None, None)


def test_the_revision_moves_when_what_is_in_force_changes() -> None:
    store = store_module.PolicyStore()
    before = store.revision
    store.apply(make_policy("web").obj(), now=0.0)
    assert store.revision > before
    before = store.revision
    store.apply(make_policy("web").obj(), now=1.0)
    assert store.revision == before


def test_objects_without_a_name_are_not_filed() -> None:
    store = store_module.PolicyStore()
    assert store.apply(make_policy().drop("metadata.name").obj(), now=0.0) is None
    assert store.apply("not an object", now=0.0) is None
    assert len(store) == 0


@settings(max_examples=100)
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=6))
def test_the_winner_does_not_depend_on_the_order_of_arrival(priorities: list[int]) -> None:
    bodies = [
        make_policy(f"p{i}").labels(app="web").priority(p).obj() for i, p in enumerate(priorities)
    ]
    expected = min(range(len(priorities)), key=lambda i: (-priorities[i], f"p{i}"))
    assert _governing(_store(*bodies), WEB) == f"p{expected}@1"
    assert _governing(_store(*reversed(bodies)), WEB) == f"p{expected}@1"
