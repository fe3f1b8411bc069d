"""The hot API path: a small async client over one aiohttp session (bind, events, status, a
preemption victim's deletion, list, watch, the leader Lease).

The Authorization header is set per request from ``credentials.Tokens``, so a rotated token
file or a renewed exec credential is picked up without a new session: a credential due for
renewal is renewed before the request goes (in a worker thread: an exec plugin such as
``aws eks get-token`` takes a second), and a 401 renews it at once and, when it changed, sends
the request once more. A new client certificate from an exec plugin closes the connections made
with the old one, as client-go does.

The requests made per pod (the binding, the Scheduled event, a pod status patch) skip aiohttp
for ``Http1Pool``: keep-alive HTTP/1.1 connections that send one prepared request each and read
its answer, for a fraction of aiohttp's CPU per request; aiohttp's request machinery was the
largest single cost of scheduling a pod (docs/performance.md#cpu-where-plumbs-time-went).
Lists, watches and the Lease go through aiohttp."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import contextvars
import dataclasses
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
import orjson

from plumb.k8s import credentials as credentials_module

JSON = dict[str, Any]
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
TRACEPARENT: contextvars.ContextVar[Callable[[], str | None] | None] = contextvars.ContextVar(
    "traceparent", default=None
)
"""What gives the W3C traceparent the requests of the current task carry (tracing: a pod's
PreBind sets its span's, so the API server's spans of those writes join the pod's trace; asked
only when a request is made, as most PreBinds make none); None: none."""
MERGE_PATCH = "application/merge-patch+json"


class TransportError(RuntimeError):
    """The request never got an HTTP answer: a timeout, a refused or broken connection."""


class StatusError(TransportError):
    """The API server answered, but not with success (``status``: its HTTP status)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApiResponse:
    """One HTTP answer from the API server, its body parsed when it is JSON."""

    status: int
    body: Any
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def message(self) -> str:
        """The Status message the API server put in an error body, else the raw body."""
        if isinstance(self.body, dict):
            return str(self.body.get("message") or self.body)
        return str(self.body)


@dataclasses.dataclass
class StreamActivity:
    """A streamed path's state, for liveness: streams open now, and when that last changed
    or one was refused (monotonic seconds)."""

    open: int = 0
    changed_at: float = dataclasses.field(default_factory=time.monotonic)


