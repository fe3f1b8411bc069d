"""plumb.backend.records.objects: pod and node bodies read the way kube-scheduler reads them."""

from __future__ import annotations

from typing import Any

import pytest

from plumb.backend.records import objects
from plumb.k8s import quantities
from plumb_dev.testing.builders import make_node, make_pod

GI = 1024**3


def requests_of(body: dict[str, Any]) -> dict[str, int]:
    return objects.pod_requests(body["spec"])


# Effective requests ---------------------------------------------------------------------------


def test_app_containers_are_summed() -> None:
    body = make_pod("web").req(cpu="1", memory="1Gi").container("log", cpu="250m").obj()
    assert requests_of(body) == {"cpu": 1250, "memory": GI}


def test_cpu_is_in_millicores_and_memory_in_bytes() -> None:
    body = make_pod("web").req(cpu="100m", memory="512Mi", ephemeral_storage="1G").obj()
    assert requests_of(body) == {
        "cpu": 100,
        "memory": 512 * 1024**2,
        "ephemeral-storage": 10**9,
    }


def test_init_container_bigger_than_the_app_sets_the_request() -> None:
    body = make_pod("web").req(cpu="1", memory="1Gi").init("migrate", cpu="3", memory="64Mi").obj()
    # Per resource: cpu from the init container, memory from the app.
    assert requests_of(body) == {"cpu": 3000, "memory": GI}


def test_init_containers_run_one_at_a_time() -> None:
    body = make_pod("web").req(cpu="1").init("a", cpu="2").init("b", cpu="2").obj()
    assert requests_of(body) == {"cpu": 2000}


def test_sidecar_adds_to_the_app_total() -> None:
    body = make_pod("web").req(cpu="1").init("proxy", sidecar=True, cpu="500m").obj()
    assert requests_of(body) == {"cpu": 1500}


def test_sidecar_runs_beside_later_init_containers() -> None:
    # The sidecar is running when "migrate" starts: max(1 + 1, 1 + 2) = 3 cpu.
    body = (
        make_pod("web").req(cpu="1").init("proxy", sidecar=True, cpu="1").init("migrate", cpu="2")
    )
    assert requests_of(body.obj()) == {"cpu": 3000}


def test_init_container_before_a_sidecar_does_not_run_beside_it() -> None:
    # "setup" finishes before the sidecar starts: max(2, 1 + 1) = 2 cpu, not 3.
    body = make_pod("web").req(cpu="1").init("setup", cpu="2").init("proxy", sidecar=True, cpu="1")
    assert requests_of(body.obj()) == {"cpu": 2000}


def test_sidecars_accumulate_for_later_init_containers() -> None:
    body = (
        make_pod("web")
        .req(cpu="100m")
        .init("a", sidecar=True, cpu="1")
        .init("b", sidecar=True, cpu="1")
        .init("migrate", cpu="3")
    )
    # Containers: 0.1 + 1 + 1 = 2.1; "migrate" runs beside both sidecars: 2 + 3 = 5.
    assert requests_of(body.obj()) == {"cpu": 5000}


def test_overhead_is_added_on_top() -> None:
    pod = make_pod("web").req(cpu="1").init("migrate", cpu="2").overhead(cpu="250m", memory="120Mi")
    assert requests_of(pod.obj()) == {"cpu": 2250, "memory": 120 * 1024**2}


def test_extended_resources_are_kept() -> None:
    body = make_pod("train").req(cpu="1", **{"nvidia.com/gpu": 2}).obj()
    assert requests_of(body) == {"cpu": 1000, "nvidia.com/gpu": 2}


def test_zero_requests_are_dropped() -> None:
    body = make_pod("web").req(cpu="0", memory="0Mi", **{"example.com/widget": "0"}).obj()
    assert requests_of(body) == {}


def test_a_pod_without_requests_requests_nothing() -> None:
    assert requests_of(make_pod("web").obj()) == {}


def test_pods_is_never_part_of_the_request() -> None:
    # Each pod counts one against the node's pod limit, whatever the spec says.
    assert requests_of(make_pod("web").req(cpu="1", pods="5").obj()) == {"cpu": 1000}


def test_sum_beyond_int64_is_clamped() -> None:
    # Each request is legal; their sum must still fit the cache's int64 arrays.
    body = make_pod("big").req(memory="8Ei").container("more", memory="8Ei").obj()
    assert requests_of(body) == {"memory": quantities.INT64_MAX}


