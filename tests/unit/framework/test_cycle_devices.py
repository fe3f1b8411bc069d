"""Pods with resource claims in one batch decide as the same pods one at a time: the same nodes,
the same devices, the same FailedScheduling words, whether they share a device column, keep
their own Filter verdict, or wait for the next batch."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.records import objects, specs
from plumb.framework import cycle, emulation, scoring
from plumb.framework.devices import availability
from plumb.framework.plugins import dynamicresources
from plumb.kernel import reference
from plumb_dev.testing import drabuilders as b
from plumb_dev.testing.builders import make_node, make_pod

GPU = "gpu.example.com"
BIG = f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0'
SMALL = f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) < 0'
A100 = f'device.attributes["{GPU}"].model == "a100"'
FEATURES = emulation.emulate(emulation.NEWEST).devices
# Every slice made here has a resourceVersion of its own: the selector verdicts are kept per
# slice name and resourceVersion for the process (dynamicresources.VERDICTS).
VERSIONS = itertools.count(1000)


def cluster(
    gpus: Sequence[Sequence[tuple[str, str]]], cpu: Sequence[str] | None = None
) -> cache_module.Cache:
    """A node per entry of ``gpus``, each with those (memory, model) GPUs in a node-local
    slice; ``cpu``: each node's cores (4 by default)."""
    cache = cache_module.Cache()
    cache.dra.on_class(b.make_class("gpu").driver(GPU).obj(), "gpu")
    for i, devices in enumerate(gpus):
        name = f"node-{i}"
        cores = cpu[i] if cpu is not None else "4"
        cache.upsert_node(objects.parse_node(make_node(name).capacity(cpu=cores).obj()))
        built = [
            b.device(f"g{d}").capacity("memory", memory).attr("model", model)
            for d, (memory, model) in enumerate(devices)
        ]
        body = b.make_slice(f"{name}-gpus", GPU).node(name).devices(*built).obj()
        body["metadata"]["resourceVersion"] = str(next(VERSIONS))
        cache.dra.on_slice(body, f"{name}-gpus")
    return cache


def claim_pod(
    cache: cache_module.Cache,
    name: str,
    *selectors: str,
    count: int = 1,
    cpu: str = "100m",
    claim: str = "",
    builder: Any = None,
) -> objects.PodInfo:
    """A pod with one claim asking for ``count`` GPUs matching ``selectors``, made for it from
    a template (``claim``: a claim of that name instead, shared by whoever names it)."""
    uid = f"uid-{name}"
    pod = (builder or make_pod(name, "ml")).uid(uid).req(cpu=cpu)
    own = claim or f"{name}-gpu"
    if claim:
        pod.resource_claim("gpu", claim=claim)
    else:
        pod.resource_claim("gpu", template="gpus")
    body = pod.obj()
    if not claim:
        body["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": own}]}
    if cache.dra.claim("ml", own) is None:
        spec = b.make_claim(own, "ml").request("gpu", "gpu", selectors=list(selectors), count=count)
        claim_body = spec.obj()
        claim_body["metadata"]["uid"] = f"uid-{own}"
        if not claim:
            owner = {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": name,
                "uid": uid,
                "controller": True,
            }
            claim_body["metadata"]["ownerReferences"] = [owner]
            annotations = {b.POD_CLAIM_NAME_ANNOTATION: "gpu"}
            claim_body["metadata"]["annotations"] = annotations
        cache.dra.on_claim(claim_body, "ml", own)
    return objects.parse_pod(body)


def decide(
    pods: Sequence[objects.PodInfo], cache: cache_module.Cache, profile: scoring.Profile
) -> tuple[list[cycle.Decision], tuple[objects.PodInfo, ...]]:
    """cycle.schedule_batch under ``profile``: the decisions, and the pods deferred."""
    prepared = cycle.prepare(pods, cache.snapshot(), cache, profile)
    decisions = list(prepared.early)
    if prepared.compiled is not None:
        result = reference.run(prepared.compiled.cluster, prepared.compiled.batch)
        decisions.extend(cycle.explain(prepared.compiled, result))
    return decisions, prepared.deferred


