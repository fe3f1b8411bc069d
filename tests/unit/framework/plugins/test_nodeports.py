"""NodePorts: a host port is taken when protocol and port match and the IPs overlap."""

from __future__ import annotations

import pytest

from plumb.backend.records import objects, specs
from plumb.framework.plugins import nodeports
from plumb_dev.testing.builders import PodBuilder, make_pod


def ports(pod: PodBuilder) -> tuple[specs.HostPort, ...]:
    return objects.parse_pod(pod.obj()).scheduling.host_ports


def conflicts(wanted: PodBuilder, existing: PodBuilder) -> bool:
    """Whether ``wanted`` fails on a node already running ``existing``."""
    fails = nodeports.filter(objects.parse_pod(wanted.obj()), [ports(existing)])
    return bool(fails[0])


def test_the_same_port_on_all_addresses_conflicts() -> None:
    assert conflicts(make_pod("new").host_port(8080), make_pod("old").host_port(8080))


def test_a_different_port_does_not_conflict() -> None:
    assert not conflicts(make_pod("new").host_port(8080), make_pod("old").host_port(8081))


def test_udp_and_tcp_on_the_same_port_coexist() -> None:
    new = make_pod("new").host_port(53, protocol="UDP")
    assert not conflicts(new, make_pod("old").host_port(53, protocol="TCP"))
    assert conflicts(new, make_pod("old").host_port(53, protocol="UDP"))


def test_an_unset_protocol_means_tcp() -> None:
    assert conflicts(make_pod("new").host_port(80), make_pod("old").host_port(80, protocol="TCP"))


@pytest.mark.parametrize(
    ("wanted_ip", "taken_ip", "conflict"),
    [
        ("0.0.0.0", "10.0.0.1", True),  # all addresses include the one in use
        ("10.0.0.1", "0.0.0.0", True),  # the one wanted is among all addresses in use
        ("10.0.0.1", "10.0.0.1", True),
        ("10.0.0.1", "10.0.0.2", False),  # two specific addresses coexist
        (None, "10.0.0.2", True),  # no hostIP means 0.0.0.0
    ],
)
def test_host_ip_overlap(wanted_ip: str | None, taken_ip: str, conflict: bool) -> None:
    wanted = make_pod("new").host_port(9000, host_ip=wanted_ip)
    assert conflicts(wanted, make_pod("old").host_port(9000, host_ip=taken_ip)) is conflict


def test_only_nodes_with_a_conflicting_port_fail() -> None:
    pod = objects.parse_pod(make_pod("new").host_port(443).host_port(80).obj())
    used = [
        ports(make_pod("a").host_port(80)),
        (),
        ports(make_pod("c").host_port(8443).host_port(53, protocol="UDP")),
        ports(make_pod("d").host_port(443, host_ip="10.0.0.4")),
    ]
    assert nodeports.filter(pod, used).tolist() == [True, False, False, True]


def test_a_pod_without_host_ports_fits_every_node() -> None:
    pod = objects.parse_pod(make_pod("web").obj())
    assert not nodeports.filter(pod, [ports(make_pod("a").host_port(80))]).any()


def test_reason_and_plugin_name_are_kube_schedulers() -> None:
    assert nodeports.NAME == "NodePorts"
    assert nodeports.PORTS_IN_USE == "node(s) didn't have free ports for the requested pod ports"
    # Unschedulable, not UnschedulableAndUnresolvable: preempting the holder frees the port.
    assert nodeports.UNRESOLVABLE is False
