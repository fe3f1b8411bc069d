"""One scenario, two schedulers: run an integration test once under plumb and once under the real
kube-scheduler on the same control plane, and read back what each decided.

A test module takes the parametrised ``scheduler`` fixture by importing it::

    from tests.support.side_by_side import scheduler_fixture  # noqa: F401

and builds its pods with ``scheduler.pod(name, namespace)``, which sets the schedulerName the
scheduler under test takes. The function has another name than the fixture so that a test's
``scheduler`` argument does not shadow the import (ruff F811). A module that wants other
parameters writes its own fixture around ``scheduler_runner``. ``gated_scheduler`` is the same
on the gated plane (conftest's ``gated_*`` fixtures: GenericWorkload on), where kube-scheduler
runs with the plane's feature gates. Gang scheduling on
scheduler-plugins' PodGroup holds plumb against scheduler-plugins' Coscheduling
(``SCHEDULER_PLUGINS``) that way::

    @pytest.fixture(name="scheduler", params=(PLUMB, SCHEDULER_PLUGINS))
    def gang_scheduler(request):
        with scheduler_runner(request, request.param) as runner:
            yield runner

Tenant quotas on scheduler-plugins' ElasticQuota hold plumb against its CapacityScheduling
(``CAPACITY_SCHEDULING``, the same binary with the other profile) in the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import utils as k8s_utils

from plumb_dev.cluster.controlplane import building
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, kubescheduler, schedulerplugins
from tests.support import plumb_process

PLUMB = "plumb"
KUBE_SCHEDULER = "kube-scheduler"
SCHEDULERS = (PLUMB, KUBE_SCHEDULER)
# scheduler-plugins' kube-scheduler (v0.34.7, Kubernetes v1.34) with Coscheduling enabled; not in
# SCHEDULERS: only the gang tests ask for it.
SCHEDULER_PLUGINS = schedulerplugins.SCHEDULER_NAME
# The same binary with CapacityScheduling (ElasticQuota) instead; only the quota tests ask for it.
CAPACITY_SCHEDULING = schedulerplugins.CAPACITY_SCHEDULER_NAME
PLUMB_SCHEDULER_NAME = "plumb"
FAILED_SCHEDULING = "FailedScheduling"
_LOG_TAIL_LINES = 40
_PROBE = "probe-"
_PROBES = 20
_NEVER = datetime.datetime.min.replace(tzinfo=datetime.UTC)


NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_CLAIMS = "no new claims to deallocate"
TERMINATING = "not eligible due to a terminating pod on the nominated node."


@dataclasses.dataclass(frozen=True)
class Words:
    """kube-scheduler's FailedScheduling words (PodScheduled's message is the same) as release
    1.``minor`` writes them, where releases differ: after the filters' node histogram come the
    PostFilter plugins' words, joined by ", " — DynamicResources' "no new claims to
    deallocate" up to v1.36 (nothing from v1.37: dynamicresources.go PostFilter), then
    DefaultPreemption's "preemption: ..."; a preemption that found a node adds nothing up to
    v1.36 (only its status is returned) and, from v1.37, "preemption: found a potential
    placement for pod on node N, preempting K victims" (preemption.go Preempt)."""

    minor: int

    def post_filter(self, histogram: str, preemption: str) -> str:
        """The whole message of a pod no node fits and preemption did not help:
        ``preemption`` is DefaultPreemption's part after "preemption: "."""
        words = [NO_CLAIMS] if self.minor < 37 else []
        words.append(f"preemption: {preemption}")
        return f"{histogram} {', '.join(words)}"

    def without_victims(self, histogram: str, total: int, searched: int) -> str:
        """The message of a pod no pod of lower priority stands in the way of: preemption's
        "0/N nodes are available" over the ``searched`` nodes (those a filter rejected for
        reasons evicting pods could cure: none of lower priority there) and the rest (not
        helpful)."""
        reasons = sorted(
            f"{count} {reason}"
            for reason, count in ((NO_VICTIMS, searched), (NOT_HELPFUL, total - searched))
            if count
        )
        return self.post_filter(histogram, f"0/{total} nodes are available: {', '.join(reasons)}.")

    def found(self, histogram: str, node: str, victims: int) -> str:
        """The message of a pod whose preemption chose ``node`` and that many victims."""
        if self.minor < 37:
            return histogram
        sentence = f"found a potential placement for pod on node {node}, preempting {victims}"
        return f"{histogram} preemption: {sentence} victims"

    def says_found(self, message: str) -> bool:
        """Whether the message is of a preemption that found a node (v1.37's sentence; up to
        v1.36 such a message has no PostFilter part at all)."""
        return " preemption: found a potential placement for pod on node " in message

    def waiting(self, histogram: str) -> str:
        """The message of a nominated preemptor tried again while its victims terminate."""
        return self.post_filter(histogram, TERMINATING)

    def histogram(self, message: str) -> str:
        """The filters' part of a message this release wrote: what comes before its PostFilter
        plugins' words."""
        for start in (f" {NO_CLAIMS}", " preemption: "):
            if start in message:
                return message[: message.index(start)]
        return message


