"""The startup list of SchedulingPolicies: no CRD means none, any other failure is retried
(pods must not be scheduled without the policies that govern them)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from plumb.app import policylist
from plumb.k8s import client as k8s_client
from tests.support import loopback


@pytest.fixture
async def answers() -> AsyncIterator[tuple[k8s_client.ApiClient, list[web.Response]]]:
    """An API client whose server answers the policy list with each response in turn."""
    queue: list[web.Response] = []

    async def policies(_: web.Request) -> web.Response:
        return queue.pop(0)

    app = web.Application()
    app.router.add_get(policylist.PATH, policies)
    async with loopback.serving(app) as port:
        api = loopback.client(port)
        try:
            yield api, queue
        finally:
            await api.close()


def _status(code: int) -> web.Response:
    return web.json_response({"kind": "Status", "code": code, "message": "no"}, status=code)


async def test_throttling_and_server_errors_are_retried_until_the_list_comes(
    answers: tuple[k8s_client.ApiClient, list[web.Response]],
) -> None:
    api, queue = answers
    listed = {"items": [{"metadata": {"name": "spread"}}], "metadata": {"resourceVersion": "7"}}
    queue.extend([_status(429), _status(503), _status(500), web.json_response(listed)])
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    items = await policylist.list_policies(api, sleep=sleep)
    assert items == listed["items"]
    assert sleeps == [1.0, 2.0, 4.0]


async def test_no_crd_means_no_policies(
    answers: tuple[k8s_client.ApiClient, list[web.Response]],
) -> None:
    api, queue = answers
    queue.append(_status(404))
    assert await policylist.list_policies(api) is None
