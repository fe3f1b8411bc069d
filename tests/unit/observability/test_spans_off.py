"""Tracing off costs nothing (issue 31): with no OTLP endpoint, ``plumb run``'s settings turn
spans off, OpenTelemetry is never imported and no exporter thread (``plumb-spans``) starts,
even once an attempt's trace is written; with an endpoint, both appear (the probe can see them).

Each case runs in a fresh interpreter: the test process itself has imported OpenTelemetry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from plumb.observability import spans

EXPORTER_THREAD = "plumb-spans"

# plumb run's import path and settings, then the spans runtime.run picks from them (Exporting
# when the settings are enabled, else OFF), then an attempt's trace written through the tracer.
PROBE = """
import json, sys, threading
from plumb import cli
from plumb.app import runtime
from plumb.observability import spans, trace, tracing

settings = cli._run_settings(cli._parser().parse_args(["run", *sys.argv[1:]]))
assert isinstance(settings, runtime.RunSettings)
chosen = spans.Exporting(settings.spans) if settings.spans.enabled else spans.OFF
record = trace.Trace(
    pod="shop/web-0", uid="u-1", result=trace.SCHEDULED, node="n1", attempts=1, feasible=3,
    total=4, plan_hash="p" * 32, input_hash="i" * 32, started=100.0, activated=99.5,
    stages=[("kernel", 100.0, 100.01), ("binding", 100.02, 100.2)],
)
tracing.Tracer(spans=chosen).emit(record)
print(json.dumps({
    "enabled": settings.spans.enabled,
    "threads": [thread.name for thread in threading.enumerate()],
    "opentelemetry": sorted(name for name in sys.modules if name.startswith("opentelemetry")),
}))
"""


def _probe(*flags: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *flags],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_without_an_endpoint_spans_are_off() -> None:
    assert not spans.settings_from({}).enabled
    assert spans.settings_from({}) == spans.NO_SPANS
    # A ratio or a service name alone turns nothing on.
    assert not spans.settings_from({"OTEL_TRACES_SAMPLER": "always_on"}, ratio=0.1).enabled


def test_plumb_run_without_an_endpoint_imports_no_opentelemetry_and_starts_no_thread() -> None:
    found = _probe()
    assert found["enabled"] is False
    assert found["opentelemetry"] == []
    assert EXPORTER_THREAD not in found["threads"]


def test_a_ratio_without_an_endpoint_keeps_tracing_off() -> None:
    found = _probe("--trace-sampling-ratio", "0.1")
    assert (found["enabled"], found["opentelemetry"]) == (False, [])
    assert EXPORTER_THREAD not in found["threads"]


@pytest.mark.parametrize(
    ("flags", "env"),
    [
        (("--otlp-endpoint", "http://127.0.0.1:9"), None),
        ((), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}),
    ],
    ids=["flag", "environment"],
)
def test_with_an_endpoint_the_probe_sees_the_exporter_thread_and_opentelemetry(
    flags: tuple[str, ...], env: dict[str, str] | None
) -> None:
    found = _probe(*flags, env=env)
    assert found["enabled"] is True
    assert "opentelemetry.sdk.trace" in found["opentelemetry"]
    assert EXPORTER_THREAD in found["threads"]


def test_sdk_disabled_turns_an_endpoint_off() -> None:
    found = _probe("--otlp-endpoint", "http://127.0.0.1:9", env={"OTEL_SDK_DISABLED": "true"})
    assert (found["enabled"], found["opentelemetry"]) == (False, [])
    assert EXPORTER_THREAD not in found["threads"]