def words(minor: int | None = None) -> Words:
    """Release 1.``minor``'s words; by default the session's control plane's release, chosen
    as the ``control_plane`` fixture chooses it ($PLUMB_KUBE_VERSION, else the default): for
    helpers called without the ``kube_minor`` fixture at hand."""
    return Words(building.chosen_release().minor if minor is None else minor)


def without_victims(histogram: str, total: int, searched: int, *, minor: int | None = None) -> str:
    """``Words.without_victims`` of release 1.``minor``, by default the session's (``words``)."""
    return words(minor).without_victims(histogram, total, searched)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Runner:
    """A scheduler running for one test."""

    name: str
    """``"plumb"``, ``"kube-scheduler"``, ``"scheduler-plugins"`` (Coscheduling) or
    ``"capacity-scheduling"`` (scheduler-plugins with CapacityScheduling): which one runs."""
    scheduler_name: str
    """The spec.schedulerName of the pods it takes; it leaves every other pod alone."""
    log: Path

    def pod(self, name: str, namespace: str) -> builders.PodBuilder:
        """A pod for this scheduler: ``scheduler.pod("web", namespace).req(cpu="1")``."""
        return builders.make_pod(name, namespace).scheduler(self.scheduler_name)


# The names of conftest's fixtures for (the control plane, plumb's starter) the runner uses.
_DEFAULT = ("control_plane", "start_plumb")
_GATED = ("gated_plane", "gated_start_plumb")


@contextlib.contextmanager
def scheduler_runner(
    request: pytest.FixtureRequest, name: str, *, gated: bool = False
) -> Iterator[Runner]:
    """Starts the scheduler called name for the requesting test and stops it afterwards.

    The building block of fixtures: ``with scheduler_runner(request, request.param) as runner:
    yield runner``. plumb comes from conftest's ``start_plumb``, whose own teardown stops it,
    checks its exit code and prints its log. kube-scheduler runs from the test's tmp_path; a
    kube-scheduler that died during the test fails it, and its log tail is printed either way.
    With ``gated``, both run against conftest's ``gated_plane`` (``gated_start_plumb``), and
    kube-scheduler with the plane's feature gates (``kubescheduler.start``'s default).
    scheduler-plugins' kube-scheduler runs the same way, with the Coscheduling profile of
    ``schedulerplugins.profile`` and the PodGroup CRD installed first (built on first use);
    ``CAPACITY_SCHEDULING`` is that binary with ``schedulerplugins.capacity_profile``, the
    ElasticQuota CRD installed first.
    """
    plane_fixture, plumb_fixture = _GATED if gated else _DEFAULT
    if name == PLUMB:
        start_plumb: plumb_process.PlumbFactory = request.getfixturevalue(plumb_fixture)
        plumb = start_plumb("--scheduler-name", PLUMB_SCHEDULER_NAME)
        yield Runner(name=PLUMB, scheduler_name=PLUMB_SCHEDULER_NAME, log=plumb.log)
        return
    others = (KUBE_SCHEDULER, SCHEDULER_PLUGINS, CAPACITY_SCHEDULING)
    if name not in others:
        raise ValueError(f"no scheduler called {name!r}; choose one of {(PLUMB, *others)}")
    plane: controlplane.ControlPlane = request.getfixturevalue(plane_fixture)
    tmp_path: Path = request.getfixturevalue("tmp_path")
    if name == SCHEDULER_PLUGINS:
        process = schedulerplugins.start(plane, tmp_path / SCHEDULER_PLUGINS)
    elif name == CAPACITY_SCHEDULING:
        process = schedulerplugins.start_capacity_scheduling(plane, tmp_path / CAPACITY_SCHEDULING)
    else:
        process = kubescheduler.start(plane, tmp_path / KUBE_SCHEDULER)
    try:
        yield Runner(name=name, scheduler_name=process.scheduler_name, log=process.log)
    finally:
        died = not process.running()
        code = process.stop()
        print(f"--- {name} log tail ({process.log}) ---\n{process.tail(_LOG_TAIL_LINES)}")
    assert not died, f"{name} exited with code {code} during the test; see its log above"


