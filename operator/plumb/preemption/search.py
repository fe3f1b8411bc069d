"""The search: what-ifs over the cache, each answered by the kernel, that feed the evaluator.

The bridge between the scheduler's records and ``evaluator.preempt`` (the decision itself):
the pod is compiled alone against the snapshot, with room held for nominated pods of at least
its priority; one kernel run gives each node's verdict (Unschedulable, or
UnschedulableAndUnresolvable as kube-scheduler's filters return them); every node of the
first kind is searched. "Does the pod fit on node n without these pods" is asked of the same
kernel (``WhatIf``): node n's requested resources and count rows less the removed pods', its
host ports recomputed without theirs, every other node masked out, so the answer has exactly
the kernel's semantics (resources, pod count, spread skew, inter-pod anti-affinity, ports).

The work is split in two: ``prepare`` reads the cache (on the event loop, which owns it) into
a ``Plan`` that holds everything it needs; ``Plan.decide`` runs the kernel over the plan alone,
so it may run on the kernel's thread while the loop goes on changing the cache.

Purely computational; no I/O. The scheduler (scheduler/postfilter.py) carries the outcome out
(preemption/execution.py).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import countrows, nominations, snapshot
from plumb.backend.records import objects, specs
from plumb.extensions import extenders, judgements
from plumb.framework import compiling, cycle, emulation, scoring
from plumb.framework.plugins import dynamicresources, nodeports
from plumb.kernel import contract
from plumb.preemption import evaluator, quotavictims

_MASKED = 1  # a static code that rejects a node the what-if does not ask about


def post_filter_words(
    kube: emulation.Emulation, preemption: str, dra: str = dynamicresources.NO_CLAIMS
) -> str:
    """What kube-scheduler's PostFilter plugins say of a pod they could not help, as the
    FailedScheduling message goes on after the filters' part: DynamicResources' (``dra``, as
    its release prints it: dynamicresources.post_filter_words), then DefaultPreemption's
    ``preemption`` ("preemption: ...", or "" when it is disabled), joined by ", "."""
    words = [dynamicresources.post_filter_words(kube, dra)]
    if preemption:
        words.append(preemption)
    return ", ".join(w for w in words if w)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Search:
    """A preemption search's outcome, with the records of the chosen victims, decided as the
    release ``kube`` does."""

    outcome: evaluator.PreemptionVerdict
    victims: tuple[objects.PodInfo, ...] = ()
    searched: int = 0  # nodes whose victims were looked for
    kube: emulation.Emulation = emulation.NEWEST_EMULATION
    # CapacityScheduling's preemption: the only PostFilter of scheduler-plugins' profile, whose
    # status goes out as it is, with no "preemption: " (DefaultPreemption's) before it.
    quota: bool = False

    def post_filter_message(self, dra: str = dynamicresources.NO_CLAIMS) -> str:
        """The text kube-scheduler appends to the FailedScheduling message: on success only
        DefaultPreemption's (its status alone is returned), from v1.37 the sentence naming the
        node and the number of victims, before that nothing; otherwise ``post_filter_words``.
        CapacityScheduling's: its evaluator's status alone, nothing on success."""
        outcome = self.outcome
        if self.quota:
            return (
                "" if outcome.node is not None else outcome.message.removeprefix(evaluator.PREFIX)
            )
        if outcome.node is None:
            return post_filter_words(self.kube, outcome.message, dra)
        if not self.kube.preemption_sentence:
            return ""
        return evaluator.PREFIX + evaluator.found(outcome.node, len(outcome.victims))


def parse_budget(body: Mapping[str, Any]) -> evaluator.DisruptionBudget:
    """A policy/v1 PodDisruptionBudget as preemption reads it (a selector that does not parse
    matches nothing, as in kube-scheduler)."""
    metadata = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    try:
        selector = specs.label_selector(spec.get("selector"), "spec.selector")
    except (specs.SpecError, ValueError, TypeError, KeyError):
        selector = None
    try:
        allowed = int(status.get("disruptionsAllowed") or 0)
    except (TypeError, ValueError):
        allowed = 0
    return evaluator.DisruptionBudget(
        namespace=str(metadata.get("namespace", "")),
        selector=selector,
        disruptions_allowed=allowed,
        disrupted=frozenset(str(name) for name in status.get("disruptedPods") or {}),
    )


def victim_record(pod: objects.PodInfo, *, exempt: bool = False) -> evaluator.Pod:
    """A cached pod as preemption reads it; ``exempt``: a SchedulingPolicy protects it."""
    return evaluator.Pod(
        uid=pod.uid,
        namespace=pod.namespace,
        name=pod.name,
        priority=pod.priority,
        requests=pod.requests,
        labels=pod.labels,
        start_time=_time(pod.start_time),
        deleting=pod.deleting,
        preempted=pod.preempted,
        preemption_policy=pod.preemption_policy,
        nominated_node=pod.nominated_node,
        qos=pod.qos,
        exempt=exempt,
    )


def without(
    compiled: compiling.Compiled,
    placed: Iterable[tuple[objects.PodInfo, int]],
    member: Callable[[objects.PodInfo], np.ndarray],
) -> contract.Cluster:
    """The compiled cluster with each (pod, node index) of ``placed`` taken off its node: its
    requests, its pod slot, its non-zero requests and its count rows (``member``: the pod's
    membership of the count rows)."""
    cluster = compiled.cluster
    requested = cluster.requested.copy()
    nonzero = cluster.nonzero_requested.copy()
    counts = cluster.counts.copy()
    column = {name: i for i, name in enumerate(compiled.resources)}
    for pod, n in placed:
        for name, amount in pod.requests.items():
            c = column.get(name)
            if c is not None:
                requested[c, n] -= amount
        requested[cluster.pods_column, n] -= 1
        nonzero[:, n] -= pod.nonzero
        if counts.shape[0]:
            counts[:, n] -= member(pod)
    return dataclasses.replace(
        cluster, requested=requested, nonzero_requested=nonzero, counts=counts
    )


class WhatIf:
    """The kernel's verdict for one compiled pod on one node with some of its pods removed."""

    def __init__(
        self,
        compiled: compiling.Compiled,
        kernel: contract.Kernel,
        pods_on: Mapping[str, Sequence[objects.PodInfo]],
        namespace_labels: Mapping[str, Mapping[str, str]],
    ) -> None:
        self._compiled = compiled
        self._kernel = kernel
        self._pods_on = pods_on
        self._labels = namespace_labels
        self._index = compiled.index
        batch = compiled.batch
        row = int(batch.static_row[0])
        # HTTP extenders' rejections decide which nodes are searched, but the dry run asks the
        # filter plugins alone (kube-scheduler runs no extender there).
        self._static = _without_extenders(compiled, batch.static_code[row])
        last = compiled.last_codes
        self._last = None if last is None else _without_extenders(compiled, last[row])
        self._taint = batch.taint_raw[row : row + 1]
        self._affinity = batch.node_affinity_raw[row : row + 1]
        self._image = batch.image_score[row : row + 1]
        self._volume = batch.volume_score[row : row + 1]
        self._extension = batch.extension_score[row : row + 1]
        self._column = {name: i for i, name in enumerate(compiled.resources)}
        self._membership: dict[str, np.ndarray] = {}
        self.runs = 0

    def verdict(self, node: str, removed: Sequence[objects.PodInfo]) -> tuple[int, int]:
        """(code, detail) of the pod on ``node`` once ``removed`` are gone (contract codes)."""
        compiled, n = self._compiled, self._index[node]
        batch = compiled.batch
        cluster = without(compiled, [(pod, n) for pod in removed], self._member)
        requested = cluster.requested
        own = self._static_code(node, n, removed)
        if own > 0:
            return contract.STATIC, own
        short = self._short(requested[:, n], cluster.allocatable[:, n], cluster.pods_column)
        if short:
            # The kernel's next check, answered here: most nodes that cannot be freed fail it.
            return contract.RESOURCES, short
        static = np.full((1, len(compiled.names)), _MASKED, dtype=np.int32)
        static[0, n] = own  # 0, or a reason the kernel checks last (negative)
        self.runs += 1
        result = self._kernel(
            cluster,
            dataclasses.replace(
                batch,
                static_row=np.zeros(1, dtype=np.int32),
                static_code=static,
                taint_raw=self._taint,
                node_affinity_raw=self._affinity,
                image_score=self._image,
                volume_score=self._volume,
                extension_score=self._extension,
            ),
        )
        return int(result.code[0, n]), int(result.detail[0, n])

    def _short(self, requested: np.ndarray, allocatable: np.ndarray, pods_column: int) -> int:
        """NodeResourcesFit as the kernel checks it: the bit of every column the pod asks for
        (and the pod count) that does not fit beside ``requested``."""
        if not self._compiled.batch.fit_filter:
            return 0  # the profile does not run NodeResourcesFit as a filter
        need = self._compiled.batch.requests[0]
        bits = 0
        for r in range(need.shape[0]):
            wanted = 1 if r == pods_column else int(need[r])
            if (wanted > 0 or r == pods_column) and wanted > allocatable[r] - requested[r]:
                bits |= 1 << r
        return bits

    def fits(self, node: str, removed: Sequence[objects.PodInfo]) -> bool:
        return self.verdict(node, removed)[0] == contract.PASS

    def reasons(self, node: str, removed: Sequence[objects.PodInfo]) -> list[str]:
        code, detail = self.verdict(node, removed)
        return [] if code == contract.PASS else cycle.node_reasons(self._compiled, code, detail)

    def _member(self, pod: objects.PodInfo) -> np.ndarray:
        """What ``pod`` adds to each count row (worked out once per pod)."""
        found = self._membership.get(pod.uid)
        if found is None:
            found = np.array(
                [countrows.belongs(key, pod, self._labels) for key in self._compiled.row_keys],
                dtype=np.int32,
            )
            self._membership[pod.uid] = found
        return found

    def _static_code(self, node: str, n: int, removed: Sequence[objects.PodInfo]) -> int:
        """The static verdict on ``node`` as the kernel's static code (negative: a reason it
        checks last, NodeDeclaredFeatures'); NodePorts is asked again without ``removed``'s
        ports (it is the last static filter, so every other one passed when it is the reason;
        the one checked last may fail there too, and is then the verdict)."""
        code = int(self._static[n])
        if code <= 0:
            return code
        if self._compiled.static_reasons[code - 1].plugin != nodeports.NAME:
            return code
        gone = {pod.uid for pod in removed}
        used = [
            port
            for pod in self._pods_on.get(node, ())
            if pod.uid not in gone
            for port in pod.scheduling.host_ports
        ]
        pod = self._compiled.pods[0]
        if bool(nodeports.filter(pod, [used])[0]):
            return code
        return 0 if self._last is None else -int(self._last[n])


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan:
    """One pod's preemption search, with all it reads copied out of the cache."""

    pod: objects.PodInfo
    compiled: compiling.Compiled
    pods_on: Mapping[str, Sequence[objects.PodInfo]]
    namespace_labels: Mapping[str, Mapping[str, str]]
    budgets: Sequence[evaluator.DisruptionBudget]
    rules: evaluator.Rules
    exempt: frozenset[str]  # uids of pods their SchedulingPolicy protects
    nominated_node: str
    kube: emulation.Emulation = emulation.NEWEST_EMULATION  # the profile's release
    # Where the cluster has ElasticQuotas: CapacityScheduling's victims (quotavictims), and
    # its PreFilter's refusal when that was why the pod failed (every node then Unschedulable).
    quota: quotavictims.QuotaView | None = None
    prefiltered: str = ""

    def decide(self, kernel: contract.Kernel) -> Search | None:
        """Where the pod should preempt, and whom; None when it fits as things are now (try it
        again as a new attempt). Touches nothing but the plan: may run on any thread."""
        found = self.find(kernel)
        return None if found is None else found.conclude()

    def find(self, kernel: contract.Kernel) -> Found | None:
        """``decide`` up to the choice of a candidate (which HTTP extenders may change in
        between: ``Found``); None when the pod fits as things are now."""
        compiled = self.compiled
        result = kernel(compiled.cluster, compiled.batch)
        if self.prefiltered:
            # PreFilter refused the pod: every node is Unschedulable with its words.
            failed = evaluator.NodeStatus(
                code=evaluator.Code.UNSCHEDULABLE, reasons=(self.prefiltered,)
            )
            statuses = dict.fromkeys(compiled.names, failed)
        elif int(result.chosen[0]) >= 0:
            return None
        else:
            statuses = _statuses(compiled, result)
        searched = {
            name for name, status in statuses.items() if status.code is evaluator.Code.UNSCHEDULABLE
        }
        listed = searched | {self.nominated_node}
        by_uid = {p.uid: p for name in compiled.names if name in listed for p in self.pods_on[name]}
        records = {uid: victim_record(p, exempt=uid in self.exempt) for uid, p in by_uid.items()}
        nodes = [
            evaluator.NodePods(
                name=name,
                pods=tuple(records[p.uid] for p in self.pods_on[name]) if name in listed else (),
            )
            for name in compiled.names
        ]
        whatif = WhatIf(compiled, kernel, self.pods_on, self.namespace_labels)

        def removed(
            node: evaluator.NodePods, remaining: Sequence[evaluator.Pod]
        ) -> list[objects.PodInfo]:
            keep = {p.uid for p in remaining}
            return [by_uid[p.uid] for p in node.pods if p.uid not in keep]

        def fits(
            _pod: evaluator.Pod, node: evaluator.NodePods, remaining: Sequence[evaluator.Pod]
        ) -> bool:
            return whatif.fits(node.name, removed(node, remaining))

        def explains(
            _pod: evaluator.Pod, node: evaluator.NodePods, remaining: Sequence[evaluator.Pod]
        ) -> list[str]:
            return whatif.reasons(node.name, removed(node, remaining))

        preemptor = dataclasses.replace(victim_record(self.pod), nominated_node=self.nominated_node)
        outcome = evaluator.search(
            preemptor,
            nodes,
            statuses,
            self.budgets,
            fits,
            explains,
            rules=self.rules,
            first_violation=self.kube.pdb_first_violation,
            select=(
                evaluator.select_victims
                if self.quota is None
                else functools.partial(quotavictims.select, view=self.quota)
            ),
        )
        return Found(plan=self, preemptor=preemptor, outcome=outcome, searched=len(searched))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Found:
    """A search's candidates before one is chosen (or its verdict, when the pod may not
    preempt): what HTTP extenders with a preempt verb are asked about."""

    plan: Plan
    preemptor: evaluator.Pod
    outcome: evaluator.PreemptionVerdict | evaluator.Searched
    searched: int

    @property
    def candidates(self) -> tuple[evaluator.Candidate, ...]:
        outcome = self.outcome
        return () if isinstance(outcome, evaluator.PreemptionVerdict) else outcome.candidates

    def pods_on(self) -> dict[str, tuple[str, ...]]:
        """The uids of each node's pods (an extender's answer names victims by uid)."""
        return {name: tuple(p.uid for p in pods) for name, pods in self.plan.pods_on.items()}

    def candidate(self, node: str, uids: Sequence[str], pdb_violations: int) -> evaluator.Candidate:
        """A candidate on ``node`` with the victims an extender chose (uids among its pods)."""
        pods = {p.uid: p for p in self.plan.pods_on[node]}
        return evaluator.Candidate(
            node=node,
            victims=tuple(victim_record(pods[uid], exempt=uid in self.plan.exempt) for uid in uids),
            pdb_violations=pdb_violations,
        )

    def conclude(
        self, chosen_from: Sequence[evaluator.Candidate] | None = None, refusal: str = ""
    ) -> Search:
        """The choice among the candidates (``chosen_from``: those extenders left; ``refusal``:
        an extender's error), with the records of its victims."""
        outcome = self.outcome
        if isinstance(outcome, evaluator.Searched):
            outcome = evaluator.conclude(self.preemptor, outcome, chosen_from, refusal)
        every = {p.uid: p for pods in self.plan.pods_on.values() for p in pods}
        return Search(
            outcome=outcome,
            victims=tuple(every[v.uid] for v in outcome.victims),
            searched=self.searched,
            kube=self.plan.kube,
            quota=self.plan.quota is not None,
        )


