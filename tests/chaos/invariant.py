"""The invariant every chaos scenario ends with, written once.

1. Every pod with schedulerName plumb (not being deleted) is bound, or pending with a
   FailedScheduling event that says why.
2. No pod was bound twice: plumb's trace lines (of every run of it) show at most one successful
   binding per pod uid, and the node it names is the node the pod is on.
3. No node is overcommitted: the requests of the pods bound to it (cpu, memory, pods and every
   extended resource it offers) stay within its allocatable. The requests are summed here from
   the pod specs, independently of plumb's own arithmetic.
4. No constraint of a bound pod was broken when it was bound: its node selector, required node
   affinity, NoSchedule/NoExecute taints and the node's cordon, judged against the node as the
   test last wrote it before the binding (``NodeHistory``; a change plumb could not have seen yet,
   within ``GRACE`` seconds before the decision, is not held against it), and required pod
   anti-affinity on the node's hostname among the bound pods.
5. plumb's cache, read from its debug snapshot, equals a fresh LIST of nodes and pods within
   ``SETTLE`` seconds of the fault ending: the same nodes (allocatable, cordon), the same bound
   pods on the same nodes, no ghost.
6. Devices (``devices``, from the API objects alone): no device (driver, pool, device) is in
   two ResourceClaims' allocations, unless every one takes it with admin access or as a share
   (consumable capacity); every bound pod's claims exist, are allocated, are reachable from
   its node (the allocation's nodeSelector matches the node) and are reserved for the pod.
7. Quotas (``quotas``, from the API objects alone): for every namespace with an ElasticQuota,
   the requests of its bound pods (not terminal; terminating ones still hold their room) stay
   within the quota's max, and those of every quota namespace together within the sum of the
   quotas' mins, both read as CapacityScheduling reads them (docs/quotas.md, "The rules").

``check`` returns the violations found (a scenario asserts there are none) with the figures
docs/reliability.md reports: pods bound and pending, and how long the cache took to match.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes import client as k8s

from plumb.k8s import quantities
from plumb_dev.testing import draclient, kube
from tests.chaos import harness

JSON = dict[str, Any]
SETTLE = 30.0
GRACE = 3.0
SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
TERMINAL = ("Succeeded", "Failed")


@dataclasses.dataclass(frozen=True, kw_only=True)
class InvariantVerdict:
    """What the check found."""

    violations: tuple[str, ...]
    bound: int
    pending: int
    cache_matched_after: float | None  # seconds; None when it never matched

    def summary(self) -> str:
        head = f"{self.bound} bound, {self.pending} pending with a reason"
        if not self.violations:
            return f"{head}; no violation"
        shown = "\n  ".join(self.violations[:30])
        return f"{head}; {len(self.violations)} violations:\n  {shown}"


class NodeHistory:
    """The node objects as the test wrote them over time, so that a binding is judged against
    the node as it was when plumb decided it (taints and labels change under node churn)."""

    def __init__(self) -> None:
        self._versions: dict[str, list[tuple[float, JSON | None]]] = defaultdict(list)

    def wrote(self, body: JSON | None, name: str | None = None) -> None:
        """Call after each write of a node (None: deleted)."""
        key = name or str((body or {})["metadata"]["name"])
        self._versions[key].append((time.time(), body))

    def at(self, name: str, when: float) -> tuple[JSON | None, bool]:
        """The node as last written before when, and whether it changed within GRACE of it."""
        before = [(t, body) for t, body in self._versions.get(name, []) if t <= when]
        recent = any(when - GRACE <= t <= when for t, _ in self._versions.get(name, []))
        return (before[-1][1] if before else None), recent

    def known(self, name: str) -> bool:
        return name in self._versions


def check(
    client: kube.Kube,
    namespaces: Iterable[str],
    plumb: harness.RestartablePlumb,
    *,
    history: NodeHistory | None = None,
    settle: float = SETTLE,
    wait: float = 120.0,
    replicas: Iterable[harness.RestartablePlumb] = (),
) -> InvariantVerdict:
    """Checks the invariant; first waits up to ``wait`` s for every pod to be settled (bound or
    FailedScheduling), then up to ``settle`` s for ``plumb``'s cache to match the API server.
    ``replicas``: the other replicas of a leader election, whose bindings count as its own."""
    runs = [plumb, *replicas]
    namespaces = list(namespaces)
    violations: list[str] = []
    deadline = time.monotonic() + wait
    while True:
        listed = [p for ns in namespaces for p in client.pods(ns)]
        ours = [
            p
            for p in listed
            if p["spec"].get("schedulerName") == harness.SCHEDULER
            and not p["metadata"].get("deletionTimestamp")
        ]
        reasons = _failed_scheduling(client, namespaces)
        unsettled = [
            _name(p)
            for p in ours
            if not p["spec"].get("nodeName") and p["metadata"]["uid"] not in reasons
        ]
        if not unsettled or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    violations += [f"{name}: neither bound nor FailedScheduling" for name in unsettled]
    bound = [p for p in ours if p["spec"].get("nodeName")]
    nodes = {n["metadata"]["name"]: n for n in client.nodes()}
    every_bound = [
        p
        for p in _all_pods(client)
        if p["spec"].get("nodeName") and p.get("status", {}).get("phase") not in TERMINAL
    ]
    violations += _bound_once(runs, bound)
    violations += _overcommit(nodes, every_bound)
    violations += _constraints(runs, bound, nodes, history)
    violations += devices(client, namespaces)
    violations += quotas(client)
    matched, problems = _cache_matches(client, plumb, settle)
    violations += problems
    return InvariantVerdict(
        violations=tuple(violations),
        bound=len(bound),
        pending=len(ours) - len(bound),
        cache_matched_after=matched,
    )


def _name(pod: JSON) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def _all_pods(client: kube.Kube) -> list[JSON]:
    listed: JSON = client._raw(client.core.list_pod_for_all_namespaces(_preload_content=False))
    items: list[JSON] = listed["items"]
    return items


def _failed_scheduling(client: kube.Kube, namespaces: list[str]) -> set[str]:
    """uids of the pods with a FailedScheduling event whose message says why."""
    return {
        str(e["involvedObject"]["uid"])
        for ns in namespaces
        for e in client.events(ns)
        if e.get("reason") == FAILED_SCHEDULING and e.get("message")
    }


def _bindings(runs: Iterable[harness.RestartablePlumb]) -> dict[str, list[JSON]]:
    found: dict[str, list[JSON]] = defaultdict(list)
    for plumb in runs:
        for line in plumb.lines():
            if line.get("result") == SCHEDULED and line.get("uid"):
                found[str(line["uid"])].append(line)
    return found


def _bound_once(runs: list[harness.RestartablePlumb], bound: list[JSON]) -> list[str]:
    bindings = _bindings(runs)
    problems = [
        f"uid {uid}: {len(lines)} successful bindings traced ({[ln.get('node') for ln in lines]})"
        for uid, lines in bindings.items()
        if len(lines) > 1
    ]
    for pod in bound:
        lines = bindings.get(pod["metadata"]["uid"], [])
        if lines and lines[0].get("node") != pod["spec"]["nodeName"]:
            problems.append(
                f"{_name(pod)}: on {pod['spec']['nodeName']} but plumb traced a binding to "
                f"{lines[0].get('node')}"
            )
    return problems


def requests(pod: JSON) -> dict[str, int]:
    """A pod's effective requests (cpu in millicores), as the API defines them: the larger of
    its containers' sum and each init container, plus the overhead; "pods" is 1."""
    spec = pod["spec"]

    def of(container: JSON) -> dict[str, int]:
        raw = (container.get("resources") or {}).get("requests") or {}
        return {name: _amount(name, text) for name, text in raw.items()}

    total: Counter[str] = Counter()
    for container in spec.get("containers") or []:
        total.update(of(container))
    for init in spec.get("initContainers") or []:
        for name, value in of(init).items():
            total[name] = max(total[name], value)
    pod_level = (spec.get("resources") or {}).get("requests") or {}
    for name, text in pod_level.items():
        total[name] = _amount(name, text)
    for name, text in (spec.get("overhead") or {}).items():
        total[name] += _amount(name, text)
    total["pods"] = 1
    return dict(total)