@pytest.fixture(name="scheduler", params=SCHEDULERS)
def scheduler_fixture(request: pytest.FixtureRequest) -> Iterator[Runner]:
    """Each test that takes ``scheduler`` runs once with plumb and once with kube-scheduler."""
    with scheduler_runner(request, request.param) as runner:
        yield runner


@pytest.fixture(name="gated_scheduler", params=SCHEDULERS)
def gated_scheduler_fixture(request: pytest.FixtureRequest) -> Iterator[Runner]:
    """``scheduler`` on the gated plane: import it as ``scheduler_fixture`` is imported, and
    take ``gated_client``, ``gated_namespace`` and ``gated_add_node`` beside it."""
    with scheduler_runner(request, request.param, gated=True) as runner:
        yield runner


# --- what the scheduler decided ------------------------------------------------------------------


def in_view(client: kube.Kube, scheduler: Runner, namespace: str, nodes: list[str]) -> None:
    """Waits until the scheduler has every node of the test in view.

    Node and pod watches are separate streams, so a pod created right after the nodes may be
    placed before the last nodes arrive, and a placement, unlike a failure, is never retried.
    The node watch is one ordered stream: a pod that fits nowhere and is judged against all the
    test's nodes proves every node has been seen. Each probe is a new pod, not a retry of the
    last one: plumb loses the retry a node should trigger when the node arrives while the pod's
    attempt is in flight, and a helper must not hang on that. Probes stay pending with priority
    0, holding nothing, so they are never victims. The pod watch is one ordered stream too: a
    probe judged also proves the scheduler has seen every pod change made before it, so the
    helper may be called again (its probes get new names).
    """
    prefix = f"0/{len(nodes)} nodes are available"
    taken = sum(p["metadata"]["name"].startswith(_PROBE) for p in client.pods(namespace))
    messages = []
    for attempt in range(taken, taken + _PROBES):
        probe = f"{_PROBE}{attempt}"
        client.create_pod(
            scheduler.pod(probe, namespace).node_selector("plumb.test/probe", "nowhere").obj()
        )
        wait_settled(client, namespace, [probe])
        message = failed_scheduling(client, namespace, probe)
        if message is not None and message.startswith(prefix):
            return
        messages.append(message)
    raise AssertionError(
        f"{scheduler.name} never judged a pod against {len(nodes)} nodes: {messages}"
    )


def wait_settled(
    client: kube.Kube,
    namespace: str,
    names: Iterable[str],
    timeout: float = 60.0,
    *,
    cluster_nodes: int | None = None,
) -> dict[str, str | None]:
    """Waits until each named pod is bound or has a FailedScheduling event: {pod: node or None}.

    Both schedulers post FailedScheduling through events.k8s.io; the core/v1 view has the
    reason, the note as message, eventTime and reportingComponent = the schedulerName.

    Watches of nodes and pods are separate streams, so a scheduler may try a pod before it has
    seen a node created just before it, fail it, and bind it on the retry the node triggers.
    Given cluster_nodes, a failure counts only once it was decided with that many nodes in
    view: both schedulers begin the message with "0/N nodes are available".
    """
    wanted = list(names)
    if not wanted:
        raise ValueError("names is empty; pass the pods to wait for")
    prefix = None if cluster_nodes is None else f"0/{cluster_nodes} nodes are available"
    waiting: dict[str, str] = {}

    def settled() -> dict[str, str | None] | None:
        pods = {p["metadata"]["name"]: p for p in client.pods(namespace)}
        failures = _newest_messages(client.events(namespace), FAILED_SCHEDULING)
        placed: dict[str, str | None] = {}
        waiting.clear()
        for name in wanted:
            pod = pods.get(name)
            if pod is None:
                waiting[name] = "no such pod"
            elif node := pod["spec"].get("nodeName"):
                placed[name] = str(node)
            elif (message := failures.get(pod["metadata"]["uid"])) is None:
                waiting[name] = "neither bound nor FailedScheduling"
            elif prefix is not None and not message.startswith(prefix):
                waiting[name] = f"FailedScheduling {message!r} does not start with {prefix!r}"
            else:
                placed[name] = None
        return None if waiting else placed

    try:
        return kube.wait_for(
            f"{len(wanted)} pods in {namespace} to be bound or FailedScheduling",
            settled,
            timeout=timeout,
        )
    except kube.WaitTimeout as error:
        detail = "; ".join(f"{name}: {why}" for name, why in waiting.items())
        raise kube.WaitTimeout(f"{error}; still waiting on {detail}") from None


