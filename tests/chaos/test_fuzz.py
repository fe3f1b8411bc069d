"""Scenario 6: fuzzed bad input. SchedulingPolicies (valid, invalid, and valid but odd) and odd
pod specs for plumb, drawn with Hypothesis (tests/chaos/fuzzing.py), go through the real API
server while a steady stream of normal pods is scheduled.

Each fuzzed object must end where a user can see what happened to it: refused by the API server
(a 4xx on create), or, for a policy, a status written by plumb (observedGeneration equal to the
generation, and a Ready condition with a reason), or, for a pod, bound or pending with a
FailedScheduling event that says why. plumb must not crash or log a traceback (the start_plumb
fixture checks its exit code and log), every normal pod must be bound, and the invariant must
hold over both namespaces. The normal stream's latency (create to bound, seen by a watch) is
recorded without the fuzz and with it, for docs/reliability.md; it is never asserted on.

The normal pods have nodes of their own (tainted for them), far roomier than the stream needs,
so a normal pod that waits says something about plumb, never about room taken by a fuzzed pod
that landed; a fuzzed pod that tolerates every taint may still land there.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import re
import statistics
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube
from tests.chaos import fuzzing, harness, invariant
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

JSON = dict[str, Any]
GROUP, VERSION, PLURAL = "scheduling.plumb.dev", "v1alpha1", "schedulingpolicies"
INTERVAL = 0.1  # seconds between two pods of the normal stream (10 a second)


@pytest.fixture
def fuzz_namespace(namespace: str, client: kube.Kube) -> Iterator[str]:
    """A second namespace for the fuzzed objects; its pods and policies are deleted afterwards
    (the policies too, or every later plumb of the session would list and report them)."""
    name = f"{namespace[:50]}-fuzz"
    client.create_namespace(name, account=False)
    yield name
    client.delete_pods(name)
    k8s.CustomObjectsApi(client.api).delete_collection_namespaced_custom_object(
        GROUP, VERSION, name, PLURAL
    )


def test_fuzzed_policies_and_pods_are_refused_or_answered_while_normal_pods_flow(
    client: kube.Kube,
    namespace: str,
    fuzz_namespace: str,
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    plane: controlplane.ControlPlane,
) -> None:
    count = harness.size(40, 1000)
    policy_cases = fuzzing.draw(fuzzing.policies(), count, salt=6)
    pod_cases = fuzzing.draw(fuzzing.odd_pod(), count, salt=66)
    lane = f"plumb.test/lane-{node_prefix}"
    nodes = harness.create_nodes(client, _nodes(node_prefix, lane))
    plumb = start_plumb()
    watch = BindWatch(plane.kubeconfig, namespace).start()
    try:
        # Without the fuzz: a stream of its own, waited for.
        before = Stream(plane.kubeconfig, namespace, lane, prefix="before")
        before.run(harness.size(30, 300))
        _wait_bound(client, namespace, len(before.created))
        # With it: the stream runs while the fuzzed objects are sent, spread over at least as
        # long as the stream ran without them.
        spread_over = len(before.created) * INTERVAL
        during = Stream(plane.kubeconfig, namespace, lane, prefix="during").start()
        sent = Sender(client, fuzz_namespace).send(policy_cases, pod_cases, over=spread_over)
        during.stop()
        _wait_bound(client, namespace, len(before.created) + len(during.created))
        # The API server answered "bound" a moment before the watch's event for the last pods
        # arrived: give the watch the time to see them too.
        normal = set(before.created) | set(during.created)
        harness.wait_until(
            "the watch to see every normal pod bound",
            lambda: normal <= set(watch.bound_at),
            timeout=30,
        )
    finally:
        watch.stop()

    verdict = invariant.check(client, [namespace, fuzz_namespace], plumb)
    policies, messages = _policies_reported(client, fuzz_namespace, sent.accepted_policies)
    pods = _pod_outcomes(client, fuzz_namespace, sent.accepted_pods)
    latency_before = _latency_ms(before, watch)
    latency_during = _latency_ms(during, watch)
    ready = collections.Counter(policies.values())
    outcomes = {outcome: len(names) for outcome, names in pods.items()}
    harness.record(
        "fuzz",
        pods=count,
        policies=count,
        nodes=len(nodes),
        faults=f"{count} fuzzed SchedulingPolicies and {count} fuzzed pods",
        violations=len(verdict.violations),
        recovery_s=verdict.cache_matched_after,
        policies_refused=len(sent.refused_policies),
        policies_ready=ready["True"],
        policies_not_ready=sum(ready.values()) - ready["True"],
        pods_refused=len(sent.refused_pods),
        pods_bound=outcomes["bound"],
        pods_pending_with_reason=outcomes["pending"],
        normal_pods=len(before.created) + len(during.created),
        latency_ms_without_fuzz=latency_before,
        latency_ms_with_fuzz=latency_during,
    )
    # The breakdown, beside the figures (reliabilityreport.py tables only the scenarios' files).
    (harness.RESULTS / "fuzz-details.json").write_text(
        json.dumps(
            {
                "inputs": _digest(policy_cases, pod_cases),
                "policies_by_kind": collections.Counter(case.kind for case in policy_cases),
                "policy_refusals": _refusals(sent.refused_policies),
                "policies_ready": ready,
                "pod_refusals": _refusals(sent.refused_pods).get("pod", {}),
                "pending_reasons": _reasons(client, fuzz_namespace),
            },
            indent=2,
        )
        + "\n"
    )
    print(
        f"fuzz: {sent.summary()}; policies Ready {dict(ready)}; pods {outcomes}; normal stream "
        f"latency {latency_before} ms without the fuzz, {latency_during} ms with it"
    )
    wrongly = {
        name: (refusal.what, refusal.cause)
        for name, refusal in sent.refused_policies.items()
        if refusal.kind != "invalid"
    }
    assert not wrongly, f"valid policies the API server refused: {wrongly}"
    assert not sent.server_errors, f"the API server failed on fuzzed input: {sent.server_errors}"
    assert plumb.running(), "plumb exited during the fuzz"
    assert not verdict.violations, verdict.summary()
    unreported = sorted(set(sent.accepted_policies) - set(policies))
    assert not unreported, f"policies with no status from plumb: {unreported[:10]}"
    misreported = {
        name: (case.what, policies[name], messages.get(name))
        for name, case in sent.accepted_policies.items()
        if policies[name] != fuzzing.expected_ready(case)
    }
    assert not misreported, f"policies whose Ready condition is not as expected: {misreported}"
    lost = {name: sent.accepted_pods[name].what for name in pods["unexplained"] + pods["missing"]}
    assert not lost, f"fuzzed pods neither bound nor explained by a FailedScheduling: {lost}"


# The cluster -----------------------------------------------------------------------------------


def _nodes(prefix: str, lane: str) -> list[JSON]:
    """Three roomy nodes tainted for the normal stream, and three of the fuzz lane: ordinary
    sizes, the labels the fuzzed affinity reads, and one offering example.com/foo."""
    normal = [
        builders.make_node(f"{prefix}-normal-{i}")
        .capacity(cpu="2000", memory="64Ti", pods=5000)
        .zone(f"zone-{i}")
        .label(lane, "normal")
        .taint(lane, "normal")
        .obj()
        for i in range(3)
    ]
    fuzz = []
    for i, (disk, rank) in enumerate([("ssd", "1"), ("hdd", "5"), ("ssd", "9")]):
        extra = {fuzzing.EXTENDED: "8"} if i == 0 else {}
        fuzz.append(
            builders.make_node(f"{prefix}-fuzz-{i}")
            .capacity(cpu="16", memory="64Gi", pods=110, **extra)
            .zone(f"zone-{i}")
            .label(fuzzing.DISK, disk)
            .label(fuzzing.RANK, rank)
            .obj()
        )
    return normal + fuzz


def _wait_bound(client: kube.Kube, namespace: str, expected: int) -> None:
    def bound() -> bool:
        return sum(bool(p["spec"].get("nodeName")) for p in client.pods(namespace)) >= expected

    harness.wait_until(f"{expected} normal pods bound", bound, timeout=180)


# The normal stream and its latency -------------------------------------------------------------


class Stream:
    """Normal pods for plumb (100m, 64Mi, on the normal lane), one every INTERVAL seconds,
    created from a thread of their own; ``created`` holds when each create was sent."""

    def __init__(self, kubeconfig: Path, namespace: str, lane: str, *, prefix: str) -> None:
        self.namespace = namespace
        self.lane = lane
        self.prefix = prefix
        self.created: dict[str, float] = {}
        self._client = kube.Kube(kubeconfig)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._error: BaseException | None = None

    def _pod(self, name: str) -> JSON:
        return (
            builders.make_pod(name, self.namespace)
            .scheduler(harness.SCHEDULER)
            .req(cpu="100m", memory="64Mi")
            .label("app", "normal")
            .node_selector(self.lane, "normal")
            .toleration(self.lane, value="normal")
            .obj()
        )

    def run(self, limit: int | None = None) -> None:
        """Create pods until ``limit`` (or ``stop``); called directly, it blocks."""
        try:
            began = time.monotonic()
            while not self._stop.is_set() and (limit is None or len(self.created) < limit):
                name = f"{self.prefix}-{len(self.created)}"
                sent = time.time()
                self._client.create_pod(self._pod(name))
                self.created[name] = sent
                pause = began + len(self.created) * INTERVAL - time.monotonic()
                if pause > 0:
                    self._stop.wait(pause)
        except BaseException as error:  # surfaced by stop()
            self._error = error
            raise
        finally:
            if limit is not None:
                self._client.close()

    def start(self) -> Stream:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._client.close()
        assert self._error is None, f"the normal stream failed: {self._error!r}"


class BindWatch:
    """When each pod of a namespace was first seen bound, by a watch on the test's clock."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.namespace = namespace
        self.bound_at: dict[str, float] = {}
        self._client = kube.Kube(kubeconfig)
        self._watch = k8s_watch.Watch()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> BindWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._watch.stop()
        self._thread.join(30)
        self._client.close()

    def _seen(self, pod: JSON, at: float) -> None:
        if pod["spec"].get("nodeName"):
            self.bound_at.setdefault(pod["metadata"]["name"], at)

    def _run(self) -> None:
        version = ""
        while not self._stop.is_set():
            if not version:  # the first time, or after the watch's revision was lost
                listed = self._client._raw(
                    self._client.core.list_namespaced_pod(self.namespace, _preload_content=False)
                )
                for pod in listed["items"]:
                    self._seen(pod, time.time())
                version = listed["metadata"]["resourceVersion"]
            try:
                for event in self._watch.stream(
                    self._client.core.list_namespaced_pod,
                    self.namespace,
                    resource_version=version,
                    timeout_seconds=2,
                ):
                    pod = event["raw_object"]
                    if event["type"] == "ERROR":
                        version = ""
                        break
                    self._seen(pod, time.time())
                    version = pod["metadata"]["resourceVersion"]
            except k8s.ApiException as error:
                if error.status != 410:
                    raise
                version = ""  # 410 Gone: list again
            except urllib3.exceptions.HTTPError:
                continue  # the connection was cut: watch again from the last revision


