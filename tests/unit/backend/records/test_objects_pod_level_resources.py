"""Pod-level resources (``spec.resources``, PodLevelResources: beta and on by default in
kube-scheduler v1.34): what a pod requests, what the resource scorers count for it, its QoS
class, and where it fits, as kube-scheduler v1.34.4 computes them."""

from __future__ import annotations

import pytest

from plumb.backend.records import objects
from plumb.framework import cycle
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import small_clusters

GI = 1024**3
MI = 1024**2
DEFAULT_CPU, DEFAULT_MEMORY = objects.DEFAULT_MILLI_CPU, objects.DEFAULT_MEMORY


# What the pod requests ----------------------------------------------------------------------


def test_pod_level_requests_replace_the_containers_sum() -> None:
    body = (
        make_pod("web")
        .req(cpu="1", memory="1Gi")
        .container("log", cpu="250m")
        .pod_resources(requests={"cpu": "3", "memory": "2Gi"})
        .obj()
    )
    assert objects.pod_requests(body["spec"]) == {"cpu": 3000, "memory": 2 * GI}


def test_a_resource_the_pod_level_leaves_out_keeps_the_containers_sum() -> None:
    body = (
        make_pod("web")
        .req(cpu="1", memory="1Gi")
        .container("log", memory="512Mi")
        .pod_resources(requests={"cpu": "2"})
        .obj()
    )
    assert objects.pod_requests(body["spec"]) == {"cpu": 2000, "memory": GI + 512 * MI}


def test_pod_level_requests_replace_the_init_container_peak_too() -> None:
    body = (
        make_pod("web")
        .req(cpu="1")
        .init("migrate", cpu="3")
        .init("proxy", sidecar=True, cpu="1")
        .pod_resources(requests={"cpu": "5"})
        .obj()
    )
    assert objects.pod_requests(body["spec"]) == {"cpu": 5000}


def test_overhead_is_added_on_top_of_the_pod_level_request() -> None:
    body = (
        make_pod("web")
        .req(cpu="1")
        .pod_resources(requests={"cpu": "2", "memory": "1Gi"})
        .overhead(cpu="250m", memory="120Mi")
        .obj()
    )
    assert objects.pod_requests(body["spec"]) == {"cpu": 2250, "memory": GI + 120 * MI}


def test_hugepages_may_be_set_at_pod_level() -> None:
    body = (
        make_pod("web")
        .req(cpu="1", **{"hugepages-2Mi": "2Mi"})
        .pod_resources(requests={"hugepages-2Mi": "8Mi"})
        .obj()
    )
    assert objects.pod_requests(body["spec"]) == {"cpu": 1000, "hugepages-2Mi": 8 * MI}


def test_only_cpu_memory_and_hugepages_are_taken_from_the_pod_level() -> None:
    # The API server refuses other names at pod level; kube-scheduler ignores them if present.
    body = (
        make_pod("web")
        .req(cpu="1", ephemeral_storage="1Gi", **{"example.com/gpu": 1})
        .pod_resources(requests={"ephemeral-storage": "5Gi", "example.com/gpu": "4"})
        .obj()
    )
    assert objects.pod_requests(body["spec"]) == {
        "cpu": 1000,
        "ephemeral-storage": GI,
        "example.com/gpu": 1,
    }


def test_pod_level_limits_alone_change_no_request() -> None:
    # The API server defaults pod-level requests from limits; the scheduler reads requests only.
    body = make_pod("web").req(cpu="1").pod_resources(limits={"cpu": "4", "memory": "4Gi"}).obj()
    assert objects.pod_requests(body["spec"]) == {"cpu": 1000}


def test_a_bad_pod_level_quantity_is_a_problem_not_an_exception() -> None:
    pod = small_clusters.pod(
        make_pod("web").req(cpu="1").pod_resources(requests={"cpu": "lots"}), "pending"
    )
    assert pod.problem is not None
    assert "lots" in pod.problem
    assert pod.requests == {}