def failed_scheduling(client: kube.Kube, namespace: str, name: str) -> str | None:
    """The message of the newest FailedScheduling event of the pod, None if there is none."""
    pod = client.pod(namespace, name)
    messages = _newest_messages(client.events(namespace, name), FAILED_SCHEDULING)
    return messages.get(pod["metadata"]["uid"])


def _newest_messages(events: Iterable[kube.JSON], reason: str) -> dict[str, str]:
    """{pod uid: message of its newest event with this reason}; the uid, since names recur."""
    newest: dict[str, tuple[datetime.datetime, str, str]] = {}
    for event in events:
        regarding = event.get("involvedObject") or {}
        if event.get("reason") != reason or regarding.get("kind") != "Pod":
            continue
        key = (_when(event), event["metadata"]["name"], str(event.get("message") or ""))
        uid = str(regarding.get("uid"))
        if uid not in newest or key > newest[uid]:
            newest[uid] = key
    return {uid: message for uid, (_, _, message) in newest.items()}


def _when(event: kube.JSON) -> datetime.datetime:
    # events.k8s.io events carry eventTime and, once repeated, series.lastObservedTime; old
    # core/v1 ones lastTimestamp. Parsed, because "…:08Z" sorts after "…:08.5Z" as text.
    series = event.get("series") or {}
    stamps = (event.get("eventTime"), series.get("lastObservedTime"), event.get("lastTimestamp"))
    return max((datetime.datetime.fromisoformat(s) for s in stamps if s), default=_NEVER)


# --- constraints ---------------------------------------------------------------------------------


def overcommitted(client: kube.Kube, namespace: str, nodes: Iterable[str]) -> list[str]:
    """Where the namespace's pods bound to nodes ask for more than a node's allocatable.

    Computed from the API objects with the Kubernetes rules, independently of plumb's own
    accounting, so it can catch that accounting being wrong. Empty when nothing is.
    """
    wanted = set(nodes)
    allocatable = {
        n["metadata"]["name"]: _quantities(n["status"].get("allocatable"))
        for n in client.nodes()
        if n["metadata"]["name"] in wanted
    }
    used: dict[str, dict[str, Decimal]] = {name: {} for name in wanted}
    for pod in client.pods(namespace):
        node = pod["spec"].get("nodeName")
        if node not in used or pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        _add(used[node], {"pods": Decimal(1), **pod_requests(pod["spec"])})
    found = []
    for node, totals in sorted(used.items()):
        for resource, amount in sorted(totals.items()):
            limit = allocatable.get(node, {}).get(resource, Decimal(0))
            if amount > limit:
                found.append(f"{node} over-committed on {resource}: {amount} > {limit}")
    return found


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What a pod takes from its node: its app containers and sidecars together, or an init
    container with the sidecars started before it if that is more, plus the pod overhead."""
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for container in spec.get("initContainers") or []:
        requests = _quantities((container.get("resources") or {}).get("requests"))
        if container.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            _maximise(peak, sidecars)
        else:
            _maximise(peak, _add(dict(sidecars), requests))
    total = dict(sidecars)
    for container in spec.get("containers") or []:
        _add(total, _quantities((container.get("resources") or {}).get("requests")))
    _maximise(total, peak)
    return _add(total, _quantities(spec.get("overhead")))


def _quantities(raw: Mapping[str, Any] | None) -> dict[str, Decimal]:
    parsed: dict[str, Decimal] = {}
    for name, text in (raw or {}).items():
        value: Decimal = k8s_utils.parse_quantity(text)
        parsed[name] = value
    return parsed


def _add(into: dict[str, Decimal], other: Mapping[str, Decimal]) -> dict[str, Decimal]:
    for name, value in other.items():
        into[name] = into.get(name, Decimal(0)) + value
    return into


def _maximise(into: dict[str, Decimal], other: Mapping[str, Decimal]) -> None:
    for name, value in other.items():
        into[name] = max(into.get(name, Decimal(0)), value)


def stop_kube_schedulers(started: Iterable[kubescheduler.KubeScheduler]) -> None:
    """Stop the kube-schedulers a test started, printing each one's log tail, and fail the
    test if one had exited during it."""
    for process in started:
        died = not process.running()
        process.stop()
        print(f"--- kube-scheduler log tail ({process.log}) ---\n{process.tail(40)}")
        assert not died, "kube-scheduler exited during the test; see its log above"
