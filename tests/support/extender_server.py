"""A programmable scheduler extender for tests: an HTTP server in a thread of the test process,
on 127.0.0.1 and a free port, that records every request and answers each verb (the last
segment of the path) with the handler the test set.

    with ExtenderServer() as server:
        server.on("filter", lambda args: {"NodeNames": ["n2"]})
        extender = {"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": True}
        ...
        assert server.bodies("filter")[0]["NodeNames"] == ["n1", "n2"]

A handler takes the request's JSON and returns the JSON to answer with (status 200), or a
Reply (another status, raw bytes, a delay before the headers: a timeout). stop() closes the
port (connection refused) and start() opens it again on the same port. ``api_binder`` gives a
bind handler that binds the pod through the API server, as a binding extender must.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self

from plumb_dev.testing import kube

Handler = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Reply:
    """An answer other than plain JSON with 200: ``body`` is sent as is when bytes, as JSON
    otherwise; ``delay`` seconds pass before the status line is written."""

    status: int = 200
    body: Any = None
    delay: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Received:
    """One request as the server got it: ``body`` is its JSON (None if it is not JSON)."""

    method: str
    path: str
    headers: Mapping[str, str]
    raw: bytes
    body: Any

    @property
    def verb(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


class ExtenderServer:
    """The server; a context manager (started on entry, stopped on exit)."""

    def __init__(self, port: int = 0) -> None:
        self.port = port or _free_port()
        self._handlers: dict[str, Handler] = {}
        self._requests: list[Received] = []
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT, the urlPrefix for a configuration (add a path if wanted)."""
        return f"http://127.0.0.1:{self.port}"

    def on(self, verb: str, handler: Handler) -> None:
        """Answer requests whose path ends with /verb with handler (replacing any)."""
        with self._lock:
            self._handlers[verb] = handler

    def requests(self, verb: str | None = None) -> list[Received]:
        """The requests so far, in arrival order (those for verb only, if given)."""
        with self._lock:
            return [r for r in self._requests if verb is None or r.verb == verb]

    def bodies(self, verb: str) -> list[Any]:
        return [r.body for r in self.requests(verb)]

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def start(self) -> None:
        if self._server is not None:
            return
        server = _Server(("127.0.0.1", self.port), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},  # stop() waits for a poll
            name=f"extender-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Closes the port: the next request is refused. Handlers still sleeping finish
        alone (their answers go nowhere)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def answer(self, request: Received) -> Reply:
        with self._lock:
            self._requests.append(request)
            handler = self._handlers.get(request.verb)
        if handler is None:
            return Reply(status=404, body=b"no handler for this verb\n")
        answer = handler(request.body)
        return answer if isinstance(answer, Reply) else Reply(body=answer)


def api_binder(client: kube.Kube) -> Handler:
    """A bind handler that POSTs the Binding the request asks for (with the pod's uid, so a
    pod recreated under the name is not bound) and answers ``{}``; an API error is answered
    as the extender's Error."""

    def bind(args: Any) -> Any:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": args["PodName"], "uid": args["PodUID"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": args["Node"]},
        }
        try:
            client.core.create_namespaced_pod_binding(
                args["PodName"], args["PodNamespace"], body, _preload_content=False
            )
        except Exception as error:
            return {"Error": f"binding failed: {error}"}
        return {}

    return bind


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: ExtenderServer


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = Received(
            method=self.command,
            path=self.path,
            headers=dict(self.headers.items()),
            raw=raw,
            body=body,
        )
        reply = self.server.owner.answer(request)
        if reply.delay:
            time.sleep(reply.delay)
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up waiting (a timeout under test)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # pytest shows nothing of a passing test; requests() has them all


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
