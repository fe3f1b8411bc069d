"""The dra workload's devices and claims: the objects each run creates (a DeviceClass, one
ResourceSlice of 8 devices per node, a ResourceClaimTemplate whose request selects by attribute
and capacity, the initial pods' claims allocated beforehand), the ceiling's writes of a claim's
allocation, the check that no device went wrong, and the removal of it all.

The devices are API objects only, as the bench's nodes are: no driver runs. Every node has the
same 8 devices (``DEVICES``), of which the template's selector accepts 6 (``MATCHING``): one is
of another model, one has too little memory. Pod i (initial pods first) gets, from the ceiling,
node ``i % nodes`` as every workload does, and there the matching device ``i // nodes``; the
initial pods' claims are allocated the same way, so the schedulers start from a cluster where
those devices are taken. The measured pods' claims are made from the template by
kube-controller-manager's resourceclaim controller (``claimcontroller``), which both
schedulers wait for alike.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from plumb.backend.records import draobjects
from plumb.k8s import client as k8s_client
from plumb.k8s import quantities
from plumb_dev.bench import populating
from plumb_dev.testing import builders, drabuilders

JSON = dict[str, Any]
DRIVER = "gpu.bench.plumb.dev"
POD_CLAIM = "gpu"
"""The name of the claim in each pod's spec.resourceClaims."""
REQUEST = "gpu"
"""The name of the one request of each claim."""
TEMPLATE = "gpu"
"""The ResourceClaimTemplate in the run's namespace the measured pods name."""
MODEL = "a100"
MIN_MEMORY = "40Gi"
SELECTOR = (
    f'device.attributes["{DRIVER}"].model == "{MODEL}" && '
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{MIN_MEMORY}")) >= 0'
)
"""The template's request selector: by attribute (the model) and by capacity (the memory)."""
RUN_LABEL = "bench.plumb.dev/run"
"""The run label the slices carry as the nodes do (benchruns.RUN_LABEL), to delete them by."""
_CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """One device every node publishes."""

    name: str
    model: str
    memory: str


DEVICES: tuple[DeviceSpec, ...] = (
    DeviceSpec("gpu-0", "a100", "80Gi"),
    DeviceSpec("gpu-1", "a100", "80Gi"),
    DeviceSpec("gpu-2", "a100", "80Gi"),
    DeviceSpec("gpu-3", "a100", "80Gi"),
    DeviceSpec("gpu-4", "a100", "40Gi"),
    DeviceSpec("gpu-5", "a100", "40Gi"),
    DeviceSpec("gpu-6", "a100", "20Gi"),  # too little memory for the selector
    DeviceSpec("gpu-7", "t4", "80Gi"),  # another model
)


def selected(spec: DeviceSpec) -> bool:
    """Whether SELECTOR accepts the device, computed here without CEL (a unit test holds the
    two equal)."""
    return spec.model == MODEL and quantities.value(spec.memory) >= quantities.value(MIN_MEMORY)


MATCHING: tuple[str, ...] = tuple(spec.name for spec in DEVICES if selected(spec))
"""The devices of a node the template's request may get, in the slice's order."""


def capacity(nodes: int) -> int:
    """How many pods (one matching device each) a cluster of that many nodes holds."""
    return nodes * len(MATCHING)