def _latency_ms(stream: Stream, watch: BindWatch) -> str:
    """Create to bound, in milliseconds: median, 99th percentile and the worst."""
    times = sorted(
        (watch.bound_at[name] - sent) * 1000
        for name, sent in stream.created.items()
        if name in watch.bound_at
    )
    if not times:
        return "no pod seen bound"
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return f"p50 {statistics.median(times):.0f}, p99 {p99:.0f}, max {times[-1]:.0f}"


# The fuzzed objects ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Refusal:
    """A fuzzed object the API server refused: its HTTP status and the field it named."""

    kind: str
    what: str
    status: int
    cause: str


class Sent:
    """What became of each fuzzed object on create, by the name it was created under."""

    def __init__(self) -> None:
        self.accepted_policies: dict[str, fuzzing.PolicyCase] = {}
        self.accepted_pods: dict[str, fuzzing.PodCase] = {}
        self.refused_policies: dict[str, Refusal] = {}
        self.refused_pods: dict[str, Refusal] = {}
        self.server_errors: list[str] = []

    def summary(self) -> str:
        refused = [*self.refused_policies.values(), *self.refused_pods.values()]
        codes = collections.Counter(r.status for r in refused)
        return (
            f"{len(self.accepted_policies)} policies accepted, {len(self.refused_policies)} "
            f"refused; {len(self.accepted_pods)} pods accepted, {len(self.refused_pods)} "
            f"refused (HTTP {dict(codes)})"
        )


