"""A read-only debug endpoint on localhost: each pod's last scheduling decision, as JSON.

``GET /debug/pods/{namespace}/{name}`` answers the pod's last trace record (the fields of its
trace line; 404 when plumb has made no decision for it since it started, or the pod was
deleted); ``GET /debug/pods`` lists the pods with a record; ``GET /debug/snapshot`` answers
the cache, its journal and the recent kernel runs, the file ``plumb replay --snapshot`` reads
(SIGUSR1 writes the same to a file). It listens on 127.0.0.1 only:
reach it with ``kubectl port-forward -n plumb-system deploy/plumb 10252``, and ``plumb explain``
reads it. It serves from the event loop, which owns the tracer, so it needs no locks, and it
writes nothing. It answers only requests whose Host header names the loopback (127.0.0.1,
localhost, [::1]): a page in a browser on the same machine could otherwise reach it through a
name of its own that resolves to 127.0.0.1 (DNS rebinding) and read the whole cache.

A snapshot is captured on the loop (only the containers copied) and encoded in a worker
thread: encoding a large cache is slow, and on the loop plumb would schedule nothing and read no
watch meanwhile (docs/reliability.md#what-the-suite-found-and-what-was-fixed). The thread
encodes and writes one record at a time (``serialise``), so it never holds the GIL, and with it
the loop, for long.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Protocol

from aiohttp import web

from plumb.observability import metrics, tracing

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
DEFAULT_PORT = 10252
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


def _host_name(header: str) -> str:
    """The Host header's name without its port ("[::1]:10252" -> "[::1]")."""
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@web.middleware
async def _loopback_only(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    name = _host_name(request.headers.get("Host", "")).lower()
    if name not in LOOPBACK_NAMES:
        return web.json_response(
            {
                "error": f"Host {request.headers.get('Host', '')!r} is not a loopback name: "
                "the debug endpoint answers requests for 127.0.0.1 or localhost only"
            },
            status=403,
        )
    return await handler(request)


class Encodable(Protocol):
    """A snapshot taken on the loop, to encode in any thread (``runs.Capture``)."""

    def encode_lazily(self) -> Mapping[str, Any]:
        """The document's JSON values, its long arrays as iterators of records."""
        ...


Dumper = Callable[[], Encodable]
"""Captures the scheduler's snapshot (app/runtime.py's ``capture_snapshot``); called on the
event loop, which owns the cache."""


def serialise(capture: Encodable) -> bytes:
    """The snapshot document as JSON bytes, the same as ``json.dumps(capture.encode())``.

    Slow on a large cache: call it in a worker thread. Each record is encoded and written in
    its own short call, so the thread never holds the GIL (and so the loop) long, as one
    ``json.dumps`` of the whole document, a single long C call, would."""
    return "".join(_pieces(capture.encode_lazily())).encode()


def _pieces(value: Any) -> Iterator[str]:
    # json.dumps' default separators, so the result is byte for byte what it writes.
    if isinstance(value, Mapping):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield f"{', ' if i else ''}{json.dumps(str(key))}: "
            yield from _pieces(item)
        yield "}"
    elif isinstance(value, Iterator):
        yield "["
        for i, record in enumerate(value):
            yield f"{', ' if i else ''}{json.dumps(record)}"
        yield "]"
    else:
        yield json.dumps(value)


def application(tracer: tracing.Tracer, dump: Dumper | None = None) -> web.Application:
    """The endpoint's routes over ``tracer``'s records and the scheduler's ``dump``."""

    async def pod(request: web.Request) -> web.Response:
        key = f"{request.match_info['namespace']}/{request.match_info['name']}"
        record = tracer.last(key)
        if record is None:
            message = (
                f"no decision recorded for pod {key}: plumb keeps the last decision of each pod "
                "it scheduled or tried since it started, until the pod is deleted"
            )
            return web.json_response({"error": message}, status=404)
        # "tried" counts the attempts whose repeated answer the log held back as well.
        served = {**record.fields(), "tried": tracer.tried(key)}
        if tracer.spans.settings.ui_url:
            served["tracing_ui"] = tracer.spans.settings.ui_url  # for `plumb explain`'s link
        return web.json_response(served)

    async def pods(_: web.Request) -> web.Response:
        listed = [
            {"pod": r.pod, "uid": r.uid, "result": r.result, "node": r.node}
            for r in tracer.records()
        ]
        return web.json_response({"pods": listed})

    async def snapshot(_: web.Request) -> web.Response:
        if dump is None:
            return web.json_response({"error": "this endpoint has no snapshot"}, status=404)
        body = await asyncio.to_thread(serialise, dump())
        return web.Response(body=body, content_type="application/json")

    app = web.Application(middlewares=[_loopback_only])
    app.router.add_get("/debug/snapshot", snapshot)
    app.router.add_get("/debug/pods", pods)
    app.router.add_get("/debug/pods/{namespace}/{name}", pod)
    return app


async def start(
    tracer: tracing.Tracer, port: int, host: str = HOST, dump: Dumper | None = None
) -> web.AppRunner | None:
    """Serve the endpoint on ``host:port``; None when ``port`` is 0 or cannot be had (plumb
    goes on scheduling without it)."""
    if not port:
        return None
    runner = web.AppRunner(application(tracer, dump), access_log=None, logger=metrics.SERVER_LOG)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as error:
        await runner.cleanup()
        logger.error(
            "cannot serve the debug endpoint on %s:%d (%s); running without it "
            "(choose another with --debug-port, or 0 to turn it off)",
            host,
            port,
            error,
        )
        return None
    logger.info("decisions on http://%s:%d/debug/pods/NAMESPACE/NAME", host, port)
    return runner


async def stop(runner: web.AppRunner | None, tracer: tracing.Tracer) -> None:
    """Stop serving, and write the summary of trace lines still held back."""
    tracer.flush()
    if runner is not None:
        await runner.cleanup()
