"""A fault-injecting HTTP proxy between plumb and kube-apiserver, for the chaos suite.

It listens on plain HTTP on 127.0.0.1 and forwards each request to the real API server (or any
upstream URL), except that a seeded share of the requests of each class (``binding``, ``event``,
``watch``, ``other``) meets a fault instead: the connection dropped before or after the API
server saw the request, a delay, a 429/500/409 answer, or a watch cut mid-stream. Watches are
relayed chunk by chunk as they arrive. The proxy runs its own event loop in a daemon thread, so
synchronous tests drive it with ``start()``/``stop()`` (or ``with``), ``set_rules``, ``pause``,
``resume`` and ``cut_watches``, and read ``counts()`` to report how many faults they injected.

Not supported: protocol upgrades (``kubectl exec``/``port-forward``) and HTTP/2.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import json
import logging
import os
import random
import re
import ssl
import threading
import types
import urllib.parse
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, TypeVar

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

logger = logging.getLogger(__name__)

PASSED: Final = "passed"

# RFC 9110 section 7.6.1: these describe one hop, not the message, so a proxy never relays them.
# Host names the proxy itself; Content-Length is recomputed (or replaced by chunking) per hop.
_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)

_BINDING: Final = re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/binding/?$")
_EVENTS: Final = re.compile(
    r"^/(api/v1|apis/events\.k8s\.io/v1(beta1)?)/namespaces/[^/]+/events/?$"
)

_T = TypeVar("_T")
_WAIT_ON_LOOP: Final = 10.0  # seconds a blocking call waits for the proxy's loop to act


class RequestClass(enum.StrEnum):
    """What a request is, as far as the faults are concerned."""

    BINDING = "binding"  # POST .../pods/NAME/binding
    EVENT = "event"  # POST to a namespace's events, core or events.k8s.io
    WATCH = "watch"  # a long chunked stream: watch=true|1, or a /watch/ path
    OTHER = "other"


class Fault(enum.StrEnum):
    """What happens to a request picked for a fault."""

    DROP = "drop"  # the client connection closed with no answer; never forwarded
    LOST = "lost"  # forwarded and completed upstream, then the client closed with no answer
    DELAY = "delay"  # forwarded after a sleep of the proxy's ``delay``
    TOO_MANY = "too_many"  # 429 with Retry-After and a Status body; never forwarded
    ERROR = "error"  # 500 InternalError Status; never forwarded
    CONFLICT = "conflict"  # 409 Conflict Status; never forwarded
    CUT = "cut"  # watches only: relayed for a random short time, then cut mid-stream


# A counter's key: the request's class, and the fault it met or "passed".
Key: TypeAlias = tuple[RequestClass, Fault | Literal["passed"]]

_STATUS_ANSWERS: Final = {
    Fault.TOO_MANY: (429, "TooManyRequests"),
    Fault.ERROR: (500, "InternalError"),
    Fault.CONFLICT: (409, "Conflict"),
}


@dataclasses.dataclass(frozen=True)
class Rule:
    """Inject ``fault`` into a ``share`` (0 to 1) of the requests of class ``kind``."""

    kind: RequestClass
    fault: Fault
    share: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"a rule's share is between 0 and 1, got {self.share!r} in {self}")
        if self.fault is Fault.CUT and self.kind is not RequestClass.WATCH:
            raise ValueError(f"only a watch can be cut mid-stream, not a {self.kind}: {self}")
        if self.fault is Fault.LOST and self.kind is RequestClass.WATCH:
            raise ValueError(
                f"a watch never completes, so its answer cannot be lost; use CUT: {self}"
            )


def classify(method: str, target: str) -> RequestClass:
    """The class of a request from its method and target (path and query, as sent)."""
    parts = urllib.parse.urlsplit(target)
    path = urllib.parse.unquote(parts.path)
    watch = urllib.parse.parse_qs(parts.query).get("watch", [])
    if any(value.lower() in ("true", "1") for value in watch) or "/watch/" in path:
        return RequestClass.WATCH
    if method.upper() == "POST":
        if _BINDING.match(path):
            return RequestClass.BINDING
        if _EVENTS.match(path):
            return RequestClass.EVENT
    return RequestClass.OTHER


def status_body(code: int, reason: str, message: str) -> bytes:
    """A Kubernetes ``Status`` failure, as the API server writes it."""
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return json.dumps(status).encode()


@dataclasses.dataclass(eq=False)
class _Watch:
    """An open watch stream, so ``cut_watches`` and ``pause`` can end it from outside."""

    cut: asyncio.Event
    finished: asyncio.Future[None]


class FaultProxy:
    """The proxy: ``start()`` it (or use ``with``), point plumb at ``url``, ``stop()`` it.

    ``upstream`` is the API server's URL (``https://`` verified against ``ca_file``, or
    ``http://``). ``seed`` makes the choice of faulty requests repeatable for the same sequence of
    requests. ``delay`` is the DELAY fault's sleep, ``retry_after`` the seconds the 429 asks for,
    and a CUT watch is cut after a time drawn uniformly from ``cut_after``.
    """

    def __init__(
        self,
        upstream: str,
        *,
        ca_file: str | os.PathLike[str] | None = None,
        rules: Iterable[Rule] = (),
        seed: int = 0,
        delay: float = 1.0,
        retry_after: int = 1,
        cut_after: tuple[float, float] = (0.1, 2.0),
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self._ssl: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=os.fspath(ca_file) if ca_file else None)
            if self.upstream.startswith("https://")
            else False
        )
        self.delay = delay
        self.retry_after = retry_after
        self.cut_after = cut_after
        # The lock guards what other threads touch: the rules, the random draws, the counters.
        self._lock = threading.Lock()
        self._rules: tuple[Rule, ...] = ()
        self._random = random.Random(seed)
        self._counts: dict[Key, int] = {}
        self.set_rules(rules)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._port: int | None = None
        self._startup_error: BaseException | None = None
        # The rest belong to the proxy's loop and are made there.
        self._stop: asyncio.Event | None = None
        self._open: asyncio.Event | None = None  # cleared while paused
        self._stopping = False
        self._session: aiohttp.ClientSession | None = None
        self._handlers: set[asyncio.Task[object]] = set()
        self._watches: set[_Watch] = set()

    # -- the test's side (any thread) ---------------------------------------------------------

    @property
    def url(self) -> str:
        """Where clients reach the proxy, e.g. ``http://127.0.0.1:41234``."""
        if self._port is None:
            raise RuntimeError("the fault proxy has no address until start() is called")
        return f"http://127.0.0.1:{self._port}"

    def set_rules(self, rules: Iterable[Rule]) -> None:
        """Replace the rules; applies to requests arriving from now on. Rules for the same class
        take disjoint shares of it, in order, so their shares may add up to at most 1."""
        rules = tuple(rules)
        for kind in RequestClass:
            total = sum(rule.share for rule in rules if rule.kind is kind)
            if total > 1.0 + 1e-9:
                raise ValueError(
                    f"the shares of the rules for {kind} add up to {total:g}, more than 1: {rules}"
                )
        with self._lock:
            self._rules = rules

    def counts(self) -> dict[Key, int]:
        """A snapshot: requests per (class, fault injected), and (class, "passed") for those
        forwarded untouched. A watch cut later by ``cut_watches``/``pause`` adds a (watch, CUT)."""
        with self._lock:
            return dict(self._counts)

    def faults_injected(self) -> int:
        """How many faults were injected so far, of every kind."""
        return sum(n for (_, outcome), n in self.counts().items() if outcome != PASSED)

    def start(self) -> FaultProxy:
        """Listen on a free port of 127.0.0.1 and serve from a daemon thread."""
        if self._thread is not None:
            raise RuntimeError("this fault proxy was started already; make a new one")
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=f"faultproxy->{self.upstream}", daemon=True
        )
        self._thread.start()
        if not ready.wait(_WAIT_ON_LOOP):
            self.stop()
            raise RuntimeError(f"the fault proxy did not start within {_WAIT_ON_LOOP:g} s")
        if self._startup_error is not None:
            self.stop()
            raise RuntimeError(
                f"the fault proxy could not start: {self._startup_error}"
            ) from self._startup_error
        return self

    def stop(self) -> None:
        """Close every connection and the listener, and end the thread. Safe to call twice."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has ended already
                loop.call_soon_threadsafe(stop.set)
        thread.join(_WAIT_ON_LOOP)
        if thread.is_alive():
            raise RuntimeError(f"the fault proxy's thread did not end within {_WAIT_ON_LOOP:g} s")

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.stop()

    def pause(self) -> None:
        """Hold every new request unanswered until ``resume``, and cut every open watch now."""
        self._on_loop(self._pause())

    def resume(self) -> None:
        """Let the held requests, and the new ones, go on."""
        self._on_loop(self._resume())

    def cut_watches(self) -> int:
        """Cut every open watch stream now; returns how many were cut."""
        return self._on_loop(self._cut_watches())

    def write_kubeconfig(self, path: str | os.PathLike[str], token: str) -> Path:
        """Write a kubeconfig whose server is the proxy and whose user has ``token``; JSON is
        YAML, so kubectl, the kubernetes client and plumb all read it."""
        name = "faultproxy"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": self.url}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
        }
        target = Path(path)
        # The token is a credential: the file is the user's alone from its first byte.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a file that exists already
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(config, file, indent=2)
        return target

    def _on_loop(self, coro: Coroutine[Any, Any, _T]) -> _T:
        loop = self._loop
        if loop is None or self._thread is None or not self._thread.is_alive():
            coro.close()  # never awaited otherwise: a RuntimeWarning, an error under pytest
            raise RuntimeError("the fault proxy is not running; call start() first")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(_WAIT_ON_LOOP)

    # -- the proxy's loop --------------------------------------------------------------------

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready))
        except BaseException as error:
            if ready.is_set():  # failed on the way out: nobody waits for an answer any more
                logger.exception("the fault proxy failed while stopping")
            else:  # start() raises it to its caller
                self._startup_error = error
        finally:
            ready.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self, ready: threading.Event) -> None:
        self._stop = asyncio.Event()
        self._open = asyncio.Event()
        self._open.set()
        # No connection limit: every watch holds one upstream connection for its whole life.
        # No decompression: bodies are relayed as the API server encoded them.
        # Python before 3.12.8 leaks the socket under a TLS connection closed mid-stream (the
        # upstream ends of a client's watches when the client is killed; cpython#118960):
        # aiohttp's clean-up aborts those, and closes what is left when the session closes.
        cleanup = bool(getattr(aiohttp.connector, "NEEDS_CLEANUP_CLOSED", False))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, enable_cleanup_closed=cleanup),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, connect=10.0),
        )
        # handler_cancellation: when the client goes away, so does its upstream request (a
        # watch would otherwise hold its upstream connection until the next event).
        server = web.Server(self._handle, handler_cancellation=True, access_log=None)
        runner = web.ServerRunner(server, shutdown_timeout=1.0)
        try:
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self._port = int(runner.addresses[0][1])
            ready.set()
            await self._stop.wait()
        finally:
            self._stopping = True
            self._open.set()
            for watch in self._watches:
                watch.cut.set()
            for task in list(self._handlers):
                task.cancel()
            if self._handlers:
                await asyncio.wait(self._handlers, timeout=_WAIT_ON_LOOP)
            await runner.cleanup()
            await self._session.close()

    async def _pause(self) -> None:
        assert self._open is not None
        self._open.clear()
        await self._cut_watches()

    async def _resume(self) -> None:
        assert self._open is not None
        self._open.set()

    async def _cut_watches(self) -> int:
        watches = list(self._watches)
        for watch in watches:
            watch.cut.set()
        if watches:
            # Cut means gone by the time the caller goes on: wait for the handlers to close.
            await asyncio.wait([w.finished for w in watches], timeout=_WAIT_ON_LOOP)
        return len(watches)

    def _choose(self, kind: RequestClass) -> Fault | None:
        with self._lock:
            rules = [rule for rule in self._rules if rule.kind is kind]
            fault: Fault | None = None
            if rules:
                # One draw per request, the rules taking consecutive slices of [0, 1).
                draw, upper = self._random.random(), 0.0
                for rule in rules:
                    upper += rule.share
                    if draw < upper:
                        fault = rule.fault
                        break
            key: Key = (kind, fault or PASSED)
            self._counts[key] = self._counts.get(key, 0) + 1
            return fault

    def _count(self, kind: RequestClass, fault: Fault) -> None:
        with self._lock:
            self._counts[kind, fault] = self._counts.get((kind, fault), 0) + 1

    def _draw_cut_after(self) -> float:
        with self._lock:
            return self._random.uniform(*self.cut_after)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            return await self._answer(request)
        finally:
            self._handlers.discard(task)

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        assert self._open is not None
        await self._open.wait()
        if self._stopping:
            return _abort(request)
        kind = classify(request.method, request.raw_path)
        fault = self._choose(kind)
        if fault is not None:
            logger.debug("injecting %s into %s %s", fault, request.method, request.raw_path)
        if fault is Fault.DROP:
            return _abort(request)
        if fault in _STATUS_ANSWERS:
            code, reason = _STATUS_ANSWERS[fault]
            headers = {"Content-Type": "application/json"}
            if fault is Fault.TOO_MANY:
                headers["Retry-After"] = str(self.retry_after)
            message = f"faultproxy injected {reason} into {request.method} {request.path}"
            return web.Response(
                status=code, headers=headers, body=status_body(code, reason, message)
            )
        if fault is Fault.DELAY:
            await asyncio.sleep(self.delay)
        body = await request.content.read()  # unbounded, unlike request.read(): big objects pass
        assert self._session is not None
        try:
            upstream = await self._session.request(
                request.method,
                URL(self.upstream + request.raw_path, encoded=True),
                headers=_end_to_end(request.headers),
                data=body if body else None,
                allow_redirects=False,
                ssl=self._ssl,
                # The client's own headers, or none: a default Accept-Encoding would bring back
                # a compressed body the client never asked for.
                skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),
            )
        except (aiohttp.ClientError, OSError) as error:
            logger.warning("upstream %s failed for %s: %s", self.upstream, request.raw_path, error)
            message = f"faultproxy could not reach {self.upstream}: {error}"
            return web.Response(
                status=502,
                headers={"Content-Type": "application/json"},
                body=status_body(502, "ServiceUnavailable", message),
            )
        try:
            if kind is RequestClass.WATCH:
                cut_after = self._draw_cut_after() if fault is Fault.CUT else None
                return await self._relay_watch(request, upstream, cut_after)
            payload = await upstream.read()
        finally:
            upstream.close()
        if fault is Fault.LOST:
            return _abort(request)
        return web.Response(
            status=upstream.status,
            reason=upstream.reason,
            headers=_end_to_end(upstream.headers),
            body=payload,
        )

    async def _relay_watch(
        self, request: web.BaseRequest, upstream: aiohttp.ClientResponse, cut_after: float | None
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason, headers=_end_to_end(upstream.headers)
        )
        await response.prepare(request)
        watch = _Watch(cut=asyncio.Event(), finished=asyncio.get_running_loop().create_future())
        self._watches.add(watch)
        pump = asyncio.create_task(_pump(upstream, response))
        cut = asyncio.create_task(watch.cut.wait())
        try:
            await asyncio.wait({pump, cut}, timeout=cut_after, return_when="FIRST_COMPLETED")
        finally:
            # Bookkeeping before the first await: a cancelled handler (client gone, stop) may
            # not get past it, and cut_watches waits on ``finished``.
            self._watches.discard(watch)
            watch.finished.set_result(None)
            for task in (pump, cut):
                task.cancel()
            await asyncio.gather(pump, cut, return_exceptions=True)
        if pump.done() and not pump.cancelled() and pump.exception() is None:
            await response.write_eof()  # upstream ended the watch: end ours cleanly
            return response
        if cut.done() and not cut.cancelled() and cut_after is None:
            self._count(RequestClass.WATCH, Fault.CUT)  # cut on request, not by a CUT rule
        # Cut now: what was relayed stays relayed, the rest never comes. Nothing may be awaited
        # after the abort: the closed connection cancels this handler at the next await.
        upstream.close()
        return _abort(request, response)


async def _pump(upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
    """Relay a stream chunk by chunk, each as soon as it arrives."""
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)


def _abort(
    request: web.BaseRequest, response: web.StreamResponse | None = None
) -> web.StreamResponse:
    """Close the client's connection with no (further) answer. aiohttp then fails to write the
    response handed back (a ConnectionError it expects), so nothing more reaches the client."""
    transport = request.transport
    if transport is not None:
        transport.abort()
    return response if response is not None else web.Response()


def _end_to_end(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    """The headers that travel end to end: all but the hop-by-hop ones, and those that the
    Connection header names as hop-by-hop for this message."""
    named = {
        token.strip().lower()
        for value in headers.getall("Connection", [])
        for token in value.split(",")
    }
    kept: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        if name.lower() not in _HOP_BY_HOP and name.lower() not in named:
            kept.add(name, value)
    return kept