def _amount(name: str, text: Any) -> int:
    return quantities.milli_value(text) if name == "cpu" else quantities.value(text)


def _overcommit(nodes: Mapping[str, JSON], bound: list[JSON]) -> list[str]:
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in bound:
        used[pod["spec"]["nodeName"]].update(requests(pod))
    problems = []
    for name, total in used.items():
        node = nodes.get(name)
        if node is None:
            continue  # a deleted node's pods: the pod garbage collector's business
        allocatable = node.get("status", {}).get("allocatable") or {}
        for resource, amount in total.items():
            if resource not in allocatable:
                if amount > 0 and resource not in ("cpu", "memory", "ephemeral-storage"):
                    problems.append(f"node {name}: {amount} {resource} requested, none offered")
                continue
            limit = _amount(resource, allocatable[resource])
            if amount > limit:
                problems.append(f"node {name}: {amount} {resource} requested of {limit}")
    return problems


def _epoch(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _constraints(
    runs: list[harness.RestartablePlumb],
    bound: list[JSON],
    nodes: Mapping[str, JSON],
    history: NodeHistory | None,
) -> list[str]:
    bindings = _bindings(runs)
    problems = []
    for pod in bound:
        name = pod["spec"]["nodeName"]
        node: JSON | None = nodes.get(name)
        lines = bindings.get(pod["metadata"]["uid"])
        if history is not None and history.known(name):
            if not lines:
                continue  # bound by a run SIGKILLed before it traced: its time is unknown
            node, recent = history.at(name, _epoch(str(lines[0]["time"])))
            if recent:
                continue  # changed just before the decision: plumb may not have seen it
        if node is None:
            problems.append(f"{_name(pod)}: bound to {name}, which did not exist then")
            continue
        problems += [f"{_name(pod)} on {name}: {why}" for why in _node_fits(pod, node)]
    problems += _anti_affinity(bound, nodes)
    return problems


def _node_fits(pod: JSON, node: JSON) -> list[str]:
    spec = pod["spec"]
    labels: Mapping[str, str] = node["metadata"].get("labels") or {}
    why = []
    if node.get("spec", {}).get("unschedulable") and not _tolerates(
        spec, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        why.append("the node was cordoned")
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            why.append(f"nodeSelector {key}={value} not met")
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required and not any(
        _term_matches(term, labels) for term in required.get("nodeSelectorTerms") or []
    ):
        why.append("required node affinity not met")
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(spec, taint):
            why.append(f"taint {taint.get('key')}={taint.get('value', '')}:{taint['effect']}")
    return why


def _term_matches(term: JSON, labels: Mapping[str, str]) -> bool:
    for expression in term.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        if operator == "In" and labels.get(key) not in (values or []):
            return False
        if operator == "NotIn" and key in labels and labels[key] in (values or []):
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return bool(term.get("matchExpressions") or term.get("matchFields"))


def _tolerates(spec: JSON, taint: JSON) -> bool:
    for toleration in spec.get("tolerations") or []:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


def _anti_affinity(bound: list[JSON], nodes: Mapping[str, JSON]) -> list[str]:
    """Required anti-affinity on kubernetes.io/hostname: no two matching pods on one node."""
    problems = []
    by_node: dict[str, list[JSON]] = defaultdict(list)
    for pod in bound:
        by_node[pod["spec"]["nodeName"]].append(pod)
    for pod in bound:
        terms = ((pod["spec"].get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []
        for term in terms:
            if term.get("topologyKey") != "kubernetes.io/hostname":
                continue
            wanted = (term.get("labelSelector") or {}).get("matchLabels") or {}
            for other in by_node[pod["spec"]["nodeName"]]:
                if other is pod or other["metadata"]["namespace"] != pod["metadata"]["namespace"]:
                    continue
                labels = other["metadata"].get("labels") or {}
                if wanted and all(labels.get(k) == v for k, v in wanted.items()):
                    problems.append(
                        f"{_name(pod)} shares {pod['spec']['nodeName']} with "
                        f"{_name(other)} against its required anti-affinity"
                    )
    return problems


def _cache_matches(
    client: kube.Kube, plumb: harness.RestartablePlumb, settle: float
) -> tuple[float | None, list[str]]:
    """Seconds until plumb's snapshot equals a fresh LIST, or the differences at the end."""
    began = time.monotonic()
    differences: list[str] = ["the debug endpoint never answered"]
    while time.monotonic() - began <= settle:
        document = plumb.snapshot()
        if document is not None:
            differences = _differences(client, document)
            if not differences:
                return time.monotonic() - began, []
        time.sleep(1.0)
    return None, [
        f"cache differs from the API server after {settle:.0f} s: {d}" for d in differences[:20]
    ]


def _differences(client: kube.Kube, document: JSON) -> list[str]:
    cache = document["cache"]
    cached_nodes = {n["name"]: n for n in cache["nodes"]}
    listed_nodes = {n["metadata"]["name"]: n for n in client.nodes()}
    found = [f"ghost node {name}" for name in cached_nodes.keys() - listed_nodes.keys()]
    found += [f"node {name} missing" for name in listed_nodes.keys() - cached_nodes.keys()]
    for name in cached_nodes.keys() & listed_nodes.keys():
        cached, listed = cached_nodes[name], listed_nodes[name]
        if bool(cached.get("unschedulable")) != bool(listed["spec"].get("unschedulable")):
            found.append(f"node {name}: cordon differs")
        allocatable = listed.get("status", {}).get("allocatable") or {}
        for resource in ("cpu", "memory", "pods"):
            if resource in allocatable and cached["allocatable"].get(resource) != _amount(
                resource, allocatable[resource]
            ):
                found.append(f"node {name}: allocatable {resource} differs")
    cached_pods = {p["pod"]["uid"]: p["node"] for p in cache["pods"]}
    listed_pods = {
        p["metadata"]["uid"]: p["spec"]["nodeName"]
        for p in _all_pods(client)
        if p["spec"].get("nodeName") and p.get("status", {}).get("phase") not in TERMINAL
    }
    found += [
        f"ghost pod {uid} on {cached_pods[uid]}" for uid in cached_pods.keys() - listed_pods.keys()
    ]
    found += [f"bound pod {uid} missing" for uid in listed_pods.keys() - cached_pods.keys()]
    found += [
        f"pod {uid}: cache says {cached_pods[uid]}, API server {listed_pods[uid]}"
        for uid in cached_pods.keys() & listed_pods.keys()
        if cached_pods[uid] != listed_pods[uid]
    ]
    return found


# Devices --------------------------------------------------------------------------------------


def devices(client: kube.Kube, namespaces: Iterable[str]) -> list[str]:
    """Item 6 of the invariant: what the ResourceClaims, the pods and the nodes the API server
    has say of the devices (no ResourceClaim API: nothing to say)."""
    try:
        listed = client._raw(
            k8s.ResourceV1Api(client.api).list_resource_claim_for_all_namespaces(
                _preload_content=False
            )
        )
    except k8s.ApiException as error:
        if error.status == 404:
            return []
        raise
    pods = [pod for namespace in namespaces for pod in client.pods(namespace)]
    return device_violations(listed["items"], pods, client.nodes())


def device_violations(
    claims: Iterable[JSON], pods: Iterable[JSON], nodes: Iterable[JSON]
) -> list[str]:
    """``devices`` over listed objects: every claim of the cluster, the pods to check (their
    bound ones) and the nodes."""
    by_key = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": c for c in claims}
    by_name = {n["metadata"]["name"]: n for n in nodes}
    problems = _taken_twice(by_key)
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if not node or pod.get("status", {}).get("phase") in TERMINAL:
            continue
        for key in _claims_of(pod):
            problems += [
                f"{_name(pod)} on {node}: claim {key} {why}"
                for why in _claim_holds(by_key.get(key), pod, by_name.get(node))
            ]
    return problems


def _taken_twice(claims: Mapping[str, JSON]) -> list[str]:
    """Devices in more than one claim's allocation, each taken whole (not with admin access,
    not as a share of a device that allows several)."""
    holders: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for key, claim in claims.items():
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("adminAccess") or result.get("shareID"):
                continue
            holders[(result["driver"], result["pool"], result["device"])].add(key)
    return [
        f"device {'/'.join(device)} allocated to {len(keys)} claims: {', '.join(sorted(keys))}"
        for device, keys in sorted(holders.items())
        if len(keys) > 1
    ]


def _claims_of(pod: JSON) -> list[str]:
    """namespace/name of each claim a pod uses: named, made from a template (as its status
    records it; a missing record is reported as an unknown claim), or made by the scheduler
    for extended resources backed by devices."""
    namespace = pod["metadata"]["namespace"]
    status = pod.get("status") or {}
    keys = []
    for entry in pod["spec"].get("resourceClaims") or []:
        name = entry.get("resourceClaimName")
        if not name and entry.get("resourceClaimTemplateName"):
            name = draclient.generated_claim(pod, entry["name"])
            if name is None and not _recorded(pod, entry["name"]):
                name = f"<not made from template {entry['resourceClaimTemplateName']}>"
        if name:
            keys.append(f"{namespace}/{name}")
    extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:
        keys.append(f"{namespace}/{extended}")
    return keys


def _recorded(pod: JSON, name: str) -> bool:
    """Whether the pod's status says the controller decided on its claim ``name`` (a null
    claim name: none was needed)."""
    entries = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    return any(entry.get("name") == name for entry in entries)


def _claim_holds(claim: JSON | None, pod: JSON, node: JSON | None) -> list[str]:
    if claim is None:
        return ["does not exist"]
    status = claim.get("status") or {}
    allocation = status.get("allocation")
    why = []
    if not allocation:
        why.append("is not allocated")
    elif node is not None and not _reaches(allocation.get("nodeSelector"), node):
        why.append(f"is allocated where the node cannot reach it: {allocation['nodeSelector']}")
    reserved = {entry.get("uid") for entry in status.get("reservedFor") or []}
    if pod["metadata"]["uid"] not in reserved:
        why.append("is not reserved for the pod")
    return why


def _reaches(selector: JSON | None, node: JSON) -> bool:
    """Whether a NodeSelector (an allocation's: None, every node) matches the node: any term,
    each of its expressions on labels and fields."""
    if not selector:
        return True
    labels: Mapping[str, str] = node["metadata"].get("labels") or {}
    fields = {"metadata.name": str(node["metadata"]["name"])}
    for term in selector.get("nodeSelectorTerms") or []:
        expressions = term.get("matchExpressions") or []
        field_expressions = term.get("matchFields") or []
        if not expressions and not field_expressions:
            continue  # an empty term matches nothing
        if all(_requirement(e, labels) for e in expressions) and all(
            _requirement(e, fields) for e in field_expressions
        ):
            return True
    return False


def _requirement(expression: JSON, values: Mapping[str, str]) -> bool:
    key, operator = expression["key"], expression["operator"]
    wanted = expression.get("values") or []
    if operator == "In":
        return values.get(key) in wanted
    if operator == "NotIn":
        return values.get(key) not in wanted
    if operator == "Exists":
        return key in values
    if operator == "DoesNotExist":
        return key not in values
    if operator in ("Gt", "Lt") and key in values:
        try:
            have, bound = int(values[key]), int(wanted[0])
        except (ValueError, IndexError):
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


# Quotas ---------------------------------------------------------------------------------------

QUOTA_GROUP, QUOTA_VERSION, QUOTA_PLURAL = "scheduling.x-k8s.io", "v1alpha1", "elasticquotas"
# framework.Resource's own names: a bound that lists some names is 0 on those it leaves out.
FIXED = ("cpu", "memory", "ephemeral-storage")


def quotas(client: kube.Kube) -> list[str]:
    """Item 7 of the invariant: what the ElasticQuotas and the bound pods the API server has say
    of the quotas (no ElasticQuota CRD: nothing to say)."""
    try:
        listed = client._raw(
            k8s.CustomObjectsApi(client.api).list_cluster_custom_object(
                QUOTA_GROUP, QUOTA_VERSION, QUOTA_PLURAL, _preload_content=False
            )
        )
    except k8s.ApiException as error:
        if error.status == 404:
            return []
        raise
    return quota_violations(listed["items"], _all_pods(client))


def quota_violations(quotas: Iterable[JSON], pods: Iterable[JSON]) -> list[str]:
    """``quotas`` over listed objects: every ElasticQuota of the cluster and every pod (the
    bound, not terminal ones count). Each namespace's use against its quota's max, then the
    use of all quota namespaces together against the sum of their mins."""
    governing: dict[str, JSON] = {}
    for quota in sorted(
        quotas,
        key=lambda q: (q["metadata"].get("creationTimestamp") or "", q["metadata"]["name"]),
    ):
        governing.setdefault(quota["metadata"]["namespace"], quota)  # the oldest governs
    used: dict[str, Counter[str]] = {namespace: Counter() for namespace in governing}
    for pod in pods:
        namespace = pod["metadata"]["namespace"]
        placed = pod["spec"].get("nodeName") and pod.get("status", {}).get("phase") not in TERMINAL
        if placed and namespace in used:
            used[namespace].update(_quota_request(pod))
    problems = []
    for namespace, quota in sorted(governing.items()):
        upper = (quota.get("spec") or {}).get("max")
        if upper is None:
            continue  # no max: unlimited
        for resource, amount in sorted(used[namespace].items()):
            limit = _bound(upper, resource, missing=None)
            if limit is not None and amount > limit:
                problems.append(
                    f"namespace {namespace}: {_shown(resource, amount)} bound, ElasticQuota "
                    f"{quota['metadata']['name']} max {_shown(resource, limit)}"
                )
    together: Counter[str] = Counter()
    for each in used.values():
        together.update(each)
    for resource, amount in sorted(together.items()):
        lowest = sum(
            _bound((quota.get("spec") or {}).get("min") or {}, resource, missing=0) or 0
            for quota in governing.values()
        )
        if amount > lowest:
            problems.append(
                f"quota namespaces together: {_shown(resource, amount)} bound, sum of mins "
                f"{_shown(resource, lowest)} ({', '.join(sorted(used))})"
            )
    return problems


def _quota_request(pod: JSON) -> dict[str, int]:
    """What a pod counts against its quota: its effective requests on cpu, memory,
    ephemeral-storage and the scalar names (extended resources, hugepages-*), not "pods"
    (framework.Resource of a pod has no pod count)."""
    return {
        name: amount
        for name, amount in requests(pod).items()
        if amount and (name in FIXED or "/" in name or name.startswith(_SCALAR_PREFIXES))
    }


_SCALAR_PREFIXES = ("hugepages-", "attachable-volumes-")


def _bound(listed: Mapping[str, Any], resource: str, *, missing: int | None) -> int | None:
    """A quota's min or max on ``resource`` as CapacityScheduling reads a list it is given: a
    name it leaves out is 0 among cpu, memory and ephemeral-storage, ``missing`` otherwise (0
    for a min, None, unlimited, for a max)."""
    if resource in listed:
        return _amount(resource, listed[resource])
    return 0 if resource in FIXED else missing


def _shown(resource: str, amount: int) -> str:
    return f"{amount}m cpu" if resource == "cpu" else f"{amount} {resource}"
