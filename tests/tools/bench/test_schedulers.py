"""What the benchmark reads from the schedulers' logs, plumb's tracing flags, the spans it
dropped read from its /metrics, and who runs a traced workload."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import prometheus_client
import pytest

from plumb.observability import metrics
from plumb_dev.bench import benchruns, schedulers, workloads

PLUMB_LOG = """\
2026-11-30 07:43:52,611 INFO plumb.app.running: kernel ready in 0.2 s
2026-11-30 07:43:53,072 WARNING plumb.binder: binding web-1 to n1 took 2.1 s
2026-11-30 07:43:53,080 ERROR plumb.scheduler: bind failed: HTTP 500
2026-11-30 07:43:53,081 WARNING plumb.binder: binding web-1 to n1 took 2.1 s
Traceback (most recent call last):
"""

KUBE_LOG = """\
I1130 07:40:01.000000   1 server.go:1] "Starting Kubernetes Scheduler"
W1130 07:40:01.000000   1 authentication.go:1] No authentication-kubeconfig provided in order
W1130 07:40:02.000000   1 schedule_one.go:1] "Pod was slow"
E1130 07:40:09.000000   1 run.go:72] "command failed" err="finished without leader elect"
"""


def test_plumb_log_counts_warnings_errors_and_tracebacks() -> None:
    summary = schedulers.summarise_log(PLUMB_LOG, schedulers.PLUMB)
    assert summary["warnings"] == 2
    assert summary["errors"] == 1
    assert summary["tracebacks"] == 1
    # Errors first, then warnings, each distinct message once.
    assert summary["samples"] == [
        "plumb.scheduler: bind failed: HTTP 500",
        "plumb.binder: binding web-1 to n1 took 2.1 s",
    ]


def test_plumb_json_log_counts_the_same() -> None:
    lines = []
    for line in PLUMB_LOG.splitlines():
        parts = line.split(" ", 3)
        if not line[:1].isdigit():
            lines.append(line)  # the traceback, as JSON logging keeps it in its text
            continue
        logger, message = parts[3].split(": ", 1)
        entry = {"time": parts[1], "level": parts[2], "logger": logger, "msg": message}
        lines.append(json.dumps(entry))
    summary = schedulers.summarise_log("\n".join(lines), schedulers.PLUMB)
    assert (summary["warnings"], summary["errors"], summary["tracebacks"]) == (2, 1, 1)
    assert summary["samples"][0] == "plumb.scheduler: bind failed: HTTP 500"


def test_kube_scheduler_log_skips_its_expected_start_and_exit_lines() -> None:
    summary = schedulers.summarise_log(KUBE_LOG, schedulers.KUBE_SCHEDULER)
    assert summary == {
        "warnings": 1,
        "errors": 0,
        "tracebacks": 0,
        "samples": ['"Pod was slow"'],
    }


def test_profiler_records_collapsed_stacks_of_the_plumb_process(tmp_path: Path) -> None:
    output = tmp_path / "basic-plumb.raw"
    command = schedulers.profiler_command(4242, output)
    assert Path(command[0]).name == "py-spy"
    assert command[1] == "record"

    def option(name: str) -> str:
        return command[command.index(name) + 1]

    assert option("--pid") == "4242"
    assert option("--format") == "raw"
    assert option("--output") == str(output)
    # plumb is not paused for each sample, so its CPU figures stay its own.
    assert "--nonblocking" in command


def test_the_tracing_flags_name_the_endpoint_and_the_ratio() -> None:
    assert schedulers.tracing_flags("http://127.0.0.1:4318", 0.1) == [
        "--otlp-endpoint",
        "http://127.0.0.1:4318",
        "--trace-sampling-ratio",
        "0.1",
    ]


def test_a_traced_workload_runs_plumb_alone() -> None:
    basic, traced = workloads.select(["basic", "basic-traced"], quick=True, large=False)
    assert benchruns.schedulers_for(basic) == benchruns.SCHEDULERS
    assert benchruns.schedulers_for(traced) == (benchruns.PLUMB,)


@pytest.fixture
def metrics_port() -> Iterator[int]:
    """plumb's own /metrics page, with 3 spans dropped for a full queue and 4 for failed
    exports."""
    meters = metrics.Metrics()
    meters.spans_dropped("queue_full", 3)
    meters.spans_dropped("export_failed", 4)
    page = prometheus_client.generate_latest(meters.registry)

    class _Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page if self.path == "/metrics" else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_the_spans_dropped_are_summed_over_their_reasons(metrics_port: int) -> None:
    assert schedulers.spans_dropped(metrics_port) == 7.0


def test_spans_dropped_is_none_when_metrics_cannot_be_read() -> None:
    # Port 9 (discard) on loopback: nothing listens.
    assert schedulers.spans_dropped(9) is None
