"""extendercalls: the extenders asked in turn, and their answers combined as kube-scheduler
combines them (statuses, the copies they return, ignorable errors, weighed scores)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from plumb.extensions import extendercalls, extenders
from plumb.framework import diagnoses
from tests.support.extender_server import ExtenderServer, Reply


@pytest.fixture(name="servers")
def servers_fixture() -> Iterator[tuple[ExtenderServer, ExtenderServer]]:
    with ExtenderServer() as first, ExtenderServer() as second:
        yield first, second


POD = {"metadata": {"name": "p", "uid": "u-p"}, "spec": {"containers": []}}


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {}}


async def test_filters_run_in_turn_and_later_statuses_overwrite_earlier_ones(
    servers: tuple[ExtenderServer, ExtenderServer],
) -> None:
    first, second = servers
    first.on(
        "f",
        lambda args: {
            "Nodes": {"items": args["Nodes"]["items"][1:]},
            "FailedNodes": {"a": "first says no", "b": "overwritten"},
            "FailedAndUnresolvableNodes": {"a": "never"},
        },
    )
    second.on("f", lambda args: {"NodeNames": ["c"], "FailedNodes": {"b": "second says no"}})
    configured = (
        extenders.Extender(url_prefix=first.url, filter_verb="f"),
        extenders.Extender(url_prefix=second.url, filter_verb="f", node_cache_capable=True),
    )
    calls = extendercalls.ExtenderCalls()
    try:
        found = await calls.filter(configured, POD, ["a", "b", "c"], _node)
    finally:
        await calls.close()
    assert found.nodes == ("c",)
    assert found.statuses == {"a": ("never", True), "b": ("second says no", False)}
    assert found.fresh == {"c"}  # the first extender's copy, kept by name
    assert second.bodies("f")[0]["NodeNames"] == ["b", "c"]


async def test_an_ignorable_filter_that_fails_is_skipped_and_another_ends_the_attempt(
    servers: tuple[ExtenderServer, ExtenderServer],
) -> None:
    first, second = servers
    first.on("f", lambda args: Reply(status=500, body={}))
    second.on("f", lambda args: {"NodeNames": args["NodeNames"][:1]})
    ignorable = extenders.Extender(url_prefix=first.url, filter_verb="f", ignorable=True)
    other = extenders.Extender(url_prefix=second.url, filter_verb="f", node_cache_capable=True)
    calls = extendercalls.ExtenderCalls()
    try:
        found = await calls.filter(extenders.ordered([ignorable, other]), POD, ["a", "b"], _node)
        assert (found.nodes, found.error) == (("a",), None)
        strict = dataclasses.replace(ignorable, ignorable=False)
        failed = await calls.filter([strict], POD, ["a"], _node)
    finally:
        await calls.close()
    assert failed.error == f"failed f with extender at URL {first.url}/f, code 500"


async def test_prioritizers_answer_together_weighed_and_summed(
    servers: tuple[ExtenderServer, ExtenderServer],
) -> None:
    first, second = servers
    first.on("p", lambda args: [{"Host": "a", "Score": 2}, {"Host": "a", "Score": 1}])
    second.on("p", lambda args: [{"Host": "b", "Score": -1}, {"Host": "z", "Score": 10}])
    configured = (
        extenders.Extender(url_prefix=first.url, prioritize_verb="p", weight=2),
        extenders.Extender(url_prefix=second.url, prioritize_verb="p", weight=5),
    )
    calls = extendercalls.ExtenderCalls()
    try:
        kept = extendercalls.Filtered(nodes=("a", "b"))
        totals = await calls.prioritize(configured, POD, kept, _node)
    finally:
        await calls.close()
    # A host named twice counts twice; an unknown host is ignored; nothing is clamped.
    assert totals == {"a": 60, "b": -50}


async def test_a_body_plumb_does_not_hold_is_an_error_of_that_extender() -> None:
    calls = extendercalls.ExtenderCalls()
    configured = (extenders.Extender(url_prefix="http://127.0.0.1:1", filter_verb="f"),)
    found = await calls.filter(configured, POD, ["a"], lambda name: None)
    await calls.close()
    assert found.error is not None
    assert "holds no copy of node a" in found.error


def test_a_node_without_a_reason_adds_no_words() -> None:
    diagnosis = diagnoses.Diagnosis.count(3, [["x"], [""], []])
    assert diagnosis.message() == "0/3 nodes are available: 1 x."
