"""NodeDeclaredFeatures as each release's kube-scheduler runs it: what a pod needs (component-
helpers' InferForScheduling over the release's registry), nodes lacking it rejected with the
release's words as the last filter, UnschedulableAndUnresolvable, and nothing at all where the
gate is off (plugins/nodedeclaredfeatures/nodedeclaredfeatures.go)."""

from __future__ import annotations

from typing import Any

import pytest

from plumb import scheduler as scheduler_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.records import objects
from plumb.framework import cycle, emulation, scoring, traces
from plumb.framework.plugins import nodedeclaredfeatures, noderesourcesfit, tainttoleration
from plumb.kernel import compiled, reference
from plumb.preemption import search
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support.small_clusters import cluster, pod, statics

KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])
RESTART_ALL = objects.RESTART_ALL_CONTAINERS
USERNS = objects.USER_NAMESPACES_HOST_NETWORK
BIND_MOUNT = objects.VOLUME_BIND_MOUNT_OPTIONS
UNSATISFIED = "node(s) didn't match Pod's required features"
V135 = "node declared features check failed - unsatisfied requirements: " + RESTART_ALL
HIGH = 1000


def _profile(minor: int, **gates: bool) -> scoring.Profile:
    return scoring.Profile(kube=emulation.emulate(minor, gates))


def _restarting(name: str = "restarting") -> PodBuilder:
    return make_pod(name).restart_all_on_exit()


def _host_network_userns(builder: PodBuilder) -> PodBuilder:
    builder._spec.update(hostNetwork=True, hostUsers=False)
    return builder


def _bind_mount(builder: PodBuilder, *, where: str = "containers") -> PodBuilder:
    spec = builder._spec
    if where == "ephemeralContainers":
        spec[where] = [{"name": "debug", "image": "busybox"}]
    spec[where][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data", "bindMountOptions": ["nosuid"]}
    ]
    spec["volumes"] = [{"name": "data", "emptyDir": {}}]
    return builder


def _decide(c: cache_module.Cache, builder: PodBuilder, profile: scoring.Profile) -> Any:
    prepared = cycle.prepare([pod(builder, "uid-incoming")], c.snapshot(), c, profile)
    assert prepared.compiled is not None
    result = reference.run(prepared.compiled.cluster, prepared.compiled.batch)
    return cycle.explain(prepared.compiled, result)[0]


# What a pod needs ----------------------------------------------------------------------------


def test_the_spec_names_the_features_it_needs() -> None:
    def needs(builder: PodBuilder) -> frozenset[str]:
        return pod(builder, "uid").needed_features

    assert needs(make_pod("plain")) == frozenset()
    assert needs(_restarting()) == {RESTART_ALL}
    # In an init container too; a rule that restarts only its own container needs nothing.
    init = make_pod("init").init("setup")
    init._spec["initContainers"][0].update(
        restartPolicy="Never",
        restartPolicyRules=[
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [3]}}
        ],
    )
    assert needs(init) == {RESTART_ALL}
    own = make_pod("own").restart_all_on_exit()
    own._spec["containers"][0]["restartPolicyRules"][0]["action"] = "Restart"
    assert needs(own) == frozenset()
    # hostNetwork with user namespaces (hostUsers false, not merely unset).
    assert needs(_host_network_userns(make_pod("userns"))) == {USERNS}
    unset = make_pod("unset")
    unset._spec["hostNetwork"] = True
    assert needs(unset) == frozenset()
    # bindMountOptions on a mount of any container, an ephemeral one included.
    assert needs(_bind_mount(make_pod("mount"))) == {BIND_MOUNT}
    assert needs(_bind_mount(make_pod("debug"), where="ephemeralContainers")) == {BIND_MOUNT}
    everything = _bind_mount(_host_network_userns(_restarting("all")))
    assert needs(everything) == {RESTART_ALL, USERNS, BIND_MOUNT}


@pytest.mark.parametrize(
    ("minor", "required"),
    [
        (34, frozenset()),  # no such plugin
        (35, frozenset({RESTART_ALL})),  # ch@0.35.4 features/registry.go
        (36, frozenset({RESTART_ALL, USERNS})),  # ch@0.36.3: + usernamespaceshostnetwork
        (37, frozenset({RESTART_ALL, USERNS, BIND_MOUNT})),  # ch@0.37.2: + volumebindmountoptions
    ],
)
def test_each_release_requires_what_its_registry_knows(
    minor: int, required: frozenset[str]
) -> None:
    everything = pod(_bind_mount(_host_network_userns(_restarting("all"))), "uid")
    release = emulation.emulate(minor).declared_features
    assert nodedeclaredfeatures.required(everything, release) == required