def reserve(
    cache: cache_module.Cache, decision: cycle.Decision, features: Any = FEATURES
) -> tuple[str, ...]:
    """The scheduler's Reserve for a placed pod (its devices assumed, the pod assumed)."""
    if decision.node is None:
        return ()
    node = cache.nodes.info(decision.node)
    assert node is not None
    reserved = dynamicresources.allocate_on(
        decision.pod, node, cache.dra, features, dynamicresources.MATCHER
    )
    assert reserved is not None, decision.pod.name
    taken = []
    for claim, allocation in reserved.claims:
        assert allocation is not None
        cache.dra.assume(claim.key, allocation, decision.pod.uid)
        taken += [f"{d.pool}/{d.device}" for d in allocation.devices]
    cache.assume(decision.pod, decision.node)
    return tuple(taken)


Outcome = tuple[str, str | None, str, tuple[str, ...]]


def in_batches(
    cache: cache_module.Cache,
    pods: Sequence[objects.PodInfo],
    profile: scoring.Profile = scoring.DEFAULT,
) -> list[Outcome]:
    """Decide the pods in batches (deferred ones first in the next), Reserve after each batch
    as the scheduler does; (pod, node, message, devices) in the order decided."""
    out: list[Outcome] = []
    waiting = list(pods)
    while waiting:
        batch, waiting = waiting[:32], waiting[32:]
        decisions, deferred = decide(batch, cache, profile)
        assert len(deferred) < len(batch)  # a batch always decides its first pod
        for decision in decisions:
            taken = reserve(cache, decision, profile.kube.devices)
            out.append((decision.pod.name, decision.node, decision.message, taken))
        waiting = [*deferred, *waiting]
    return out


def one_at_a_time(
    cache: cache_module.Cache,
    pods: Sequence[objects.PodInfo],
    profile: scoring.Profile = scoring.DEFAULT,
) -> list[Outcome]:
    out: list[Outcome] = []
    for pod in pods:
        (decision,), deferred = decide([pod], cache, profile)
        assert not deferred
        taken = reserve(cache, decision, profile.kube.devices)
        out.append((pod.name, decision.node, decision.message, taken))
    return out


def decided_together(cache: cache_module.Cache, pods: Sequence[objects.PodInfo]) -> int:
    """How many of the pods one kernel run decides."""
    prepared = cycle.prepare(pods, cache.snapshot(), cache)
    return 0 if prepared.compiled is None else len(prepared.compiled.pods)


def same_as_one_at_a_time(
    build: Any, names: Sequence[str], profile: scoring.Profile = scoring.DEFAULT
) -> list[Outcome]:
    """Build the cluster and pods twice; decide one copy in batches, the other one at a time
    in the order the batches decided; both must agree."""
    cache, pods = build()
    batched = in_batches(cache, pods, profile)
    order = [name for name, *_ in batched]
    cache, pods = build()
    by_name = {pod.name: pod for pod in pods}
    single = one_at_a_time(cache, [by_name[name] for name in order], profile)
    assert batched == single
    assert sorted(order) == sorted(names)
    return batched


# --- pods asking for the same devices share a column -------------------------------------------


def test_replicas_of_one_template_fill_the_gpus_in_one_batch_as_one_at_a_time() -> None:
    def build() -> tuple[cache_module.Cache, list[objects.PodInfo]]:
        cache = cluster([[("80Gi", "a100"), ("80Gi", "a100"), ("20Gi", "t4")]] * 4)
        return cache, [claim_pod(cache, f"train-{k}", BIG) for k in range(10)]

    cache, pods = build()
    assert decided_together(cache, pods) == 10
    outcomes = same_as_one_at_a_time(build, [f"train-{k}" for k in range(10)])
    placed = [node for _, node, _, _ in outcomes if node is not None]
    assert len(placed) == 8
    assert all(placed.count(f"node-{i}") == 2 for i in range(4))
    assert [message for _, node, message, _ in outcomes if node is None] == [
        "0/4 nodes are available: 4 cannot allocate all claims."
    ] * 2


def test_a_node_short_of_cpu_says_so_before_its_devices() -> None:
    def build() -> tuple[cache_module.Cache, list[objects.PodInfo]]:
        cache = cluster([[("80Gi", "a100")], [("80Gi", "a100")]], cpu=["1", "8"])
        return cache, [claim_pod(cache, f"train-{k}", BIG, cpu="800m") for k in range(3)]

    outcomes = same_as_one_at_a_time(build, ["train-0", "train-1", "train-2"])
    failed = [message for _, node, message, _ in outcomes if node is None]
    assert len(failed) == 1
    assert failed[0].startswith(
        "0/2 nodes are available: 1 Insufficient cpu, 1 cannot allocate all claims."
    )