class Sender:
    """Creates the fuzzed objects, a policy and a pod in turn, and sorts them by the answer."""

    def __init__(self, client: kube.Kube, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.custom = k8s.CustomObjectsApi(client.api)

    def send(
        self,
        policies: Sequence[fuzzing.PolicyCase],
        pods: Sequence[fuzzing.PodCase],
        *,
        over: float,
    ) -> Sent:
        """Sends them all, taking at least ``over`` seconds."""
        sent = Sent()
        run = uuid.uuid4().hex[:4]
        rounds = max(len(policies), len(pods))
        began = time.monotonic()
        for index in range(rounds):
            pause = began + index * over / rounds - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            if index < len(policies):
                policy, name = policies[index], f"spol-{run}-{index}"
                answer = self._create_policy(policy, name)
                if answer is None:
                    sent.accepted_policies[name] = policy
                else:
                    sent.refused_policies[name] = self._refusal(sent, name, policy, answer)
            if index < len(pods):
                pod, name = pods[index], f"fuzz-{run}-{index}"
                answer = self._create_pod(pod, name)
                if answer is None:
                    sent.accepted_pods[name] = pod
                else:
                    sent.refused_pods[name] = self._refusal(sent, name, pod, answer)
        return sent

    @staticmethod
    def _refusal(
        sent: Sent, name: str, case: fuzzing.PolicyCase | fuzzing.PodCase, answer: k8s.ApiException
    ) -> Refusal:
        status = int(answer.status)
        if status >= 500 or status == 0:
            sent.server_errors.append(
                f"{name} ({case.what}): HTTP {status}: {str(answer.body)[:300]}"
            )
        return Refusal(kind=case.kind, what=case.what, status=status, cause=_cause(answer))

    def _create_policy(self, case: fuzzing.PolicyCase, name: str) -> k8s.ApiException | None:
        options = {"field_validation": "Strict"} if case.strict else {}
        try:
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, case.body(self.namespace, name), **options
            )
        except k8s.ApiException as error:
            return error
        return None

    def _create_pod(self, case: fuzzing.PodCase, name: str) -> k8s.ApiException | None:
        try:
            self.client.core.create_namespaced_pod(
                self.namespace, case.body(self.namespace, name), _preload_content=False
            )
        except k8s.ApiException as error:
            return error
        return None