def test_nodes_declared_features_are_read_and_matched_as_a_whole() -> None:
    nodes = statics(
        make_node("a").declared_features(RESTART_ALL, "SomeFutureFeature"),
        make_node("b").declared_features(USERNS),
        make_node("c"),
    )
    assert nodes.nodes[0].declared_features == (RESTART_ALL, "SomeFutureFeature")
    assert nodedeclaredfeatures.filter(frozenset({RESTART_ALL}), nodes).tolist() == [
        False,
        True,
        True,
    ]
    both = frozenset({RESTART_ALL, USERNS})
    assert nodedeclaredfeatures.filter(both, nodes).tolist() == [True, True, True]


# Decisions -----------------------------------------------------------------------------------


@KERNELS
def test_the_pod_goes_only_where_the_feature_is_declared(kernel: Any) -> None:
    c = cluster(
        [
            make_node("a").capacity(cpu="8"),  # the emptiest: every score prefers it
            make_node("b").capacity(cpu="2").declared_features(RESTART_ALL),
        ]
    )
    prepared = cycle.prepare([pod(_restarting().req(cpu="1"), "uid")], c.snapshot(), c)
    assert prepared.compiled is not None
    (decision,) = cycle.explain(
        prepared.compiled, kernel(prepared.compiled.cluster, prepared.compiled.batch)
    )
    assert decision.node == "b"
    assert decision.feasible == 1
    # A pod that needs nothing goes to the emptier node.
    assert _decide(c, make_pod("plain").req(cpu="1"), scoring.DEFAULT).node == "a"


@pytest.mark.parametrize(
    ("minor", "message"),
    [
        (36, f"0/2 nodes are available: 2 {UNSATISFIED}."),
        (37, f"0/2 nodes are available: 2 {UNSATISFIED}."),
    ],
)
def test_no_node_declaring_it_is_unresolvable_with_the_releases_words(
    minor: int, message: str
) -> None:
    c = cluster([make_node("a"), make_node("b").declared_features(USERNS)])
    decision = _decide(c, _restarting(), _profile(minor))
    assert decision.node is None
    assert decision.message == message
    assert decision.unresolvable  # preemption is not tried
    assert decision.plugins == {nodedeclaredfeatures.NAME}
    # The trace line's "rejected" names the plugin.
    prepared = cycle.prepare([decision.pod], c.snapshot(), c, _profile(minor))
    assert prepared.compiled is not None
    plugin_of = {r.message: r.plugin for r in prepared.compiled.static_reasons}
    rejected = traces.rejections(decision, plugin_of)
    assert list(rejected) == [nodedeclaredfeatures.NAME]
    assert rejected[nodedeclaredfeatures.NAME].nodes == 2


def test_v1_35_with_its_gate_on_lists_the_missing_feature() -> None:
    c = cluster([make_node("a"), make_node("b")])
    decision = _decide(c, _restarting(), _profile(35, NodeDeclaredFeatures=True))
    assert decision.message == f"0/2 nodes are available: 2 {V135}."
    assert decision.unresolvable


@pytest.mark.parametrize(
    "profile",
    [
        _profile(34),  # no gate, no plugin
        _profile(35),  # alpha, off by default
        _profile(36, NodeDeclaredFeatures=False),
        scoring.Profile(filters=frozenset(scoring.FILTERS) - {nodedeclaredfeatures.NAME}),
    ],
    ids=["v1.34", "v1.35", "v1.36-gate-off", "v1.37-plugin-disabled"],
)
def test_inert_where_the_gate_is_off_or_the_plugin_disabled(profile: scoring.Profile) -> None:
    c = cluster([make_node("a"), make_node("b")])
    decision = _decide(c, _bind_mount(_host_network_userns(_restarting())), profile)
    assert decision.node is not None
    assert decision.feasible == 2


