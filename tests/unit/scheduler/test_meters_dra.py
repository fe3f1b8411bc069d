"""DynamicResources' extension points on plumb's metrics page, under kube-scheduler's name
plugin_execution_duration_seconds: one observation per pod with claims at each point it
reached, labelled with the status it ended in, as a person reading the page sees them."""

from __future__ import annotations

import logging

from prometheus_client import parser

from plumb.observability import metrics
from plumb_dev.testing.drabuilders import device, make_claim
from tests.support.dra_world import NS, DraWorld
from tests.support.log_capture import Lines


def _counts(world: DraWorld) -> dict[tuple[str, str], float]:
    page = world.scheduler.metrics.render().decode()
    family = next(
        f for f in parser.text_string_to_metric_families(page) if f.name == metrics.PLUGIN_EXECUTION
    )
    return {
        (s.labels["extension_point"], s.labels["status"]): s.value
        for s in family.samples
        if s.name.endswith("_count") and s.labels["plugin"] == "DynamicResources"
    }


async def test_each_claim_pod_counts_once_per_extension_point_with_its_status(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    world = DraWorld(json_lines)
    world.nodes("node-a", "node-b")
    world.device_class("gpu")
    world.publish("node-a", device("gpu-0"))
    world.claim(make_claim("first", NS).request("gpu", "gpu"))
    world.claim(make_claim("second", NS).request("gpu", "gpu"))
    world.claim(make_claim("odd", NS).request("gpu", "no-such-class"))
    world.pod("placed", "first")
    await world.settle()
    world.pod("waiting", "second")  # the one device is taken
    world.pod("turned-away", "odd")
    world.pod("plain")  # no claims: DynamicResources does not run for it
    await world.settle()
    assert _counts(world) == {
        ("Filter", "Success"): 1.0,
        ("Reserve", "Success"): 1.0,
        ("PreBind", "Success"): 1.0,
        ("Filter", "UnschedulableAndUnresolvable"): 1.0,
        ("PreFilter", "UnschedulableAndUnresolvable"): 1.0,
    }
