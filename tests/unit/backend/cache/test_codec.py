"""The codec writes and reads back the DRA records a snapshot dump carries."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import pytest

from plumb.backend.cache import codec
from plumb.backend.records import draobjects


def _roundtrip(kind: type[Any], value: Any) -> Any:
    return codec.decode(kind, json.loads(json.dumps(codec.encode(value))))


def test_a_slice_comes_back_with_every_attribute_type_and_exact_quantities() -> None:
    body = {
        "metadata": {"name": "node-1-gpus", "resourceVersion": "7"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "node-1", "generation": 3, "resourceSliceCount": 1},
            "nodeName": "node-1",
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {
                        "model": {"string": "a100"},
                        "driverVersion": {"version": "1.2.3"},
                        "index": {"int": 0},
                        "mig": {"bool": False},
                        "links": {"ints": [1, 2]},
                        "tags": {"strings": ["a", "b"]},
                    },
                    "capacity": {"memory": {"value": "1.5Gi"}},
                }
            ],
        },
    }
    original = draobjects.parse_slice(body)
    back = _roundtrip(draobjects.ResourceSlice, original)
    assert back == original
    attributes = back.devices[0].attributes
    assert attributes["driverVersion"] == draobjects.SemVer("1.2.3")
    assert attributes["mig"] is False
    assert attributes["index"] == 0
    assert attributes["links"] == (1, 2)
    assert attributes["tags"] == ("a", "b")
    assert back.devices[0].capacity["memory"].value.value == Fraction(3 * 2**29)


def test_a_claim_comes_back_with_its_allocation_and_device_conditions() -> None:
    body = {
        "metadata": {"namespace": "ml", "name": "train-gpu", "uid": "c1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.example.com",
                            "pool": "node-1",
                            "device": "gpu-0",
                            "shareID": "s-1",
                            "consumedCapacity": {"memory": "10Gi"},
                        }
                    ],
                    "config": [
                        {
                            "source": "FromClass",
                            "opaque": {"driver": "gpu.example.com", "parameters": {"a": [1]}},
                        }
                    ],
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n"]}
                            ]
                        }
                    ]
                },
            },
            "devices": [
                {
                    "driver": "gpu.example.com",
                    "pool": "node-1",
                    "device": "gpu-0",
                    "conditions": [{"type": "Ready", "status": "True"}],
                }
            ],
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "p1"}],
        },
    }
    original = draobjects.parse_claim(body)
    back = _roundtrip(draobjects.ResourceClaim, original)
    assert back == original
    assert back.device_conditions == {("gpu.example.com", "node-1", "gpu-0"): {"Ready"}}
    assert back.allocation is not None
    assert back.allocation.config[0][1].parameters == {"a": [1]}


def test_an_int_field_refuses_a_bool() -> None:
    with pytest.raises(codec.CodecError, match="expected int"):
        codec.decode(draobjects.ResourceSlice, {**codec.encode(_slice()), "generation": True})


def _slice() -> draobjects.ResourceSlice:
    return draobjects.ResourceSlice(
        name="s",
        driver="d",
        pool="p",
        generation=1,
        slice_count=1,
        selection=draobjects.NodeSelection(all_nodes=True),
    )
