"""The dra workload's objects: the devices each node publishes, the class and template whose
selectors pick 6 of them, the initial claims and the ceiling's allocations (distinct devices,
each on its pod's node), the writes a scheduler's PreBind makes, and the check of the result."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp import web

from plumb.backend.records import draobjects
from plumb.framework.devices import expressions
from plumb_dev.bench import draload, workloads
from plumb_dev.testing import builders
from tests.support import loopback

JSON = dict[str, Any]
NODES = ["n0", "n1", "n2"]


def _run() -> draload.DraRun:
    return draload.DraRun(namespace="bench-dra", run_id="abc123", node_names=NODES)


def test_each_node_publishes_8_devices_of_its_own_in_one_slice() -> None:
    run = _run()
    parsed = draobjects.parse_slice(run.slice_body("n1"))
    assert parsed.selection.node_name == "n1"
    assert (parsed.driver, parsed.pool, parsed.slice_count) == (draload.DRIVER, "n1-gpus", 1)
    assert [device.name for device in parsed.devices] == [f"gpu-{i}" for i in range(8)]
    # Deleted by the run's label at the end of the run, as the nodes are.
    assert run.slice_body("n1")["metadata"]["labels"] == {draload.RUN_LABEL: "abc123"}
    assert run.slice_body("n0")["metadata"]["name"] != run.slice_body("n1")["metadata"]["name"]


def test_the_template_selects_6_devices_by_model_and_memory_as_cel_does() -> None:
    """MATCHING (what the ceiling and the check rely on) is what the selectors, evaluated as
    plumb evaluates them, accept: one device is of another model, one has too little memory."""
    run = _run()
    template = draobjects.parse_template(run.template_body())
    assert template.problem is None
    (request,) = template.spec.requests
    assert request.exactly is not None
    assert request.exactly.device_class == run.device_class
    assert request.exactly.selectors == (draload.SELECTOR,)
    device_class = draobjects.parse_class(run.class_body())
    assert device_class.name == "bench-gpu-abc123"
    selectors = [*device_class.selectors, *request.exactly.selectors]
    compiled = [expressions.compile_selector(text) for text in selectors]
    assert all(selector.error is None for selector in compiled)
    devices = draobjects.parse_slice(run.slice_body("n0")).devices
    accepted = [
        device.name
        for device in devices
        if all(expressions.evaluate(s, draload.DRIVER, device) for s in compiled)
    ]
    assert accepted == list(draload.MATCHING) == [f"gpu-{i}" for i in range(6)]
    assert [draload.selected(spec) for spec in draload.DEVICES] == [True] * 6 + [False, False]
    refused = {spec.name: (spec.model, spec.memory) for spec in draload.DEVICES[6:]}
    assert refused == {"gpu-6": ("a100", "20Gi"), "gpu-7": ("t4", "80Gi")}


def test_the_initial_claims_ask_what_the_template_asks() -> None:
    run = _run()
    claim = draobjects.parse_claim(run.initial_claim_body("init-00003"))
    assert claim.problem is None
    assert claim.name == "init-00003-gpu"
    assert claim.spec == draobjects.parse_template(run.template_body()).spec


@pytest.mark.parametrize("quick", [False, True])
def test_round_robin_gives_every_pod_of_the_workload_its_own_matching_device_on_its_node(
    quick: bool,
) -> None:
    (dra,) = workloads.select(["dra"], quick=quick, large=False)
    names = [f"n{i}" for i in range(dra.nodes)]
    run = draload.DraRun(namespace="ns", run_id="r", node_names=names)
    pods = range(dra.initial_pods + dra.measured_pods)
    taken = [(run.node_of(i), run.device_of(i)) for i in pods]
    assert len(set(taken)) == len(taken)
    assert all(node == names[dra.ceiling_node(i)] for i, (node, _) in zip(pods, taken, strict=True))
    assert {device for _, device in taken} <= set(draload.MATCHING)
    # The initial pods, one per node at full size, take each node's first device.
    assert {run.device_of(i) for i in range(min(dra.initial_pods, dra.nodes))} == {"gpu-0"}


def test_a_pod_beyond_the_nodes_devices_has_none() -> None:
    run = _run()
    assert run.device_of(3 * 6 - 1) == "gpu-5"
    with pytest.raises(ValueError, match="more pods than 3 nodes hold \\(18\\)"):
        run.device_of(3 * 6)


def test_an_allocation_names_the_device_in_its_nodes_pool_and_selects_the_node() -> None:
    run = _run()
    body = run.initial_claim_body("init-00000")
    body["metadata"]["uid"] = "c-uid"
    body["status"] = {
        "allocation": run.allocation("n2", "gpu-4"),
        "reservedFor": [{"resource": "pods", "name": "init-00000", "uid": "p-uid"}],
    }
    claim = draobjects.parse_claim(body)
    assert claim.allocation is not None
    (device,) = claim.allocation.devices
    assert (device.request, device.driver, device.pool, device.device) == (
        "gpu",
        draload.DRIVER,
        "n2-gpus",
        "gpu-4",
    )
    assert claim.allocation.node_selection is not None
    (term,) = body["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]
    assert [(c.resource, c.name, c.uid) for c in claim.reserved_for] == [
        ("pods", "init-00000", "p-uid")
    ]


def test_initial_pods_name_their_claim_and_measured_pods_the_template() -> None:
    run = _run()
    initial = draload.initial_pod(builders.make_pod("init-00001", "ns"), run).obj()
    measured = draload.measured_pod(builders.make_pod("pod-00001", "ns")).obj()
    assert initial["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimName": "init-00001-gpu"}
    ]
    assert measured["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "gpu"}
    ]
    assert measured["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]
    assert draload.claim_of(initial) == "init-00001-gpu"
    # A measured pod's claim is known once the resourceclaim controller has recorded it.
    assert draload.claim_of(measured) is None
    measured["status"] = {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "pod-00001-gpu-x7k2p"}]
    }
    assert draload.claim_of(measured) == "pod-00001-gpu-x7k2p"


# --- the check --------------------------------------------------------------------------------


def _placed() -> tuple[list[JSON], list[JSON], list[JSON]]:
    """Nodes, pods and claims of a correct placement: pod i on n(i % 3) with device i // 3."""
    run = _run()
    nodes = [builders.make_node(name).obj() for name in NODES]
    pods, claims = [], []
    for i in range(5):
        name = f"init-{i:05d}"
        pod = draload.initial_pod(builders.make_pod(name, "ns").uid(f"u{i}"), run)
        pods.append(pod.node(run.node_of(i)).obj())
        claim = run.initial_claim_body(name)
        claim["status"] = {
            "allocation": run.allocation(run.node_of(i), run.device_of(i)),
            "reservedFor": [{"resource": "pods", "name": name, "uid": f"u{i}"}],
        }
        claims.append(claim)
    return nodes, pods, claims


