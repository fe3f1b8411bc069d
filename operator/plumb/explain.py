"""``plumb explain NS/POD``: why plumb put a pod where it did, or why it could not, for a person.

The answer is the pod's last trace record, from one of two places:

- the running scheduler's debug endpoint (``--endpoint``, default http://127.0.0.1:10252; reach
  an in-cluster plumb with ``kubectl port-forward -n plumb-system deploy/plumb 10252``);
- plumb's log, from a file or stdin (``--from FILE``, ``--from -``, or a pipe:
  ``kubectl logs deploy/plumb -n plumb-system | plumb explain NS/POD``), in either log format;
  the pod's last trace line counts. Without ``--from`` or ``--endpoint``, stdin is read when it
  is not a terminal and has something to read; otherwise the endpoint is asked.

``render`` turns a record into text and depends on nothing else, so both places give the same
text for the same decision.
"""

from __future__ import annotations

import itertools
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from typing import TextIO

from plumb.backend.records import groupobjects
from plumb.observability import trace

DEFAULT_ENDPOINT = "http://127.0.0.1:10252"
TIMEOUT = 10.0
_HOW_TO_REACH = (
    "forward it with `kubectl port-forward -n plumb-system deploy/plumb 10252`, or pipe the "
    "log instead: `kubectl logs deploy/plumb -n plumb-system | plumb explain NS/POD`"
)


class ExplainError(Exception):
    """The record could not be had; the message says why and what to try."""


def main(
    pod: str,
    *,
    source: str | None = None,
    endpoint: str | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    tracing_ui: str = "",
    open_trace: Callable[[str], object] | None = None,
) -> int:
    """Print the explanation of ``pod``'s last decision; 1 with a message when there is none.
    ``tracing_ui``: where traces are read (Jaeger's query URL): the trace's link is printed;
    ``open_trace``: called with that link (``--open``: the browser)."""
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if out is None else out
    try:
        key = pod_key(pod)
        first = ""
        if source is None and endpoint is None and not stdin.isatty():
            first = stdin.readline()  # nothing piped in (a script's empty stdin): ask plumb
        if source == "-" or first:
            record = from_lines(itertools.chain([first] if first else [], stdin), key)
        elif source is not None:
            try:
                with open(source, encoding="utf-8", errors="replace") as lines:
                    record = from_lines(lines, key)
            except OSError as error:
                raise ExplainError(f"cannot read {source}: {error.strerror}") from error
        else:
            record, served_ui = served_by(endpoint or DEFAULT_ENDPOINT, key)
            tracing_ui = tracing_ui or served_ui
    except ExplainError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    out.write(render(record, tracing_ui))
    if open_trace is not None:
        if not record.trace_id or not tracing_ui:
            why = "no trace was kept for it" if not record.trace_id else "no --tracing-ui-url"
            print(f"error: cannot open the decision's trace: {why}", file=sys.stderr)
            return 1
        open_trace(f"{tracing_ui.rstrip('/')}/trace/{record.trace_id}")
    return 0


def pod_key(text: str) -> str:
    namespace, slash, name = text.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ExplainError(f"name the pod as NAMESPACE/NAME, not {text!r}")
    return text


def from_lines(lines: Iterable[str], pod: str) -> trace.Trace:
    """The last trace of ``pod`` in log lines of either format."""
    found: trace.Trace | None = None
    read = traces = 0
    for line in lines:
        read += 1
        try:
            record = trace.from_log_line(line)
        except (trace.TraceError, ValueError):
            continue  # a line cut short or garbled: the others still count
        if record is None:
            continue
        traces += 1
        if record.pod == pod:
            found = record
    if found is None:
        raise ExplainError(
            f"no trace line for {pod} in {read} lines ({traces} trace lines of other pods): "
            "plumb has not decided for it in this log, or its lines were held back by the "
            "rate cap (the debug endpoint keeps every pod's last decision)"
        )
    return found


def from_endpoint(endpoint: str, pod: str) -> trace.Trace:
    """``pod``'s last record from a running plumb's debug endpoint."""
    return served_by(endpoint, pod)[0]


def served_by(endpoint: str, pod: str) -> tuple[trace.Trace, str]:
    """``pod``'s last record from a running plumb's debug endpoint, and where that plumb says
    traces are read (its --tracing-ui-url; "" when it has none)."""
    namespace, name = pod.split("/")
    url = (
        f"{endpoint.rstrip('/')}/debug/pods/"
        f"{urllib.parse.quote(namespace, safe='')}/{urllib.parse.quote(name, safe='')}"
    )
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            body = json.loads(response.read().decode())
    except urllib.error.HTTPError as error:
        raise ExplainError(f"{url}: HTTP {error.code}: {_error_text(error)}") from error
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise ExplainError(
            f"cannot reach plumb's debug endpoint at {url} ({reason}); {_HOW_TO_REACH}"
        ) from error
    except json.JSONDecodeError as error:
        raise ExplainError(f"{url} did not answer JSON: {error}") from error
    try:
        return trace.Trace.from_fields(body), str(body.get("tracing_ui") or "")
    except trace.TraceError as error:
        raise ExplainError(f"{url} answered something else than a trace: {error}") from error


