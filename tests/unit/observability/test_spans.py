"""OpenTelemetry spans per scheduling attempt: settings from the OTEL_* environment and flags,
ids derived from the attempt (so the binding's traceparent names its span before it exists),
which attempts are kept, the spans made from a record's stages, and drops counted."""

from __future__ import annotations

import dataclasses
import logging
import time

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plumb.observability import metrics, spans, trace, tracing

RECORD = trace.Trace(
    pod="shop/web-0",
    uid="u-1",
    result=trace.SCHEDULED,
    node="n1",
    attempts=1,
    feasible=3,
    total=4,
    plan_hash="p" * 32,
    input_hash="i" * 32,
    started=100.0,
    activated=99.5,
    stages=[("compile", 100.0, 100.01), ("kernel", 100.01, 100.02), ("binding", 100.03, 100.2)],
)


def test_settings_come_from_the_environment_and_flags_replace_them() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.25",
        "OTEL_SERVICE_NAME": "plumb-eu",
    }
    found = spans.settings_from(env)
    assert (found.enabled, found.ratio, found.service, found.protocol) == (
        True,
        0.25,
        "plumb-eu",
        spans.HTTP_PROTOBUF,
    )
    assert spans.settings_from(env, ratio=1.0, protocol=spans.GRPC).ratio == 1.0
    assert not spans.settings_from({}).enabled
    assert not spans.settings_from({**env, "OTEL_SDK_DISABLED": "true"}).enabled
    assert spans.settings_from({"OTEL_TRACES_SAMPLER": "always_off"}).ratio == 0.0


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTLP protocol 'http/json'"),
        ({"OTEL_TRACES_SAMPLER": "jaeger_remote"}, "OTEL_TRACES_SAMPLER 'jaeger_remote'"),
        (
            {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "x"},
            "OTEL_TRACES_SAMPLER_ARG 'x': not a number",
        ),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "must be from"),
    ],
)
def test_a_setting_plumb_cannot_use_is_refused_by_name(env: dict[str, str], words: str) -> None:
    with pytest.raises(spans.SettingsError, match=words):
        spans.settings_from(env)


def test_ids_and_the_traceparent_follow_from_the_attempt() -> None:
    trace_id = spans.trace_id_of("u-1", 1, 100.0)
    assert trace_id == spans.trace_id_of("u-1", 1, 100.0)
    assert trace_id != spans.trace_id_of("u-1", 2, 100.0)
    header = spans.traceparent(trace_id, spans.span_id_of(trace_id, spans.BINDING), True)
    version, hex_trace, hex_span, flags = header.split("-")
    assert (version, len(hex_trace), len(hex_span), flags) == ("00", 32, 16, "01")
    assert spans.head_sampled(trace_id, spans.sampling_bound(1.0))
    assert not spans.head_sampled(trace_id, spans.sampling_bound(0.0))
    ids = [spans.trace_id_of("u", i, 0.0) for i in range(2000)]
    share = sum(spans.head_sampled(i, spans.sampling_bound(0.1)) for i in ids) / len(ids)
    assert 0.07 < share < 0.13


def _exporting(
    ratio: float, slow_seconds: float = spans.DEFAULT_SLOW_SECONDS
) -> tuple[spans.Exporting, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    settings = dataclasses.replace(
        spans.settings_from({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}),
        ratio=ratio,
        slow_seconds=slow_seconds,
    )
    return spans.Exporting(settings, exporter=exporter), exporter


def test_a_kept_attempt_becomes_a_root_span_with_a_child_per_stage() -> None:
    exporting, exporter = _exporting(1.0)
    trace_id = exporting.finish(RECORD)
    exporting.close()
    assert trace_id == f"{spans.trace_id_of('u-1', 1, 100.0):032x}"
    found = {s.name: s for s in exporter.get_finished_spans()}
    assert set(found) == {"schedule shop/web-0", "queue", "compile", "kernel", "binding"}
    root = found["schedule shop/web-0"]
    assert root.attributes is not None
    assert root.attributes["k8s.node.name"] == "n1"
    assert root.attributes["plumb.plan_hash"] == "p" * 32
    for name in ("queue", "compile", "kernel", "binding"):
        span = found[name]
        assert f"{span.context.trace_id:032x}" == trace_id
        assert span.parent is not None
        assert span.parent.span_id == root.context.span_id
    # The binding's span is the one its request's traceparent named.
    header = exporting.binding_header(RECORD)
    assert header is not None
    assert header.split("-")[2] == f"{found['binding'].context.span_id:016x}"
    # Durations follow the recorded stages (monotonic seconds to epoch nanoseconds).
    binding = found["binding"]
    assert binding.end_time is not None
    assert binding.start_time is not None
    assert round((binding.end_time - binding.start_time) / 1e6) == 170
    assert round((root.end_time - root.start_time) / 1e6) == 700  # type: ignore[operator]


def test_an_attempt_outside_the_ratio_is_kept_only_when_it_failed_or_was_slow() -> None:
    exporting, exporter = _exporting(0.0, slow_seconds=1.0)
    assert exporting.finish(RECORD) == ""  # fast and bound: dropped
    failed = dataclasses.replace(RECORD, result=trace.UNSCHEDULABLE, node=None, message="0/4")
    assert exporting.finish(failed) != ""
    slow = dataclasses.replace(RECORD, stages=[*RECORD.stages, ("binding", 100.2, 101.0)])
    assert exporting.finish(slow) != ""
    exporting.close()
    roots = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert len(roots) == 2
    assert not roots[0].status.is_ok  # the failed attempt's root says so


def test_a_line_written_carries_its_trace_id_and_off_costs_nothing() -> None:
    exporting, _ = _exporting(1.0)
    log = logging.getLogger("test.spans")
    tracer = tracing.Tracer(spans=exporting, log=log)
    tracer.emit(RECORD)
    kept = tracer.last("shop/web-0")
    assert kept is not None
    assert kept.trace_id == exporting.finish(RECORD)
    assert kept.fields()["trace_id"] == kept.trace_id
    assert "trace_id" not in RECORD.fields()
    assert trace.Trace.from_fields(kept.fields()).trace_id == kept.trace_id
    exporting.close()
    plain = tracing.Tracer(log=log)
    plain.emit(RECORD)
    assert plain.last("shop/web-0") == RECORD
    assert spans.OFF.binding_header(RECORD) is None


class _Refusing(InMemorySpanExporter):
    def export(self, spans: object) -> SpanExportResult:
        return SpanExportResult.FAILURE


def test_spans_the_collector_refuses_are_counted_as_dropped() -> None:
    meters = metrics.Metrics()
    settings = spans.settings_from({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    exporting = spans.Exporting(
        dataclasses.replace(settings, ratio=1.0), dropped=meters.spans_dropped, exporter=_Refusing()
    )
    exporting.finish(RECORD)
    deadline = time.monotonic() + 10
    page = ""
    while time.monotonic() < deadline:
        exporting._queue.drain(1.0)
        page = meters.render().decode()
        if 'plumb_trace_spans_dropped_total{reason="export_failed"} 5.0' in page:
            break
        time.sleep(0.05)
    exporting.close()
    assert 'plumb_trace_spans_dropped_total{reason="export_failed"} 5.0' in page
