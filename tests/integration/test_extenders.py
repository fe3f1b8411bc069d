"""kube-scheduler's HTTP extenders (the configuration's ``extenders``), scenario by scenario, with
a programmable extender served by the test (tests/support/extender_server.py) on 127.0.0.1:
what each verb is sent, and what the scheduler makes of the answers: where pods go, which nodes
an extender is asked about, and the FailedScheduling words (an extender's FailedNodes reasons
counted among the filters', its errors repeated verbatim with reason SchedulerError).

Every scenario runs under the real kube-scheduler and under plumb (``SCHEDULERS``), given the
same file: each expectation is what the binary did, and plumb must do the same (docs/extenders.md
says how it does). The research behind the scenarios: /work/notes/extenders-upstream.md, §9 (S1
to S8).

Nodes exist before the scheduler starts (it lists them all before its first cycle), and pods
are created one at a time where the order matters. Node names carry the test's namespace, so
the extender's answers name them in full.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, kubescheduler
from tests.support import side_by_side
from tests.support.extender_server import ExtenderServer, Reply, api_binder
from tests.support.live_cluster import NodeFactory, events_of
from tests.support.plumb_process import PlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.extenders]

SCHEDULERS = side_by_side.SCHEDULERS
PROFILE = "extended"
# No DeviceClass names these, so NodeResourcesFit never hands them to DynamicResources.
GPU = "example.com/extender-gpu"
OTHER = "example.com/extender-other"

# Preferred node affinity (weight 100) to the nodes made with pref="yes".
PREFERRED = {"key": "plumb.test/pref", "operator": "In", "values": ["yes"]}


class Starter(Protocol):
    def __call__(
        self, extenders: Sequence[Mapping[str, Any]], profile: Mapping[str, Any] | None = None
    ) -> side_by_side.Runner: ...


ProfileStarter = Callable[[Mapping[str, Any]], side_by_side.Runner]


@pytest.fixture(name="start", params=SCHEDULERS)
def start_fixture(
    request: pytest.FixtureRequest, control_plane: controlplane.ControlPlane, tmp_path: Path
) -> Iterator[Starter]:
    """Starts the scheduler under test with one profile (``PROFILE``) and these extenders,
    once the test has made its nodes and its extender."""
    yield from _starter(request, control_plane, tmp_path)


@pytest.fixture(name="start_both", params=side_by_side.SCHEDULERS)
def start_both_fixture(
    request: pytest.FixtureRequest, control_plane: controlplane.ControlPlane, tmp_path: Path
) -> Iterator[ProfileStarter]:
    """``start`` with a profile of the test's own and no extenders."""
    starter = _starter(request, control_plane, tmp_path)
    start = next(starter)
    yield lambda profile: start((), profile)
    next(starter, None)


def _starter(
    request: pytest.FixtureRequest, control_plane: controlplane.ControlPlane, tmp_path: Path
) -> Iterator[Starter]:
    started: list[kubescheduler.KubeScheduler] = []

    def start(
        extenders: Sequence[Mapping[str, Any]], profile: Mapping[str, Any] | None = None
    ) -> side_by_side.Runner:
        profiles = [{"schedulerName": PROFILE, **(profile or {})}]
        if request.param == side_by_side.PLUMB:
            config = tmp_path / "scheduler-config.json"
            body = kubescheduler.configuration(
                control_plane, profiles=profiles, extenders=extenders
            )
            config.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
            start_plumb: PlumbFactory = request.getfixturevalue("start_plumb")
            plumb = start_plumb("--config", str(config))
            return side_by_side.Runner(
                name=side_by_side.PLUMB, scheduler_name=PROFILE, log=plumb.log
            )
        process = kubescheduler.start(
            control_plane,
            tmp_path / f"kube-scheduler-{len(started)}",
            profiles=profiles,
            extenders=extenders,
        )
        started.append(process)
        return side_by_side.Runner(
            name=side_by_side.KUBE_SCHEDULER, scheduler_name=PROFILE, log=process.log
        )

    yield start
    side_by_side.stop_kube_schedulers(started)


@pytest.fixture
def extender() -> Iterator[ExtenderServer]:
    with ExtenderServer() as server:
        yield server


def pod(name: str, namespace: str) -> builders.PodBuilder:
    return builders.make_pod(name, namespace).scheduler(PROFILE).grace(0)


Shape = Callable[[str], builders.NodeBuilder]


