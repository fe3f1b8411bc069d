"""The DRA builders make the bodies they say: plumb's own parser (backend/records/draobjects)
reads back the devices, selectors, requests and claims a test meant to publish."""

from __future__ import annotations

from fractions import Fraction

import pytest

from plumb.backend.records import draobjects
from plumb_dev.testing import builders, draclient
from plumb_dev.testing import drabuilders as drab


def test_a_node_local_slice_carries_typed_attributes_capacity_and_taints() -> None:
    body = (
        drab.make_slice("node-a-gpus", "gpu.example.com")
        .pool("node-a")
        .node("node-a")
        .devices(
            drab.device("gpu-0")
            .attr("model", "a100")
            .attr("numa", 1)
            .attr("healthy", True)
            .attr("cuda", "12.4.0", version=True)
            .capacity("memory", "80Gi")
            .taint("example.com/unhealthy", "true", "NoExecute")
        )
        .obj()
    )
    parsed = draobjects.parse_slice(body)
    assert (parsed.driver, parsed.pool, parsed.generation, parsed.slice_count) == (
        "gpu.example.com",
        "node-a",
        1,
        1,
    )
    assert parsed.selection == draobjects.NodeSelection(node_name="node-a")
    (device,) = parsed.devices
    assert dict(device.attributes) == {
        "model": "a100",
        "numa": 1,
        "healthy": True,
        "cuda": draobjects.SemVer("12.4.0"),
    }
    assert device.capacity["memory"].value.value == Fraction(80 * 2**30)
    assert device.taints == (
        draobjects.DeviceTaint(key="example.com/unhealthy", value="true", effect="NoExecute"),
    )


def test_a_slice_for_all_nodes_with_shared_counters() -> None:
    body = (
        drab.make_slice("shared", "gpu.example.com")
        .all_nodes()
        .counters("gpu-0-memory", memory="80Gi")
        .devices(drab.device("gpu-0-half").consumes("gpu-0-memory", memory="40Gi"))
        .obj()
    )
    parsed = draobjects.parse_slice(body)
    assert parsed.selection == draobjects.NodeSelection(all_nodes=True)
    assert [c.name for c in parsed.shared_counters] == ["gpu-0-memory"]
    (consumption,) = parsed.devices[0].consumes_counters
    assert consumption.counter_set == "gpu-0-memory"
    assert consumption.counters["memory"].text == "40Gi"


def test_a_class_has_its_driver_selector_config_and_extended_resource() -> None:
    body = (
        drab.make_class("gpu")
        .driver("gpu.example.com")
        .selector('device.attributes["gpu.example.com"].model == "a100"')
        .config("gpu.example.com", {"mode": "exclusive"})
        .extended_resource("example.com/gpu")
        .obj()
    )
    parsed = draobjects.parse_class(body)
    assert parsed.selectors == (
        'device.driver == "gpu.example.com"',
        'device.attributes["gpu.example.com"].model == "a100"',
    )
    assert parsed.extended_resource_name == "example.com/gpu"
    assert [(c.driver, c.parameters) for c in parsed.config] == [
        ("gpu.example.com", {"mode": "exclusive"})
    ]


def test_a_claim_has_exact_all_and_prioritized_requests_and_constraints() -> None:
    tolerate = drab.toleration("example.com/unhealthy", operator="Exists")
    body = (
        drab.make_claim("train", "ml")
        .request("pair", "gpu", count=2, tolerations=[tolerate])
        .request("nics", "nic", all_devices=True, admin=True)
        .first_available(
            "accel",
            drab.subrequest("large", "gpu", selectors=["device.capacity['x'].memory > 1"]),
            drab.subrequest("any", "gpu"),
        )
        .match_attribute("gpu.example.com/numa", "pair", "nics")
        .config("gpu.example.com", {"sharing": "none"}, "pair")
        .obj()
    )
    parsed = draobjects.parse_claim(body)
    assert parsed.problem is None
    pair, nics, accel = parsed.spec.requests
    assert pair.exactly is not None
    assert (pair.exactly.mode, pair.exactly.count) == (draobjects.EXACT_COUNT, 2)
    assert pair.exactly.tolerations == (
        draobjects.DeviceToleration(key="example.com/unhealthy", operator="Exists"),
    )
    assert nics.exactly is not None
    assert nics.exactly.mode == draobjects.ALL
    assert nics.exactly.admin_access
    assert [(s.name, s.selectors) for s in accel.first_available] == [
        ("large", ("device.capacity['x'].memory > 1",)),
        ("any", ()),
    ]
    assert parsed.spec.constraints == (
        draobjects.DeviceConstraint(
            requests=("pair", "nics"), match_attribute="gpu.example.com/numa"
        ),
    )
    assert [c.requests for c in parsed.spec.config] == [("pair",)]


def test_a_template_holds_the_claim_spec_and_the_pod_names_it() -> None:
    template = drab.make_template("one-gpu", "ml").request("gpu", "gpu").obj()
    parsed = draobjects.parse_template(template)
    assert [r.name for r in parsed.spec.requests] == ["gpu"]
    pod = builders.make_pod("p", "ml").resource_claim("gpu", template="one-gpu")
    pod.resource_claim("scratch", claim="shared", request="gpu")
    spec = pod.obj()["spec"]
    assert draobjects.pod_resource_claims(spec) == (
        draobjects.PodResourceClaim("gpu", template_name="one-gpu"),
        draobjects.PodResourceClaim("scratch", claim_name="shared"),
    )
    assert spec["containers"][0]["resources"]["claims"] == [
        {"name": "gpu"},
        {"name": "scratch", "request": "gpu"},
    ]


def test_a_pod_claim_names_a_claim_or_a_template_never_both() -> None:
    with pytest.raises(ValueError, match="exactly one of claim, template"):
        builders.make_pod("p").resource_claim("gpu", claim="a", template="b")


def test_the_client_reads_an_allocation_in_the_order_written() -> None:
    claim = {
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "d", "pool": "p", "device": "gpu-1"},
                        {"request": "gpu", "driver": "d", "pool": "p", "device": "gpu-0"},
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "u"}],
        }
    }
    assert [a.device for a in draclient.allocated(claim)] == ["gpu-1", "gpu-0"]
    assert draclient.reserved_for(claim) == ["trainer"]
    assert draclient.allocated({"status": {}}) == []
    pod = {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]}}
    assert draclient.generated_claim(pod, "gpu") == "p-gpu-x"
    assert draclient.generated_claim(pod, "other") is None