def test_two_templates_for_devices_apart_share_the_batch() -> None:
    def build() -> tuple[cache_module.Cache, list[objects.PodInfo]]:
        cache = cluster([[("80Gi", "a100"), ("20Gi", "t4")]] * 3)
        pods = [
            claim_pod(cache, f"{kind}-{k}", selector)
            for k in range(4)
            for kind, selector in (("big", BIG), ("small", SMALL))
        ]
        return cache, pods

    cache, pods = build()
    assert decided_together(cache, pods) == 8
    same_as_one_at_a_time(build, [p.name for p in pods])


# --- what waits for the next batch, or keeps its own verdict -----------------------------------


def test_a_pod_whose_devices_another_selector_may_take_waits() -> None:
    def build() -> tuple[cache_module.Cache, list[objects.PodInfo]]:
        cache = cluster([[("80Gi", "a100"), ("20Gi", "a100")]] * 2)
        pods = [
            claim_pod(cache, "big-0", BIG),
            claim_pod(cache, "a100-0", A100),  # overlaps big-0's devices
            claim_pod(cache, "big-1", BIG),
        ]
        return cache, pods

    cache, pods = build()
    prepared = cycle.prepare(pods, cache.snapshot(), cache)
    assert [p.name for p in prepared.deferred] == ["a100-0"]
    assert prepared.compiled is not None
    assert [p.name for p in prepared.compiled.pods] == ["big-0", "big-1"]
    same_as_one_at_a_time(build, [p.name for p in pods])


def test_a_shared_claim_is_allocated_by_its_first_pod_only() -> None:
    def build() -> tuple[cache_module.Cache, list[objects.PodInfo]]:
        cache = cluster([[("80Gi", "a100")]] * 2)
        pods = [claim_pod(cache, f"worker-{k}", BIG, claim="shared") for k in range(2)]
        return cache, pods

    outcomes = same_as_one_at_a_time(build, ["worker-0", "worker-1"])
    assert outcomes[0][1] is not None


def test_an_anti_affinity_term_in_the_batch_keeps_the_verdicts_and_defers_the_rest() -> None:
    def build() -> tuple[cache_module.Cache, list[objects.PodInfo]]:
        cache = cluster([[("80Gi", "a100"), ("80Gi", "a100")]] * 2)
        apart = make_pod("lonely", "ml").label("app", "lonely")
        apart.affinity("kubernetes.io/hostname", {"app": "lonely"}, anti=True)
        pods = [
            claim_pod(cache, "lonely", BIG, builder=apart),
            claim_pod(cache, "train-0", BIG),
            claim_pod(cache, "train-1", BIG),
        ]
        return cache, pods

    cache, pods = build()
    prepared = cycle.prepare(pods, cache.snapshot(), cache)
    assert [p.name for p in prepared.deferred] == ["train-0", "train-1"]
    same_as_one_at_a_time(build, [p.name for p in pods])


def test_a_pod_the_allocator_decides_somewhere_goes_first_or_waits() -> None:
    def build() -> tuple[cache_module.Cache, list[objects.PodInfo]]:
        cache = cluster([[("80Gi", "a100")], [("80Gi", "a100")]])
        tainted = b.device("g9").capacity("memory", "80Gi").taint("flaky")
        body = b.make_slice("node-1-extra", GPU).node("node-1").devices(tainted).obj()
        body["metadata"]["resourceVersion"] = str(next(VERSIONS))
        cache.dra.on_slice(body, "node-1-extra")
        return cache, [claim_pod(cache, f"train-{k}", BIG) for k in range(3)]

    cache, pods = build()
    prepared = cycle.prepare(pods, cache.snapshot(), cache)
    assert [p.name for p in prepared.deferred] == ["train-1", "train-2"]
    same_as_one_at_a_time(build, ["train-0", "train-1", "train-2"])


