"""Trace records: one per scheduling decision, written as one log line, kept for ``plumb explain``.

A ``Trace`` is what a decision was and why: the pod, the result (``Scheduled``,
``Unschedulable``, ``BindFailed``), the node, the FailedScheduling message, how many nodes each
filter plugin rejected (with the reasons that add up to the message's histogram), the top
candidates with their per-plugin scores and the weights that summed them, the SchedulingPolicy
and generation in force, whether the pod was placed beyond it (deviation) and its budget, what
preemption did when the pod fit nowhere (the node it was nominated to and the victims, or why
none), for a pod with ResourceClaims the devices its claims were given (or, when it fit
nowhere, which claim DynamicResources rejected on which nodes and why), the snapshot
generation, two hashes and the latencies (queue wait, kernel, bind). The scheduler builds it
from its decision; this module never imports the scheduler's layers. The hashes cover what the
kernel decided from and what it decided, never what followed (preemption, the devices Reserve
allocated: outcomes, not inputs).

Hashes (blake2b, 16 bytes, hex) over *canonical JSON*: keys sorted, no spaces, UTF-8; a
dataclass is the object of its fields that take part in equality (``compare=True``: a pod's
resourceVersion and its PodScheduled condition are not inputs), mappings are objects, tuples
are arrays, sets are arrays sorted by their own canonical JSON.

- ``input_hash`` hashes ``{"v": 1, "pod", "profile", "policy", "snapshot", "nodes", "ahead",
  "deviation"}``, what the kernel decided the pod from: the ``digest`` of the pod as compiled
  (requests, labels, priority, owner and scheduling constraints, a governing policy's rules
  merged in), the ``digest`` of the scoring profile (weights, strategy, zone factors), the
  policy as [namespace, name, generation] or null, the snapshot generation and its node
  count, the plan hashes of the pods placed before it in its kernel run (a batch is decided
  pod after pod, each placement applied before the next), and whether this was a deviation
  run (the policy's hard spread lifted); for a pod with ResourceClaims, ``"devices"`` too:
  the generation of the DRA store it was decided over (slices, classes, claims and the
  allocations assumed change it, not the node table). Equal hashes mean the kernel saw the
  same pod over the same snapshot. ``plumb replay`` recomputes it with ``input_hash`` from a
  snapshot dump (which records both generations), the pod, the profile and the plans ahead
  of it in its run.
- ``plan_hash`` hashes ``{"v": 1, "uid", "node", "candidates"}``: the pod, the node chosen (null
  when none) and the top candidates with their per-plugin scores, all of them, however many
  the log shows. Equal inputs must give an equal plan: that is the determinism promise.

``tracing.Tracer`` writes the records as log lines (``logs`` renders them as JSON or key=value)
within volume limits; ``from_log_line`` reads them back for ``plumb explain``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import orjson

from plumb.observability import logs

_T = TypeVar("_T")

LOGGER = "plumb.trace"
SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"
BIND_FAILED = "BindFailed"
SCHEDULER_ERROR = "SchedulerError"  # plumb itself failed deciding the pod (an internal error)
RESULTS = (SCHEDULED, UNSCHEDULABLE, BIND_FAILED, SCHEDULER_ERROR)
TOP = 3  # candidates a line shows at most

_HASH_VERSION = 1


class TraceError(ValueError):
    """A line or a mapping that claims to be a trace but is not one."""


class Scores(Mapping[str, int]):
    """Per-plugin scores as a read-only mapping over a plugin-name tuple shared by every
    candidate of a profile: a tuple of values rather than a dict per candidate (a trace of
    every pod is kept, three candidates each). Equal to, and read like, the dict it stands for.
    """

    __slots__ = ("_names", "_values")

    def __init__(self, names: tuple[str, ...], values: Sequence[int]) -> None:
        if len(values) != len(names):
            names, values = names[: len(values)], values[: len(names)]
        self._names = names
        # Scores are 0-100: one byte each (41 bytes for eight, a tuple of them is 104).
        self._values: Sequence[int] = (
            bytes(values) if all(0 <= v <= 255 for v in values) else tuple(values)
        )

    def __getitem__(self, key: str) -> int:
        try:
            return self._values[self._names.index(key)]
        except ValueError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return repr(dict(zip(self._names, self._values, strict=True)))


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class CandidateRecord:
    """One of the best-scored nodes: its weighted total and each plugin's score (0-100)."""

    node: str
    score: int
    scores: Mapping[str, int]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Rejection:
    """How many nodes one filter plugin rejected, and for which reasons (counted per reason;
    one node may give several, as "Insufficient cpu" and "Insufficient memory")."""

    nodes: int
    reasons: Mapping[str, int]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class BudgetRecord:
    """A SchedulingPolicy's deviation budget when the decision was made."""

    used: int
    remaining: int
    max_violations: int
    open: bool  # whether it allowed a deviation then
    text: str  # the sentence events and FailedScheduling messages carry


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Victim:
    """One pod a preemption evicts."""

    pod: str  # namespace/name
    priority: int
    qos: str  # Guaranteed, Burstable or BestEffort


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PreemptionRecord:
    """What PostFilter (kube-scheduler's DefaultPreemption) did for a pod that fit nowhere.

    An outcome, not an input: it takes no part in the hashes."""

    node: str | None = None  # the node the pod was nominated to; None: no victims chosen
    victims: tuple[Victim, ...] = ()
    candidates: int = 0  # nodes where preemption would make room
    searched: int = 0  # nodes searched (those failing only for reasons evictions cure)
    pdb_violations: int = 0  # of the victims, those a PodDisruptionBudget does not allow to go
    # reason -> searched nodes that preemption could not free, with that reason
    rejected: Mapping[str, int] = dataclasses.field(default_factory=dict)
    message: str = ""  # the "preemption: ..." sentence when it found nothing

    def fields(self) -> dict[str, Any]:
        """JSON-ready, in a fixed order (the ``preemption`` value of a trace line)."""
        return {
            "node": self.node,
            "victims": [{"pod": v.pod, "priority": v.priority, "qos": v.qos} for v in self.victims],
            "candidates": self.candidates,
            "searched": self.searched,
            "pdb_violations": self.pdb_violations,
            "rejected": dict(self.rejected),
            "message": self.message,
        }

    @classmethod
    def from_fields(cls, fields: Any) -> PreemptionRecord:
        """The record back from ``fields()``; raises TypeError or KeyError when it is not one."""
        record = _mapping(fields)
        return cls(
            node=_optional(_text, record.get("node")),
            victims=tuple(
                Victim(pod=_text(v["pod"]), priority=_integer(v["priority"]), qos=_text(v["qos"]))
                for v in _sequence(record.get("victims", []))
            ),
            candidates=_integer(record.get("candidates", 0)),
            searched=_integer(record.get("searched", 0)),
            pdb_violations=_integer(record.get("pdb_violations", 0)),
            rejected=_counts(record.get("rejected", {})),
            message=_text(record.get("message", "")),
        )


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DeviceRecord:
    """One device a pod's claim was given (one result of the claim's allocation).

    An outcome of Reserve, not a kernel input nor its plan: it takes no part in the hashes."""

    claim: str  # namespace/name
    request: str  # the request it meets ("gpu", or "gpu/large" for a firstAvailable subrequest)
    driver: str
    pool: str
    device: str

    def fields(self) -> dict[str, str]:
        return {
            "claim": self.claim,
            "request": self.request,
            "driver": self.driver,
            "pool": self.pool,
            "device": self.device,
        }

    @classmethod
    def from_fields(cls, fields: Any) -> DeviceRecord:
        record = _mapping(fields)
        return cls(
            claim=_text(record["claim"]),
            request=_text(record["request"]),
            driver=_text(record["driver"]),
            pool=_text(record["pool"]),
            device=_text(record["device"]),
        )