def node(cpu: str = "4", memory: str = "8Gi", **labels: str) -> Shape:
    return lambda name: (
        builders.make_node(name)
        .capacity(cpu=cpu, memory=memory)
        .label("plumb.test/pref", labels.get("pref", "no"))
    )


def cordoned() -> Shape:
    return lambda name: node()(name).unschedulable()


def nodes(add_node: NodeFactory, namespace: str, **shapes: Shape) -> dict[str, str]:
    """Creates each node as ``<namespace>-<key>``: {key: node name}."""
    return {key: add_node(shape(f"{namespace}-{key}")) for key, shape in shapes.items()}


def pod_name(args: Any) -> str:
    return str(args["Pod"]["metadata"]["name"])


def settle(client: kube.Kube, namespace: str, *names: str) -> dict[str, str | None]:
    return side_by_side.wait_settled(client, namespace, names)


def said(client: kube.Kube, namespace: str, name: str) -> str | None:
    return side_by_side.failed_scheduling(client, namespace, name)


def condition(client: kube.Kube, namespace: str, name: str) -> dict[str, Any]:
    conditions = client.pod(namespace, name)["status"].get("conditions") or []
    return next(c for c in conditions if c["type"] == "PodScheduled")


def bound(client: kube.Kube, namespace: str, name: str, timeout: float = 30) -> str:
    return str(
        kube.wait_for(
            f"{namespace}/{name} to be bound",
            lambda: client.pod(namespace, name)["spec"].get("nodeName"),
            timeout=timeout,
        )
    )


# S1: filter ---------------------------------------------------------------------------------


def test_filter_keeps_what_the_extender_keeps_and_counts_its_reasons(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    extender: ExtenderServer,
    start: Starter,
    words: side_by_side.Words,
) -> None:
    n = nodes(add_node, namespace, n1=node(), n2=node(), n3=node(), n4=cordoned())

    def filter_(args: Any) -> Any:
        sent = {item["metadata"]["name"]: item for item in args["Nodes"]["items"]}
        licence = {n["n1"]: "no licence", n["n2"]: "no licence"}
        want = args["Pod"]["metadata"]["labels"]["want"]
        if want == "n3":
            return {"Nodes": {"items": [sent[n["n3"]]]}, "FailedNodes": licence}
        if want == "none":
            return {
                "Nodes": {"items": []},
                "FailedNodes": licence,
                "FailedAndUnresolvableNodes": {n["n3"]: "rack retired"},
            }
        return {"NodeNames": [n["n1"]]}  # not read from a non-cache-capable extender

    extender.on("filter", filter_)
    start([{"urlPrefix": extender.url + "/x", "filterVerb": "filter"}])

    kube_client.create_pod(pod("p-n3", namespace).label("want", "n3").obj())
    assert settle(kube_client, namespace, "p-n3") == {"p-n3": n["n3"]}
    (request,) = extender.requests("filter")
    assert request.path == "/x/filter"
    assert request.headers["Content-Type"] == "application/json"
    assert request.body["NodeNames"] is None
    assert request.body["Nodes"]["metadata"] == {}
    # The cordoned node, which the framework rejected, is not sent.
    sent = {item["metadata"]["name"] for item in request.body["Nodes"]["items"]}
    assert sent == {n["n1"], n["n2"], n["n3"]}
    assert request.body["Pod"]["metadata"]["name"] == "p-n3"
    assert "managedFields" not in request.body["Pod"]["metadata"]

    kube_client.create_pod(pod("p-none", namespace).label("want", "none").obj())
    assert settle(kube_client, namespace, "p-none") == {"p-none": None}
    histogram = (
        "0/4 nodes are available: 1 node(s) were unschedulable, 1 rack retired, 2 no licence."
    )
    # Only FailedNodes (Unschedulable) are searched for victims.
    assert said(kube_client, namespace, "p-none") == words.without_victims(histogram, 4, 2)

    kube_client.create_pod(pod("p-names", namespace).label("want", "names").obj())
    assert settle(kube_client, namespace, "p-names") == {"p-names": None}
    # The dropped nodes have no status and add no words.
    assert said(kube_client, namespace, "p-names") == words.without_victims(
        "0/4 nodes are available: 1 node(s) were unschedulable.", 4, 0
    )


# S2: prioritize -----------------------------------------------------------------------------


