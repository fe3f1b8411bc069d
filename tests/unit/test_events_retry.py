"""An event the API server could not take (a lost connection, 429, 5xx) is tried again with a
doubling wait, as client-go's event sink does; a refusal is not; a drain ends the waiting."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plumb import events
from plumb.backend.records import objects
from plumb.k8s import client as k8s_client
from plumb_dev.testing.builders import make_pod
from tests.support.fakes import Answer

WEB = objects.parse_pod(make_pod("web", "shop").uid("uid-web").obj())


class ScriptedEventsApi:
    """create_event answered from a script, then 201; every try recorded."""

    def __init__(self, *script: Answer) -> None:
        self.tries: list[str] = []
        self._script = list(script)

    async def create_event(
        self, *, namespace: str, event: dict[str, Any]
    ) -> k8s_client.ApiResponse:
        self.tries.append(event["metadata"]["name"])
        outcome = (
            self._script.pop(0) if self._script else k8s_client.ApiResponse(status=201, body={})
        )
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def patch_pod_status(
        self, *, namespace: str, name: str, patch: dict[str, Any]
    ) -> k8s_client.ApiResponse:
        return k8s_client.ApiResponse(status=200, body={})


def _recorder(api: ScriptedEventsApi, waits: list[float]) -> events.Recorder:
    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    return events.Recorder(api, instance="test", sleep=sleep)


async def _settle(recorder: events.Recorder) -> None:
    # Let the fire-and-forget task run its tries (the fake sleep returns at once).
    for _ in range(50):
        await asyncio.sleep(0)
    await recorder.drain()


@pytest.mark.parametrize(
    "failure",
    [
        k8s_client.TransportError("POST events: ServerDisconnectedError"),
        k8s_client.ApiResponse(status=429, body={"message": "slow down"}),
        k8s_client.ApiResponse(status=500, body={"message": "etcd leader changed"}),
    ],
    ids=["lost", "429", "500"],
)
async def test_an_event_the_server_could_not_take_is_tried_again(failure: Answer) -> None:
    api, waits = ScriptedEventsApi(failure, failure), list[float]()
    recorder = _recorder(api, waits)
    recorder.scheduled(WEB, "n1")
    await _settle(recorder)
    assert len(api.tries) == 3  # two failures, then stored
    assert len(set(api.tries)) == 1  # the same event each time: a stored one answers 409
    assert waits == [1.0, 2.0]


async def test_a_refused_event_is_not_tried_again() -> None:
    api = ScriptedEventsApi(k8s_client.ApiResponse(status=422, body={"message": "invalid"}))
    waits: list[float] = []
    recorder = _recorder(api, waits)
    recorder.scheduled(WEB, "n1")
    await _settle(recorder)
    assert len(api.tries) == 1
    assert waits == []


async def test_an_event_gives_up_after_its_tries() -> None:
    failure = k8s_client.ApiResponse(status=503, body={"message": "unavailable"})
    api, waits = ScriptedEventsApi(*[failure] * 20), list[float]()
    recorder = _recorder(api, waits)
    recorder.scheduled(WEB, "n1")
    await _settle(recorder)
    assert len(api.tries) == events.EVENT_TRIES
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0]


async def test_a_drain_ends_the_waiting_at_once() -> None:
    failure = k8s_client.ApiResponse(status=503, body={"message": "unavailable"})
    api = ScriptedEventsApi(*[failure] * 20)
    # Real sleeps: without the drain waking them, the tries would take 25 s.
    recorder = events.Recorder(api, instance="test")
    recorder.scheduled(WEB, "n1")
    await asyncio.sleep(0.05)
    await asyncio.wait_for(recorder.drain(), 2.0)
    assert len(api.tries) == 2
