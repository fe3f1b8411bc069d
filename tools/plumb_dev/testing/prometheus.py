"""A real Prometheus for tests: Debian's ``prometheus`` (the installed one, else the package's
binary unpacked into plumb's cache), started on 127.0.0.1 with a given configuration, and its
HTTP API read without any proxy the environment names."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

# No proxy, whatever the environment says: Prometheus is on this machine's loopback.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
READY_SECONDS = 60.0


class PrometheusUnavailable(RuntimeError):
    """Debian's prometheus is neither installed nor downloadable here."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def binary() -> str:
    """Debian's prometheus: the installed one, else the package's binary unpacked into the
    cache (``apt-get download`` and ``dpkg-deb -x``: no maintainer scripts, so no service is
    started or user made, and nothing is left installed)."""
    installed = shutil.which("prometheus")
    if installed is not None:
        return installed
    root = Path(os.environ.get("PLUMB_CACHE_DIR") or Path.home() / ".cache" / "plumb")
    unpacked = root / "prometheus-deb"
    found = unpacked / "usr" / "bin" / "prometheus"
    if found.is_file():
        return str(found)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        download = subprocess.run(
            ["apt-get", "download", "prometheus"],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        debs = list(Path(scratch).glob("prometheus_*.deb"))
        if download.returncode != 0 or not debs:
            raise PrometheusUnavailable(
                f"Debian's prometheus package could not be downloaded ({download.stderr.strip()}); "
                f"install it with apt-get install --no-install-recommends prometheus"
            )
        partial = Path(tempfile.mkdtemp(prefix=".prometheus-", dir=root))
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(partial)], check=True, timeout=120)
        partial.rename(unpacked)
    return str(found)


def query(port: int, expr: str) -> dict[str, Any]:
    """Prometheus's answer to an instant query; {} while it is not listening yet."""
    return _get(port, "query", {"query": expr})


def query_exemplars(port: int, expr: str, start: float, end: float) -> dict[str, Any]:
    """Prometheus's answer to ``/api/v1/query_exemplars`` for the series ``expr`` selects, between
    ``start`` and ``end`` (Unix seconds); {} while it is not listening yet. The exemplars are in
    ``data[i]["exemplars"]``, each with its ``labels`` (``trace_id``...), ``value`` and
    ``timestamp``. They are scraped only when the target serves OpenMetrics."""
    return _get(port, "query_exemplars", {"query": expr, "start": f"{start}", "end": f"{end}"})


def _get(port: int, endpoint: str, params: Mapping[str, str]) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}/api/v1/{endpoint}?" + urllib.parse.urlencode(params)
    try:
        with _OPENER.open(url, timeout=10) as response:
            answer: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as error:
        answer = json.load(error)
    except urllib.error.URLError:
        return {}
    return answer


@contextlib.contextmanager
def running(config: Mapping[str, Any], directory: Path, flags: Sequence[str] = ()) -> Iterator[int]:
    """Prometheus with ``config`` (its data and log in ``directory``) until the block ends; its
    port. Waits until it answers queries; its log's tail is printed when it stops."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    port = free_port()
    log_path = directory / "prometheus.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                binary(),
                f"--config.file={directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
                *flags,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + READY_SECONDS
            while query(port, "vector(1)").get("status") != "success":
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"Prometheus did not answer on port {port}: "
                        f"{log_path.read_text(errors='replace')[-2000:]}"
                    )
                time.sleep(0.2)
            yield port
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            print(log_path.read_text(errors="replace")[-3000:])