EXAMPLE_NODES = 5  # node names a claim rejection lists at most


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ClaimRejection:
    """Which of a failed pod's ResourceClaims DynamicResources could not satisfy, on how many
    nodes, and why (its Filter's or PreFilter's words); ``claim`` "" stands for the pod's claims
    together (each would fit alone, not all at once). ``examples``: the first nodes, by name."""

    claim: str  # namespace/name, or "" for the claims together
    reason: str
    nodes: int
    examples: tuple[str, ...] = ()

    def fields(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "reason": self.reason,
            "nodes": self.nodes,
            "examples": list(self.examples),
        }

    @classmethod
    def from_fields(cls, fields: Any) -> ClaimRejection:
        record = _mapping(fields)
        return cls(
            claim=_text(record["claim"]),
            reason=_text(record["reason"]),
            nodes=_integer(record["nodes"]),
            examples=tuple(_text(n) for n in _sequence(record.get("examples", []))),
        )


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class GroupDomainRecord:
    """Where a SchedulingPolicy's ``gangs`` rule put a pod group: the topology key, the domain
    the group was placed in (None when it spans domains or was not placed), the domains tried
    in order, whether it spans domains, whether that spanning was a deviation on the budget,
    and the why, in words."""

    key: str
    domain: str | None = None
    tried: tuple[str, ...] = ()
    spans: bool = False
    deviation: bool = False
    text: str = ""

    def fields(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "domain": self.domain,
            "tried": list(self.tried),
            "spans": self.spans,
            "deviation": self.deviation,
            "text": self.text,
        }

    @classmethod
    def from_fields(cls, fields: Any) -> GroupDomainRecord:
        record = _mapping(fields)
        return cls(
            key=_text(record["key"]),
            domain=_optional(_text, record.get("domain")),
            tried=tuple(_text(t) for t in _sequence(record.get("tried", []))),
            spans=bool(record.get("spans", False)),
            deviation=bool(record.get("deviation", False)),
            text=_text(record.get("text", "")),
        )


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class GroupRecord:
    """The pod group a member was decided with: its PodGroup (API and namespace/name), the
    minimum it needs placed together, how many members found a node (placed before this
    cycle, or fitting in it: kube-scheduler's "scheduled"; a refused group keeps none of the
    latter), how many the cycle had, and the group's outcome and words."""

    name: str  # namespace/name
    api: str  # scheduling.k8s.io or scheduling.x-k8s.io
    minimum: int
    scheduled: int
    members: int
    result: str  # SCHEDULED (the minimum placed together) or UNSCHEDULABLE (none placed)
    message: str = ""
    # Its governing policy's ``gangs`` rule at work; None without one (and absent from the line).
    topology: GroupDomainRecord | None = None

    def fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "name": self.name,
            "api": self.api,
            "minimum": self.minimum,
            "scheduled": self.scheduled,
            "members": self.members,
            "result": self.result,
            "message": self.message,
        }
        if self.topology is not None:
            fields["topology"] = self.topology.fields()
        return fields

    @classmethod
    def from_fields(cls, fields: Any) -> GroupRecord:
        record = _mapping(fields)
        return cls(
            name=_text(record["name"]),
            api=_text(record["api"]),
            minimum=_integer(record["minimum"]),
            scheduled=_integer(record["scheduled"]),
            members=_integer(record["members"]),
            result=_text(record["result"]),
            message=_text(record.get("message", "")),
            # Absent for a group no gangs rule governs, and from lines before the rule.
            topology=None
            if record.get("topology") is None
            else GroupDomainRecord.from_fields(record["topology"]),
        )


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Trace:
    """One decision, as its log line and the debug endpoint show it (see the module doc)."""

    pod: str  # namespace/name
    uid: str
    result: str
    node: str | None = None
    message: str = ""
    attempts: int = 0
    feasible: int = 0
    total: int = 0
    rejected: Mapping[str, Rejection] = dataclasses.field(default_factory=dict)
    candidates: tuple[CandidateRecord, ...] = ()
    weights: Mapping[str, int] = dataclasses.field(default_factory=dict)
    profile: str = ""  # the schedulerName of the profile it was decided under
    config: str = ""  # the hash of the configuration file in force ("" = built-in defaults)
    kube: str = ""  # the kube-scheduler release it was decided as ("1.37")
    policy: str | None = None  # namespace/name
    generation: int | None = None
    deviation: bool = False
    budget: BudgetRecord | None = None
    preemption: PreemptionRecord | None = None  # set when PostFilter ran (the pod fit nowhere)
    # The devices the pod's claims hold on ``node`` (set once Reserve allocated them), and, for
    # a pod no node fits, which claim DynamicResources rejected where and why.
    devices: tuple[DeviceRecord, ...] = ()
    claims: tuple[ClaimRejection, ...] = ()
    # The pod group it was decided with (a member's line), None for a pod of no group.
    group: GroupRecord | None = None
    # A quota refusal's figures (CapacityScheduling's PreFilter): what the namespace uses
    # against which bound, and why that bound; "" for any other pod (absent from the line).
    quota: str = ""
    # The Python plugins of its profile and their versions (absent from the line without any).
    plugins: Mapping[str, str] = dataclasses.field(default_factory=dict)
    snapshot: int = 0
    input_hash: str = ""
    plan_hash: str = ""
    queue_wait_ms: float | None = None
    kernel_ms: float | None = None
    bind_ms: float | None = None
    batch: int = 0  # pods the kernel decided in the same run (kernel_ms is that run's)
    # The node was the next of the previous pod's ranking (kube-scheduler's OpportunisticBatching),
    # not the best of ``candidates``, which are the pod's own scores.
    hinted: bool = False
    # The attempt's OpenTelemetry trace (32 hex digits) when tracing kept it, else "" (absent
    # from the line); not an input of the hashes.
    trace_id: str = ""
    # When the attempt was popped and when the pod last entered the active queue (the
    # scheduler's monotonic clock; 0: unknown), and its stages as (name, start, end) on that
    # clock: what its spans are made of (observability/spans.py). Not on the line. The list is
    # the attempt's: the copies of its record share it (``staged`` appends, copying nothing).
    started: float = dataclasses.field(default=0.0, compare=False)
    activated: float = dataclasses.field(default=0.0, compare=False)
    stages: list[tuple[str, float, float]] = dataclasses.field(default_factory=list, compare=False)

    def staged(self, name: str, start: float, end: float) -> None:
        """One more stage of the attempt recorded, in place (a copy of the record per stage
        cost 10 µs, tracing's largest cost per pod), for every copy of the record."""
        self.stages.append((name, start, end))

    def summary(self) -> str:
        """The log line's message: the result, the pod and the node (no free text)."""
        if self.node:
            return f"{self.result} {self.pod} on {self.node}"
        return f"{self.result} {self.pod}"

    def fields(self) -> dict[str, Any]:
        """The record as JSON-ready fields, in a fixed order (the log line, the endpoint);
        ``devices`` and ``claims`` only when they hold something (a pod with claims),
        ``group`` only for a member of a pod group."""
        fields: dict[str, Any] = {
            "pod": self.pod,
            "uid": self.uid,
            "result": self.result,
            "node": self.node,
            "message": self.message,
            "attempts": self.attempts,
            "feasible": self.feasible,
            "total": self.total,
            "rejected": {
                plugin: {"nodes": r.nodes, "reasons": dict(r.reasons)}
                for plugin, r in self.rejected.items()
            },
            "candidates": [
                {"node": c.node, "score": c.score, "scores": dict(c.scores)}
                for c in self.candidates
            ],
            "weights": dict(self.weights),
            "profile": self.profile,
            "config": self.config,
            "kube": self.kube,
            "policy": self.policy,
            "generation": self.generation,
            "deviation": self.deviation,
            "budget": None if self.budget is None else dataclasses.asdict(self.budget),
            "preemption": None if self.preemption is None else self.preemption.fields(),
            "snapshot": self.snapshot,
            "input_hash": self.input_hash,
            "plan_hash": self.plan_hash,
            "queue_wait_ms": self.queue_wait_ms,
            "kernel_ms": self.kernel_ms,
            "bind_ms": self.bind_ms,
            "batch": self.batch,
            "hinted": self.hinted,
        }
        if self.devices:
            fields["devices"] = [d.fields() for d in self.devices]
        if self.claims:
            fields["claims"] = [c.fields() for c in self.claims]
        if self.group is not None:
            fields["group"] = self.group.fields()
        if self.quota:
            fields["quota"] = self.quota
        if self.plugins:
            fields["plugins"] = dict(self.plugins)
        if self.trace_id:
            fields["trace_id"] = self.trace_id
        return fields

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Trace:
        """The record back from ``fields()`` (a log line's or the endpoint's); other keys, such
        as a log line's time and level, are ignored. Raises TraceError when it is not a trace."""
        try:
            budget = fields.get("budget")
            preemption = fields.get("preemption")  # absent from lines before preemption
            return cls(
                pod=_text(fields["pod"]),
                uid=_text(fields["uid"]),
                result=_text(fields["result"]),
                node=_optional(_text, fields.get("node")),
                message=_text(fields.get("message", "")),
                attempts=_integer(fields.get("attempts", 0)),
                feasible=_integer(fields.get("feasible", 0)),
                total=_integer(fields.get("total", 0)),
                rejected={
                    _text(plugin): Rejection(
                        nodes=_integer(r["nodes"]), reasons=_counts(r.get("reasons", {}))
                    )
                    for plugin, r in _mapping(fields.get("rejected", {})).items()
                },
                candidates=tuple(
                    CandidateRecord(
                        node=_text(c["node"]),
                        score=_integer(c["score"]),
                        scores=_counts(c["scores"]),
                    )
                    for c in _sequence(fields.get("candidates", []))
                ),
                weights=_counts(fields.get("weights", {})),
                plugins={
                    _text(name): _text(version)
                    for name, version in _mapping(fields.get("plugins", {})).items()
                },
                trace_id=_text(fields.get("trace_id", "")),
                profile=_text(fields.get("profile", "")),  # absent before configuration files
                config=_text(fields.get("config", "")),
                kube=_text(fields.get("kube", "")),
                policy=_optional(_text, fields.get("policy")),
                generation=_optional(_integer, fields.get("generation")),
                deviation=bool(fields.get("deviation", False)),
                budget=None
                if budget is None
                else BudgetRecord(
                    used=_integer(budget["used"]),
                    remaining=_integer(budget["remaining"]),
                    max_violations=_integer(budget["max_violations"]),
                    open=bool(budget["open"]),
                    text=_text(budget["text"]),
                ),
                preemption=None if preemption is None else PreemptionRecord.from_fields(preemption),
                # Both absent when empty, and from lines before DRA.
                devices=tuple(
                    DeviceRecord.from_fields(d) for d in _sequence(fields.get("devices", []))
                ),
                claims=tuple(
                    ClaimRejection.from_fields(c) for c in _sequence(fields.get("claims", []))
                ),
                # Absent for a pod of no group, and from lines before gangs.
                group=None
                if fields.get("group") is None
                else GroupRecord.from_fields(fields["group"]),
                quota=_text(fields.get("quota", "")),  # absent but for a quota refusal
                snapshot=_integer(fields.get("snapshot", 0)),
                input_hash=_text(fields.get("input_hash", "")),
                plan_hash=_text(fields.get("plan_hash", "")),
                queue_wait_ms=_optional(_number, fields.get("queue_wait_ms")),
                kernel_ms=_optional(_number, fields.get("kernel_ms")),
                bind_ms=_optional(_number, fields.get("bind_ms")),
                batch=_integer(fields.get("batch", 0)),
                hinted=bool(fields.get("hinted", False)),  # absent before v1.35's batching
            )
        except (KeyError, TypeError, AttributeError) as error:
            raise TraceError(f"not a trace record: {error!r} in {dict(fields)!r:.200}") from error


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _optional(convert: Callable[[Any], _T], value: Any) -> _T | None:
    return None if value is None else convert(value)


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object, got {value!r}")
    return value


