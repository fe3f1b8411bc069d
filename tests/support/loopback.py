"""A scripted API server for unit tests: an aiohttp app on a free loopback port."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[int]:
    """Serve ``app`` on 127.0.0.1 for the block; yields its port."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


def client(port: int) -> k8s_client.ApiClient:
    """plumb's API client pointed at the loopback server on ``port`` (plain HTTP)."""
    return k8s_client.ApiClient(credentials_module.Credentials(server=f"http://127.0.0.1:{port}"))
