"""``plumb replay``: make a recorded decision again, offline, from a snapshot dump and the pod.

The snapshot is what the running scheduler dumps (``GET /debug/snapshot`` on its debug port,
or SIGUSR1, which writes a file and logs its path): the cache, the journal of its recent
writes (the DRA store's among them: slices, classes, claims, the allocations assumed) and the
recent kernel runs (runs.py). The pod is the pod as the API server has it (``kubectl get pod
-o json``; a List of pods replays each). For each pod replay takes the run that decided it (the
latest, or the one whose input hash ``--input-hash`` names), rewinds the cache to what that run
saw, decides the run's pods again with the same kernel and prints the node, the input hash and
the plan hash, and for a pod no node fits the FailedScheduling message (with what the
PostFilter plugins said, from the preemption search made again): the trace line's, when the
decision is reproduced. What the binding wrote is ignored, since the pod was pending when it
was decided: its spec.nodeName, and the node's topology labels the API server copies onto the
pod it binds (PodTopologyLabels admission, on by default from Kubernetes v1.35); when the pod
differs otherwise from the pod that was decided (its labels changed since), replay says so and
decides the file's pod.

With ``--trace LOG`` replay checks a log instead: every trace line in LOG of a pod in the pod
file is replayed (by its input hash) and compared with the line's node and plan hash (and an
Unschedulable line's message, unless a SchedulingPolicy's budget sentence joined it); it prints
one verdict per decision and a count, and exits 1 when a decision in the snapshot did not
reproduce. Lines of decisions the snapshot no longer reaches are counted apart.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from plumb import runs
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import dumps
from plumb.backend.records import objects
from plumb.extensions import enabling, registry
from plumb.framework.schedconfig import plugins as schedconfig_plugins
from plumb.kernel import contract, reference
from plumb.observability import trace

TIMEOUT = 60.0
# The labels the API server copies from a node onto each pod bound to it, overwriting the
# pod's own (plugin/pkg/admission/podtopologylabels, on by default from v1.35).
BINDING_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")


class ReplayError(Exception):
    """The snapshot or the pod could not be used; the message says why."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PodReplay:
    """One pod replayed: the decision made again and which run it was."""

    replayed: runs.Replayed
    snapshot: int  # the snapshot generation the run saw (the trace line's "snapshot")
    batch: int
    changed: bool  # the pod given differs from the pod that was decided
    preemption: runs.Replayed | None = None  # the preemption search that followed, made again
    # How the Python plugins here differ from those the decision was made with.
    plugins: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """The FailedScheduling message made again: the filters' diagnosis, then what the
        PostFilter plugins said (DynamicResources', DefaultPreemption's), as the scheduler
        wrote it ("" for a pod placed)."""
        message = self.replayed.message
        tail = "" if self.preemption is None else self.preemption.post_filter
        return f"{message} {tail}" if tail and message else message

    def fields(self) -> dict[str, Any]:
        return {
            "pod": self.replayed.pod,
            "uid": self.replayed.uid,
            "node": self.replayed.node,
            "input_hash": self.replayed.input_hash,
            "plan_hash": self.replayed.plan_hash,
            "snapshot": self.snapshot,
            "batch": self.batch,
            "changed": self.changed,
            "plugins": list(self.plugins),
            "message": self.message,
            "preemption": None
            if self.preemption is None
            else {
                "node": self.preemption.node,
                "victims": list(self.preemption.victims),
                "message": self.preemption.message,
            },
        }

    def line(self) -> str:
        node = self.replayed.node or "(none: unschedulable)"
        text = (
            f"{self.replayed.pod}: node {node} plan {self.replayed.plan_hash} "
            f"input {self.replayed.input_hash} (snapshot {self.snapshot}, run of {self.batch})"
        )
        if self.changed:
            text += "; the pod differs from the pod that was decided: the given pod replayed"
        for difference in self.plugins:
            text += f"\n  {difference}"
        if self.replayed.node is None and self.message:
            text += f"\n  {self.message}"
        searched = self.preemption
        if searched is not None and searched.node is not None:
            victims = ", ".join(searched.victims) or "none (victims already terminating)"
            text += f"\n  preemption: nominated to {searched.node}, evicting {victims}"
        elif searched is not None:
            text += f"\n  {searched.message or 'preemption: the pod fit when searched again'}"
        return text