def _sequence(value: Any) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"expected an array, got {value!r}")
    return list(value)


def _counts(value: Any) -> dict[str, int]:
    return {_text(key): _integer(count) for key, count in _mapping(value).items()}


def ms(seconds: float) -> float:
    """Seconds as milliseconds, to the microsecond (what a trace line carries)."""
    return round(seconds * 1000.0, 3)


# Hashes ------------------------------------------------------------------------------------


_ORJSON = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS
"""Keys sorted; dataclasses through ``_jsonable`` (only their compare=True fields)."""


def canonical(value: object) -> bytes:
    """``value`` as canonical JSON (see the module doc), UTF-8 encoded.

    orjson, since a trace's hashes are worked out per pod; json for what orjson refuses (a key
    that is not a string, an integer beyond 64 bits). The two write the same bytes for what
    traces hash, but for floats in exponent form (orjson ``1e16``, json ``1e+16``), which no
    hashed input holds."""
    try:
        return orjson.dumps(value, default=_jsonable, option=_ORJSON)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(
            value,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
            default=_jsonable,
        ).encode()


def digest(value: object) -> str:
    """blake2b (16 bytes, hex) of ``value``'s canonical JSON."""
    return hashlib.blake2b(canonical(value), digest_size=16).hexdigest()


def input_hash(
    *,
    pod: str,
    profile: str,
    policy: tuple[str, str, int] | None,
    snapshot: int,
    nodes: int,
    ahead: Sequence[str],
    deviation: bool,
    devices: int | None = None,
) -> str:
    """The hash of what the kernel decided a pod from (see the module doc); ``pod`` and
    ``profile`` are the ``digest`` of the compiled pod and of the scoring profile; ``devices``
    the DRA store's generation, for a pod with ResourceClaims (None: the key is left out)."""
    inputs: dict[str, object] = {
        "v": _HASH_VERSION,
        "pod": pod,
        "profile": profile,
        "policy": policy,
        "snapshot": snapshot,
        "nodes": nodes,
        "ahead": list(ahead),
        "deviation": deviation,
    }
    if devices is not None:
        inputs["devices"] = devices
    return digest(inputs)


