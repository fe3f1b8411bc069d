"""Claims that bind devices together or to a node, under plumb and under the real kube-scheduler
on the same control plane: a claim shared by several pods, matchAttribute constraints,
prioritized lists (firstAvailable) and their score, and device taints with the requests'
tolerations.

The harness is test_dra_selection.py's: slices published by the test, nodes as API objects,
"roomy" favoured by the resources for every pod (1 cpu, 1Gi), devices laid out so that one node
alone can hold each claim, or, where two can, the scores are worked out in the test. Where a
release differs (DRA's score from v1.35, device taints from v1.36), the expectation is keyed
by the control plane's minor release.

State (issue 27): every test here passes under kube-scheduler v1.37.2 and v1.34.4; under plumb
they fail until it allocates claims.
"""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from plumb_dev.testing import builders, draclient, kube
from plumb_dev.testing import drabuilders as drab
from tests.support import side_by_side
from tests.support.dra_stage import (  # noqa: F401
    BOTH_CANNOT_ALLOCATE,
    Stage,
    dra_fixture,
    model,
    not_helpful,
)
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.dra]


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_shared_claim_takes_every_pod_that_uses_it_to_its_node(
    scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")
    _, small = dra.two_nodes(scheduler, roomy=[drab.device("gpu-0")], small=[drab.device("gpu-0")])

    dra.new_claim("shared", gpu)
    # The first pod, pinned to small, has the claim allocated there; the second, free to go
    # anywhere and favoured by roomy, follows the allocation's node selector; one device.
    first = dra.claim_pod(scheduler, "first", "shared")
    assert dra.schedule(first.node_selector(builders.HOSTNAME_LABEL, small)) == small
    assert dra.run(scheduler, "second", "shared") == small
    claim = dra.claim("shared")
    assert draclient.allocated(claim) == [draclient.DeviceTaken("gpu", dra.driver, small, "gpu-0")]
    assert draclient.reserved_for(claim) == ["first", "second"]


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_match_attribute_takes_devices_that_share_the_attribute(
    kube_minor: int, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")

    def on_numa(*numa: int) -> list[drab.DeviceBuilder]:
        return [drab.device(f"gpu-{i}").attr("numa", n) for i, n in enumerate(numa)]

    # Two GPUs on one NUMA node: none on roomy; on small the second and third, found after
    # the first (NUMA 0) fails to pair with either.
    _, small = dra.two_nodes(scheduler, roomy=on_numa(0, 1), small=on_numa(0, 1, 1))

    pair = dra.make_claim("pair").request("gpu", gpu, count=2)
    dra.api.create_claim(pair.match_attribute(dra.attribute("numa")).obj())
    assert dra.run(scheduler, "pair", "pair") == small
    assert dra.devices("pair") == [(dra.driver, small, "gpu-1"), (dra.driver, small, "gpu-2")]

    # Across two requests, one device each on one NUMA node: no node has such a pair free
    # (roomy's two are on different NUMA nodes, small has one left).
    split = dra.make_claim("split").request("a", gpu).request("b", gpu)
    dra.api.create_claim(split.match_attribute(dra.attribute("numa"), "a", "b").obj())
    assert dra.run(scheduler, "split", "split") is None
    assert draclient.allocated(dra.claim("split")) == []
    assert dra.failed("split") == not_helpful(kube_minor, BOTH_CANNOT_ALLOCATE, 2)


def test_a_prioritized_list_takes_the_first_subrequest_a_node_can_meet(
    kube_minor: int, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")

    def memory(size: str) -> list[drab.DeviceBuilder]:
        return [drab.device("gpu-0").capacity("memory", size)]

    roomy, small = dra.two_nodes(scheduler, roomy=memory("16Gi"), small=memory("80Gi"))
    large = f'{dra.capacity_cel("memory")}.compareTo(quantity("64Gi")) >= 0'

    def flexible(name: str) -> str | None:
        claim = dra.make_claim(name).first_available(
            "gpu",
            drab.subrequest("large", gpu, selectors=[large]),
            drab.subrequest("any", gpu),
        )
        dra.api.create_claim(claim.obj())
        return dra.run(scheduler, name, name)

    # Both nodes can hold the claim: roomy with its second choice, small with its first.
    # Up to v1.34 nothing scores that and roomy wins on resources (by 12). From v1.35
    # DynamicResources scores the subrequest chosen, 8 - its index (small 8, roomy 7),
    # normalised to 100 and 87, weight 2: small by 26, against roomy's 12 (9 from v1.36).
    first = roomy if kube_minor < 35 else small
    assert flexible("first") == first
    # The second pod can only have the device the first left.
    second = small if first == roomy else roomy
    assert flexible("second") == second
    chosen = {roomy: "gpu/any", small: "gpu/large"}
    assert dra.requests("first") == [(chosen[first], "gpu-0")]
    assert dra.requests("second") == [(chosen[second], "gpu-0")]
    assert dra.devices("first") == [(dra.driver, first, "gpu-0")]


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_tainted_device_is_left_to_requests_that_tolerate_it(
    kube_minor: int, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")
    tainted = drab.device("gpu-0").taint("example.com/unhealthy", "true")
    roomy, small = dra.two_nodes(scheduler, roomy=[tainted], small=[drab.device("gpu-0")])
    # DRADeviceTaints: beta and on from v1.36; before, the API server drops the taints (and
    # the requests' tolerations), so the device is as good as any.
    taints = kube_minor >= 36
    assert ("taints" in dra.slice(roomy)["spec"]["devices"][0]) == taints

    plain = small if taints else roomy
    assert dra.run(scheduler, "plain", dra.new_claim("plain", gpu)) == plain

    tolerate = drab.toleration("example.com/unhealthy", operator="Exists", effect="NoSchedule")
    tolerant = dra.make_claim("tolerant").request("gpu", gpu, tolerations=[tolerate])
    dra.api.create_claim(tolerant.obj())
    other = roomy if plain == small else small
    assert dra.run(scheduler, "tolerant", "tolerant") == other
    # The allocation result carries the request's tolerations where the feature is on.
    result: dict[str, object] = {
        "request": "gpu",
        "driver": dra.driver,
        "pool": other,
        "device": "gpu-0",
    }
    if taints:
        result["tolerations"] = [tolerate]
    allocation = dra.claim("tolerant")["status"]["allocation"]
    assert allocation["devices"]["results"] == [result]


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_admin_access_reaches_a_device_another_claim_holds(
    kube_client: kube.Kube, namespace: str, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    gpu = dra.device_class("gpu")
    _, small = dra.two_nodes(scheduler, roomy=[model("t4")], small=[model("a100")])
    a100 = dra.model_is("a100")

    assert dra.run(scheduler, "work", dra.new_claim("work", gpu, a100)) == small
    # Only a namespace an administrator labelled may ask for admin access (the API server
    # refuses the claim elsewhere).
    watch = dra.make_claim("watch").request("gpu", gpu, selectors=[a100], admin=True)
    with pytest.raises(k8s.ApiException) as refused:
        dra.api.create_claim(watch.obj())
    assert refused.value.status == 422
    kube_client.core.patch_namespace(
        namespace, {"metadata": {"labels": {drab.ADMIN_ACCESS_LABEL: "true"}}}
    )
    dra.api.create_claim(watch.obj())
    # The monitor gets the A100 "work" holds: admin access neither needs a free device nor
    # takes one.
    assert dra.run(scheduler, "monitor", "watch") == small
    allocation = dra.claim("watch")["status"]["allocation"]
    assert allocation["devices"]["results"] == [
        {
            "request": "gpu",
            "driver": dra.driver,
            "pool": small,
            "device": "gpu-0",
            "adminAccess": True,
        }
    ]


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_partitions_of_a_device_share_its_counters(
    kube_minor: int, scheduler: side_by_side.Runner, dra: Stage
) -> None:
    if kube_minor < 36:
        pytest.skip(reason="DRAPartitionableDevices is alpha (off) before v1.36")
    roomy, small = dra.roomy_and_small()
    gpu = dra.device_class("gpu")
    # Small's GPU as a whole or in halves: one pool of two slices, the counters in one, the
    # partitions in the other (the API keeps them apart from v1.35).
    counters = drab.make_slice(f"{small}-counters-{dra.tag}", dra.driver).pool(small, count=2)
    dra.api.create_slice(counters.node(small).counters("gpu-0", memory="80Gi").obj())

    def part(name: str, memory: str) -> drab.DeviceBuilder:
        return drab.device(name).attr("size", memory).consumes("gpu-0", memory=memory)

    partitions = drab.make_slice(f"{small}-{dra.tag}", dra.driver).pool(small, count=2)
    partitions.node(small).devices(
        part("gpu-0-whole", "80Gi"), part("gpu-0-half-a", "40Gi"), part("gpu-0-half-b", "40Gi")
    )
    dra.api.create_slice(partitions.obj())
    dra.publish(roomy, drab.device("gpu-0").attr("size", "16Gi"))
    dra.in_view(scheduler, [roomy, small])

    def sized(name: str, size: str) -> str | None:
        selector = f'{dra.cel("size")} == "{size}"'
        return dra.run(scheduler, name, dra.new_claim(name, gpu, selector))

    # A half takes 40Gi of the 80Gi: the whole GPU no longer fits, the other half does.
    assert sized("half", "40Gi") == small
    assert sized("whole", "80Gi") is None
    assert sized("other-half", "40Gi") == small
    assert dra.devices("half") == [(dra.driver, small, "gpu-0-half-a")]
    assert dra.devices("other-half") == [(dra.driver, small, "gpu-0-half-b")]
    assert dra.failed("whole") == not_helpful(kube_minor, BOTH_CANNOT_ALLOCATE, 2)
