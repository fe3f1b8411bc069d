"""extenderclient against a local extender (tests/support/extender_server.py): the requests
kube-scheduler sends, the answers read as it reads them, and each error in its words."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from plumb.extensions import extenderclient, extenders
from plumb.extensions.extenderclient import ExtenderClient, ExtenderError, Victims
from tests.support.extender_server import ExtenderServer, Reply, _free_port

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "uid": "u-p", "managedFields": [{"x": 1}]},
    "spec": {"containers": [{"name": "c"}]},
}


def node(name: str) -> dict[str, Any]:
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "labels": {"a": "b"}}}


NODES = [node("n1"), node("n2"), node("n3")]


@pytest.fixture
def server() -> Iterator[ExtenderServer]:
    with ExtenderServer() as started:
        yield started


@pytest.fixture
async def make(server: ExtenderServer) -> AsyncIterator[Any]:
    clients: list[ExtenderClient] = []

    def build(**fields: Any) -> ExtenderClient:
        fields.setdefault("url_prefix", server.url + "/x/")
        client = ExtenderClient(extenders.Extender(**fields))
        clients.append(client)
        return client

    yield build
    for client in clients:
        await client.close()


async def test_filter_sends_whole_nodes_and_takes_the_nodes_answered(
    server: ExtenderServer, make: Any
) -> None:
    server.on(
        "filter",
        lambda args: {
            "nodes": {"items": [args["Nodes"]["items"][2]]},  # keys match ignoring case
            "FailedNodes": {"n1": "no licence"},
            "FailedAndUnresolvableNodes": {"n2": "rack retired"},
            "Unknown": 1,
        },
    )
    result = await make(filter_verb="filter").filter(POD, NODES)
    assert result.nodes == ("n3",)
    assert result.returned == ({"metadata": {"name": "n3", "labels": {"a": "b"}}},)
    assert result.failed == {"n1": "no licence"}
    assert result.failed_and_unresolvable == {"n2": "rack retired"}
    (request,) = server.requests("filter")
    assert request.path == "/x/filter"  # the prefix's trailing "/" is dropped
    assert request.headers["Content-Type"] == "application/json"
    body = request.body
    assert set(body) == {"Pod", "Nodes", "NodeNames"}
    assert body["NodeNames"] is None
    assert body["Nodes"]["metadata"] == {}
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["n1", "n2", "n3"]
    assert all("kind" not in n for n in body["Nodes"]["items"])
    assert "managedFields" not in body["Pod"]["metadata"]
    assert "kind" not in body["Pod"]


async def test_filter_of_a_cache_capable_extender_sends_and_takes_names(
    server: ExtenderServer, make: Any
) -> None:
    server.on("filter", lambda args: {"NodeNames": ["n2"], "Nodes": {"items": [node("n9")]}})
    result = await make(filter_verb="filter", node_cache_capable=True).filter(POD, NODES)
    assert (result.nodes, result.returned) == (("n2",), None)
    assert server.bodies("filter")[0]["Nodes"] is None
    assert server.bodies("filter")[0]["NodeNames"] == ["n1", "n2", "n3"]


async def test_filter_answering_neither_list_drops_every_node(
    server: ExtenderServer, make: Any
) -> None:
    # A non-cache-capable extender's NodeNames are not read.
    server.on("filter", lambda args: {"NodeNames": ["n1"]})
    result = await make(filter_verb="filter").filter(POD, NODES)
    assert result.nodes == ()
    assert result.failed == {}


async def test_filter_naming_a_node_it_was_not_sent_fails(
    server: ExtenderServer, make: Any
) -> None:
    server.on("filter", lambda args: {"NodeNames": ["n9"]})
    with pytest.raises(ExtenderError) as raised:
        await make(filter_verb="filter", node_cache_capable=True).filter(POD, ["n1"])
    assert str(raised.value) == (
        f'extender "{server.url}/x/" claims a filtered node "n9" which is not found in the '
        "input node list"
    )


async def test_without_a_verb_nothing_is_called(server: ExtenderServer, make: Any) -> None:
    client = make()
    assert (await client.filter(POD, NODES)).nodes == ("n1", "n2", "n3")
    assert await client.prioritize(POD, NODES) == ()
    with pytest.raises(ExtenderError, match=r"^unexpected empty bindVerb in extender$"):
        await client.bind("ns", "p", "u", "n1")
    assert server.requests() == []


async def test_the_extender_s_error_is_the_error(server: ExtenderServer, make: Any) -> None:
    server.on("filter", lambda args: {"Error": "licence server unreachable", "NodeNames": []})
    with pytest.raises(ExtenderError) as raised:
        await make(filter_verb="filter").filter(POD, NODES)
    assert str(raised.value) == "licence server unreachable"


async def test_a_status_other_than_200_fails(server: ExtenderServer, make: Any) -> None:
    server.on("filter", lambda args: Reply(status=500, body={}))
    with pytest.raises(ExtenderError) as raised:
        await make(filter_verb="filter").filter(POD, NODES)
    assert str(raised.value) == (
        f"failed filter with extender at URL {server.url}/x/filter, code 500"
    )


async def test_a_refused_connection_is_go_s_dial_error(make: Any) -> None:
    port = _free_port()  # nothing listens there
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(ExtenderError) as raised:
        await make(url_prefix=url, filter_verb="filter").filter(POD, NODES)
    assert str(raised.value) == (
        f'Post "{url}/filter": dial tcp 127.0.0.1:{port}: connect: connection refused'
    )


async def test_a_timeout_before_the_headers(server: ExtenderServer, make: Any) -> None:
    server.on("filter", lambda args: Reply(body={}, delay=1.0))
    client = make(filter_verb="filter", http_timeout=0.2)
    with pytest.raises(ExtenderError) as raised:
        await client.filter(POD, NODES)
    assert str(raised.value) == (
        f'Post "{server.url}/x/filter": context deadline exceeded (Client.Timeout exceeded '
        "while awaiting headers)"
    )


async def test_no_timeout_waits(server: ExtenderServer, make: Any) -> None:
    server.on("filter", lambda args: Reply(body={"NodeNames": ["n1"]}, delay=0.3))
    client = make(filter_verb="filter", http_timeout=None, node_cache_capable=True)
    assert (await client.filter(POD, NODES)).nodes == ("n1",)


async def test_prioritize_keeps_the_list_as_answered(server: ExtenderServer, make: Any) -> None:
    server.on(
        "prio",
        lambda args: [{"Host": "n1", "Score": 3}, {"host": "n9", "score": -2}, {"Host": "n1"}],
    )
    client = make(prioritize_verb="prio", weight=3, node_cache_capable=True)
    assert await client.prioritize(POD, NODES) == (("n1", 3), ("n9", -2), ("n1", 0))
    assert extenders.weighted(10, client.extender) == 300


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (
            [{"Host": "n1", "Score": 1.5}],
            "json: cannot unmarshal number 1.5 into Go struct field HostPriority.Score of type "
            "int64",
        ),
        ({"Host": "n1"}, "json: cannot unmarshal object into Go value of type v1.HostPriorityList"),
        (Reply(body=b""), "EOF"),
        (Reply(body=b"oops"), "invalid character 'o' looking for beginning of value"),
    ],
)
async def test_an_answer_go_cannot_decode_fails(
    server: ExtenderServer, make: Any, answer: Any, words: str
) -> None:
    server.on("prio", lambda args: answer)
    with pytest.raises(ExtenderError) as raised:
        await make(prioritize_verb="prio", weight=1).prioritize(POD, NODES)
    assert str(raised.value) == words


async def test_bind_sends_the_pod_s_identity(server: ExtenderServer, make: Any) -> None:
    server.on("bind", lambda args: {})
    await make(bind_verb="bind").bind("ns", "p", "u-p", "n2")
    assert server.bodies("bind") == [
        {"PodName": "p", "PodNamespace": "ns", "PodUID": "u-p", "Node": "n2"}
    ]
    server.on("bind", lambda args: {"Error": "gpu driver not ready"})
    with pytest.raises(ExtenderError, match=r"^gpu driver not ready$"):
        await make(bind_verb="bind").bind("ns", "p", "u-p", "n2")


def victim(uid: str) -> dict[str, Any]:
    return {"metadata": {"name": uid, "uid": uid, "managedFields": []}, "spec": {}}


async def test_preempt_sends_whole_victims_and_reads_meta_victims(
    server: ExtenderServer, make: Any
) -> None:
    server.on(
        "preempt",
        lambda args: {
            "NodeNameToMetaVictims": {
                "n1": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 1},
                "n2": None,
            }
        },
    )
    victims = {"n1": Victims(pods=(victim("v1"),)), "n2": Victims(pods=(victim("v2"),))}
    answer = await make(preempt_verb="preempt").preempt(POD, victims)
    assert answer == {"n1": (("v1",), 1), "n2": ((), 0)}
    body = server.bodies("preempt")[0]
    assert body["NodeNameToMetaVictims"] is None
    assert body["NodeNameToVictims"]["n1"] == {
        "Pods": [{"metadata": {"name": "v1", "uid": "v1"}, "spec": {}}],
        "NumPDBViolations": 0,
    }


async def test_preempt_of_a_cache_capable_extender_sends_uids(
    server: ExtenderServer, make: Any
) -> None:
    server.on("preempt", lambda args: {"NodeNameToMetaVictims": {}})
    victims = {"n1": Victims(pods=(victim("v1"),), pdb_violations=2)}
    client = make(preempt_verb="preempt", node_cache_capable=True)
    assert await client.preempt(POD, victims) == {}
    body = server.bodies("preempt")[0]
    assert body["NodeNameToVictims"] is None
    assert body["NodeNameToMetaVictims"] == {"n1": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 2}}


async def test_calls_run_concurrently_over_one_session(server: ExtenderServer, make: Any) -> None:
    server.on("prio", lambda args: Reply(body=[{"Host": "n1", "Score": 1}], delay=0.3))
    client = make(prioritize_verb="prio", weight=1, node_cache_capable=True)
    loop = asyncio.get_running_loop()
    started = loop.time()
    answers = await asyncio.gather(*(client.prioritize(POD, NODES) for _ in range(4)))
    assert answers == [(("n1", 1),)] * 4
    assert loop.time() - started < 1.0


def test_tls_insecure_with_a_ca_is_refused_at_build() -> None:
    tls = extenders.Tls(insecure=True, ca_file="/nonexistent/ca.pem")
    with pytest.raises(ExtenderError) as raised:
        ExtenderClient(extenders.Extender(url_prefix="https://x", tls=tls))
    assert str(raised.value) == (
        "couldn't build extenders: specifying a root certificates file with the insecure "
        "flag is not allowed"
    )


def test_tls_files_are_read_at_build() -> None:
    tls = extenders.Tls(ca_file="/nonexistent/ca.pem")
    with pytest.raises(ExtenderError) as raised:
        ExtenderClient(extenders.Extender(url_prefix="https://x", tls=tls))
    assert str(raised.value) == (
        "couldn't build extenders: open /nonexistent/ca.pem: no such file or directory"
    )


def test_enable_https_without_a_ca_is_insecure() -> None:
    context = extenderclient.ssl_context(extenders.Extender(url_prefix="x", enable_https=True))
    assert context is not None
    assert not context.check_hostname
    assert extenderclient.ssl_context(extenders.Extender(url_prefix="x")) is None
