"""status.allocation as kube-scheduler writes it: the JSON body PreBind sends."""

from __future__ import annotations

import datetime
import json

from plumb.backend.records import draobjects, specs
from plumb.framework.devices import statuses
from plumb.k8s import quantities


def q(text: str) -> draobjects.Quantity:
    return draobjects.Quantity(quantities.parse(text), text)


def test_an_allocation_reads_as_the_api_writes_it_field_for_field() -> None:
    toleration = draobjects.DeviceToleration(key="k", operator="Exists", effect="NoSchedule")
    allocation = draobjects.Allocation(
        devices=(
            draobjects.AllocatedDevice(
                request="gpu/big", driver="d", pool="p", device="gpu-0", tolerations=(toleration,)
            ),
            draobjects.AllocatedDevice(
                request="nic",
                driver="d",
                pool="p",
                device="nic-0",
                admin_access=True,
                binding_conditions=("Ready",),
                binding_failure_conditions=("Failed",),
                share_id="aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
                consumed_capacity={"memory": q("2048Mi"), "bandwidth": q("1.5")},
            ),
        ),
        config=(
            ("FromClass", draobjects.Opaque(driver="d", parameters={"a": 1}, requests=("nic",))),
            ("FromClaim", draobjects.Opaque(driver="d", parameters=None)),
        ),
        node_selection=draobjects.NodeSelection(
            terms=(
                specs.NodeSelectorTerm(
                    expressions=(specs.Requirement("region", "In", ("r1",)),),
                    fields=(specs.Requirement("metadata.name", "In", ("node-1",)),),
                ),
            )
        ),
    )
    body = statuses.allocation_body(allocation, timestamp="2026-01-02T03:04:05Z")
    assert json.dumps(body) == json.dumps(
        {
            "devices": {
                "results": [
                    {
                        "request": "gpu/big",
                        "driver": "d",
                        "pool": "p",
                        "device": "gpu-0",
                        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                    },
                    {
                        "request": "nic",
                        "driver": "d",
                        "pool": "p",
                        "device": "nic-0",
                        "adminAccess": True,
                        "bindingConditions": ["Ready"],
                        "bindingFailureConditions": ["Failed"],
                        "shareID": "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
                        "consumedCapacity": {"bandwidth": "1500m", "memory": "2Gi"},
                    },
                ],
                "config": [
                    {
                        "source": "FromClass",
                        "requests": ["nic"],
                        "opaque": {"driver": "d", "parameters": {"a": 1}},
                    },
                    {"source": "FromClaim", "opaque": {"driver": "d"}},
                ],
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [{"key": "region", "operator": "In", "values": ["r1"]}],
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                        ],
                    }
                ]
            },
            "allocationTimestamp": "2026-01-02T03:04:05Z",
        }
    )


def test_an_allocation_reachable_everywhere_has_no_node_selector_nor_timestamp() -> None:
    allocation = draobjects.Allocation(
        devices=(draobjects.AllocatedDevice(request="r", driver="d", pool="p", device="x"),)
    )
    body = statuses.allocation_body(allocation)
    assert body == {
        "devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "x"}]}
    }


def test_a_body_reads_back_as_the_same_allocation() -> None:
    allocation = draobjects.Allocation(
        devices=(
            draobjects.AllocatedDevice(
                request="r", driver="d", pool="p", device="x", share_id="s", admin_access=True
            ),
        ),
        config=(("FromClaim", draobjects.Opaque(driver="d", parameters={"k": "v"})),),
        node_selection=draobjects.NodeSelection(
            terms=(
                specs.NodeSelectorTerm(
                    fields=(specs.Requirement("metadata.name", "In", ("node-1",)),)
                ),
            )
        ),
        timestamp="2026-01-02T03:04:05Z",
    )
    body = {"status": {"allocation": statuses.allocation_body(allocation)}, "spec": {}}
    parsed = draobjects.parse_claim(body).allocation
    assert parsed == allocation


def test_timestamps_are_rfc3339_in_utc_to_the_second() -> None:
    when = datetime.datetime(
        2026, 1, 2, 4, 4, 5, 999, tzinfo=datetime.timezone(datetime.timedelta(hours=1))
    )
    assert statuses.timestamp(when) == "2026-01-02T03:04:05Z"