def test_a_correct_placement_has_no_device_violations() -> None:
    nodes, pods, claims = _placed()
    assert draload.device_violations(nodes, pods, claims) == []
    # A pending pod of the run, its claim not made yet, is no violation either.
    pending = draload.measured_pod(builders.make_pod("pod-00000", "ns").uid("u9")).obj()
    assert draload.device_violations(nodes, [*pods, pending], claims) == []


def _results(claim: JSON) -> JSON:
    result: JSON = claim["status"]["allocation"]["devices"]["results"][0]
    return result


def test_a_device_given_twice_is_a_violation() -> None:
    nodes, pods, claims = _placed()
    _results(claims[3]).update(device="gpu-0")  # pod 3 on n0, where pod 0 holds gpu-0
    assert draload.device_violations(nodes, pods, claims) == [
        f"device {draload.DRIVER}/n0-gpus/gpu-0 allocated to 2 claims"
    ]


def test_a_device_of_another_node_or_refused_by_the_selector_is_a_violation() -> None:
    nodes, pods, claims = _placed()
    _results(claims[1]).update(pool="n2-gpus", device="gpu-5")
    _results(claims[2]).update(device="gpu-7")
    assert draload.device_violations(nodes, pods, claims) == [
        "pod init-00001 is on n1 with device n2-gpus/gpu-5",
        "pod init-00002 got gpu-7, which the selector refuses",
    ]


