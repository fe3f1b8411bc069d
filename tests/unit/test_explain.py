"""``plumb explain``: what a person reads for a decision, and that the running scheduler's
endpoint and its log, in either format, give the same text for the same decision."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import logging
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from plumb import explain, runs
from plumb.app import debug
from plumb.backend.cache import clustercache as cache_module
from plumb.observability import logs, trace, tracing

PLUGINS = {
    "NodeResourcesFit": 1,
    "NodeResourcesBalancedAllocation": 1,
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
}


def _scores(*values: int) -> dict[str, int]:
    return dict(zip(PLUGINS, values, strict=True))


SCHEDULED = trace.Trace(
    pod="shop/web-7",
    uid="uid-web-7",
    result=trace.SCHEDULED,
    node="shop-b1",
    attempts=1,
    feasible=5,
    total=6,
    candidates=(
        trace.CandidateRecord(node="shop-b1", score=806, scores=_scores(90, 96, 100, 0, 100, 0)),
        trace.CandidateRecord(node="shop-a1", score=704, scores=_scores(95, 99, 100, 0, 50, 0)),
        trace.CandidateRecord(node="shop-c1", score=650, scores=_scores(80, 90, 100, 0, 40, 0)),
    ),
    weights=PLUGINS,
    policy="shop/web-spread",
    generation=3,
    budget=trace.BudgetRecord(
        used=1,
        remaining=2,
        max_violations=3,
        open=True,
        text="SchedulingPolicy shop/web-spread's deviation budget: 1 of 3 used, 2 left",
    ),
    snapshot=812,
    input_hash="0f" * 16,
    plan_hash="a1" * 16,
    queue_wait_ms=0.41,
    kernel_ms=1.25,
    bind_ms=14.5,
    batch=12,
)

UNSCHEDULABLE = trace.Trace(
    pod="shop/too-big",
    uid="uid-too-big",
    result=trace.UNSCHEDULABLE,
    message="0/6 nodes are available: 1 node(s) had untolerated taint(s), 5 Insufficient cpu.",
    attempts=4,
    total=6,
    rejected={
        "NodeResourcesFit": trace.Rejection(nodes=5, reasons={"Insufficient cpu": 5}),
        "TaintToleration": trace.Rejection(
            nodes=1, reasons={"node(s) had untolerated taint(s)": 1}
        ),
    },
    weights=PLUGINS,
    snapshot=813,
    input_hash="1e" * 16,
    plan_hash="b2" * 16,
    queue_wait_ms=0.2,
    kernel_ms=0.9,
    batch=1,
)


def test_a_scheduled_pod_reads_verdict_policy_budget_and_a_score_table() -> None:
    text = explain.render(SCHEDULED)
    lines = text.splitlines()
    assert lines[0] == "shop/web-7: Scheduled on shop-b1 (attempt 1)"
    assert "node:     shop-b1" in lines
    assert "policy:   SchedulingPolicy shop/web-spread generation 3; no deviation" in lines
    assert (
        "budget:   SchedulingPolicy shop/web-spread's deviation budget: 1 of 3 used, 2 left "
        "(deviation allowed)"
    ) in lines
    assert "nodes:    5 of 6 passed every filter" in lines
    header = next(line for line in lines if line.split()[:1] == ["weight"])
    assert header.split() == ["weight", "shop-b1", "shop-a1", "shop-c1"]
    assert next(line for line in lines if line.strip().startswith("score")).split() == [
        "score",
        "806",
        "704",
        "650",
    ]
    spread = next(line for line in lines if line.strip().startswith("PodTopologySpread"))
    assert spread.split() == ["PodTopologySpread", "2", "100", "50", "40"]
    assert f"input hash {'0f' * 16}" in text
    assert "tie" not in text
    tied = dataclasses.replace(
        SCHEDULED,
        candidates=(
            SCHEDULED.candidates[0],
            dataclasses.replace(SCHEDULED.candidates[1], score=806),
            SCHEDULED.candidates[2],
        ),
    )
    assert "  shop-b1, shop-a1 tie at 806: a stable hash of the pod's uid" in explain.render(tied)
    assert lines[-1] == (
        "latency:  queued 0.410 ms, kernel 1.250 ms (12 pods in its run), bind 14.500 ms"
    )


def test_an_unschedulable_pod_reads_the_message_and_each_filters_rejections() -> None:
    lines = explain.render(UNSCHEDULABLE).splitlines()
    assert lines[:3] == [
        "shop/too-big: Unschedulable (attempt 4)",
        "  0/6 nodes are available: 1 node(s) had untolerated taint(s), 5 Insufficient cpu.",
        "node:     none",
    ]
    assert "policy:   none (kube-scheduler's default plugins and weights)" in lines
    assert "  NodeResourcesFit rejected 5 nodes: 5 Insufficient cpu" in lines
    assert "  TaintToleration rejected 1 node: 1 node(s) had untolerated taint(s)" in lines
    assert not any("top candidates" in line for line in lines)


def test_a_node_taken_from_the_previous_pods_scores_says_so() -> None:
    hinted = dataclasses.replace(SCHEDULED, node="shop-a1", hinted=True)
    text = explain.render(hinted)
    assert text.startswith("shop/web-7: Scheduled on shop-a1 (attempt 1)\n")
    assert (
        "  shop-a1 is the next node of the previous pod's scores, not of these: the pod has "
        "that pod's signature and its node no longer fits it (kube-scheduler's "
        "OpportunisticBatching)\n"
    ) in text
    assert trace.Trace.from_fields(hinted.fields()) == hinted


def test_a_deviation_says_so() -> None:
    deviated = dataclasses.replace(SCHEDULED, deviation=True, candidates=())
    text = explain.render(deviated)
    assert text.startswith("shop/web-7: Scheduled on shop-b1 beyond its policy (attempt 1)\n")
    assert "generation 3; a deviation on its budget" in text


NOMINATED = trace.PreemptionRecord(
    node="node-b",
    victims=(
        trace.Victim(pod="team-a/batch-1", priority=0, qos="BestEffort"),
        trace.Victim(pod="team-a/batch-2", priority=0, qos="Burstable"),
    ),
    candidates=3,
    searched=4,
    rejected={"No preemption victims found for incoming pod": 1},
)

PREEMPTED = dataclasses.replace(
    UNSCHEDULABLE,
    pod="team-a/urgent",
    uid="uid-urgent",
    message=(
        "0/6 nodes are available: 1 node(s) had untolerated taint(s), 5 Insufficient cpu. "
        "preemption: nominated to node-b"
    ),
    preemption=NOMINATED,
)

NOT_PREEMPTED = dataclasses.replace(
    UNSCHEDULABLE,
    preemption=trace.PreemptionRecord(
        searched=5,
        rejected={"No preemption victims found for incoming pod": 5},
        message=(
            "preemption: 0/6 nodes are available: 5 No preemption victims found for incoming "
            "pod, 1 Preemption is not helpful for scheduling."
        ),
    ),
)


def test_a_preempting_pod_reads_its_node_and_each_victim_after_the_decision() -> None:
    lines = explain.render(PREEMPTED).splitlines()
    latency = lines.index("latency:  queued 0.200 ms, kernel 0.900 ms (1 pod in its run)")
    assert lines[latency + 1 :] == [
        "preemption: nominated to node-b, 2 victims (1 of 3 candidate nodes, 4 searched, "
        "0 PDB violations)",
        "  evicts team-a/batch-1 (priority 0, BestEffort)",
        "  evicts team-a/batch-2 (priority 0, Burstable)",
        "  could not free nodes: 1 No preemption victims found for incoming pod",
    ]
    one = dataclasses.replace(
        NOMINATED,
        victims=NOMINATED.victims[:1],
        candidates=1,
        pdb_violations=1,
        rejected={},
    )
    assert explain.render(dataclasses.replace(PREEMPTED, preemption=one)).endswith(
        "preemption: nominated to node-b, 1 victim (1 of 1 candidate node, 4 searched, "
        "1 PDB violation)\n"
        "  evicts team-a/batch-1 (priority 0, BestEffort)\n"
    )


def test_a_pod_preemption_could_not_help_reads_why_and_the_nodes_it_could_not_free() -> None:
    lines = explain.render(NOT_PREEMPTED).splitlines()
    assert lines[-3:] == [
        "preemption: none: 0/6 nodes are available: 5 No preemption victims found for "
        "incoming pod, 1 Preemption is not helpful for scheduling.",
        "  5 nodes searched, 0 candidate nodes",
        "  could not free nodes: 5 No preemption victims found for incoming pod",
    ]
    ineligible = trace.PreemptionRecord(message="not eligible due to preemptionPolicy=Never.")
    assert explain.render(dataclasses.replace(UNSCHEDULABLE, preemption=ineligible)).endswith(
        "\npreemption: none: not eligible due to preemptionPolicy=Never.\n"
    )
    assert "preemption" not in explain.render(UNSCHEDULABLE)  # PostFilter did not run


def _log(formatter: logging.Formatter, *records: trace.Trace) -> list[str]:
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    log = logging.Logger(trace.LOGGER)
    handler = Collect()
    handler.setFormatter(formatter)
    log.addHandler(handler)
    tracer = tracing.Tracer(log=log)
    for record in records:
        tracer.emit(record)
    return lines


@pytest.mark.parametrize(
    "formatter", [logs.JsonFormatter(), logs.PlainFormatter()], ids=["json", "plain"]
)
def test_a_log_in_either_format_gives_the_text_of_the_record(
    formatter: logging.Formatter,
) -> None:
    earlier = dataclasses.replace(SCHEDULED, result=trace.BIND_FAILED, message="HTTP 500")
    other = dataclasses.replace(UNSCHEDULABLE, pod="shop/other", uid="uid-other")
    lines = [
        "a line that is not plumb's",
        *_log(formatter, earlier, other, SCHEDULED, PREEMPTED),
        '{"logger":"plumb.trace","msg":"suppressed 2 trace lines","suppressed":2}',
    ]
    record = explain.from_lines(lines, "shop/web-7")
    assert record == SCHEDULED  # the pod's last line counts
    assert explain.render(record) == explain.render(SCHEDULED)
    preempting = explain.from_lines(lines, "team-a/urgent")
    assert preempting == PREEMPTED
    assert explain.render(preempting) == explain.render(PREEMPTED)


def test_a_pod_without_a_line_is_an_error_that_says_where_else_to_look() -> None:
    with pytest.raises(explain.ExplainError, match="no trace line for shop/gone in 2 lines"):
        explain.from_lines(_log(logs.JsonFormatter(), SCHEDULED, UNSCHEDULABLE), "shop/gone")


def test_main_reads_a_file_or_a_pipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "plumb.log"
    log.write_text("\n".join(_log(logs.JsonFormatter(), UNSCHEDULABLE)) + "\n")
    out = io.StringIO()
    assert explain.main("shop/too-big", source=str(log), out=out) == 0
    assert out.getvalue() == explain.render(UNSCHEDULABLE)

    piped, out = io.StringIO(log.read_text()), io.StringIO()
    assert explain.main("shop/too-big", stdin=piped, out=out) == 0  # not a TTY: read it
    assert out.getvalue() == explain.render(UNSCHEDULABLE)

    assert explain.main("too-big", source=str(log), out=io.StringIO()) == 1
    assert "name the pod as NAMESPACE/NAME, not 'too-big'" in capsys.readouterr().err
    assert explain.main("shop/x", source=str(tmp_path / "missing.log")) == 1
    assert "cannot read" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_the_endpoint_answers_the_same_record_as_the_log() -> None:
    lines = _log(logs.PlainFormatter(), SCHEDULED)
    tracer = tracing.Tracer(log=logging.Logger("quiet"))
    tracer.emit(SCHEDULED)
    port = _free_port()
    runner = await debug.start(tracer, port)
    assert runner is not None
    try:
        endpoint = f"http://127.0.0.1:{port}"
        live = await asyncio.to_thread(explain.from_endpoint, endpoint, "shop/web-7")
        assert live == explain.from_lines(lines, "shop/web-7")
        with pytest.raises(explain.ExplainError, match="HTTP 404: no decision recorded"):
            await asyncio.to_thread(explain.from_endpoint, endpoint, "shop/unknown")
    finally:
        await debug.stop(runner, tracer)
    with pytest.raises(explain.ExplainError, match="kubectl port-forward"):
        await asyncio.to_thread(explain.from_endpoint, f"http://127.0.0.1:{port}", "shop/web-7")


async def test_a_busy_port_leaves_plumb_running_without_the_endpoint(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tracer = tracing.Tracer(log=logging.Logger("quiet"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert await debug.start(tracer, taken.getsockname()[1]) is None
    assert "cannot serve the debug endpoint" in caplog.text
    assert await debug.start(tracer, 0) is None


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("[::1]:{port}", 200),
        ("LOCALHOST", 200),
        ("rebound.attacker.example:{port}", 403),  # DNS rebinding: a name that resolves here
        ("10.0.0.5:{port}", 403),
        ("", 403),
    ],
)
async def test_the_endpoint_answers_only_requests_for_the_loopback(host: str, status: int) -> None:
    tracer = tracing.Tracer(log=logging.Logger("quiet"))
    tracer.emit(SCHEDULED)
    port = _free_port()
    empty = runs.capture(cache_module.Cache(), runs.RunLog(), "plumb")
    runner = await debug.start(tracer, port, dump=lambda: empty)
    assert runner is not None

    def get(path: str) -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", headers={"Host": host.format(port=port)}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    try:
        for path in ("/debug/snapshot", "/debug/pods", "/debug/pods/shop/web-7"):
            assert await asyncio.to_thread(get, path) == status, path
    finally:
        await debug.stop(runner, tracer)


def test_a_claim_pod_reads_the_devices_each_claim_was_given() -> None:
    placed = dataclasses.replace(
        SCHEDULED,
        devices=(
            trace.DeviceRecord(
                claim="shop/web-7-gpu-x2k", request="gpu", driver="gpu.example.com",
                pool="shop-b1", device="gpu-3",
            ),
            trace.DeviceRecord(
                claim="shop/shared-nic", request="nic/fast", driver="nic.example.com",
                pool="rack-2", device="nic-0",
            ),
        ),
    )  # fmt: skip
    lines = explain.render(placed).splitlines()
    at = lines.index("devices allocated on shop-b1:")
    assert lines[at + 1 : at + 3] == [
        "  shop/web-7-gpu-x2k request gpu: gpu-3 (driver gpu.example.com, pool shop-b1)",
        "  shop/shared-nic request nic/fast: nic-0 (driver nic.example.com, pool rack-2)",
    ]
    assert (
        lines.index("top candidates (score: the plugins' 0-100 scores, weighted and summed):") < at
    )
    failed = dataclasses.replace(placed, result=trace.BIND_FAILED, message="claim write refused")
    assert "devices it was to be given on shop-b1:" in explain.render(failed).splitlines()
    assert "devices" not in explain.render(SCHEDULED)


def test_a_claim_pod_no_node_fits_reads_which_claim_failed_on_which_nodes_and_why() -> None:
    message = (
        "0/6 nodes are available: 1 node(s) had untolerated taint(s), 2 cannot allocate all "
        "claims, 3 resourceclaim not available on the node."
    )
    failed = dataclasses.replace(
        UNSCHEDULABLE,
        message=message,
        rejected={
            "DynamicResources": trace.Rejection(
                nodes=5,
                reasons={
                    "cannot allocate all claims": 2,
                    "resourceclaim not available on the node": 3,
                },
            ),
            "TaintToleration": trace.Rejection(
                nodes=1, reasons={"node(s) had untolerated taint(s)": 1}
            ),
        },
        claims=(
            trace.ClaimRejection(
                claim="shop/shared-gpu",
                reason="resourceclaim not available on the node",
                nodes=3,
                examples=("shop-a1", "shop-a2", "shop-c1"),
            ),
            trace.ClaimRejection(
                claim="shop/too-big-gpu",
                reason="cannot allocate all claims",
                nodes=8,
                examples=("n1", "n2", "n3", "n4", "n5"),
            ),
            trace.ClaimRejection(
                claim="", reason="cannot allocate all claims", nodes=1, examples=("shop-b1",)
            ),
        ),
    )
    lines = explain.render(failed).splitlines()
    at = lines.index("claims (DynamicResources' verdict on each node it rejected):")
    assert lines[at + 1 : at + 4] == [
        "  shop/shared-gpu rejected on 3 nodes (shop-a1, shop-a2, shop-c1): resourceclaim not "
        "available on the node",
        "  shop/too-big-gpu rejected on 8 nodes (n1, n2, n3, n4, n5 and 3 more): cannot "
        "allocate all claims",
        "  the pod's claims together (each fits alone) rejected on 1 node (shop-b1): cannot "
        "allocate all claims",
    ]
    assert lines[at - 1].startswith("  TaintToleration rejected 1 node")
    # A PreFilter rejection names the claim, on every node.
    turned_away = dataclasses.replace(
        UNSCHEDULABLE,
        message="0/6 nodes are available: resourceclaim in use.",
        claims=(trace.ClaimRejection(claim="shop/db", reason="resourceclaim in use", nodes=6),),
    )
    assert "  shop/db rejected on every node (6): resourceclaim in use" in (
        explain.render(turned_away).splitlines()
    )


def test_a_quota_refusal_reads_what_the_namespace_uses_and_why_its_limit() -> None:
    said = (
        "namespace team-a uses cpu 7.5 of 8 and asks 1 cpu more; its limit is cpu 8 (max cpu "
        "10), lowered from cpu 9.6 at 12:04:05 UTC by SchedulingPolicy team-a/slo because its "
        "SLO attainment fell to 91%"
    )
    record = dataclasses.replace(UNSCHEDULABLE, quota=said)
    assert f"quota:    {said}" in explain.render(record).splitlines()
    assert trace.Trace.from_fields(record.fields()).quota == said
    assert "quota" not in UNSCHEDULABLE.fields()


def test_a_traced_decision_prints_its_trace_and_its_link_and_its_plugins_versions() -> None:
    traced = dataclasses.replace(
        SCHEDULED, trace_id="4b" * 16, plugins={"MaintenanceWindow": "0.1.0"}
    )
    line = logs.JsonFormatter().format(
        logging.makeLogRecord(
            {"name": trace.LOGGER, "msg": traced.summary(), logs.FIELDS: traced.fields()}
        )
    )
    out = io.StringIO()
    assert explain.main("shop/web-7", source="-", stdin=io.StringIO(line + "\n"), out=out) == 0
    text = out.getvalue()
    assert (
        f"trace:    {'4b' * 16} (--tracing-ui-url or PLUMB_TRACING_UI_URL gives its link)" in text
    )
    assert "plugins:  MaintenanceWindow 0.1.0" in text
    out = io.StringIO()
    explain.main(
        "shop/web-7",
        source="-",
        stdin=io.StringIO(line + "\n"),
        out=out,
        tracing_ui="http://127.0.0.1:16686/",
    )
    link = f"http://127.0.0.1:16686/trace/{'4b' * 16}"
    assert (
        f"trace:    {'4b' * 16} {link} (JSON: http://127.0.0.1:16686/api/traces/" in out.getvalue()
    )
    assert "trace:" not in explain.render(SCHEDULED)


def test_open_hands_the_traces_link_to_the_browser_or_says_why_it_cannot() -> None:
    traced = dataclasses.replace(SCHEDULED, trace_id="4b" * 16)
    line = logs.JsonFormatter().format(
        logging.makeLogRecord(
            {"name": trace.LOGGER, "msg": traced.summary(), logs.FIELDS: traced.fields()}
        )
    )
    opened: list[str] = []
    code = explain.main(
        "shop/web-7",
        source="-",
        stdin=io.StringIO(line + "\n"),
        out=io.StringIO(),
        tracing_ui="http://jaeger:16686",
        open_trace=opened.append,
    )
    assert (code, opened) == (0, [f"http://jaeger:16686/trace/{'4b' * 16}"])
    code = explain.main(
        "shop/web-7",
        source="-",
        stdin=io.StringIO(line + "\n"),
        out=io.StringIO(),
        open_trace=opened.append,
    )
    assert code == 1
    assert len(opened) == 1
