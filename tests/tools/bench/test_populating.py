"""The bench's clean-up between runs: a collection deletion the API server cuts short at its
own request timeout (504) is asked again until it is done."""

from __future__ import annotations

import pytest
from aiohttp import web

from plumb_dev.bench import populating
from tests.support import loopback


def _app(timeouts: int, deletes: list[str]) -> web.Application:
    """An API server whose pod collection deletion answers 504 ``timeouts`` times first."""
    left = [timeouts]

    async def delete(request: web.Request) -> web.StreamResponse:
        deletes.append(request.path)
        if request.path.endswith("/pods") and left[0] > 0:
            left[0] -= 1
            return web.json_response(
                {"kind": "Status", "message": "Timeout: request did not complete", "code": 504},
                status=504,
            )
        return web.json_response({"kind": "Status", "status": "Success"})

    async def empty(request: web.Request) -> web.StreamResponse:
        return web.json_response(
            {"kind": "List", "metadata": {"resourceVersion": "9"}, "items": []}
        )

    app = web.Application()
    app.router.add_delete("/api/v1/namespaces/{ns}/pods", delete)
    app.router.add_delete("/api/v1/nodes", delete)
    app.router.add_get("/api/v1/namespaces/{ns}/pods", empty)
    app.router.add_get("/api/v1/nodes", empty)
    return app


async def test_a_deletion_cut_short_by_the_api_servers_timeout_is_asked_again() -> None:
    deletes: list[str] = []
    async with loopback.serving(_app(2, deletes)) as port:
        api = loopback.client(port)
        try:
            await populating.delete_run(api, "bench-x", "bench=run")
        finally:
            await api.close()
    pods = "/api/v1/namespaces/bench-x/pods"
    assert deletes == [pods, pods, pods, "/api/v1/nodes"]


async def test_a_deletion_still_cut_short_past_its_deadline_fails_with_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(populating, "DELETE_TIMEOUT", 0.0)
    deletes: list[str] = []
    async with loopback.serving(_app(5, deletes)) as port:
        api = loopback.client(port)
        try:
            with pytest.raises(populating.PopulateError, match="HTTP 504: Timeout"):
                await populating.delete_run(api, "bench-x", "bench=run")
        finally:
            await api.close()
    assert deletes == ["/api/v1/namespaces/bench-x/pods"]