@KERNELS
def test_a_node_failing_an_earlier_filter_reports_that_filter(kernel: Any) -> None:
    # Every node lacks the feature; "tainted" also has an untolerated taint (checked first),
    # "small" too little cpu (NodeResourcesFit, checked before it): they report those.
    c = cluster(
        [
            make_node("plain"),
            make_node("small").capacity(cpu="1"),
            make_node("tainted").taint("dedicated", "gpu"),
        ]
    )
    prepared = cycle.prepare([pod(_restarting().req(cpu="2"), "uid")], c.snapshot(), c)
    assert prepared.compiled is not None
    (decision,) = cycle.explain(
        prepared.compiled, kernel(prepared.compiled.cluster, prepared.compiled.batch)
    )
    assert decision.message == (
        f"0/3 nodes are available: 1 Insufficient cpu, 1 {UNSATISFIED}, "
        "1 node(s) had untolerated taint(s)."
    )
    assert decision.plugins == {
        nodedeclaredfeatures.NAME,
        noderesourcesfit.NAME,
        tainttoleration.NAME,
    }
    # More cpu than "small" has at all would be unresolvable there; 2 of its 1 is.
    assert decision.unresolvable


def test_replicas_needing_different_features_do_not_share_a_static_row() -> None:
    c = cluster([make_node("a").declared_features(RESTART_ALL), make_node("b")])
    pods = [pod(_restarting("r1"), "uid-r1"), pod(make_pod("p"), "uid-p")]
    prepared = cycle.prepare(pods, c.snapshot(), c)
    assert prepared.compiled is not None
    assert prepared.compiled.batch.static_row.tolist() == [0, 1]
    codes = prepared.compiled.batch.static_code.tolist()
    # "b" fails the restarting pod's filter checked last (a negative code), nothing else.
    assert codes[0][0] == 0
    assert codes[0][1] < 0
    assert prepared.compiled.static_reasons[-codes[0][1] - 1].plugin == nodedeclaredfeatures.NAME
    assert codes[1] == [0, 0]


# Preemption ----------------------------------------------------------------------------------


def test_preemption_searches_no_node_lacking_the_feature() -> None:
    # "a" lacks the feature: preemption would not help there, however many low pods it holds.
    c = cluster(
        [
            make_node("a").capacity(cpu="2"),
            make_node("b").capacity(cpu="2").declared_features(RESTART_ALL),
        ],
        bound=[
            make_pod("low-a").node("a").req(cpu="2"),
            make_pod("low-b1").node("b").req(cpu="1"),
            make_pod("low-b2").node("b").req(cpu="1").priority(5),
        ],
    )
    vip = pod(_restarting("vip").req(cpu="1").priority(HIGH), "vip")
    found = search.search(vip, c.snapshot(), c, reference.run)
    assert found is not None
    assert found.outcome.node == "b"
    assert [v.name for v in found.victims] == ["low-b1"]
    assert found.searched == 2  # both fail NodeResourcesFit first: both are searched...
    # ...but "a", even emptied, lacks the feature: its reason is the plugin's.
    nothing_on_b = cluster(
        [make_node("a").capacity(cpu="2"), make_node("b").capacity(cpu="2")],
        bound=[make_pod("low-a").node("a").req(cpu="2")],
    )
    refused = search.search(vip, nothing_on_b.snapshot(), nothing_on_b, compiled.run)
    assert refused is not None
    assert refused.outcome.node is None
    assert refused.post_filter_message() == (
        "preemption: 0/2 nodes are available: "
        f"1 Preemption is not helpful for scheduling, 1 {UNSATISFIED}."
    )


def test_a_host_port_freed_still_leaves_the_feature_missing() -> None:
    # "a" fails NodePorts first (the holder is of lower priority) and lacks the feature: the
    # what-if without the holder must still reject it.
    c = cluster(
        [make_node("a")],
        bound=[make_pod("holder").node("a").host_port(8080)],
    )
    vip = pod(_restarting("vip").host_port(8080).priority(HIGH), "vip")
    found = search.search(vip, c.snapshot(), c, reference.run)
    assert found is not None
    assert found.searched == 1
    assert found.outcome.node is None
    assert found.post_filter_message() == (f"preemption: 0/1 nodes are available: 1 {UNSATISFIED}.")


# Queueing hints ------------------------------------------------------------------------------


def test_a_change_of_declared_features_may_help() -> None:
    def node(*features: str) -> objects.NodeInfo:
        return objects.parse_node(make_node("n").declared_features(*features).obj())

    helps = scheduler_module.node_change_helps
    assert helps(node(), node(RESTART_ALL)) == {nodedeclaredfeatures.NAME}
    assert helps(node(RESTART_ALL), node(RESTART_ALL, USERNS)) == {nodedeclaredfeatures.NAME}
    assert helps(node(RESTART_ALL), node(RESTART_ALL)) == frozenset()
