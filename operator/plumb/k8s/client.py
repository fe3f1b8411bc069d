"""The hot API path: a small async client over one aiohttp session (bind, events, status, a
preemption victim's deletion, list, watch, the leader Lease).

The Authorization header is set per request from ``credentials.Tokens``, so a rotated token
file is picked up without a new session; a 401 re-reads the file at once and, when the token
changed, sends the request once more."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import aiohttp

from plumb.k8s import credentials as credentials_module

JSON = dict[str, Any]
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


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
    ) -> None:
        self._creds = creds
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._connections = connections
        self._headers = {"User-Agent": user_agent, "Accept": "application/json"}
        self.tokens = credentials_module.Tokens(creds)
        self.streams: dict[str, StreamActivity] = {}
        self._session: aiohttp.ClientSession | None = None

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

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        request_timeout: float | None = None,
    ) -> ApiResponse:
        """Send one request; HTTP errors come back as a response, transport errors raise.

        ``request_timeout`` (seconds) overrides the client's for this request: a collection
        delete can take minutes."""
        data = None if body is None else json.dumps(body, separators=(",", ":"))
        response = await self._send(method, path, data, params, content_type, request_timeout)
        if response.status == 401 and self.tokens.refresh():
            # The token rotated under us: the new one is in the file now.
            response = await self._send(method, path, data, params, content_type, request_timeout)
        return response

    async def _send(
        self,
        method: str,
        path: str,
        data: str | None,
        params: Mapping[str, str] | None,
        content_type: str,
        request_timeout: float | None,
    ) -> ApiResponse:
        headers = self.tokens.headers()
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
                parsed: Any
                if response.content_type == "application/json" and raw:
                    parsed = json.loads(raw)
                else:
                    parsed = raw.decode(errors="replace")
                return ApiResponse(status=response.status, body=parsed, retry_after=retry_after)
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
        try:
            async with self.session.request(
                method, path, params=params, timeout=timeout, headers=self.tokens.headers()
            ) as response:
                if response.status == 401:
                    # The caller retries the watch; by then the rotated token is in use.
                    self.tokens.refresh()
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

    async def bind(self, *, namespace: str, name: str, uid: str, node: str) -> ApiResponse:
        """POST pods/{name}/binding; the uid makes the API server refuse a recreated pod."""
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/binding"
        return await self.request("POST", path, body=binding)

    async def create_event(self, *, namespace: str, event: JSON) -> ApiResponse:
        path = f"/apis/events.k8s.io/v1/namespaces/{quote(namespace)}/events"
        return await self.request("POST", path, body=event)

    async def patch_pod_status(self, *, namespace: str, name: str, patch: JSON) -> ApiResponse:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/status"
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


def _lease_path(namespace: str, name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases/{quote(name)}"


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