def prepare(
    pod: objects.PodInfo,
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    *,
    profile: scoring.Profile = scoring.DEFAULT,
    held: Sequence[nominations.Nomination] = (),
    budgets: Sequence[evaluator.DisruptionBudget] = (),
    rules: evaluator.Rules = evaluator.NO_RULES,
    exempt: Callable[[objects.PodInfo], bool] | None = None,
    nominated_node: str = "",
    quota: quotavictims.QuotaView | None = None,
    prefiltered: str = "",
    judgement: judgements.Judgement | None = None,
) -> Plan | None:
    """The search for ``pod`` (which just fit nowhere), read from the cache now; None when it
    cannot be compiled alone.

    ``held`` are the nominations of other pods of at least its priority (room they keep);
    ``nominated_node`` the node this pod is nominated to, if any; ``exempt`` tells the pods
    a SchedulingPolicy protects; ``rules`` are the preemptor's policy's; ``quota`` and
    ``prefiltered`` as ``Plan``'s; ``judgement``: the Python plugins' verdicts of the pod's
    cycle (their Filter rejections hold: no victim changes a plugin's verdict).
    """
    devices = cycle.device_verdicts(pod, snap, cache, profile)
    if isinstance(devices, cycle.Decision):
        return None  # DynamicResources' PreFilter rejects every node: nothing to search
    compiled = compiling.compile_batch(
        [pod],
        snap,
        cache,
        profile=profile,
        nominated=[(h.pod, h.node) for h in held],
        devices={} if devices is None else {pod.uid: devices},
        judged={} if judgement is None else {pod.uid: judgement},
    )
    if compiled.deferred or not compiled.pods:
        return None
    lowest = cache.lowest_priority()
    if quota is None and (lowest is None or lowest >= pod.priority):
        # No pod anywhere is less important: no node has a victim (nor one terminating).
        pods_on: dict[str, tuple[objects.PodInfo, ...]] = dict.fromkeys(compiled.names, ())
    else:
        pods_on = {name: tuple(p.pod for p in cache.pods_on(name)) for name in compiled.names}
    protected = frozenset(
        p.uid for placed in pods_on.values() for p in placed if exempt is not None and exempt(p)
    )
    return Plan(
        pod=pod,
        compiled=compiled,
        pods_on=pods_on,
        namespace_labels=dict(cache.namespace_labels),
        budgets=tuple(budgets),
        rules=rules,
        exempt=protected,
        nominated_node=nominated_node,
        kube=profile.kube,
        quota=quota,
        prefiltered=prefiltered,
    )