class ApiClient:
    """Async access to the few endpoints plumb calls per pod; one connection pool for all."""

    def __init__(
        self,
        creds: credentials_module.Credentials,
        *,
        timeout: float = 30.0,
        connections: int = 200,
        user_agent: str = "plumb",
        tokens: credentials_module.Tokens | None = None,
    ) -> None:
        """``tokens``: where the credential comes from (default: ``creds``, on the real
        clocks)."""
        self._creds = creds
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._connections = connections
        self._headers = {"User-Agent": user_agent, "Accept": "application/json"}
        self.tokens = tokens or credentials_module.Tokens(creds)
        self.streams: dict[str, StreamActivity] = {}
        self._session: aiohttp.ClientSession | None = None
        self._pool: Http1Pool | None = None
        self._renewing = asyncio.Lock()  # one renewal in flight; the others wait for it
        self._certificates = self.tokens.certificate_generation  # the one the connections use
        self._retiring: set[asyncio.Task[None]] = set()  # closing connections of an old one

    @property
    def session(self) -> aiohttp.ClientSession:
        # Created lazily so the client can be built outside a running event loop.
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._connections, ssl=self._creds.ssl_context())
            self._session = aiohttp.ClientSession(
                base_url=self._creds.server,
                connector=connector,
                timeout=self._timeout,
                # The token as of now, for callers that use the session directly (the
                # benchmark's watch); request() and stream() send the current one each time.
                headers={**self._headers, **self.tokens.headers()},
            )
        return self._session

    @property
    def pool(self) -> Http1Pool:
        if self._pool is None:
            self._pool = Http1Pool(
                self._creds.server, self._creds.ssl_context(), limit=self._connections
            )
        return self._pool

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        if self._retiring:
            await asyncio.gather(*self._retiring)

    async def _credential(self) -> tuple[int, dict[str, str]]:
        """The credential's generation and Authorization header for a request about to go,
        renewed first when it is due."""
        if self.tokens.due():
            async with self._renewing:
                if self.tokens.due():  # not renewed while this request waited for the lock
                    await asyncio.to_thread(self.tokens.current)
        self._follow_certificate()
        return self.tokens.generation, self.tokens.headers()

    async def _renew(self, since: int) -> bool:
        """After a 401 to a request sent with generation ``since``: whether the credential is
        now another, worth sending the request again with."""
        async with self._renewing:
            renewed = await asyncio.to_thread(self.tokens.refresh, since)
        self._follow_certificate()
        return renewed

    def _follow_certificate(self) -> None:
        """A connection keeps the identity of the certificate it was opened with: after the
        exec plugin gives a new one, new requests go on new connections, and the old ones are
        closed (a watch on one ends, and is resumed)."""
        generation = self.tokens.certificate_generation
        if generation == self._certificates:
            return
        self._certificates = generation
        session, pool = self._session, self._pool
        self._session, self._pool = None, None
        for old in (session, pool):
            if old is not None:
                task = asyncio.create_task(old.close())
                self._retiring.add(task)
                task.add_done_callback(self._retiring.discard)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        request_timeout: float | None = None,
        hot: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> ApiResponse:
        """Send one request; HTTP errors come back as a response, transport errors raise.
        ``headers``: more of them (a traceparent), beside the credential's.

        ``request_timeout`` (seconds) overrides the client's for this request: a collection
        delete can take minutes. ``hot``: a small request made per pod, sent through
        ``pool`` rather than aiohttp."""
        data = None if body is None else encode(body)
        send = self._send_hot if hot else self._send
        generation, auth = await self._credential()
        traced = TRACEPARENT.get()
        if traced is not None and not (headers and "traceparent" in headers):
            header = traced()
            if header is not None:
                headers = {**(headers or {}), "traceparent": header}
        if headers:
            auth = {**auth, **headers}
        response = await send(method, path, auth, data, params, content_type, request_timeout)
        if response.status == 401 and await self._renew(generation):
            # The credential rotated under us (a new token file, a plugin's new token).
            _, auth = await self._credential()
            if headers:
                auth = {**auth, **headers}
            response = await send(method, path, auth, data, params, content_type, request_timeout)
        return response

    async def _send_hot(
        self,
        method: str,
        path: str,
        auth: Mapping[str, str],
        data: bytes | None,
        params: Mapping[str, str] | None,
        content_type: str,
        request_timeout: float | None,
    ) -> ApiResponse:
        headers = {**self._headers, **auth}
        if data is not None:
            headers["Content-Type"] = content_type
        target = f"{path}?{urlencode(params)}" if params else path
        timeout = request_timeout or self._timeout.total
        try:
            status, answered, raw = await self.pool.send(method, target, headers, data, timeout)
        except (OSError, ssl.SSLError, TimeoutError, HttpError) as error:
            raise TransportError(f"{method} {path}: {type(error).__name__}: {error}") from error
        return ApiResponse(
            status=status,
            body=_body(answered.get("content-type", ""), raw),
            retry_after=_retry_after(answered.get("retry-after")),
        )

    async def _send(
        self,
        method: str,
        path: str,
        auth: Mapping[str, str],
        data: bytes | None,
        params: Mapping[str, str] | None,
        content_type: str,
        request_timeout: float | None,
    ) -> ApiResponse:
        headers = dict(auth)
        if data is not None:
            headers["Content-Type"] = content_type
        try:
            async with self.session.request(
                method,
                path,
                data=data,
                params=params,
                headers=headers,
                timeout=(
                    aiohttp.ClientTimeout(total=request_timeout)
                    if request_timeout
                    else self._timeout
                ),
            ) as response:
                raw = await response.read()
                retry_after = _retry_after(response.headers.get("Retry-After"))
                body = _body(response.content_type, raw)
                return ApiResponse(status=response.status, body=body, retry_after=retry_after)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise TransportError(f"{method} {path}: {type(error).__name__}: {error}") from error

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        read_timeout: float,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A response whose body is read as it arrives (a watch); no total timeout, but a
        silence longer than ``read_timeout`` seconds breaks it."""
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._timeout.total, sock_read=read_timeout
        )
        activity = self.streams.setdefault(path, StreamActivity())
        generation, auth = await self._credential()
        try:
            async with self.session.request(
                method, path, params=params, timeout=timeout, headers=auth
            ) as response:
                if response.status == 401:
                    # The caller retries the watch; by then the renewed credential is in use.
                    await self._renew(generation)
                streaming = response.status == 200
                activity.open += streaming
                activity.changed_at = time.monotonic()
                try:
                    yield response
                finally:
                    activity.open -= streaming
                    activity.changed_at = time.monotonic()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise TransportError(f"{method} {path}: {type(error).__name__}: {error}") from error

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, traceparent: str | None = None
    ) -> ApiResponse:
        """POST pods/{name}/binding; the uid makes the API server refuse a recreated pod;
        ``traceparent`` (W3C trace context) joins the API server's spans to the caller's."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/binding"
        headers = {"traceparent": traceparent} if traceparent else None
        return await self.request("POST", path, body=binding, hot=True, headers=headers)

    async def create_event(self, *, namespace: str, event: JSON) -> ApiResponse:
        path = f"/apis/events.k8s.io/v1/namespaces/{quote(namespace)}/events"
        return await self.request("POST", path, body=event, hot=True)

    async def patch_pod_status(self, *, namespace: str, name: str, patch: JSON) -> ApiResponse:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/status"
        return await self.request(
            "PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH, hot=True
        )

    async def patch_pod_group_status(
        self, *, namespace: str, name: str, patch: JSON
    ) -> ApiResponse:
        """A strategic merge patch of an upstream PodGroup's status (its conditions, merged
        by type)."""
        path = (
            f"/apis/scheduling.k8s.io/v1beta1/namespaces/{quote(namespace)}/podgroups/"
            f"{quote(name)}/status"
        )
        return await self.request("PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)

    async def delete_pod(self, *, namespace: str, name: str, uid: str) -> ApiResponse:
        """DELETE pods/{name}, on the condition that the pod is still the one with ``uid``.

        A pod recreated under the same name answers 409 (the precondition failed) and is left
        alone; a pod gone already answers 404."""
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
        return await self.request("DELETE", path, body=options)

    async def get_lease(
        self, *, namespace: str, name: str, request_timeout: float | None = None
    ) -> ApiResponse:
        path = _lease_path(namespace, name)
        return await self.request("GET", path, request_timeout=request_timeout)

    async def create_lease(
        self, *, namespace: str, body: JSON, request_timeout: float | None = None
    ) -> ApiResponse:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases"
        return await self.request("POST", path, body=body, request_timeout=request_timeout)

    async def replace_lease(
        self, *, namespace: str, name: str, body: JSON, request_timeout: float | None = None
    ) -> ApiResponse:
        """PUT the whole Lease; its metadata.resourceVersion makes a concurrent change a 409."""
        path = _lease_path(namespace, name)
        return await self.request("PUT", path, body=body, request_timeout=request_timeout)

    async def list_all(self, path: str, *, page: int = 500) -> tuple[list[JSON], str]:
        """Every item of a collection, page by page; returns the items and the resourceVersion."""
        items: list[JSON] = []
        params = {"limit": str(page)}
        while True:
            response = await self.request("GET", path, params=params)
            if not response.ok:
                raise StatusError(
                    f"GET {path}: HTTP {response.status}: {response.message()}", response.status
                )
            items.extend(response.body.get("items") or [])
            metadata = response.body.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                return items, str(metadata.get("resourceVersion", ""))
            params = {"limit": str(page), "continue": token}

    # Volumes (VolumeBinding's PreBind): the PV controller's objects, read and written the way
    # kube-scheduler's volume binder does. A patch that carries metadata.resourceVersion is
    # applied only to that version (409 otherwise), as the binder's Update of its cached copy.

    async def get_persistent_volume(self, *, name: str) -> ApiResponse:
        return await self.request("GET", f"/api/v1/persistentvolumes/{quote(name)}")

    async def patch_persistent_volume(self, *, name: str, patch: JSON) -> ApiResponse:
        """A JSON merge patch of the PV."""
        path = f"/api/v1/persistentvolumes/{quote(name)}"
        merge = "application/merge-patch+json"
        return await self.request("PATCH", path, body=patch, content_type=merge)

    async def get_persistent_volume_claim(self, *, namespace: str, name: str) -> ApiResponse:
        path = f"/api/v1/namespaces/{quote(namespace)}/persistentvolumeclaims/{quote(name)}"
        return await self.request("GET", path)

    async def patch_persistent_volume_claim(
        self, *, namespace: str, name: str, patch: JSON
    ) -> ApiResponse:
        """A JSON merge patch of the PVC."""
        path = f"/api/v1/namespaces/{quote(namespace)}/persistentvolumeclaims/{quote(name)}"
        merge = "application/merge-patch+json"
        return await self.request("PATCH", path, body=patch, content_type=merge)

    # ResourceClaims (DynamicResources' PreBind, PostFilter and Unreserve), written as
    # kube-scheduler's plugin does: a patch that carries metadata.resourceVersion is applied
    # only to that version (409 otherwise), as its Update of the cached claim. Patches, not
    # whole objects: an opaque configuration sent back re-encoded would differ from the stored
    # bytes, and the API server refuses any change of a claim's spec.

    async def get_resource_claim(self, *, namespace: str, name: str) -> ApiResponse:
        return await self.request("GET", _claim_path(namespace, name))

    async def patch_resource_claim(self, *, namespace: str, name: str, patch: JSON) -> ApiResponse:
        """A JSON merge patch of the claim (its finalizers)."""
        path = _claim_path(namespace, name)
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def patch_resource_claim_status(
        self, *, namespace: str, name: str, patch: JSON, strategic: bool = False
    ) -> ApiResponse:
        """A JSON merge patch of the claim's status subresource (allocation, reservedFor);
        ``strategic``: a strategic merge patch (one reservedFor entry removed by uid)."""
        path = _claim_path(namespace, name) + "/status"
        kind = STRATEGIC_MERGE_PATCH if strategic else MERGE_PATCH
        return await self.request("PATCH", path, body=patch, content_type=kind)

    async def create_resource_claim(self, *, namespace: str, body: JSON) -> ApiResponse:
        path = f"/apis/resource.k8s.io/v1/namespaces/{quote(namespace)}/resourceclaims"
        return await self.request("POST", path, body=body)

    async def delete_resource_claim(self, *, namespace: str, name: str, uid: str) -> ApiResponse:
        """DELETE the claim, on the condition that it is still the one with ``uid``."""
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        return await self.request("DELETE", _claim_path(namespace, name), body=options)


class HttpError(Exception):
    """The server's answer broke HTTP/1.1, or the connection closed before it was whole."""


TLS_READ_BUFFER = 32 * 1024
"""Bytes each TLS connection reads into at a time (asyncio's default is 256 KiB)."""


def limit_tls_buffers(size: int = TLS_READ_BUFFER) -> None:
    """Gives every TLS connection this process opens from now on a ``size``-byte read buffer.

    asyncio allocates (and fills with zeros) its whole read buffer per TLS connection, 256 KiB
    by default, and plumb holds about a hundred connections (a binding or an event in flight
    each, plus aiohttp's): at the default the buffers are a large share of plumb's peak. 32 KiB
    is two TLS records (at most 16 KiB each) per read; a larger buffer only saves a watch a few
    reads (docs/performance.md#memory-peak-rss-vmhwm, then #start-up-memory).
    The size is a class attribute of asyncio's SSL protocol (Python 3.11 and later)."""
    protocol = getattr(asyncio.sslproto, "SSLProtocol", None)
    if protocol is not None and hasattr(protocol, "max_size"):
        protocol.max_size = size


class Http1Pool:
    """Keep-alive HTTP/1.1 connections to one server, at most ``limit`` open, each carrying one
    request at a time: a request takes an idle connection (or opens one), sends, reads the whole
    answer, and gives the connection back unless either side said ``Connection: close``.

    No retries: a request whose connection breaks raises, as aiohttp's does for a POST."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | bool, *, limit: int) -> None:
        url = urlsplit(server)
        self._host = url.hostname or "localhost"
        self._tls = url.scheme == "https"
        self._port = url.port or (443 if self._tls else 80)
        self._ssl = ssl_context if self._tls else None
        self._authority = url.netloc.encode("ascii")
        self._idle: list[_Http1Connection] = []
        self._open: set[_Http1Connection] = set()  # until each is lost
        self._slots = asyncio.Semaphore(limit)
        self._closed = False

    async def send(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None,
        within: float | None,
    ) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-case names, body) of one request; ``within`` seconds
        for all of it, connecting included (None: no limit)."""
        head = [f"{method} {target} HTTP/1.1\r\n".encode("ascii"), b"Host: ", self._authority]
        for name, value in headers.items():
            head.append(f"\r\n{name}: {value}".encode("latin-1"))
        head.append(b"\r\nContent-Length: %d\r\n\r\n" % len(body or b""))
        if body:
            head.append(body)
        request = b"".join(head)
        async with self._slots, asyncio.timeout(within):
            connection = await self._connection()
            try:
                status, answered, raw = await connection.exchange(request)
            except BaseException:
                connection.close()
                raise
            if connection.reusable and not self._closed:
                self._idle.append(connection)
            else:
                connection.close()
            return status, answered, raw

    async def _connection(self) -> _Http1Connection:
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable:
                return connection
            connection.close()  # closed by the server, or out of step, while it was idle
        loop = asyncio.get_running_loop()
        if self._ssl is not None:
            _transport, connection = await loop.create_connection(
                _Http1Connection,
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._host,
            )
        else:
            _transport, connection = await loop.create_connection(
                _Http1Connection, self._host, self._port
            )
        self._open.add(connection)
        connection.lost.add_done_callback(lambda _: self._open.discard(connection))
        return connection

    async def close(self, *, within: float = 5.0) -> None:
        """Closes the idle connections now, those in use when their request ends, and waits
        (``within`` seconds at most) until every socket is closed: a socket still open when
        its event loop ends is never closed, and the interpreter warns of it."""
        self._closed = True
        while self._idle:
            self._idle.pop().close()
        lost = [connection.lost for connection in self._open]
        if lost:
            await asyncio.wait(lost, timeout=within)


class _Http1Connection(asyncio.Protocol):
    """One HTTP/1.1 connection's reading side: parses the answer to the request in flight as
    its bytes arrive (Content-Length, chunked, or up to the end of the connection).

    Closing aborts the transport: the socket closes at once, with no TLS close_notify
    exchange to wait for (nothing is left to send once an answer is read or given up)."""

    def __init__(self) -> None:
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[tuple[int, dict[str, str], bytes]] | None = None
        self._open = False
        self._keep = True
        # The answer being read: its status and headers once they are in, then its body.
        self._status = 0
        self._headers: dict[str, str] | None = None
        self._length: int | None = None  # Content-Length; None: chunked or to the end
        self._chunked = False
        self._chunks: list[bytes] = []
        self._chunk_left = -1  # bytes (and the CRLF after them) of the chunk being read

    @property
    def reusable(self) -> bool:
        return self._open and self._keep and self._waiter is None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._open = True

    async def exchange(self, request: bytes) -> tuple[int, dict[str, str], bytes]:
        assert self._transport is not None
        assert self._waiter is None
        self._waiter = asyncio.get_running_loop().create_future()
        self._buffer.clear()
        self._headers, self._chunks, self._chunk_left = None, [], -1
        self._transport.write(request)
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self._keep = False  # bytes nobody asked for: the connection is out of step
            return
        self._buffer += data
        try:
            answer = self._parse()
        except (ValueError, HttpError) as error:
            self._keep = False
            self._waiter.set_exception(HttpError(f"a malformed answer: {error}"))
            return
        if answer is not None:
            if self._buffer:
                self._keep = False  # bytes beyond the answer: the connection is out of step
            self._waiter.set_result(answer)

    def eof_received(self) -> bool | None:
        self._keep = False
        if self._waiter is not None and not self._waiter.done():
            if self._headers is not None and self._length is None and not self._chunked:
                self._waiter.set_result((self._status, self._headers, bytes(self._buffer)))
            else:
                self._waiter.set_exception(HttpError("the server closed the connection"))
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._open = False
        if not self.lost.done():
            self.lost.set_result(None)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(
                HttpError(f"the connection was lost: {exc}" if exc else "the connection closed")
            )

    def close(self) -> None:
        self._open = False
        if self._transport is not None:
            self._transport.abort()

    def _parse(self) -> tuple[int, dict[str, str], bytes] | None:
        """The whole answer once it is in, else None (and what there is kept for later)."""
        buffer = self._buffer
        if self._headers is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return None
            lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
            del buffer[: end + 4]
            version, status = lines[0].split(" ", 2)[:2]
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            self._status = int(status)
            if 100 <= self._status < 200:
                return self._parse()  # an interim answer (100 Continue): the real one follows
            self._headers = headers
            connection = headers.get("connection", "").lower()
            if connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive"):
                self._keep = False
            self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
            self._length = None
            if not self._chunked:
                if "content-length" in headers:
                    self._length = int(headers["content-length"])
                elif self._status in (204, 304):
                    self._length = 0
                else:
                    self._keep = False  # the body runs to the end of the connection
        if self._chunked:
            return self._parse_chunks()
        if self._length is not None and len(buffer) >= self._length:
            body = bytes(buffer[: self._length])
            del buffer[: self._length]
            return self._status, self._headers, body
        return None

    def _parse_chunks(self) -> tuple[int, dict[str, str], bytes] | None:
        buffer = self._buffer
        while True:
            if self._chunk_left < 0:
                end = buffer.find(b"\r\n")
                if end < 0:
                    return None
                size = int(bytes(buffer[:end]).split(b";", 1)[0], 16)
                del buffer[: end + 2]
                if size == 0:
                    self._chunk_left = 0
                else:
                    self._chunk_left = size + 2
            if self._chunk_left == 0:
                # The last chunk: trailer lines (rarely any) up to an empty line.
                end = buffer.find(b"\r\n")
                while end > 0:
                    del buffer[: end + 2]
                    end = buffer.find(b"\r\n")
                if end < 0:
                    return None
                del buffer[:2]
                assert self._headers is not None
                return self._status, self._headers, b"".join(self._chunks)
            if len(buffer) < self._chunk_left:
                return None
            self._chunks.append(bytes(buffer[: self._chunk_left - 2]))
            del buffer[: self._chunk_left]
            self._chunk_left = -1


def encode(body: Any) -> bytes:
    """``body`` as compact JSON: orjson (several times faster than json, and a bind and an
    event are encoded per pod); json only for what orjson refuses (an integer beyond 64 bits)."""
    try:
        return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(body, separators=(",", ":")).encode()


def decode(raw: bytes | str) -> Any:
    """A JSON document (a response, a watch event): orjson, as ``encode``; json for what orjson
    refuses and json reads (NaN, a lone surrogate), which raises on a malformed document."""
    try:
        return orjson.loads(raw)
    except ValueError:  # orjson.JSONDecodeError
        return json.loads(raw)


def _body(content_type: str, raw: bytes) -> Any:
    """An answer's body: decoded when it is JSON, else its text."""
    if content_type.startswith("application/json") and raw:
        return decode(raw)
    return raw.decode(errors="replace")


def _claim_path(namespace: str, name: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{quote(namespace)}/resourceclaims/{quote(name)}"


def _lease_path(namespace: str, name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases/{quote(name)}"


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
