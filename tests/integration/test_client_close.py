"""Closing plumb's API client against the real (TLS) API server closes every socket it opened
before it returns, so nothing is left open when the event loop ends."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from plumb.k8s import client as k8s_client
from plumb.k8s import credentials
from plumb_dev.cluster.controlplane import lifecycle as controlplane

pytestmark = pytest.mark.integration


def test_closing_the_client_leaves_no_socket_for_the_end_of_its_loop(
    control_plane: controlplane.ControlPlane, namespace: str
) -> None:
    opened: list[int] = []

    async def requests_then_close() -> None:
        api = k8s_client.ApiClient(credentials.load(control_plane.kubeconfig))
        # Per-pod requests in parallel (each on a connection of its own), and a listing
        # (through aiohttp's pool): a 404 for each patch is an answer like any other.
        patches = [
            api.patch_pod_status(namespace=namespace, name=f"absent-{i}", patch={"status": {}})
            for i in range(8)
        ]
        answers = await asyncio.gather(*patches)
        assert {answer.status for answer in answers} == {404}
        assert (await api.request("GET", f"/api/v1/namespaces/{namespace}/pods")).ok
        opened.append(len(api.pool._open))
        await api.close()

    gc.collect()  # what earlier tests left is theirs, not this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        # The loop ends the moment close() returns: no further turn of it closes anything.
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(requests_then_close())
        finally:
            loop.close()
        gc.collect()
    assert opened[0] > 1, "the patches did not open several connections"
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []
