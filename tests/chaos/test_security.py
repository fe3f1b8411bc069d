"""Scenario 8: what plumb's two HTTP endpoints give away, and what they take, on a real API server.

The debug endpoint's snapshot holds every pod spec of the cluster, so it listens on 127.0.0.1
only; the metrics port (metrics and the probes) listens where ``--metrics-address`` says. Read
from ``/proc/<pid>/net/tcp*``, plumb listens on those two sockets and no other. With a marker
secret in plumb's environment and the API token in its kubeconfig, no answer of either endpoint
(every route, the pods' decisions, the snapshot, unknown paths) and no line of its most verbose
log carries the marker or the token.

Then both endpoints are fed garbage over raw sockets: bytes that are no HTTP, a 100 kB request
line, 10,000 headers, a 50 MB body, path traversal, invalid percent-encoding, an HTTP/0.9 line,
a foreign Host (the debug endpoint answers 403: DNS rebinding), and slow connections that send
their headers a byte at a time while a GET from elsewhere must still be answered. Each gets a
4xx or a closed connection, never a 5xx, and costs plumb no ERROR line; afterwards plumb still
binds a pod, has closed the slow clients' sockets, and its RSS has not grown by more than a
generous bound.

Caught: a handler that echoes ``os.environ`` or the client's settings; a debug server started on
0.0.0.0; a request log that prints the token at debug level; a body read without a size limit
(the 50 MB POST would show in the RSS); a handler that blocks the loop on a slow client (the
concurrent GET would time out). Found when it was written: aiohttp logs every request its
parser refuses at ERROR with a traceback, so anyone who reached the metrics port (every
interface) could fill plumb's log with tracebacks; both servers now log them on one debug line
(``metrics.SERVER_LOG``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from plumb import cli
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube
from tests.chaos import harness
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

MARKER_VARIABLE = "PLUMB_TEST_SECRET"
LOOPBACK = "127.0.0.1"
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
RSS_GROWTH_BOUND = 200 * 1024 * 1024
BODY_BYTES = 50 * 1024 * 1024
SLOW_CLIENTS = 50
SOCKET_SLACK = 5  # plumb's own connections to the API server may come and go meanwhile
PODS = 4


def test_endpoints_listen_on_loopback_and_serve_no_secret(
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    namespace: str,
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert "127.0.0.1:PORT only" in _help(capsys, "--debug-port")
    assert "0.0.0.0, is every interface" in _help(capsys, "--metrics-address")
    marker = f"marker-{uuid.uuid4().hex}"
    monkeypatch.setenv(MARKER_VARIABLE, marker)
    harness.create_nodes(client, harness.nodes(2, prefix=node_prefix))
    plumb = start_plumb("--log-level", "debug", "--metrics-address", LOOPBACK)
    assert plumb.process is not None

    listening = _listening(plumb.process.pid)
    assert listening == {(LOOPBACK, plumb.debug_port), (LOOPBACK, plumb.metrics_port)}, (
        f"plumb listens on {sorted(listening)}; expected the debug port {plumb.debug_port} and "
        f"the metrics port {plumb.metrics_port} on {LOOPBACK} only"
    )

    names = _schedule(client, namespace, PODS)
    client.create_pod(
        builders.make_pod("too-big", namespace).scheduler(harness.SCHEDULER).req(cpu="64").obj()
    )
    harness.wait_until(
        "a decision for too-big",
        lambda: plumb.get(plumb.debug_port, f"/debug/pods/{namespace}/too-big")[0] == 200,
        timeout=60,
    )
    # Every route with the status it must answer: a route that failed would hide a leak.
    decisions = [f"/debug/pods/{namespace}/{name}" for name in [*names, "too-big"]]
    expected = {
        plumb.metrics_port: {
            **dict.fromkeys(["/metrics", "/healthz", "/readyz"], 200),
            **dict.fromkeys(_UNKNOWN, 404),
        },
        plumb.debug_port: {
            **dict.fromkeys(["/debug/pods", "/debug/snapshot", *decisions], 200),
            f"/debug/pods/{namespace}/absent": 404,
            **dict.fromkeys(_UNKNOWN, 404),
        },
    }
    secrets = _secrets(plane, marker)
    answers: dict[str, bytes] = {}
    for port, routes in expected.items():
        for path, status in routes.items():
            answer = _exchange(port, _request("GET", path))
            answers[f":{port}{path}"] = answer
            assert _status(answer) == status, f"GET :{port}{path} answered {answer[:300]!r}"
            leaked = [name for name, value in secrets.items() if value in answer]
            assert not leaked, f"GET :{port}{path} gave away {leaked}"
    snapshot = answers[f":{plumb.debug_port}/debug/snapshot"]
    assert all(name.encode() in snapshot for name in names), "the snapshot lacks the pods"

    plumb.stop()  # the log's last lines (the shutdown) are read as well
    output = plumb.output()
    assert '"level":"DEBUG"' in output, "plumb did not log at debug level"
    leaked = [name for name, value in secrets.items() if value.decode() in output]
    assert not leaked, f"plumb's debug log gave away {leaked}"
    harness.record(
        "security-secrets",
        routes_read=len(answers),
        bytes_read=sum(len(answer) for answer in answers.values()),
        log_lines=output.count("\n"),
        listening=sorted(f"{host}:{port}" for host, port in listening),
        leaks=0,
    )


def test_malformed_and_huge_requests_are_refused_without_harm(
    client: kube.Kube, namespace: str, node_prefix: str, start_plumb: RestartablePlumbFactory
) -> None:
    harness.create_nodes(client, harness.nodes(2, prefix=node_prefix))
    plumb = start_plumb("--log-level", "debug")
    assert plumb.process is not None
    # The metrics port's default address is every interface (Prometheus scrapes it from afar).
    listening = _listening(plumb.process.pid)
    expected = {(LOOPBACK, plumb.debug_port), ("0.0.0.0", plumb.metrics_port)}
    assert listening == expected, (
        f"plumb listens on {sorted(listening)}; expected the debug port on 127.0.0.1 only and "
        f"the metrics port on every interface (its default): {sorted(expected)}"
    )
    _schedule(client, namespace, 1, prefix="before")
    rss_before = plumb.rss_bytes()
    outcomes: dict[str, str] = {}
    for port, endpoint in ((plumb.metrics_port, "metrics"), (plumb.debug_port, "debug")):
        for case, payload in _abuse(endpoint).items():
            answer = _exchange(port, payload)
            status = _status(answer)
            outcomes[f"{endpoint} {case}"] = str(status or "closed")
            assert status == 0 or 400 <= status < 500, (
                f"{endpoint} endpoint, {case}: answered {answer[:400]!r}"
            )
            assert b"Traceback" not in answer, answer[:400]
            assert b"root:x:0:0" not in answer, answer[:400]
        outcomes[f"{endpoint} 50 MB body"] = _huge_body(port, _route(endpoint))
    rebound = _exchange(plumb.debug_port, _request("GET", "/debug/pods", host="attacker.example"))
    outcomes["debug a foreign Host"] = str(_status(rebound))
    assert _status(rebound) == 403, f"a request for a foreign Host was answered {rebound[:300]!r}"

    slowest = _while_slow_clients(plumb)
    _schedule(client, namespace, 1, prefix="after")
    rss_after = plumb.rss_bytes()
    refused = sum(o != "200" for o in outcomes.values())
    harness.record(
        "security",
        requests_sent=len(outcomes) + 2 * SLOW_CLIENTS,
        refused=refused,
        outcomes=outcomes,
        slow_clients=2 * SLOW_CLIENTS,
        slowest_get_during_slow_clients_s=round(slowest, 3),
        rss_before_mb=round(rss_before / 2**20, 1),
        rss_after_mb=round(rss_after / 2**20, 1),
    )
    assert refused == len(outcomes), outcomes
    assert rss_after - rss_before < RSS_GROWTH_BOUND, (rss_before, rss_after)
    # A client's garbage is the client's fault: no ERROR line (aiohttp's default is one, with a
    # traceback, per refused request), so nobody outside can fill the log or page anyone.
    errors = [line for line in plumb.lines() if line.get("level") == "ERROR"]
    assert not errors, f"{len(errors)} ERROR lines, the first: {errors[0]}"


_UNKNOWN = [
    "/",
    "/debug",
    "/debug/vars",
    "/debug/pprof/",
    "/env",
    "/.env",
    "/proc/self/environ",
    "/config",
]


def _help(capsys: pytest.CaptureFixture[str], flag: str) -> str:
    """What ``plumb run --help`` says of flag, on one line."""
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    return text.split(f" {flag} ", 1)[1].split(" --", 1)[0]


def _secrets(plane: controlplane.ControlPlane, marker: str) -> dict[str, bytes]:
    """What must never be served or logged: the marker and its variable's name, the API token
    plumb's kubeconfig holds, and a prefix of it (a token cut short in a log line still leaks)."""
    token = re.search(r"token:\s*(\S+)", plane.kubeconfig.read_text())
    assert token is not None, f"no token in {plane.kubeconfig}"
    assert token.group(1).strip("'\"") == plane.token
    return {
        "the marker": marker.encode(),
        f"the variable {MARKER_VARIABLE}": MARKER_VARIABLE.encode(),
        "the API token": plane.token.encode(),
        "the API token's first 12 characters": plane.token[:12].encode(),
    }


def _schedule(client: kube.Kube, namespace: str, count: int, *, prefix: str = "p") -> list[str]:
    """Creates count pods for plumb and waits until every one is bound."""
    bodies = harness.pods(namespace, count, prefix=prefix)
    for body in bodies:
        client.create_pod(body)
    names = [str(body["metadata"]["name"]) for body in bodies]
    harness.wait_until(
        f"{count} {prefix} pods bound",
        lambda: all(client.pod(namespace, name)["spec"].get("nodeName") for name in names),
        timeout=60,
    )
    return names


def _listening(pid: int) -> set[tuple[str, int]]:
    """The (address, port) of every TCP socket the process listens on, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != LISTEN or fields[9] not in inodes:
                continue
            address, port = fields[1].split(":")
            found.add((_address(address), int(port, 16)))
    return found


def _address(hexed: str) -> str:
    # /proc/net/tcp* writes each 32-bit word of the address in host (little-endian) order.
    raw = bytes.fromhex(hexed)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def _request(method: str, path: str, *, host: str = LOOPBACK, extra: bytes = b"") -> bytes:
    return (
        f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n".encode()
        + extra
        + b"\r\n"
    )


def _abuse(endpoint: str) -> dict[str, bytes]:
    """Malformed and oversized requests, by what they try."""
    route = _route(endpoint)
    many_headers = b"".join(b"X-Filler-%d: %d\r\n" % (i, i) for i in range(10_000))
    return {
        "no HTTP at all": os.urandom(4096).replace(b"\n", b" ") + b"\r\n\r\n",
        "a NUL-laden request line": b"GET /\x00\x00 HTTP/1.1\r\n\r\n",
        "a 100 kB request line": _request("GET", route + "?" + "a" * 100_000),
        "a 100 kB header": _request("GET", route, extra=b"X-Big: " + b"b" * 100_000 + b"\r\n"),
        "10,000 headers": _request("GET", route, extra=many_headers),
        "path traversal": _request("GET", "/debug/pods/../../etc/passwd"),
        "encoded path traversal": _request("GET", "/debug/pods/..%2F..%2F..%2Fetc%2Fpasswd/x"),
        "invalid percent-encoding": _request("GET", "/debug/pods/%zz/%"),
        "HTTP/0.9": f"GET {route}\r\n\r\n".encode(),
        "HTTP/2.0 on a 1.1 port": f"GET {route} HTTP/2.0\r\nHost: {LOOPBACK}\r\n\r\n".encode(),
        "an unknown method": _request("BREW", route),
        "two Content-Lengths": _request(
            "POST", route, extra=b"Content-Length: 3\r\nContent-Length: 4\r\n"
        )
        + b"abcd",
        "a negative Content-Length": _request("POST", route, extra=b"Content-Length: -1\r\n"),
        "a broken chunk": _request("POST", route, extra=b"Transfer-Encoding: chunked\r\n")
        + b"zz\r\nabc\r\n0\r\n\r\n",
    }


def _route(endpoint: str) -> str:
    return "/metrics" if endpoint == "metrics" else "/debug/pods"


def _exchange(port: int, payload: bytes, *, timeout: float = 10.0) -> bytes:
    """Sends payload on a fresh connection and reads until the server closes it (b"" when it
    closed without a word, or reset the connection)."""
    received = b""
    with socket.create_connection((LOOPBACK, port), timeout=timeout) as conn:
        try:
            conn.sendall(payload)
            while chunk := conn.recv(65536):
                received += chunk
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the whole request was read
    return received


def _status(answer: bytes) -> int:
    """The status code of an HTTP answer; 0 when there was none (the connection closed)."""
    match = re.match(rb"HTTP/1\.[01] (\d{3}) ", answer)
    return int(match.group(1)) if match else 0


def _huge_body(port: int, route: str) -> str:
    """POSTs a 50 MB body to a GET route; the status answered, or "closed"."""
    head = _request("POST", route, extra=f"Content-Length: {BODY_BYTES}\r\n".encode())
    chunk = b"x" * (1024 * 1024)
    received = b""
    with socket.create_connection((LOOPBACK, port), timeout=30) as conn:
        try:
            conn.sendall(head)
            for _ in range(BODY_BYTES // len(chunk)):
                conn.sendall(chunk)
            while data := conn.recv(65536):
                received += data
        except (BrokenPipeError, ConnectionResetError):
            pass
    status = _status(received)
    assert status == 0 or 400 <= status < 500, f"a 50 MB POST was answered {received[:300]!r}"
    return str(status or "closed")


def _while_slow_clients(plumb: harness.RestartablePlumb) -> float:
    """Holds SLOW_CLIENTS connections to each endpoint that send their headers a byte at a
    time; meanwhile GETs both endpoints and returns the slowest answer's seconds. Once the slow
    clients hang up, plumb must have closed their sockets too."""
    stop = threading.Event()
    before = plumb.open_sockets()
    with contextlib.ExitStack() as stack:
        conns = [
            stack.enter_context(socket.create_connection((LOOPBACK, port), timeout=5))
            for port in (plumb.metrics_port, plumb.debug_port)
            for _ in range(SLOW_CLIENTS)
        ]
        harness.wait_until(
            "plumb to accept the slow clients",
            lambda: plumb.open_sockets() >= before + len(conns) - SOCKET_SLACK,
            timeout=30,
        )
        trickle = threading.Thread(target=_trickle, args=(conns, stop), daemon=True)
        trickle.start()
        slowest = 0.0
        try:
            for _ in range(10):
                for port, path in (
                    (plumb.metrics_port, "/metrics"),
                    (plumb.debug_port, "/debug/pods"),
                ):
                    began = time.monotonic()
                    status, _body = plumb.get(port, path, timeout=10)
                    slowest = max(slowest, time.monotonic() - began)
                    assert status == 200, f"GET :{port}{path} answered {status}"
                time.sleep(0.1)
        finally:
            stop.set()
            trickle.join()
    harness.wait_until(
        "plumb to close the slow clients' sockets",
        lambda: plumb.open_sockets() <= before + SOCKET_SLACK,
        timeout=30,
    )
    return slowest


def _trickle(conns: list[socket.socket], stop: threading.Event) -> None:
    payload = _request("GET", "/metrics", extra=b"X-Slow: " + b"s" * 1000)
    for byte in _bytes(payload):
        if stop.is_set():
            return
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.sendall(byte)
        time.sleep(0.02)


def _bytes(payload: bytes) -> Iterator[bytes]:
    for i in range(len(payload)):
        yield payload[i : i + 1]