def test_without_noderesourcesfit_pods_keep_their_verdicts() -> None:
    cache = cluster([[("80Gi", "a100"), ("80Gi", "a100")]] * 2)
    pods = [claim_pod(cache, f"train-{k}", BIG) for k in range(3)]
    profile = scoring.DEFAULT
    no_fit = profile.__class__(
        **{
            **{f: getattr(profile, f) for f in profile.__dataclass_fields__},
            "filters": profile.filters - {"NodeResourcesFit"},
        }
    )
    prepared = cycle.prepare(pods, cache.snapshot(), cache, no_fit)
    assert [p.name for p in prepared.deferred] == ["train-1", "train-2"]


def test_hard_default_spread_constraints_keep_the_verdicts() -> None:
    cache = cluster([[("80Gi", "a100"), ("80Gi", "a100")]] * 2)
    pods = [claim_pod(cache, f"train-{k}", BIG) for k in range(3)]
    hard = specs.SpreadConstraint(1, "kubernetes.io/hostname", "DoNotSchedule", None)
    listed = scoring.Profile(spread_defaulting="List", spread_defaults=(hard,))
    prepared = cycle.prepare(pods, cache.snapshot(), cache, listed)
    assert [p.name for p in prepared.deferred] == ["train-1", "train-2"]
    prepared = cycle.prepare(pods, cache.snapshot(), cache)
    assert prepared.deferred == ()


def test_device_columns_are_named_dynamicresources_in_the_trace_reasons() -> None:
    cache = cluster([[("20Gi", "t4")]] * 2)
    pods = [claim_pod(cache, f"train-{k}", BIG) for k in range(2)]
    prepared = cycle.prepare(pods, cache.snapshot(), cache)
    assert prepared.compiled is not None
    assert any(
        r.plugin == dynamicresources.NAME and r.message == "cannot allocate all claims"
        for r in prepared.compiled.static_reasons
    )
    decisions, _ = cycle.schedule_batch(pods, cache.snapshot(), cache)
    assert all(d.plugins == frozenset({dynamicresources.NAME}) for d in decisions)
    assert all(d.unresolvable for d in decisions)


# --- the property ------------------------------------------------------------------------------

GPU_KINDS = st.sampled_from([("80Gi", "a100"), ("80Gi", "t4"), ("20Gi", "a100"), ("20Gi", "t4")])
SELECTORS = st.sampled_from([(BIG,), (SMALL,), (A100,), (BIG, A100), ()])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    minor=st.sampled_from(sorted(emulation.MINORS)),
    gpus=st.lists(st.lists(GPU_KINDS, max_size=4), min_size=1, max_size=4),
    cpu=st.lists(st.sampled_from(["1", "2", "4"]), min_size=4, max_size=4),
    asks=st.lists(
        st.tuples(
            SELECTORS,
            st.integers(0, 2),
            st.sampled_from(["100m", "600m"]),
            st.sampled_from(["", "", "", "", "shared"]),
            st.sampled_from(["", "", "", "", "", "", "", "anti", "spread", "spread"]),
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_batches_with_claims_decide_as_one_at_a_time(
    minor: int,
    gpus: list[list[tuple[str, str]]],
    cpu: list[str],
    asks: list[tuple[tuple[str, ...], int, str, str, str]],
) -> None:
    def build() -> tuple[cache_module.Cache, list[objects.PodInfo]]:
        cache = cluster(gpus, cpu[: len(gpus)])
        pods = []
        for k, (selectors, count, cores, shared, anti) in enumerate(asks):
            builder = make_pod(f"p{k}", "ml").label("app", "x")
            if anti == "anti":
                builder.affinity("kubernetes.io/hostname", {"app": "x"}, anti=True)
            elif anti == "spread":
                builder.spread("kubernetes.io/hostname", 1, selector={"app": "x"})
            pods.append(
                claim_pod(
                    cache,
                    f"p{k}",
                    *selectors,
                    count=count,
                    cpu=cores,
                    claim=shared,
                    builder=builder,
                )
            )
        return cache, pods

    profile = scoring.Profile(kube=emulation.emulate(minor))
    same_as_one_at_a_time(build, [f"p{k}" for k in range(len(asks))], profile)


def test_sharing_admits_the_first_claim_pod_whatever_it_is() -> None:
    sharing = availability.Sharing()
    assert sharing.admit(["ml/a"], None, True) == (availability.STATIC, ())
    assert sharing.admit(["ml/b"], None, True) == (availability.DEFER, ())