def plan_hash(uid: str, node: str | None, candidates: Iterable[CandidateRecord]) -> str:
    """The hash of what was decided: the pod, the node (or none), the top candidates."""
    top = [{"node": c.node, "score": c.score, "scores": dict(c.scores)} for c in candidates]
    return digest({"v": _HASH_VERSION, "uid": uid, "node": node, "candidates": top})


def _jsonable(value: object) -> Any:
    """What ``json`` cannot encode itself, as something it can (it recurses into the result)."""
    if isinstance(value, enum.Enum):
        return value.value
    kind = type(value)
    if dataclasses.is_dataclass(kind) and not isinstance(value, type):
        if kind not in _UNSHARED:
            try:
                return _shared(value)
            except TypeError:  # holds a dict: not hashable, not shared
                # Not tried again for this type (a pod record never is: its requests are a
                # mapping); the bytes are the same either way, only the caching is lost.
                _UNSHARED.add(kind)
        return _fields(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=canonical)
    raise TypeError(f"{type(value).__name__} has no canonical JSON form: {value!r:.100}")


_UNSHARED: set[type] = set()  # dataclasses whose instances could not be hashed
_COMPARED: dict[type, tuple[str, ...]] = {}  # each dataclass's compared fields


def _fields(value: Any) -> dict[str, Any]:
    kind = type(value)
    names = _COMPARED.get(kind)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(value) if f.compare)
        _COMPARED[kind] = names
    return {name: getattr(value, name) for name in names}


@functools.lru_cache(maxsize=4096)
def _shared(value: Any) -> Any:
    # Frozen specs (a Deployment's tolerations, selectors, spread rules) are shared by many
    # pods: their plain form is worked out once (callers only read it).
    return orjson.loads(canonical(_fields(value)))


# Reading lines -----------------------------------------------------------------------------


def from_log_line(line: str) -> Trace | None:
    """The trace a log line carries, in either log format, or None for any other line.

    Tolerates a prefix before the record (``kubectl logs --prefix``, a timestamp)."""
    brace = line.find("{")
    if brace >= 0 and f'"{LOGGER}"' in line:
        try:
            entry = json.loads(line[brace:])
        except json.JSONDecodeError:
            entry = None  # a plain line with a JSON value, or a line cut short
        if isinstance(entry, dict) and entry.get("logger") == LOGGER:
            return Trace.from_fields(entry) if "uid" in entry else None  # else a summary
    marker = f" {LOGGER}: "
    if marker not in line:
        return None
    fields = logs.parse_pairs(line[line.index(marker) + len(marker) :])
    return Trace.from_fields(fields) if "uid" in fields else None