def _error_text(error: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(error.read().decode())
    except (ValueError, OSError):
        return str(error.reason)
    return str(body.get("error", error.reason)) if isinstance(body, dict) else str(error.reason)


# Rendering ---------------------------------------------------------------------------------


def render(record: trace.Trace, tracing_ui: str = "") -> str:
    """The record for a person: verdict, node, its pod group, policy, filters, the claims
    rejected (a claim
    pod that fit nowhere), candidates, the devices allocated, hashes, timing, and what
    preemption did when the pod fit nowhere."""
    lines = [_verdict(record)]
    if record.message:
        lines.append(f"  {record.message}")
    lines.append(_row("node", record.node or "none"))
    lines.extend(_group(record))
    if record.quota:
        lines.append(_row("quota", record.quota))
    lines.extend(_policy(record))
    lines.append(_row("nodes", f"{record.feasible} of {record.total} passed every filter"))
    if record.rejected:
        lines.append("filters:")
        for plugin, rejection in record.rejected.items():
            reasons = ", ".join(f"{count} {reason}" for reason, count in rejection.reasons.items())
            noun = "node" if rejection.nodes == 1 else "nodes"
            lines.append(f"  {plugin} rejected {rejection.nodes} {noun}: {reasons}")
    lines.extend(_claims(record))
    lines.extend(_candidates(record))
    if record.plugins:
        versions = ", ".join(
            f"{name} {version or '(no version)'}" for name, version in record.plugins.items()
        )
        lines.append(_row("plugins", versions))
    lines.extend(_devices(record))
    lines.append(
        _row(
            "decided",
            f"snapshot {record.snapshot}, input hash {record.input_hash or '-'}, "
            f"plan hash {record.plan_hash or '-'}",
        )
    )
    lines.append(_row("latency", _latencies(record)))
    if record.trace_id:
        lines.append(_row("trace", trace_link(record.trace_id, tracing_ui)))
    if record.preemption is not None:
        lines.extend(_preemption(record.preemption))
    return "\n".join(lines) + "\n"


def trace_link(trace_id: str, tracing_ui: str) -> str:
    """The attempt's trace: its id, and where Jaeger shows it (its UI's page and its API's
    JSON) when the query's URL is known."""
    if not tracing_ui:
        return f"{trace_id} (--tracing-ui-url or PLUMB_TRACING_UI_URL gives its link)"
    base = tracing_ui.rstrip("/")
    return f"{trace_id} {base}/trace/{trace_id} (JSON: {base}/api/traces/{trace_id})"


def _row(label: str, text: str) -> str:
    return f"{label + ':':<10}{text}"


def _verdict(record: trace.Trace) -> str:
    attempt = f"attempt {record.attempts}"
    if record.result == trace.SCHEDULED and record.deviation:
        return f"{record.pod}: Scheduled on {record.node} beyond its policy ({attempt})"
    if record.node:
        return f"{record.pod}: {record.result} on {record.node} ({attempt})"
    return f"{record.pod}: {record.result} ({attempt})"


def _group(record: trace.Trace) -> list[str]:
    """The pod group the pod was decided with: its PodGroup, how many of its minimum found a
    node, the group's outcome, and the topology domain its policy's ``gangs`` rule chose."""
    group = record.group
    if group is None:
        return []
    api = "PodGroup" if group.api == groupobjects.UPSTREAM else "scheduler-plugins PodGroup"
    outcome = (
        "placed together"
        if group.result == trace.SCHEDULED
        else "not placed: nothing of it stays reserved"
    )
    lines = [
        _row(
            "group",
            f"{api} {group.name}: {group.scheduled} of its minimum {group.minimum} found a node "
            f"({group.members} members tried in this cycle); {outcome}",
        )
    ]
    if group.message:
        lines.append(f"  {group.message}")
    topology = group.topology
    if topology is not None:
        if topology.domain is not None:
            where = f"all in {topology.key}={topology.domain}"
        elif topology.spans:
            where = f"spans {topology.key} domains"
            if topology.deviation:
                where += ", a deviation on its policy's budget"
        else:
            where = f"in no single {topology.key} domain"
        lines.append(_row("domain", where))
        if topology.text:
            lines.append(f"  {topology.text}")
    return lines


def _policy(record: trace.Trace) -> list[str]:
    if record.policy is None:
        return [_row("policy", "none (kube-scheduler's default plugins and weights)")]
    deviation = "a deviation on its budget" if record.deviation else "no deviation"
    lines = [
        _row(
            "policy",
            f"SchedulingPolicy {record.policy} generation {record.generation}; {deviation}",
        )
    ]
    if record.budget is not None:
        allowed = "deviation allowed" if record.budget.open else "no deviation allowed"
        lines.append(_row("budget", f"{record.budget.text} ({allowed})"))
    return lines


def _candidates(record: trace.Trace) -> list[str]:
    if not record.candidates:
        return []
    plugins = list(record.weights) or list(record.candidates[0].scores)
    names = [c.node for c in record.candidates]
    width = max(6, *(len(name) for name in names))
    label = max(len("score"), *(len(plugin) for plugin in plugins))

    def row(first: str, weight: str, cells: Iterable[object]) -> str:
        values = "".join(f"  {cell!s:>{width}}" for cell in cells)
        return f"  {first:<{label}}  {weight:>6}{values}"

    lines = [
        "top candidates (score: the plugins' 0-100 scores, weighted and summed):",
        row("", "weight", names),
        row("score", "", (c.score for c in record.candidates)),
    ]
    for plugin in plugins:
        weight = record.weights.get(plugin)
        lines.append(
            row(
                plugin,
                "" if weight is None else str(weight),
                (c.scores.get(plugin, "-") for c in record.candidates),
            )
        )
    if record.hinted:
        lines.append(
            f"  {record.node} is the next node of the previous pod's scores, not of these: the "
            "pod has that pod's signature and its node no longer fits it (kube-scheduler's "
            "OpportunisticBatching)"
        )
        return lines
    tied = [c.node for c in record.candidates if c.score == record.candidates[0].score]
    if len(tied) > 1:
        lines.append(
            f"  {', '.join(tied)} tie at {record.candidates[0].score}: a stable hash of the "
            "pod's uid and the node's name breaks it"
        )
    return lines


def _claims(record: trace.Trace) -> list[str]:
    if not record.claims:
        return []
    lines = ["claims (DynamicResources' verdict on each node it rejected):"]
    for rejection in record.claims:
        claim = rejection.claim or "the pod's claims together (each fits alone)"
        if rejection.nodes == record.total and not rejection.examples:
            where = f"every node ({rejection.nodes})"
        else:
            where = _count(rejection.nodes, "node")
            named = ", ".join(rejection.examples)
            more = rejection.nodes - len(rejection.examples)
            if named:
                where += f" ({named}{f' and {more} more' if more > 0 else ''})"
        lines.append(f"  {claim} rejected on {where}: {rejection.reason}")
    return lines


def _devices(record: trace.Trace) -> list[str]:
    if not record.devices:
        return []
    held = "allocated" if record.result == trace.SCHEDULED else "it was to be given"
    lines = [f"devices {held} on {record.node}:"]
    lines.extend(
        f"  {d.claim} request {d.request}: {d.device} (driver {d.driver}, pool {d.pool})"
        for d in record.devices
    )
    return lines


def _preemption(preemption: trace.PreemptionRecord) -> list[str]:
    if preemption.node is None:
        # The sentence starts "preemption: " as kube-scheduler words it; the label says it.
        message = preemption.message.removeprefix("preemption: ")
        lines = [f"preemption: none: {message}" if message else "preemption: none"]
        if preemption.searched or preemption.candidates:
            lines.append(
                f"  {_count(preemption.searched, 'node')} searched, "
                f"{_count(preemption.candidates, 'candidate node')}"
            )
    else:
        lines = [
            f"preemption: nominated to {preemption.node}, "
            f"{_count(len(preemption.victims), 'victim')} (1 of "
            f"{_count(preemption.candidates, 'candidate node')}, {preemption.searched} searched, "
            f"{_count(preemption.pdb_violations, 'PDB violation')})"
        ]
        lines.extend(
            f"  evicts {victim.pod} (priority {victim.priority}, {victim.qos})"
            for victim in preemption.victims
        )
    if preemption.rejected:
        reasons = ", ".join(f"{count} {reason}" for reason, count in preemption.rejected.items())
        lines.append(f"  could not free nodes: {reasons}")
    return lines


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _latencies(record: trace.Trace) -> str:
    parts = []
    if record.queue_wait_ms is not None:
        parts.append(f"queued {record.queue_wait_ms:.3f} ms")
    if record.kernel_ms is not None:
        pods = "pod" if record.batch == 1 else "pods"
        parts.append(f"kernel {record.kernel_ms:.3f} ms ({record.batch} {pods} in its run)")
    if record.bind_ms is not None:
        parts.append(f"bind {record.bind_ms:.3f} ms")
    return ", ".join(parts) or "-"