def search(
    pod: objects.PodInfo,
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    kernel: contract.Kernel,
    **options: Any,
) -> Search | None:
    """``prepare`` and ``decide`` in one go (tests, replay)."""
    plan = prepare(pod, snap, cache, **options)
    return None if plan is None else plan.decide(kernel)


def _without_extenders(compiled: compiling.Compiled, codes: np.ndarray) -> np.ndarray:
    """Static codes with the HTTP extenders' reasons (plugin "Extender") passing."""
    reasons = compiled.static_reasons
    theirs = [c + 1 for c, reason in enumerate(reasons) if reason.plugin == extenders.PLUGIN]
    if not theirs:
        return codes
    return np.where(np.isin(np.abs(codes), theirs), 0, codes).astype(codes.dtype)


def _statuses(
    compiled: compiling.Compiled, result: contract.Result
) -> dict[str, evaluator.NodeStatus]:
    """Each node's verdict for the pod (row 0), as kube-scheduler's status codes."""
    statuses = {}
    codes, details = result.code[0], result.detail[0]
    for n, name in enumerate(compiled.names):
        code, detail = int(codes[n]), int(details[n])
        if code == contract.STATIC:
            unresolvable = compiled.static_reasons[detail - 1].unresolvable
        elif code == contract.RESOURCES:
            unresolvable = cycle.beyond_allocatable(compiled, 0, n, detail)
        else:
            unresolvable = code in cycle.UNRESOLVABLE_CODES
        statuses[name] = evaluator.NodeStatus(
            code=evaluator.Code.UNRESOLVABLE if unresolvable else evaluator.Code.UNSCHEDULABLE,
            reasons=tuple(cycle.node_reasons(compiled, code, detail)),
        )
    return statuses


def _time(text: str) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