def test_prioritize_weighs_scores_by_weight_times_ten_and_ignores_errors(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    extender: ExtenderServer,
    start: Starter,
) -> None:
    n = nodes(add_node, namespace, n1=node(pref="yes"), n2=node(), n3=node())
    favours = {"p1": {n["n2"]: 10}, "p2": {n["n2"]: 6}}

    def prioritize(args: Any) -> Any:
        name = pod_name(args)
        if name not in favours:
            return Reply(status=500, body={})
        return [{"Host": host, "Score": favours[name].get(host, 0)} for host in args["NodeNames"]]

    extender.on("prio", prioritize)
    start(
        [
            {
                "urlPrefix": extender.url,
                "prioritizeVerb": "prio",
                "weight": 3,
                "nodeCacheCapable": True,
            }
        ]
    )
    placed = {}
    for name in ("p1", "p2", "p3"):
        body = pod(name, namespace).req(cpu="100m", memory="128Mi")
        body.preferred_node_affinity(100, PREFERRED)
        kube_client.create_pod(body.obj())
        placed.update(settle(kube_client, namespace, name))
    # p1: n2 10 * 3 * 10 = 300 beats n1's NodeAffinity 100 * 2 = 200; p2: 6 * 3 * 10 = 180
    # does not; p3: the extender's 500 is ignored (no FailedScheduling).
    assert placed == {"p1": n["n2"], "p2": n["n1"], "p3": n["n1"]}
    assert said(kube_client, namespace, "p3") is None
    bodies = extender.bodies("prio")
    assert [pod_name(b) for b in bodies] == ["p1", "p2", "p3"]
    for body in bodies:
        assert body["Nodes"] is None
        assert sorted(body["NodeNames"]) == sorted(n.values())


# S3: an extender that fails ----------------------------------------------------------------


def test_an_ignorable_extender_that_is_down_is_skipped_for_every_verb(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    extender: ExtenderServer,
    start: Starter,
) -> None:
    n = nodes(add_node, namespace, n1=node(), n2=node(cpu="2", memory="4Gi"))
    extender.stop()
    start(
        [
            {
                "urlPrefix": extender.url,
                "filterVerb": "filter",
                "prioritizeVerb": "prio",
                "weight": 1,
                "bindVerb": "bind",
                "ignorable": True,
            }
        ]
    )
    kube_client.create_pod(pod("p", namespace).req(cpu="1", memory="1Gi").obj())
    assert settle(kube_client, namespace, "p") == {"p": n["n1"]}
    assert said(kube_client, namespace, "p") is None
    # DefaultBinder bound it, after the extender's bind failed; the event is kube-scheduler's.
    (event,) = events_of(kube_client, namespace, "p", "Scheduled")
    assert event["message"] == f"Successfully assigned {namespace}/p to {n['n1']}"


@pytest.mark.long  # in make test-long; the six scenarios of the issue stay in make test
def test_an_extender_that_is_down_fails_the_attempt_in_go_s_words(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    extender: ExtenderServer,
    start: Starter,
) -> None:
    nodes(add_node, namespace, n1=node())
    extender.stop()
    start([{"urlPrefix": extender.url, "filterVerb": "filter"}])
    kube_client.create_pod(pod("p", namespace).req(cpu="1").obj())
    assert settle(kube_client, namespace, "p") == {"p": None}
    url = f"{extender.url}/filter"
    words = f'Post "{url}": dial tcp 127.0.0.1:{extender.port}: connect: connection refused'
    # An error, not a verdict: no preemption words follow.
    assert said(kube_client, namespace, "p") == words
    scheduled = condition(kube_client, namespace, "p")
    assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == (
        "False",
        "SchedulerError",
        words,
    )


@pytest.mark.long  # in make test-long; the six scenarios of the issue stay in make test
def test_a_timeout_a_status_and_an_error_answer_fail_the_attempt(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    extender: ExtenderServer,
    start: Starter,
) -> None:
    nodes(add_node, namespace, n1=node())
    answers = {
        "slow": Reply(body={}, delay=3.0),
        "broken": Reply(status=500, body={}),
        "refusing": Reply(body={"Error": "licence server unreachable"}),
    }
    extender.on("filter", lambda args: answers[pod_name(args)])
    start([{"urlPrefix": extender.url, "filterVerb": "filter", "httpTimeout": "1s"}])
    url = f"{extender.url}/filter"
    expected = {
        "slow": (
            f'Post "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting '
            "headers)"
        ),
        "broken": f"failed filter with extender at URL {url}, code 500",
        "refusing": "licence server unreachable",
    }
    for name in answers:
        kube_client.create_pod(pod(name, namespace).req(cpu="1").obj())
    assert settle(kube_client, namespace, *answers) == dict.fromkeys(answers)
    for name, words in expected.items():
        assert said(kube_client, namespace, name) == words
        assert condition(kube_client, namespace, name)["reason"] == "SchedulerError"