def _device(spec: DeviceSpec, index: int) -> drabuilders.DeviceBuilder:
    # Attributes as a real GPU driver publishes them (scheduler_perf's slices are modelled on
    # one), so that a selector is evaluated on a device of a realistic size.
    return (
        drabuilders.device(spec.name)
        .attr("model", spec.model)
        .attr("driverVersion", "1.2.3", version=True)
        .attr("family", "bench")
        .attr("health", "Healthy")
        .attr("pciRoot", f"0{index % 2}")
        .attr("pciAddress", f"0000:0{index}:00.0")
        .attr("sriov", True)
        .attr("numa", index // 4)
        .capacity("memory", spec.memory)
        .capacity("millicores", "1k")
    )


def pool_of(node: str) -> str:
    """The pool (and slice) name of a node's devices."""
    return f"{node}-gpus"


@dataclasses.dataclass(frozen=True, kw_only=True)
class DraRun:
    """The DRA objects of one run: its namespace, its nodes (in index order), its run id."""

    namespace: str
    run_id: str
    node_names: Sequence[str]

    @property
    def device_class(self) -> str:
        """Cluster-scoped, so named after the run as the nodes are."""
        return f"bench-gpu-{self.run_id}"

    def slice_body(self, node: str) -> JSON:
        body = (
            drabuilders.make_slice(pool_of(node), DRIVER)
            .node(node)
            .devices(*(_device(spec, i) for i, spec in enumerate(DEVICES)))
            .obj()
        )
        body["metadata"]["labels"] = {RUN_LABEL: self.run_id}
        return body

    def class_body(self) -> JSON:
        return drabuilders.make_class(self.device_class).driver(DRIVER).obj()

    def template_body(self) -> JSON:
        template = drabuilders.make_template(TEMPLATE, self.namespace)
        return template.request(REQUEST, self.device_class, selectors=[SELECTOR]).obj()

    @staticmethod
    def initial_claim_name(pod: str) -> str:
        return f"{pod}-{POD_CLAIM}"

    def initial_claim_body(self, pod: str) -> JSON:
        claim = drabuilders.make_claim(self.initial_claim_name(pod), self.namespace)
        return claim.request(REQUEST, self.device_class, selectors=[SELECTOR]).obj()

    def node_of(self, pod_index: int) -> str:
        return self.node_names[pod_index % len(self.node_names)]

    def device_of(self, pod_index: int) -> str:
        """The matching device the ceiling (and the initial claims) give the pod_index-th pod
        on node_of(pod_index): round-robin fills each node's devices in the slice's order."""
        index = pod_index // len(self.node_names)
        if index >= len(MATCHING):
            raise ValueError(
                f"pod {pod_index} needs the matching device #{index} of its node, which has "
                f"{len(MATCHING)}: the workload has more pods than {len(self.node_names)} nodes "
                f"hold ({capacity(len(self.node_names))})"
            )
        return MATCHING[index]

    def allocation(self, node: str, device: str) -> JSON:
        """status.allocation of a claim given ``device`` of ``node``, as kube-scheduler writes
        it for a node-local device."""
        return {
            "devices": {
                "results": [
                    {"request": REQUEST, "driver": DRIVER, "pool": pool_of(node), "device": device}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        }


def initial_pod(pod: builders.PodBuilder, run: DraRun) -> builders.PodBuilder:
    """An initial pod: created bound, with a claim of its own allocated beforehand."""
    name = pod.obj()["metadata"]["name"]
    return pod.resource_claim(POD_CLAIM, claim=run.initial_claim_name(name))


def measured_pod(pod: builders.PodBuilder) -> builders.PodBuilder:
    """A measured pod: its claim made from the template by the resourceclaim controller."""
    return pod.resource_claim(POD_CLAIM, template=TEMPLATE)


def claim_of(pod: Mapping[str, Any]) -> str | None:
    """The name of the pod's claim: named in its spec, or made from the template and recorded
    in its status by the resourceclaim controller (None until it has)."""
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        if entry.get("name") == POD_CLAIM and entry.get("resourceClaimName"):
            return str(entry["resourceClaimName"])
    for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
        if entry.get("name") == POD_CLAIM and entry.get("resourceClaimName"):
            return str(entry["resourceClaimName"])
    return None


# --- the API ---------------------------------------------------------------------------------


async def _post(api: k8s_client.ApiClient, path: str, body: JSON) -> None:
    # plumb's client sends compact JSON, as kubectl does (see draclient.Dra._sent).
    response = await api.request("POST", path, body=body)
    if not response.ok:
        raise populating.PopulateError(
            f"POST {path}: HTTP {response.status}: {response.message()}; does the API server "
            f"serve resource.k8s.io/v1 (Kubernetes v1.34 or later)?"
        )


async def create_devices(api: k8s_client.ApiClient, run: DraRun) -> None:
    """The class, a slice per node and the template: what a cluster has before pods come."""
    await _post(api, _CLASSES, run.class_body())
    slices = [run.slice_body(node) for node in run.node_names]

    async def create(index: int) -> None:
        await _post(api, _SLICES, slices[index])

    await populating.many(len(slices), create)
    path = f"/apis/resource.k8s.io/v1/namespaces/{quote(run.namespace)}/resourceclaimtemplates"
    await _post(api, path, run.template_body())


async def create_initial_claims(api: k8s_client.ApiClient, run: DraRun, pods: int) -> None:
    """The claims of the initial pods init-00000 ..., before the pods that name them."""
    path = _CLAIMS.format(namespace=quote(run.namespace))

    async def create(index: int) -> None:
        await _post(api, path, run.initial_claim_body(f"init-{index:05d}"))

    await populating.many(pods, create)


async def reserve(
    api: k8s_client.ApiClient,
    namespace: str,
    claim: str,
    *,
    pod: str,
    uid: str,
    allocation: JSON,
) -> str | None:
    """What kube-scheduler's PreBind writes for a claim it allocated: the finalizer that keeps
    an allocated claim from being deleted, then the allocation and the pod's reservation in
    the status; None when both were accepted, else what the API server said."""
    path = f"{_CLAIMS.format(namespace=quote(namespace))}/{quote(claim)}"
    patch = {"metadata": {"finalizers": [draobjects.CLAIM_FINALIZER]}}
    response = await api.request("PATCH", path, body=patch, content_type=k8s_client.MERGE_PATCH)
    if not response.ok:
        return f"finalizer of claim {claim}: HTTP {response.status}: {response.message()}"
    status = {
        "status": {
            "allocation": allocation,
            "reservedFor": [{"resource": "pods", "name": pod, "uid": uid}],
        }
    }
    response = await api.request(
        "PATCH", f"{path}/status", body=status, content_type=k8s_client.MERGE_PATCH
    )
    if not response.ok:
        return f"allocation of claim {claim}: HTTP {response.status}: {response.message()}"
    return None


async def allocate_initial(
    api: k8s_client.ApiClient, run: DraRun, pods: Sequence[JSON], index_of: Mapping[str, int]
) -> None:
    """Allocates each initial pod's claim on its node's device and reserves it for the pod
    (``index_of``: pod name → its index in the run), as if a scheduler had."""

    async def allocate(position: int) -> None:
        pod = pods[position]
        name = pod["metadata"]["name"]
        index = index_of[name]
        node = run.node_of(index)
        problem = await reserve(
            api,
            run.namespace,
            run.initial_claim_name(name),
            pod=name,
            uid=pod["metadata"]["uid"],
            allocation=run.allocation(node, run.device_of(index)),
        )
        if problem:
            raise populating.PopulateError(f"initial pod {name}: {problem}")

    await populating.many(len(pods), allocate)


async def list_claims(api: k8s_client.ApiClient, namespace: str) -> list[JSON]:
    items, _ = await api.list_all(_CLAIMS.format(namespace=quote(namespace)))
    return items


async def list_slices(api: k8s_client.ApiClient, run_id: str) -> list[JSON]:
    items, _ = await api.list_all(f"{_SLICES}?labelSelector={quote(f'{RUN_LABEL}={run_id}')}")
    return items


async def delete_devices(api: k8s_client.ApiClient, run: DraRun) -> None:
    """The run's claims (their finalizers taken off first: no controller is left to), slices
    and class. The template goes with the namespace's other leftovers (benchruns keeps the
    namespace: nothing would finish deleting it)."""
    path = _CLAIMS.format(namespace=quote(run.namespace))
    await populating.unfinalize(api, path, await list_claims(api, run.namespace))
    await populating.delete_collection(api, path, {})
    await populating.delete_collection(api, _SLICES, {"labelSelector": f"{RUN_LABEL}={run.run_id}"})
    response = await api.request("DELETE", f"{_CLASSES}/{quote(run.device_class)}")
    if not response.ok and response.status != 404:
        raise populating.PopulateError(
            f"DELETE {_CLASSES}/{run.device_class}: HTTP {response.status}: {response.message()}"
        )
    await populating.wait_gone(
        f"claims in {run.namespace} and slices of run {run.run_id}",
        lambda: _remaining(api, run),
    )


async def _remaining(api: k8s_client.ApiClient, run: DraRun) -> int:
    return len(await list_claims(api, run.namespace)) + len(await list_slices(api, run.run_id))


# --- the check -------------------------------------------------------------------------------


def device_violations(
    nodes: Iterable[JSON], pods: Iterable[JSON], claims: Iterable[JSON]
) -> list[str]:
    """What went wrong with the devices, one sentence each: a device allocated to two claims;
    a bound pod of the run whose claim is missing, not allocated, not reserved for it, or
    allocated on a device its node cannot reach or the selector does not accept."""
    node_names = {node["metadata"]["name"] for node in nodes}
    by_name = {claim["metadata"]["name"]: claim for claim in claims}
    problems = []
    taken: Counter[tuple[str, str, str]] = Counter()
    for body in by_name.values():
        for result in _results(body):
            taken[(result["driver"], result["pool"], result["device"])] += 1
    for (driver, pool, device), count in sorted(taken.items()):
        if count > 1:
            problems.append(f"device {driver}/{pool}/{device} allocated to {count} claims")
    accepted = set(MATCHING)
    for pod in pods:
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if node not in node_names:
            continue
        name = pod["metadata"]["name"]
        claim = by_name.get(claim_of(pod) or "")
        if claim is None:
            problems.append(f"pod {name} is bound to {node} without its claim")
            continue
        uids = [entry.get("uid") for entry in (claim.get("status") or {}).get("reservedFor") or ()]
        if pod["metadata"]["uid"] not in uids:
            problems.append(f"pod {name}'s claim is not reserved for it")
        results = _results(claim)
        if not results:
            problems.append(f"pod {name} is bound to {node} with its claim not allocated")
        for result in results:
            if (result["driver"], result["pool"]) != (DRIVER, pool_of(node)):
                problems.append(
                    f"pod {name} is on {node} with device {result['pool']}/{result['device']}"
                )
            elif result["device"] not in accepted:
                problems.append(f"pod {name} got {result['device']}, which the selector refuses")
    return problems


def _results(claim: Mapping[str, Any]) -> list[JSON]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results: list[JSON] = (allocation.get("devices") or {}).get("results") or []
    return results