# What the resource scorers count (non-zero requests) --------------------------------------------


def test_without_pod_level_requests_each_container_asking_nothing_counts_the_defaults() -> None:
    pod = small_clusters.pod(make_pod("web").req(cpu="500m").container("log"), "pending")
    assert pod.nonzero == (500 + DEFAULT_CPU, 2 * DEFAULT_MEMORY)
    assert pod.nonzero_incoming is None
    assert pod.scored_nonzero == pod.nonzero


# Being scheduled, NodeResourcesFit's scorer leaves pod-level requests out (its
# resourceAllocationScorer lacks the PodLevelResources switch): the containers' requests with
# the defaults, plus the overhead. Seen on kube-scheduler v1.37.2 (test_pod_level_resources).


def test_pod_level_requests_count_as_they_are() -> None:
    pod = small_clusters.pod(
        make_pod("web").container("log").pod_resources(requests={"cpu": "2", "memory": "1Gi"}),
        "pending",
    )
    assert pod.nonzero == (2000, GI)
    assert pod.scored_nonzero == (2 * DEFAULT_CPU, 2 * DEFAULT_MEMORY)


def test_a_resource_set_nowhere_gets_the_default_per_container() -> None:
    # Pod-level memory only, no container names cpu: 100m for each of the two containers.
    pod = small_clusters.pod(
        make_pod("web").container("log").pod_resources(requests={"memory": "1Gi"}), "pending"
    )
    assert pod.nonzero == (2 * DEFAULT_CPU, GI)
    assert pod.scored_nonzero == (2 * DEFAULT_CPU, 2 * DEFAULT_MEMORY)


def test_placed_and_scored_differ_when_some_containers_name_cpu_and_others_do_not() -> None:
    # On a node (CalculateResource): cpu is named somewhere, so no default: 500m. Being
    # scheduled (the scorers' calculatePodResourceRequest): 100m for "log" too: 600m.
    pod = small_clusters.pod(
        make_pod("web").req(cpu="500m").container("log").pod_resources(requests={"memory": "1Gi"}),
        "pending",
    )
    assert pod.nonzero == (500, GI)
    assert pod.nonzero_incoming == (500 + DEFAULT_CPU, 2 * DEFAULT_MEMORY)
    assert pod.scored_nonzero == (500 + DEFAULT_CPU, 2 * DEFAULT_MEMORY)


def test_overhead_naming_cpu_suppresses_the_default_on_the_node_only() -> None:
    pod = small_clusters.pod(
        make_pod("web").pod_resources(requests={"memory": "1Gi"}).overhead(cpu="250m"), "pending"
    )
    assert pod.nonzero == (250, GI)
    assert pod.scored_nonzero == (DEFAULT_CPU + 250, DEFAULT_MEMORY)


def test_an_explicit_zero_request_is_not_replaced_by_the_default() -> None:
    pod = small_clusters.pod(make_pod("web").req(cpu="0", memory="0"), "pending")
    assert pod.nonzero == (0, 0)


def test_pod_level_requests_of_unsupported_names_only_are_not_pod_level_requests() -> None:
    pod = small_clusters.pod(
        make_pod("web").req(cpu="500m").container("log").pod_resources(requests={"pods": "3"}),
        "pending",
    )
    assert pod.nonzero == (500 + DEFAULT_CPU, 2 * DEFAULT_MEMORY)
    assert pod.nonzero_incoming is None


# QoS class (when status.qosClass is missing) ----------------------------------------------------