# parse_pod ------------------------------------------------------------------------------------


def test_parse_pod_reads_identity_and_requests() -> None:
    body = (
        make_pod("web", "shop")
        .uid("u-1")
        .created("2024-05-01T10:00:00Z")
        .resource_version("42")
        .req(cpu="500m")
        .scheduler("plumb")
        .node("n1")
        .priority(7)
        .obj()
    )
    pod = objects.parse_pod(body)
    assert (pod.uid, pod.key, pod.scheduler_name, pod.node_name) == (
        "u-1",
        "shop/web",
        "plumb",
        "n1",
    )
    assert (pod.priority, pod.creation_timestamp, pod.resource_version) == (
        7,
        "2024-05-01T10:00:00Z",
        "42",
    )
    assert dict(pod.requests) == {"cpu": 500}
    assert pod.problem is None
    assert (pod.terminal, pod.deleting, pod.gated) == (False, False, False)


def test_scheduler_name_defaults_to_default_scheduler() -> None:
    pod = objects.parse_pod(make_pod("web").obj())
    assert pod.scheduler_name == "default-scheduler"
    assert pod.priority == 0
    assert pod.node_name == ""


@pytest.mark.parametrize(
    ("phase", "terminal"),
    [("Succeeded", True), ("Failed", True), ("Running", False), ("Pending", False)],
)
def test_terminal_phases(phase: str, terminal: bool) -> None:
    assert objects.parse_pod(make_pod("web").phase(phase).obj()).terminal is terminal


def test_deletion_timestamp_means_deleting() -> None:
    assert objects.parse_pod(make_pod("web").terminating("2024-05-01T10:00:00Z").obj()).deleting


def test_scheduling_gates_mean_gated() -> None:
    assert objects.parse_pod(make_pod("web").gate("example.com/wait").obj()).gated
    body = make_pod("web").obj()
    body["spec"]["schedulingGates"] = []
    assert not objects.parse_pod(body).gated


def test_requests_cannot_be_changed_through_the_record() -> None:
    pod = objects.parse_pod(make_pod("web").req(cpu="1").obj())
    with pytest.raises(TypeError):
        pod.requests["cpu"] = 0  # type: ignore[index]


@pytest.mark.parametrize("bad", ["lots", "1 cpu", "1.5.5"])
def test_bad_quantity_is_a_problem_not_an_exception(bad: str) -> None:
    body = make_pod("web").req(cpu=bad, memory="1Gi").obj()
    pod = objects.parse_pod(body)
    assert pod.problem is not None
    assert repr(bad) in pod.problem
    assert pod.problem.startswith("invalid resource request")
    assert dict(pod.requests) == {}
    assert pod.name == "web"


def test_bad_quantity_in_an_init_container_is_a_problem() -> None:
    pod = objects.parse_pod(make_pod("web").init("setup", memory="1Gb").obj())
    assert pod.problem is not None
    assert "'1Gb'" in pod.problem


# parse_node -----------------------------------------------------------------------------------


def test_parse_node_reads_allocatable() -> None:
    body = make_node("n1").capacity(cpu="8", memory="16Gi", pods=30).obj()
    body["status"]["allocatable"] = {"cpu": "7500m", "memory": "15Gi", "pods": "30"}
    node = objects.parse_node(body)
    assert node.name == "n1"
    assert dict(node.allocatable) == {"cpu": 7500, "memory": 15 * GI, "pods": 30}
    assert node.problem is None


def test_allocatable_falls_back_to_capacity() -> None:
    body = make_node("n1").capacity(cpu="2", **{"nvidia.com/gpu": 1}).obj()
    del body["status"]["allocatable"]
    node = objects.parse_node(body)
    assert dict(node.allocatable) == {
        "cpu": 2000,
        "memory": 32 * GI,
        "pods": 110,
        "nvidia.com/gpu": 1,
    }


def test_node_without_status_has_nothing() -> None:
    node = objects.parse_node({"metadata": {"name": "bare"}})
    assert node.name == "bare"
    assert dict(node.allocatable) == {}
    assert node.problem is None


def test_bad_node_quantity_is_a_problem() -> None:
    node = objects.parse_node(make_node("n1").capacity(memory="32 Gi").obj())
    assert node.problem is not None
    assert "'32 Gi'" in node.problem
    assert dict(node.allocatable) == {}