def test_a_bound_pod_without_its_claim_allocated_and_reserved_is_a_violation() -> None:
    nodes, pods, claims = _placed()
    del claims[0]["status"]["allocation"]
    claims[1]["status"]["reservedFor"] = []
    del claims[2]
    assert draload.device_violations(nodes, pods, claims) == [
        "pod init-00000 is bound to n0 with its claim not allocated",
        "pod init-00001's claim is not reserved for it",
        "pod init-00002 is bound to n2 without its claim",
    ]


# --- the API ----------------------------------------------------------------------------------


def _claims_app(
    calls: list[tuple[str, str, str, JSON | None]], refuse: str = ""
) -> web.Application:
    """An API server that records each write to claims; ``refuse``: the path it answers 409."""
    stored = [
        {"metadata": {"name": "a", "finalizers": [draobjects.CLAIM_FINALIZER]}},
        {"metadata": {"name": "b"}},
    ]

    async def write(request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else None
        calls.append((request.method, request.path, request.content_type, body))
        if request.path == refuse:
            return web.json_response({"kind": "Status", "message": "conflict"}, status=409)
        if request.method == "DELETE" and request.path.endswith("/resourceclaims"):
            stored.clear()
        return web.json_response({"kind": "Status", "status": "Success"})

    async def listing(request: web.Request) -> web.StreamResponse:
        items = copy.deepcopy(stored) if request.path.endswith("/resourceclaims") else []
        return web.json_response(
            {"kind": "List", "metadata": {"resourceVersion": "9"}, "items": items}
        )

    app = web.Application()
    app.router.add_get("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", listing)
    app.router.add_get("/apis/resource.k8s.io/v1/resourceslices", listing)
    app.router.add_route("*", "/apis/resource.k8s.io/v1/{tail:.*}", write)
    return app


async def test_reserving_writes_the_finalizer_then_the_allocation_and_the_pod() -> None:
    calls: list[tuple[str, str, str, JSON | None]] = []
    allocation = _run().allocation("n1", "gpu-2")
    async with loopback.serving(_claims_app(calls)) as port:
        api = loopback.client(port)
        try:
            problem = await draload.reserve(
                api, "ns", "pod-1-gpu-x", pod="pod-1", uid="u1", allocation=allocation
            )
        finally:
            await api.close()
    assert problem is None
    path = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/pod-1-gpu-x"
    merge = "application/merge-patch+json"
    assert calls == [
        ("PATCH", path, merge, {"metadata": {"finalizers": [draobjects.CLAIM_FINALIZER]}}),
        (
            "PATCH",
            f"{path}/status",
            merge,
            {
                "status": {
                    "allocation": allocation,
                    "reservedFor": [{"resource": "pods", "name": "pod-1", "uid": "u1"}],
                }
            },
        ),
    ]


async def test_a_refused_write_is_said_and_ends_the_reservation() -> None:
    calls: list[tuple[str, str, str, JSON | None]] = []
    path = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"
    async with loopback.serving(_claims_app(calls, refuse=path)) as port:
        api = loopback.client(port)
        try:
            problem = await draload.reserve(api, "ns", "c", pod="p", uid="u", allocation={})
        finally:
            await api.close()
    assert problem == "finalizer of claim c: HTTP 409: conflict"
    assert len(calls) == 1


async def test_removing_a_run_takes_the_finalizers_off_then_deletes_claims_slices_and_class() -> (
    None
):
    calls: list[tuple[str, str, str, JSON | None]] = []
    async with loopback.serving(_claims_app(calls)) as port:
        api = loopback.client(port)
        try:
            await draload.delete_devices(api, _run())
        finally:
            await api.close()
    claims = "/apis/resource.k8s.io/v1/namespaces/bench-dra/resourceclaims"
    assert [(method, path) for method, path, _, _ in calls] == [
        ("PATCH", f"{claims}/a"),  # b has no finalizer
        ("DELETE", claims),
        ("DELETE", "/apis/resource.k8s.io/v1/resourceslices"),
        ("DELETE", "/apis/resource.k8s.io/v1/deviceclasses/bench-gpu-abc123"),
    ]
    assert calls[0][3] == {"metadata": {"finalizers": None}}
