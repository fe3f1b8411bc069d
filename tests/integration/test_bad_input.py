"""Odd pod specs on the real API server: each is refused by the API server with a clear error,
or gets a clear FailedScheduling reason, or is scheduled correctly, and plumb goes on
scheduling the others."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import ApiException

from plumb_dev.testing import builders, kube
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory, events_of
from tests.support.plumb_process import Plumb

pytestmark = pytest.mark.integration


def _node_of(client: kube.Kube, namespace: str, name: str) -> str:
    return str(client.pod(namespace, name)["spec"].get("nodeName") or "")


def _bound(client: kube.Kube, namespace: str, name: str) -> str:
    return kube.wait_for(
        f"{namespace}/{name} to be bound", lambda: _node_of(client, namespace, name), timeout=30
    )


def _latest_failure(client: kube.Kube, namespace: str, name: str, expected: str) -> str:
    def newest() -> str | None:
        found = events_of(client, namespace, name, "FailedScheduling")
        found.sort(key=lambda e: (e.get("eventTime") or "", e["metadata"]["name"]))
        return str(found[-1]["message"]) if found and found[-1]["message"] == expected else None

    return kube.wait_for(f"FailedScheduling {expected!r} on {name}", newest)


def _refused(client: kube.Kube, body: dict[str, Any]) -> str:
    with pytest.raises(ApiException) as caught:
        client.create_pod(body)
    assert caught.value.status == 422
    return str(caught.value.body)


def test_specs_the_api_server_refuses_never_reach_plumb(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    add_node(builders.make_node(f"{namespace}-n"))
    unknown_operator = builders.make_pod("odd-op", namespace).scheduler("plumb").obj()
    unknown_operator["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}
                ]
            }
        }
    }
    assert "Near" in _refused(kube_client, unknown_operator)
    empty_key = builders.make_pod("no-key", namespace).scheduler("plumb").obj()
    empty_key["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ""}
            ]
        }
    }
    assert "topologyKey" in _refused(kube_client, empty_key)
    # plumb is unaffected: the next pod schedules.
    kube_client.create_pod(builders.make_pod("fine", namespace).scheduler("plumb").obj())
    _bound(kube_client, namespace, "fine")


def test_odd_but_valid_specs_are_scheduled_or_explained(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n").zone("a").taint("dedicated", "gpu"))
    # A huge maxSkew never blocks.
    kube_client.create_pod(
        builders.make_pod("wide", namespace)
        .scheduler("plumb")
        .label("app", "w")
        .toleration("dedicated", operator="Exists")
        .spread(builders.ZONE_LABEL, 2**31 - 1, selector={"app": "w"})
        .obj()
    )
    # Thousands of tolerations, one of which matches.
    many = builders.make_pod("tolerant", namespace).scheduler("plumb")
    for i in range(2000):
        many = many.toleration(f"example.com/t{i}", operator="Exists")
    many = many.toleration("dedicated", value="gpu")
    kube_client.create_pod(many.obj())
    # Thousands of tolerations, none of which matches.
    none = builders.make_pod("intolerant", namespace).scheduler("plumb")
    for i in range(2000):
        none = none.toleration(f"example.com/t{i}", operator="Exists")
    kube_client.create_pod(none.obj())
    # A resource no node advertises.
    kube_client.create_pod(
        builders.make_pod("widget", namespace)
        .scheduler("plumb")
        .toleration("dedicated", operator="Exists")
        .req(**{"example.com/widget": "1"})
        .obj()
    )
    # A memory request beyond int64 when summed.
    kube_client.create_pod(
        builders.make_pod("vast", namespace)
        .scheduler("plumb")
        .toleration("dedicated", operator="Exists")
        .req(memory="8Ei")
        .container("second", memory="8Ei")
        .obj()
    )

    assert _bound(kube_client, namespace, "wide") == node
    assert _bound(kube_client, namespace, "tolerant") == node
    _latest_failure(
        kube_client,
        namespace,
        "intolerant",
        side_by_side.without_victims(
            "0/1 nodes are available: 1 node(s) had untolerated taint(s).", 1, 0
        ),
    )
    _latest_failure(
        kube_client,
        namespace,
        "widget",
        side_by_side.without_victims(
            "0/1 nodes are available: 1 Insufficient example.com/widget.", 1, 0
        ),
    )
    _latest_failure(
        kube_client,
        namespace,
        "vast",
        side_by_side.without_victims("0/1 nodes are available: 1 Insufficient memory.", 1, 0),
    )
    kube_client.create_pod(
        builders.make_pod("after", namespace)
        .scheduler("plumb")
        .toleration("dedicated", operator="Exists")
        .obj()
    )
    assert _bound(kube_client, namespace, "after") == node