@pytest.mark.parametrize(
    ("requests", "limits", "expected"),
    [
        ({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}, objects.GUARANTEED),
        ({"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"}, objects.BURSTABLE),
        ({"cpu": "1"}, {"cpu": "1"}, objects.BURSTABLE),  # limits must name cpu and memory
        ({"cpu": "1"}, None, objects.BURSTABLE),
        (None, None, objects.BEST_EFFORT),  # the containers' requests do not count then
    ],
)
def test_pod_level_resources_alone_decide_the_qos_class(
    requests: dict[str, str] | None, limits: dict[str, str] | None, expected: str
) -> None:
    body = (
        make_pod("web")
        .req(cpu="100m", memory="64Mi")
        .pod_resources(requests=requests, limits=limits)
        .obj()
    )
    assert objects.qos_class(body["spec"]) == expected


def test_container_qos_compares_the_sums_of_requests_and_limits() -> None:
    # ComputePodQOS sums across containers: 1 + 2 = 3 cpu requested and limited.
    body = make_pod("web").obj()
    body["spec"]["containers"] = [
        {
            "name": "a",
            "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}},
        },
        {
            "name": "b",
            "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        },
    ]
    assert objects.qos_class(body["spec"]) == objects.GUARANTEED
    body["spec"]["containers"][1]["resources"]["limits"].pop("memory")
    assert objects.qos_class(body["spec"]) == objects.BURSTABLE


def test_a_container_request_left_out_takes_its_limit() -> None:
    body = make_pod("web").obj()
    body["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    assert objects.qos_class(body["spec"]) == objects.GUARANTEED


# Where it fits ------------------------------------------------------------------------------


def test_a_pod_level_request_above_the_node_is_insufficient_cpu() -> None:
    cache = small_clusters.cluster(
        [make_node("n1").capacity(cpu="2"), make_node("n2").capacity(cpu="2")]
    )
    # Its container asks 500m, which would fit; the pod as a whole asks 3 cpu.
    big = make_pod("big").req(cpu="500m").pod_resources(requests={"cpu": "3"})
    decision = cycle.schedule(small_clusters.pod(big, "pending"), cache.snapshot(), cache)
    assert decision.node is None
    assert decision.message == "0/2 nodes are available: 2 Insufficient cpu."


def test_a_bound_pod_takes_its_pod_level_request_from_the_node() -> None:
    bound = make_pod("bound").req(cpu="100m").node("n1").pod_resources(requests={"cpu": "1500m"})
    cache = small_clusters.cluster([make_node("n1").capacity(cpu="2")])
    cache.add_pod(small_clusters.pod(bound, "bound-0"))
    assert cache.nodes.requested("n1")["cpu"] == 1500
    decision = small_clusters.schedule(cache, make_pod("next").req(cpu="1"))
    assert decision.node is None
    assert decision.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_a_pod_level_request_smaller_than_it_looks_fits() -> None:
    # Containers ask nothing, pod level 1 cpu: fits beside a pod holding 1 of 2 cpu.
    cache = small_clusters.cluster(
        [make_node("n1").capacity(cpu="2")], bound=[make_pod("b").req(cpu="1").node("n1")]
    )
    web = make_pod("web").container("log").pod_resources(requests={"cpu": "1"})
    assert cycle.schedule(small_clusters.pod(web, "pending"), cache.snapshot(), cache).node == "n1"


def test_the_scorers_count_a_bound_pods_pod_level_request() -> None:
    # n1 holds a pod whose container asks 100m but which asks 1500m as a whole; n2 one asking
    # 1 cpu. LeastAllocated prefers n2, the less used once the pod level counts.
    heavy = make_pod("heavy").req(cpu="100m", memory="1Gi").node("n1")
    heavy = heavy.pod_resources(requests={"cpu": "1500m"})
    cache = small_clusters.cluster(
        [make_node("n1").capacity(cpu="4"), make_node("n2").capacity(cpu="4")],
        bound=[make_pod("light").req(cpu="1", memory="1Gi").node("n2")],
    )
    cache.add_pod(small_clusters.pod(heavy, "heavy"))
    assert (
        small_clusters.schedule(cache, make_pod("web").req(cpu="100m", memory="1Gi")).node == "n2"
    )
