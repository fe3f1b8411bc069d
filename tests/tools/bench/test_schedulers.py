"""What the benchmark reads from the schedulers' logs."""

from __future__ import annotations

import json
from pathlib import Path

from plumb_dev.bench import schedulers

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