def _cause(error: k8s.ApiException) -> str:
    """What a refusal names: the first cause's field (indices dropped) or the reason."""
    try:
        details = json.loads(error.body).get("details") or {}
    except (TypeError, ValueError):
        return f"HTTP {error.status}"
    causes = details.get("causes") or [{}]
    field = str(causes[0].get("field") or causes[0].get("reason") or f"HTTP {error.status}")
    return re.sub(r"\[\d+\]", "[]", field)


def _policies_reported(
    client: kube.Kube, namespace: str, accepted: dict[str, fuzzing.PolicyCase]
) -> tuple[dict[str, str], dict[str, str]]:
    """Waits (up to 60 s) for plumb to report on every accepted policy: observedGeneration equal
    to the generation and a Ready condition with a reason. Returns each reported policy's Ready
    status ("True", or "False: <reason>") and its message."""
    custom = k8s.CustomObjectsApi(client.api)
    reported: dict[str, str] = {}
    messages: dict[str, str] = {}

    def everyone() -> bool:
        listed = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        for policy in listed["items"]:
            name = policy["metadata"]["name"]
            status = policy.get("status") or {}
            ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
            if (
                name in accepted
                and status.get("observedGeneration") == policy["metadata"]["generation"]
                and ready
                and ready[0].get("reason")
            ):
                condition = ready[0]
                messages[name] = str(condition.get("message", ""))
                reported[name] = (
                    "True"
                    if condition["status"] == "True"
                    else f"{condition['status']}: {condition['reason']}"
                )
        return set(accepted) <= set(reported)

    with contextlib.suppress(kube.WaitTimeout):  # the caller names the ones left
        harness.wait_until("every accepted policy's status", everyone, timeout=60)
    return reported, messages


def _pod_outcomes(
    client: kube.Kube, namespace: str, accepted: dict[str, fuzzing.PodCase]
) -> dict[str, list[str]]:
    """The accepted fuzzed pods by outcome: bound, pending with a FailedScheduling event whose
    message is not empty, unexplained (pending with no such event) and missing (not listed)."""
    explained = {
        e["involvedObject"]["name"]
        for e in client.events(namespace)
        if e.get("reason") == invariant.FAILED_SCHEDULING and e.get("message")
    }
    outcome: dict[str, list[str]] = {"bound": [], "pending": [], "unexplained": [], "missing": []}
    listed = {p["metadata"]["name"]: p for p in client.pods(namespace)}
    for name in accepted:
        pod = listed.get(name)
        if pod is None:
            outcome["missing"].append(name)
        elif pod["spec"].get("nodeName"):
            outcome["bound"].append(name)
        elif name in explained:
            outcome["pending"].append(name)
        else:
            outcome["unexplained"].append(name)
    return outcome


def _reasons(client: kube.Kube, namespace: str) -> dict[str, int]:
    """The FailedScheduling messages of the fuzzed pods, counts of nodes blanked, by frequency."""
    found = collections.Counter(
        re.sub(r"\d+", "N", str(e["message"]))[:200]
        for e in client.events(namespace)
        if e.get("reason") == invariant.FAILED_SCHEDULING
    )
    return dict(found.most_common(12))


def _digest(*cases: Sequence[Any]) -> str:
    """A fingerprint of the generated objects: the same on every run unless a strategy changed."""
    bodies = [[dataclasses.asdict(case) for case in group] for group in cases]
    return hashlib.sha256(json.dumps(bodies, sort_keys=True).encode()).hexdigest()[:12]


def _refusals(refused: dict[str, Refusal]) -> dict[str, dict[str, int]]:
    """Per kind of generated object, how many the API server refused, by the field it named."""
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for refusal in refused.values():
        table[refusal.kind][refusal.cause] += 1
    return {kind: dict(counts.most_common()) for kind, counts in sorted(table.items())}