# S4: managed resources ----------------------------------------------------------------------


def gpu_pod(name: str, namespace: str, *, init: bool = False) -> dict[str, Any]:
    """A pod asking for one GPU, in its container or (init) only in an init container."""
    if not init:
        return pod(name, namespace).req(cpu="100m", **{GPU: 1}).obj()
    body = pod(name, namespace).req(cpu="100m").init("setup", cpu="100m").obj()
    resources = body["spec"]["initContainers"][0]["resources"]
    resources["requests"][GPU] = resources.setdefault("limits", {})[GPU] = "1"
    return body


def test_a_managed_resource_ignored_by_the_scheduler_is_left_to_the_extender(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    extender: ExtenderServer,
    start: Starter,
    words: side_by_side.Words,
) -> None:
    # Neither node advertises the GPU: NodeResourcesFit would reject both without the
    # extender's ignoredByScheduler.
    n = nodes(add_node, namespace, n1=node(pref="yes"), n2=node())

    def filter_(args: Any) -> Any:
        if pod_name(args) == "g3":
            return {"NodeNames": [], "FailedNodes": dict.fromkeys(n.values(), "no free gpu")}
        return {"NodeNames": [n["n2"]], "FailedNodes": {n["n1"]: "no free gpu"}}

    extender.on("filter", filter_)
    start(
        [
            {
                "urlPrefix": extender.url,
                "filterVerb": "filter",
                "nodeCacheCapable": True,
                "managedResources": [{"name": GPU, "ignoredByScheduler": True}],
            }
        ]
    )
    plain = pod("plain", namespace).req(cpu="100m")
    plain.preferred_node_affinity(100, PREFERRED)
    kube_client.create_pod(gpu_pod("g1", namespace))
    kube_client.create_pod(gpu_pod("g2", namespace, init=True))
    kube_client.create_pod(plain.obj())
    kube_client.create_pod(pod("o1", namespace).req(cpu="100m", **{OTHER: 1}).obj())
    kube_client.create_pod(gpu_pod("g3", namespace))
    placed = settle(kube_client, namespace, "g1", "g2", "plain", "o1", "g3")
    assert placed == {"g1": n["n2"], "g2": n["n2"], "plain": n["n1"], "o1": None, "g3": None}
    # Only the pods naming the managed resource were sent, each with both nodes.
    asked = {pod_name(body) for body in extender.bodies("filter")}
    assert asked == {"g1", "g2", "g3"}
    assert all(sorted(b["NodeNames"]) == sorted(n.values()) for b in extender.bodies("filter"))
    # A resource no extender manages is checked as ever: no node has any.
    assert said(kube_client, namespace, "o1") == words.post_filter(
        f"0/2 nodes are available: 2 Insufficient {OTHER}.",
        "0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    )
    assert said(kube_client, namespace, "g3") == words.without_victims(
        "0/2 nodes are available: 2 no free gpu.", 2, 2
    )


# S5: bind -----------------------------------------------------------------------------------


def test_the_binding_extender_binds_the_pods_it_manages(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    extender: ExtenderServer,
    start: Starter,
) -> None:
    n = nodes(add_node, namespace, n1=node())
    binder = api_binder(kube_client)
    refused: list[str] = []

    def bind(args: Any) -> Any:
        if args["PodName"] == "g2" and not refused:
            refused.append(args["PodUID"])
            return {"Error": "gpu driver not ready"}
        return binder(args)

    extender.on("bind", bind)
    start(
        [
            {
                "urlPrefix": extender.url,
                "bindVerb": "bind",
                "managedResources": [{"name": GPU, "ignoredByScheduler": True}],
            }
        ]
    )
    kube_client.create_pod(gpu_pod("g1", namespace))
    assert settle(kube_client, namespace, "g1") == {"g1": n["n1"]}
    uid = kube_client.pod(namespace, "g1")["metadata"]["uid"]
    assert extender.bodies("bind") == [
        {"PodName": "g1", "PodNamespace": namespace, "PodUID": uid, "Node": n["n1"]}
    ]
    (event,) = events_of(kube_client, namespace, "g1", "Scheduled")
    assert event["message"] == f"Successfully assigned {namespace}/g1 to {n['n1']}"

    kube_client.create_pod(pod("p", namespace).req(cpu="100m").obj())
    assert settle(kube_client, namespace, "p") == {"p": n["n1"]}
    assert [b["PodName"] for b in extender.bodies("bind")] == ["g1"]  # DefaultBinder bound p

    kube_client.create_pod(gpu_pod("g2", namespace))
    assert bound(kube_client, namespace, "g2") == n["n1"]
    assert said(kube_client, namespace, "g2") == "gpu driver not ready"
    assert [b["PodName"] for b in extender.bodies("bind")] == ["g1", "g2", "g2"]
    (event,) = events_of(kube_client, namespace, "g2", "Scheduled")
    assert event["message"] == f"Successfully assigned {namespace}/g2 to {n['n1']}"


# S6: preempt --------------------------------------------------------------------------------


def occupied(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory
) -> tuple[dict[str, str], dict[str, str]]:
    """Nodes n1 and n2 (2 cpu each), full: v1 (priority 200) on n1, v2 (100) on n2. Without an
    extender DefaultPreemption would evict v2 (the lowest highest-priority victim). {key:
    node}, {victim: uid}."""
    n = nodes(add_node, namespace, n1=node(cpu="2"), n2=node(cpu="2"))
    uids = {}
    for name, key, priority in (("v1", "n1", 200), ("v2", "n2", 100)):
        body = pod(name, namespace).priority(priority).req(cpu="2").node(n[key]).obj()
        uids[name] = kube_client.create_pod(body)["metadata"]["uid"]
    return n, uids


def test_the_preempting_extender_chooses_the_victims(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    extender: ExtenderServer,
    start: Starter,
    words: side_by_side.Words,
) -> None:
    n, uids = occupied(kube_client, namespace, add_node)
    extender.on(
        "preempt",
        lambda args: {
            "NodeNameToMetaVictims": {
                n["n1"]: {"Pods": [{"UID": uids["v1"]}], "NumPDBViolations": 0}
            }
        },
    )
    start([{"urlPrefix": extender.url, "preemptVerb": "preempt"}])
    kube_client.create_pod(pod("h", namespace).priority(1000).req(cpu="2").obj())
    assert bound(kube_client, namespace, "h") == n["n1"]
    assert said(kube_client, namespace, "h") == words.found(
        "0/2 nodes are available: 2 Insufficient cpu.", n["n1"], 1
    )
    names = {p["metadata"]["name"] for p in kube_client.pods(namespace)}
    assert names == {"h", "v2"}
    (request,) = extender.bodies("preempt")
    assert request["NodeNameToMetaVictims"] is None
    victims = request["NodeNameToVictims"]
    assert {node: [p["metadata"]["uid"] for p in v["Pods"]] for node, v in victims.items()} == {
        n["n1"]: [uids["v1"]],
        n["n2"]: [uids["v2"]],
    }
    assert all(v["NumPDBViolations"] == 0 for v in victims.values())


@pytest.mark.long  # in make test-long; the six scenarios of the issue stay in make test
def test_a_preempting_extender_that_keeps_no_victims_leaves_the_pod_pending(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    extender: ExtenderServer,
    start: Starter,
    words: side_by_side.Words,
) -> None:
    n, uids = occupied(kube_client, namespace, add_node)
    answers = {
        "none": {"NodeNameToMetaVictims": {}},
        "empty": {"NodeNameToMetaVictims": {n["n1"]: {"Pods": []}}},
    }
    extender.on("preempt", lambda args: answers[pod_name(args)])
    start([{"urlPrefix": extender.url, "preemptVerb": "preempt", "nodeCacheCapable": True}])
    for name in answers:
        kube_client.create_pod(pod(name, namespace).priority(1000).req(cpu="2").obj())
    assert settle(kube_client, namespace, *answers) == dict.fromkeys(answers)
    histogram = "0/2 nodes are available: 2 Insufficient cpu."
    assert said(kube_client, namespace, "none") == words.post_filter(
        histogram, "no candidate node for preemption"
    )
    # An extender's error ends the PostFilter plugins at once: DefaultPreemption's words only.
    assert said(kube_client, namespace, "empty") == (
        f'{histogram} preemption: expected at least one victim pod on node "{n["n1"]}"'
    )
    assert {p["metadata"]["name"] for p in kube_client.pods(namespace)} >= {"v1", "v2"}
    request = extender.bodies("preempt")[0]
    assert request["NodeNameToVictims"] is None
    assert request["NodeNameToMetaVictims"] == {
        n["n1"]: {"Pods": [{"UID": uids["v1"]}], "NumPDBViolations": 0},
        n["n2"]: {"Pods": [{"UID": uids["v2"]}], "NumPDBViolations": 0},
    }


# S7: the nodes a non-cache-capable filter returns are scored as empty -----------------------


@pytest.mark.long  # in make test-long
@pytest.mark.parametrize("cache_capable", [False, True], ids=["whole-nodes", "node-names"])
def test_nodes_returned_whole_are_scored_as_if_empty(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    extender: ExtenderServer,
    start: Starter,
    cache_capable: bool,
) -> None:
    n = nodes(add_node, namespace, a=node(cpu="16", memory="32Gi"), b=node(cpu="4"))
    busy = pod("busy", namespace).req(cpu="15", memory="30Gi").node(n["a"])
    kube_client.create_pod(busy.obj())
    if cache_capable:
        extender.on("filter", lambda args: {"NodeNames": args["NodeNames"]})
    else:
        extender.on("filter", lambda args: {"Nodes": args["Nodes"]})
    start([{"urlPrefix": extender.url, "filterVerb": "filter", "nodeCacheCapable": cache_capable}])
    kube_client.create_pod(pod("p", namespace).req(cpu="1", memory="2Gi").obj())
    # Whole nodes come back as new NodeInfos without pods: a looks empty (93 + 100 against b's
    # 75 + 100). By name, the real use counts: a scores 0 + 100.
    assert settle(kube_client, namespace, "p") == {"p": n["b" if cache_capable else "a"]}


# S8: two filters, the ignorable one last ---------------------------------------------------


@pytest.mark.long  # in make test-long; the six scenarios of the issue stay in make test
def test_ignorable_extenders_filter_after_the_others(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start: Starter,
) -> None:
    n = nodes(add_node, namespace, n1=node(), n2=node(), n3=node())
    with ExtenderServer() as first, ExtenderServer() as second:
        first.on(
            "filter",
            lambda args: {"NodeNames": [x for x in args["NodeNames"] if x in (n["n1"], n["n2"])]},
        )
        second.on(
            "filter",
            lambda args: {
                "NodeNames": [x for x in args["NodeNames"] if x in (n["n2"], n["n3"])],
                "FailedNodes": {n["n1"]: "not in rack 2"},
            },
        )
        start(
            [
                {
                    "urlPrefix": first.url,
                    "filterVerb": "filter",
                    "nodeCacheCapable": True,
                    "ignorable": True,
                },
                {"urlPrefix": second.url, "filterVerb": "filter", "nodeCacheCapable": True},
            ]
        )
        kube_client.create_pod(pod("p", namespace).req(cpu="100m").obj())
        assert settle(kube_client, namespace, "p") == {"p": n["n2"]}
        # The file's second extender (not ignorable) is asked first, about every node; the
        # ignorable one only about what it kept.
        assert sorted(second.bodies("filter")[0]["NodeNames"]) == sorted(n.values())
        assert sorted(first.bodies("filter")[0]["NodeNames"]) == [n["n2"], n["n3"]]


# NodeResourcesFit's ignored resources, from the file alone (what ignoredByScheduler feeds) -----


@pytest.mark.long  # in make test-long
@pytest.mark.differential
def test_the_fit_filter_skips_ignored_resources_and_groups(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_both: ProfileStarter,
    words: side_by_side.Words,
) -> None:
    n = nodes(add_node, namespace, n1=node())
    start_both(
        {
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "ignoredResources": [GPU],
                        "ignoredResourceGroups": ["ignored.example"],
                    },
                }
            ]
        }
    )
    asks = {"by-name": GPU, "by-group": "ignored.example/fpga", "checked": OTHER}
    for name, resource in asks.items():
        kube_client.create_pod(pod(name, namespace).req(cpu="100m", **{resource: 2}).obj())
    placed = settle(kube_client, namespace, *asks)
    assert placed == {"by-name": n["n1"], "by-group": n["n1"], "checked": None}
    assert said(kube_client, namespace, "checked") == words.post_filter(
        f"0/1 nodes are available: 1 Insufficient {OTHER}.",
        "0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
    )
