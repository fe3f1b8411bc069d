"""A pod being resized in place counts what its status reports, as each release's
component-helpers resource/helpers.go PodRequests reads it: up to v1.36 each container the
largest of its spec, actuated and allocated requests; from v1.37 (#140047) the largest of the
three totals; pod-level requests from the status with InPlacePodLevelResourcesVerticalScaling."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from plumb.backend.records import objects
from plumb_dev.testing.builders import PodBuilder, make_pod

GI = 1 << 30
MI = 1 << 20
V134 = objects.ResizeAccounting(pod_totals=False, pod_level_status=False)
V136 = objects.ResizeAccounting(pod_totals=False, pod_level_status=True)
V137 = objects.NEWEST_RESIZE
RELEASES = {"v1.34": V134, "v1.36": V136, "v1.37": V137}


def _status(
    containers: Mapping[str, tuple[str | None, str | None]] | None = None,
    *,
    init: Mapping[str, tuple[str | None, str | None]] | None = None,
    infeasible: bool = False,
    pod: tuple[Mapping[str, str], Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """A status as the kubelet writes it: per container (actuated cpu, allocated cpu), None
    leaving the field out; ``pod``: (status.resources.requests, status.allocatedResources)."""

    def statuses(named: Mapping[str, tuple[str | None, str | None]]) -> list[dict[str, Any]]:
        out = []
        for name, (actuated, allocated) in named.items():
            entry: dict[str, Any] = {"name": name}
            if actuated is not None:
                entry["resources"] = {"requests": {"cpu": actuated}}
            if allocated is not None:
                entry["allocatedResources"] = {"cpu": allocated}
            out.append(entry)
        return out

    status: dict[str, Any] = {"phase": "Running"}
    if containers:
        status["containerStatuses"] = statuses(containers)
    if init:
        status["initContainerStatuses"] = statuses(init)
    if infeasible:
        status["conditions"] = [
            {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
        ]
    if pod is not None:
        status["resources"] = {"requests": dict(pod[0])}
        status["allocatedResources"] = dict(pod[1])
    return status


def _parse(
    builder: PodBuilder, status: Mapping[str, Any], resize: objects.ResizeAccounting
) -> objects.PodInfo:
    body = builder.uid("resized").node("n1").obj()
    body["status"] = dict(status)
    return objects.parse_pod(body, resize=resize)


def _two_containers() -> PodBuilder:
    return make_pod("resized").req(cpu="2", memory="1Gi").container("side", cpu="1")


@pytest.mark.parametrize("release", RELEASES)
def test_a_status_that_reports_nothing_leaves_the_spec(release: str) -> None:
    pod = _parse(_two_containers(), {"phase": "Running"}, RELEASES[release])
    assert pod.requests == {"cpu": 3000, "memory": GI}
    assert pod.status_resources is False


@pytest.mark.parametrize("release", RELEASES)
def test_a_resize_that_has_caught_up_counts_the_spec(release: str) -> None:
    done = _status({"main": ("2", "2"), "side": ("1", "1")})
    pod = _parse(_two_containers(), done, RELEASES[release])
    assert pod.requests == {"cpu": 3000, "memory": GI}
    assert pod.status_resources is True


@pytest.mark.parametrize(("release", "cpu"), [("v1.34", 4000), ("v1.36", 4000), ("v1.37", 3000)])
def test_one_container_growing_and_one_shrinking_count_the_largest_total_from_v1_37(
    release: str, cpu: int
) -> None:
    # main asks 2 cpu and runs with 1; side asks 1 and runs with 2 (both allocated as they
    # run). Up to v1.36 each container counts its largest: 2 + 2. From v1.37 the largest
    # total: spec 3, actuated 3, allocated 3.
    swapping = _status({"main": ("1", "1"), "side": ("2", "2")})
    pod = _parse(_two_containers(), swapping, RELEASES[release])
    assert pod.requests == {"cpu": cpu, "memory": GI}
    # The non-zero pair the scorers read follows (memory as the spec, side's 200Mi default).
    assert pod.nonzero == (cpu, GI + 200 * MI)


@pytest.mark.parametrize("release", RELEASES)
def test_an_infeasible_resize_counts_what_runs_not_what_is_asked(release: str) -> None:
    # main asks 8 cpu, which the node can never give: it runs with, and was given, 2.
    builder = make_pod("resized").req(cpu="8")
    pod = _parse(builder, _status({"main": ("2", "2")}, infeasible=True), RELEASES[release])
    assert pod.requests == {"cpu": 2000}


@pytest.mark.parametrize(("release", "cpu"), [("v1.34", 2000), ("v1.36", 2000), ("v1.37", 3000)])
def test_an_init_containers_status_counts_from_v1_37(release: str, cpu: int) -> None:
    # The init container "setup" (not restartable) asks 2 cpu; its status says 3. Up to
    # v1.36 only app and restartable init containers read their status.
    builder = make_pod("resized").req(cpu="1").init("setup", cpu="2")
    status = _status({"main": ("1", "1")}, init={"setup": ("3", "3")})
    assert _parse(builder, status, RELEASES[release]).requests == {"cpu": cpu}


@pytest.mark.parametrize("release", RELEASES)
def test_a_sidecars_status_counts_in_every_release(release: str) -> None:
    builder = make_pod("resized").req(cpu="1").init("proxy", sidecar=True, cpu="1")
    status = _status({"main": ("1", "1")}, init={"proxy": ("2", "2")})
    assert _parse(builder, status, RELEASES[release]).requests == {"cpu": 3000}


@pytest.mark.parametrize(("release", "cpu"), [("v1.34", 3000), ("v1.36", 3000), ("v1.37", 4000)])
def test_an_allocation_not_yet_actuated_counts_from_v1_37(release: str, cpu: int) -> None:
    # main asks 2 cpu and was allocated 3 (its status reports no resources yet); side asks,
    # runs with and was given 1. Up to v1.36 a container without status resources counts its
    # spec: 2 + 1. From v1.37 main's allocation stands for its actuated resources too: the
    # allocated and actuated totals are 3 + 1.
    status = _status({"main": (None, "3"), "side": ("1", "1")})
    assert _parse(_two_containers(), status, RELEASES[release]).requests["cpu"] == cpu


@pytest.mark.parametrize(("release", "cpu"), [("v1.34", 2000), ("v1.36", 2000), ("v1.37", 4000)])
def test_an_infeasible_resize_without_actuated_resources(release: str, cpu: int) -> None:
    # Infeasible: the spec is left out. main reports only its allocation (3 cpu), side
    # reports resources (1 actuated, 1 allocated). Up to v1.36 main lacks status resources
    # and counts its spec (1); from v1.37 it counts its allocation (3) in both totals.
    builder = make_pod("resized").req(cpu="1").container("side", cpu="4")
    status = _status({"main": (None, "3"), "side": ("1", "1")}, infeasible=True)
    assert _parse(builder, status, RELEASES[release]).requests["cpu"] == cpu


def _pod_level() -> PodBuilder:
    # Pod-level requests of 2 cpu over two containers asking 500m and 256Mi each.
    return (
        make_pod("resized")
        .req(cpu="500m", memory="256Mi")
        .container("side", cpu="500m", memory="256Mi")
        .pod_resources(requests={"cpu": "2"})
    )


@pytest.mark.parametrize(
    ("release", "requests"),
    [
        ("v1.34", {"cpu": 2000, "memory": 512 * MI}),  # no such gate: the spec
        ("v1.36", {"cpu": 3000, "memory": 512 * MI}),  # the spec's resources, from the status
        ("v1.37", {"cpu": 3000, "memory": GI}),  # every pod-level resource the status names
    ],
)
def test_pod_level_requests_read_from_the_status(release: str, requests: Mapping[str, int]) -> None:
    status = _status(pod=({"cpu": "3", "memory": "1Gi"}, {"cpu": "3", "memory": "1Gi"}))
    assert _parse(_pod_level(), status, RELEASES[release]).requests == requests


def test_pod_level_status_with_the_gate_off_is_the_spec() -> None:
    off = objects.ResizeAccounting(pod_totals=True, pod_level_status=False)
    status = _status(pod=({"cpu": "3", "memory": "1Gi"}, {"cpu": "3", "memory": "1Gi"}))
    assert _parse(_pod_level(), status, off).requests == {"cpu": 2000, "memory": 512 * MI}


def test_a_status_update_of_the_same_generation_reads_the_resize() -> None:
    # The kubelet's status writes do not change the generation: the spec is not parsed
    # again, but the requests are read again while the status takes part in them.
    builder = _two_containers().generation(2)
    plain = _parse(builder, {"phase": "Running"}, V137)
    body = builder.uid("resized").node("n1").obj()
    body["status"] = _status({"main": ("1", "1"), "side": ("3", "3")})
    resizing = objects.parse_pod(body, known=plain, resize=V137)
    assert resizing.requests == {"cpu": 4000, "memory": GI}
    assert resizing.scheduling is plain.scheduling  # taken from the known record
    body["status"] = {"phase": "Running"}
    assert objects.parse_pod(body, known=resizing, resize=V137).requests == plain.requests


def test_the_same_status_is_the_same_record() -> None:
    builder = _two_containers().generation(2)
    status = _status({"main": ("1", "1"), "side": ("2", "2")})
    first = _parse(builder, status, V137)
    body = builder.uid("resized").node("n1").obj()
    body["status"] = status
    assert objects.parse_pod(body, known=first, resize=V137) == first