def main(
    snapshot: str,
    pod_file: str,
    *,
    input_hash: str | None = None,
    trace_log: str | None = None,
    output: str = "text",
    kernel_name: str = "compiled",
    out: TextIO | None = None,
) -> int:
    """Replay each pod of ``pod_file`` from ``snapshot`` (or check the decisions of
    ``trace_log``); 1 with a message when one cannot be."""
    out = sys.stdout if out is None else out
    try:
        if pod_file == "-" and trace_log == "-":
            raise ReplayError("--pod and --trace cannot both read stdin: write one to a file")
        document = read_snapshot(snapshot)
        pods = read_pods(pod_file)
        if trace_log is not None:
            return check_log(document, pods, read_traces(trace_log), _kernel(kernel_name), out)
        outcomes = replay_pods(document, pods, _kernel(kernel_name), input_hash=input_hash)
    except (ReplayError, dumps.DumpError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for outcome in outcomes:
        out.write(
            json.dumps(outcome.fields()) + "\n" if output == "json" else outcome.line() + "\n"
        )
    return 0


def _kernel(name: str) -> contract.Kernel:
    if name == "reference":
        return reference.run
    from plumb.kernel import compiled  # numba: loaded only when replay runs the real kernel

    return compiled.run


def replay_pods(
    document: runs.SnapshotDocument,
    pods: Sequence[objects.PodInfo],
    kernel: contract.Kernel,
    *,
    input_hash: str | None = None,
) -> list[PodReplay]:
    """Each pod's decision made again (see the module doc)."""
    outcomes = []
    cache: dict[int, cache_module.Cache] = {}  # rewound caches by journal position
    for pod in pods:
        candidates = document.runs_of(pod.uid)
        if not candidates:
            raise ReplayError(
                f"the snapshot (taken {document.taken}) has no decision for pod {pod.key} "
                f"(uid {pod.uid}): it keeps the last {runs.DEFAULT_LIMIT} kernel runs whose "
                "cache state its journal still reaches"
            )
        chosen = None
        for run in reversed(candidates):
            if run.seq not in cache:
                cache[run.seq] = document.cache.rewind(run.seq)
            recorded = next(p for p in run.pods if p.uid == pod.uid)
            pending = as_decided(pod, recorded, cache[run.seq])
            given = [pending if p.uid == pod.uid else p for p in run.pods]
            found = registry.installed(frozenset(schedconfig_plugins.registry()))
            differences = tuple(enabling.differences(run.profile.extensions, found))
            if any("is not installed" in line for line in differences):
                raise ReplayError("; ".join(differences))
            replayed = runs.replay(run, cache[run.seq], kernel, given)[pod.uid]
            if input_hash is None or replayed.input_hash == input_hash:
                chosen = PodReplay(
                    replayed=replayed,
                    snapshot=run.generation,
                    batch=len(run.pods),
                    changed=recorded != pending,
                    preemption=_preemption(document, run, pod.uid, cache, kernel),
                    plugins=differences,
                )
                break
        if chosen is None:
            raise ReplayError(
                f"none of the {len(candidates)} decisions of pod {pod.key} in the snapshot has "
                f"input hash {input_hash}"
            )
        outcomes.append(chosen)
    return outcomes


def as_decided(
    pod: objects.PodInfo, recorded: objects.PodInfo, cache: cache_module.Cache
) -> objects.PodInfo:
    """``pod`` (as the API server has it now) as it was while pending: without spec.nodeName,
    and with each of BINDING_LABELS as ``recorded`` (the pod the run decided) had it where the
    pod's value is its node's in ``cache``, as the binding wrote it."""
    if not pod.node_name:
        return pod
    node = cache.nodes.info(pod.node_name)
    labels = dict(pod.labels)
    for key in BINDING_LABELS:
        if node is None or key not in labels or labels[key] != node.labels.get(key):
            continue
        if key in recorded.labels:
            labels[key] = recorded.labels[key]
        else:
            del labels[key]
    if labels == pod.labels:
        return dataclasses.replace(pod, node_name="")
    return dataclasses.replace(pod, node_name="", labels=types.MappingProxyType(labels))


def check_log(
    document: runs.SnapshotDocument,
    pods: Sequence[objects.PodInfo],
    records: Iterable[trace.Trace],
    kernel: contract.Kernel,
    out: TextIO,
) -> int:
    """Replay every decision of ``records`` whose pod is in ``pods`` and say whether its node
    and plan hash came out as the line says; 0 when every one the snapshot reaches did."""
    by_uid = {pod.uid: pod for pod in pods}
    decisions = {(r.uid, r.input_hash): r for r in records if r.uid in by_uid}
    reproduced = differ = unreachable = 0
    for record in decisions.values():
        try:
            (outcome,) = replay_pods(
                document, [by_uid[record.uid]], kernel, input_hash=record.input_hash
            )
        except ReplayError:
            unreachable += 1
            continue
        got = (outcome.replayed.node, outcome.replayed.plan_hash)
        preempted = _preemption_differs(record, outcome)
        worded = _message_differs(record, outcome)
        if preempted or worded:
            differ += 1
            out.write(f"DIFFERS    {record.pod}: {preempted or worded}\n")
        elif got == (record.node, record.plan_hash):
            reproduced += 1
            out.write(f"reproduced {record.pod} {record.result} plan {record.plan_hash}\n")
        else:
            differ += 1
            out.write(
                f"DIFFERS    {record.pod}: the line says node {record.node} plan "
                f"{record.plan_hash}, replay gives node {got[0]} plan {got[1]}\n"
            )
    out.write(
        f"{reproduced} of {reproduced + differ} decisions reproduced"
        + (f", {differ} differ" if differ else "")
        + (f"; {unreachable} not in the snapshot (older than its journal)" if unreachable else "")
        + f" ({len(decisions)} decisions of the given pods in the log)\n"
    )
    if not reproduced + differ:
        # A check that checked nothing proves nothing: say why, and fail.
        out.write(
            "nothing was checked: no decision of the given pods could be made again from this "
            "snapshot (are they the pods the log names, and is the snapshot newer than the "
            "lines?)\n"
        )
        return 1
    return 1 if differ else 0


def _preemption(
    document: runs.SnapshotDocument,
    decided: runs.Run,
    uid: str,
    caches: dict[int, cache_module.Cache],
    kernel: contract.Kernel,
) -> runs.Replayed | None:
    """The preemption search that followed ``decided`` for pod ``uid``, made again."""
    search = document.preemption_after(decided, uid)
    if search is None:
        return None
    if search.seq not in caches:
        caches[search.seq] = document.cache.rewind(search.seq)
    return runs.replay(search, caches[search.seq], kernel, search.pods)[uid]


def _message_differs(record: trace.Trace, outcome: PodReplay) -> str:
    """How an Unschedulable line's FailedScheduling message differs from the one made again
    ("" when it does not, or cannot be compared: a SchedulingPolicy's budget sentence, or a
    preemption search the snapshot does not hold, as when the pod's victims were still being
    evicted)."""
    if record.result != trace.UNSCHEDULABLE or record.policy is not None:
        return ""
    if outcome.replayed.searched and outcome.preemption is None:
        return ""
    if record.message == outcome.message:
        return ""
    return f"the line says {record.message!r}, replay gives {outcome.message!r}"


def _preemption_differs(record: trace.Trace, outcome: PodReplay) -> str:
    """How the line's preemption differs from the one made again ("" when it does not)."""
    line, again = record.preemption, outcome.preemption
    if line is None or again is None:
        return ""
    said = (line.node, tuple(v.pod for v in line.victims))
    got = (again.node, again.victims)
    if said == got:
        return ""
    return (
        f"the line says preemption on {said[0]} evicting {list(said[1])}, replay gives "
        f"{got[0]} evicting {list(got[1])}"
    )


def read_traces(source: str) -> list[trace.Trace]:
    """The trace records of a log file ('-': stdin), in either log format."""
    if source == "-":
        return _traces(sys.stdin)
    try:
        with open(source, encoding="utf-8", errors="replace") as lines:
            return _traces(lines)
    except OSError as error:
        raise ReplayError(f"cannot read {source}: {error.strerror}") from error


def _traces(lines: Iterable[str]) -> list[trace.Trace]:
    records = []
    for line in lines:
        try:
            record = trace.from_log_line(line)
        except (trace.TraceError, ValueError):
            continue  # a line cut short: the others still count
        if record is not None:
            records.append(record)
    return records


def read_snapshot(source: str) -> runs.SnapshotDocument:
    """A snapshot from a file, or from a debug endpoint's URL (http://.../debug/snapshot)."""
    try:
        if source.startswith(("http://", "https://")):
            with urllib.request.urlopen(source, timeout=TIMEOUT) as answer:
                data = json.load(answer)
        else:
            with open(source, encoding="utf-8") as file:
                data = json.load(file)
    except (OSError, urllib.error.URLError) as error:
        raise ReplayError(f"cannot read the snapshot {source}: {error}") from error
    except json.JSONDecodeError as error:
        raise ReplayError(f"the snapshot {source} is not JSON: {error}") from error
    return runs.load(data)


def read_pods(source: str) -> list[objects.PodInfo]:
    """The pods of a file ('-': stdin) holding a Pod or a List of them, as JSON."""
    try:
        if source == "-":
            text = sys.stdin.read()
        else:
            with open(source, encoding="utf-8") as file:
                text = file.read()
        data = json.loads(text)
    except OSError as error:
        raise ReplayError(f"cannot read {source}: {error.strerror}") from error
    except json.JSONDecodeError as error:
        raise ReplayError(
            f"{source} is not JSON ({error}); write the pod with kubectl get pod -o json"
        ) from error
    bodies = list(_pod_bodies(data, source))
    if not bodies:
        raise ReplayError(f"{source} holds no pod")
    return [objects.parse_pod(body) for body in bodies]


def _pod_bodies(data: Any, source: str) -> Iterable[Mapping[str, Any]]:
    if not isinstance(data, Mapping):
        raise ReplayError(f"{source} holds no Kubernetes object")
    if data.get("kind") == "Pod":
        yield data
        return
    if isinstance(data.get("items"), list):
        for item in data["items"]:
            yield from _pod_bodies({"kind": "Pod", **item}, source)
        return
    raise ReplayError(f"{source} holds a {data.get('kind')!r}, not a Pod or a List of pods")
