"""Tenant quotas of scheduler-plugins' ElasticQuota (scheduling.x-k8s.io/v1alpha1) side by side:
each scenario runs under plumb and under scheduler-plugins' own kube-scheduler with its
CapacityScheduling plugin (``CAPACITY_SCHEDULING``: v0.34.7, built from its Go module, the
profile of its manifests/capacityscheduling/, the ElasticQuota CRD installed from plumb's
manifests/optional/), on the session's control plane, and asserts the same pods bound (and where,
on one node), the same victims and the FailedScheduling text as scheduler-plugins writes it.

What CapacityScheduling does, as these scenarios pin down (docs/quotas.md has the rules):
- a pod of a namespace with an ElasticQuota is refused in PreFilter when its quota's use plus
  its request would pass the quota's max, or when the use of all quotas together plus its
  request would pass the sum of all quotas' mins: a quota borrows beyond its own min only what
  the other quotas leave of theirs. A namespace without a quota is not limited at all;
- a max (or min) that names some resources makes every one of cpu, memory and
  ephemeral-storage it does not name 0, and any extended resource it does not name unlimited
  (max) or 0 (min);
- its preemption replaces DefaultPreemption: a pod whose quota would stay within its min takes
  back what it is owed from pods of other quotas that use more than their min, whatever their
  priority; a pod beyond its min preempts only lower-priority pods of its own namespace; a
  pod of a namespace without a quota preempts only lower-priority pods of such namespaces;
- the words: "0/N nodes are available: " then PreFilter's refusal, then, after ". ", the
  preemption's own "0/N nodes are available: ..." with no "preemption: " before it (that is
  DefaultPreemption's, which this profile disables, as it does DynamicResources' PostFilter);
  a preemption that found victims adds nothing (kube-scheduler v1.34's evaluator).
  scheduler-plugins is v1.34 whatever the control plane runs, so these are v1.34's words where
  releases differ.

Every pod has a termination grace period of 0: on these nodes without a kubelet a victim is then
gone as soon as it is deleted, and its quota use with it. Each scenario's namespaces are the
test's namespace (no quota: it holds the probes proving the nodes are in view) and tenants made
beside it; the quotas are deleted at the end, and a scenario starts only when no quota from
another one is left, since CapacityScheduling sums the mins and uses of every quota in the
cluster. Each scenario prints its tenants' events at the end (``pytest -rP`` shows them).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import kube, quotaclient, schedulerplugins
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.tenants import Tenants, no_quota_left

pytestmark = [pytest.mark.integration, pytest.mark.quotas]


def _max_words(namespace: str, pod: str) -> str:
    """PreFilter's refusal of a pod whose quota's use would pass its max."""
    because = f"ElasticQuota {namespace} is more than Max"
    return f"Pod {namespace}/{pod} is rejected in PreFilter because {because}"


def _min_words(namespace: str, pod: str) -> str:
    """PreFilter's refusal of a pod with which all quotas would use more than their mins."""
    because = "total ElasticQuota used is more than min"
    return f"Pod {namespace}/{pod} is rejected in PreFilter because {because}"


def _no_victims(node: str, pod: str) -> str:
    return f"1 No victims found on node {node} for preemptor pod {pod}"


def _refused(pre_filter: str, preemption: str) -> str:
    """The whole text of a pod refused in PreFilter on the one node of a scenario, preemption
    having found no victims: the evaluator's own "0/N nodes are available" follows without
    DefaultPreemption's "preemption: " (that plugin adds it; CapacityScheduling does not)."""
    return f"0/1 nodes are available: {pre_filter}. 0/1 nodes are available: {preemption}."


@pytest.fixture(params=(side_by_side.PLUMB, side_by_side.CAPACITY_SCHEDULING))
def tenants(
    request: pytest.FixtureRequest,
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    tmp_path: Path,
) -> Iterator[Tenants]:
    """plumb or scheduler-plugins' CapacityScheduling; the ElasticQuota CRD is installed first
    either way (plumb reads the ElasticQuotas of a CRD that exists when it starts)."""
    schedulerplugins.install_elasticquotas(control_plane, tmp_path / "kubectl-cache")
    no_quota_left(quotaclient.ElasticQuotaClient(kube_client))
    with side_by_side.scheduler_runner(request, request.param) as runner:
        scene = Tenants(kube_client, runner, namespace, add_node)
        try:
            yield scene
        finally:
            scene.clean()


CPU8 = {"cpu": "8"}


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_pods_within_their_quota_s_max_bind(tenants: Tenants) -> None:
    (node,) = tenants.nodes(CPU8)
    a = tenants.tenant("a", minimum={"cpu": "3"}, maximum={"cpu": "3"})

    placed = tenants.settle(a, *(tenants.pod(f"a-{i}", a, cpu="1") for i in range(3)))

    assert placed == {"a-0": node, "a-1": node, "a-2": node}


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_pod_beyond_its_quota_s_max_waits_and_says_so(tenants: Tenants) -> None:
    (node,) = tenants.nodes(CPU8)
    a = tenants.tenant("a", minimum={"cpu": "2"}, maximum={"cpu": "2"})
    assert tenants.settle(a, tenants.pod("a-0", a, cpu="1"), tenants.pod("a-1", a, cpu="1")) == {
        "a-0": node,
        "a-1": node,
    }

    assert tenants.settle(a, tenants.pod("a-2", a, cpu="1")) == {"a-2": None}
    # The node has room; the quota has not. Preemption looks for pods of the same namespace of
    # lower priority (its quota is beyond its min) and finds none.
    assert tenants.said(a, "a-2") == _refused(_max_words(a, "a-2"), _no_victims(node, "a-2"))


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_quota_borrows_the_min_of_idle_quotas_and_no_more(
    tenants: Tenants,
) -> None:
    (node,) = tenants.nodes(CPU8)
    a = tenants.tenant("a", minimum={"cpu": "2"}, maximum={"cpu": "6"})
    tenants.tenant("b", minimum={"cpu": "2"}, maximum={"cpu": "6"})

    placed = tenants.settle(a, *(tenants.pod(f"a-{i}", a, cpu="1") for i in range(4)))
    assert placed == dict.fromkeys(("a-0", "a-1", "a-2", "a-3"), node)
    # Below its max (6) and the node has room, but all quotas together would use more than the
    # sum of their mins (2 + 2): b's idle min is all a can borrow.
    assert tenants.settle(a, tenants.pod("a-4", a, cpu="1")) == {"a-4": None}
    assert tenants.said(a, "a-4") == _refused(_min_words(a, "a-4"), _no_victims(node, "a-4"))


def test_a_quota_under_its_min_takes_back_what_another_borrowed(
    tenants: Tenants,
) -> None:
    (node,) = tenants.nodes(CPU8)
    a = tenants.tenant("a", minimum={"cpu": "2"}, maximum={"cpu": "6"})
    b = tenants.tenant("b", minimum={"cpu": "2"}, maximum={"cpu": "6"})
    # a borrows b's min; distinct priorities make the victims one answer.
    borrowers = [f"a-{i}" for i in range(4)]
    placed = tenants.settle(
        a, *(tenants.pod(f"a-{i}", a, priority=i + 1, cpu="1") for i in range(4))
    )
    assert placed == dict.fromkeys(borrowers, node)

    # b-0 has priority 0, below all of a's: a quota under its min preempts pods of quotas
    # beyond theirs whatever their priority. The node has room; the sum of mins has not. All
    # of a's pods are candidates, reprieved most important first while the quotas allow:
    # a-3, a-2, a-1 fit the sum of mins (4) beside b-0, a-0 does not.
    tenants.create(tenants.pod("b-0", b, cpu="1"))
    assert tenants.bound(b, "b-0") == node

    assert tenants.gone(a, borrowers) == {"a-0"}
    uid = tenants.client.pod(b, "b-0")["metadata"]["uid"]
    assert tenants.preempted(a, "a-0") == [f"Preempted by pod {uid} on node {node}"]
    # Its first attempt's text: the refusal alone (a v1.34 kube-scheduler's evaluator adds
    # nothing when it finds victims).
    assert tenants.said(b, "b-0") == f"0/1 nodes are available: {_min_words(b, 'b-0')}."


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_namespace_without_quota_is_unlimited_and_preempts_only_its_like(
    tenants: Tenants,
) -> None:
    (node,) = tenants.nodes({"cpu": "4"})
    a = tenants.tenant("a", minimum={"cpu": "1"}, maximum={"cpu": "1"})
    c = tenants.tenant("c", quota=False)
    assert tenants.settle(a, tenants.pod("a-0", a, cpu="1")) == {"a-0": node}
    # 3 cpu in a namespace without quota, beyond the sum of mins (1): no quota counts them.
    open_pods = [tenants.pod(f"c-{i}", c, priority=i + 1, cpu="1") for i in range(3)]
    assert tenants.settle(c, *open_pods) == dict.fromkeys(("c-0", "c-1", "c-2"), node)

    # The node is full. a-0 has the lowest priority (0), but it is a quota's: a pod without
    # quota preempts only lower-priority pods of namespaces without quota, c-0 the least.
    tenants.create(tenants.pod("c-big", c, priority=10, cpu="1"))
    assert tenants.bound(c, "c-big") == node

    assert tenants.gone(c, ["c-0", "c-1", "c-2"]) == {"c-0"}
    assert tenants.gone(a, ["a-0"]) == set()
    assert tenants.said(c, "c-big") == "0/1 nodes are available: 1 Insufficient cpu."


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_each_resource_of_a_quota_counts_and_those_it_does_not_name(
    tenants: Tenants,
) -> None:
    gpu = "example.com/gpu"
    (node,) = tenants.nodes({"cpu": "8", "memory": "32Gi", gpu: "4"})
    limits = {"cpu": "4", "memory": "8Gi", gpu: "2"}
    a = tenants.tenant("a", minimum=limits, maximum=limits)
    b = tenants.tenant("b", minimum={"cpu": "2"}, maximum={"cpu": "2"})
    takes = {"cpu": "1", "memory": "2Gi", gpu: "1"}

    placed = tenants.settle(a, tenants.asking("a-0", a, takes), tenants.asking("a-1", a, takes))
    assert placed == {"a-0": node, "a-1": node}
    # Within cpu (3 of 4) and memory (6Gi of 8Gi), beyond the gpus (3 of 2).
    assert tenants.settle(a, tenants.asking("a-2", a, takes)) == {"a-2": None}
    assert tenants.said(a, "a-2") == _refused(_max_words(a, "a-2"), _no_victims(node, "a-2"))
    # b's max names only cpu: its memory max is 0, so any memory is beyond it.
    assert tenants.settle(b, tenants.pod("b-mem", b, cpu="1", memory="1Gi")) == {"b-mem": None}
    assert tenants.said(b, "b-mem") == _refused(_max_words(b, "b-mem"), _no_victims(node, "b-mem"))
    assert tenants.settle(b, tenants.pod("b-cpu", b, cpu="1")) == {"b-cpu": node}
    # Nor does it name the gpus: no max for them, but b's min of them is 0, and a's two are
    # all the mins hold: the sum of mins refuses a third.
    assert tenants.settle(b, tenants.asking("b-gpu", b, {gpu: "1"})) == {"b-gpu": None}
    assert tenants.said(b, "b-gpu") == _refused(_min_words(b, "b-gpu"), _no_victims(node, "b-gpu"))


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_batch_created_at_once_binds_exactly_what_the_max_holds(tenants: Tenants) -> None:
    (node,) = tenants.nodes(CPU8)
    a = tenants.tenant("a", minimum={"cpu": "3"}, maximum={"cpu": "3"})

    placed = tenants.settle(a, *(tenants.pod(f"a-{i}", a, cpu="1") for i in range(6)))

    bound = sorted(name for name, where in placed.items() if where)
    assert len(bound) == 3, placed
    assert {placed[name] for name in bound} == {node}
    for name in sorted(set(placed) - set(bound)):
        assert tenants.said(a, name) == _refused(_max_words(a, name), _no_victims(node, name))


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_deleted_quota_leaves_its_namespace_unlimited(tenants: Tenants) -> None:
    (node,) = tenants.nodes(CPU8)
    a = tenants.tenant("a", minimum={"cpu": "1"}, maximum={"cpu": "1"})
    assert tenants.settle(a, tenants.pod("a-0", a, cpu="1"), tenants.pod("a-1", a, cpu="1")) == {
        "a-0": node,
        "a-1": None,
    }

    tenants.quotas.delete(a)
    started = time.monotonic()
    where, nudges = tenants.bound_after_change(a, "a-1", node)
    print(
        f"a-1 bound {time.monotonic() - started:.1f} s after its quota was deleted, {nudges} nudges"
    )
    assert where == node
    # a-1 bound proves the scheduler has no quota for a any more: nothing limits it.
    assert tenants.settle(a, *(tenants.pod(f"a-{i}", a, cpu="1") for i in range(2, 5))) == {
        "a-2": node,
        "a-3": node,
        "a-4": node,
    }


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_raised_max_lets_a_waiting_pod_bind(tenants: Tenants) -> None:
    (node,) = tenants.nodes(CPU8)
    a = tenants.tenant("a", minimum={"cpu": "1"}, maximum={"cpu": "1"})
    tenants.tenant("b", minimum={"cpu": "2"})
    assert tenants.settle(a, tenants.pod("a-0", a, cpu="1"), tenants.pod("a-1", a, cpu="1")) == {
        "a-0": node,
        "a-1": None,
    }

    tenants.quotas.set_spec(a, {"min": {"cpu": "1"}, "max": {"cpu": "2"}})
    started = time.monotonic()
    where, nudges = tenants.bound_after_change(a, "a-1", node)
    print(f"a-1 bound {time.monotonic() - started:.1f} s after its max was raised, {nudges} nudges")
    assert where == node
    # Its max is reached again.
    assert tenants.settle(a, tenants.pod("a-2", a, cpu="1")) == {"a-2": None}
    assert tenants.said(a, "a-2") == _refused(_max_words(a, "a-2"), _no_victims(node, "a-2"))


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_quota_beyond_its_min_preempts_only_its_own_lower_priority_pods(
    tenants: Tenants,
) -> None:
    (node,) = tenants.nodes({"cpu": "4"})
    a = tenants.tenant("a", minimum={"cpu": "2"}, maximum={"cpu": "2"})
    b = tenants.tenant("b", minimum={"cpu": "2"}, maximum={"cpu": "2"})
    assert tenants.settle(b, tenants.pod("b-0", b, cpu="1"), tenants.pod("b-1", b, cpu="1")) == {
        "b-0": node,
        "b-1": node,
    }
    own = [tenants.pod("a-0", a, priority=1, cpu="1"), tenants.pod("a-1", a, priority=2, cpu="1")]
    assert tenants.settle(a, *own) == {"a-0": node, "a-1": node}

    # b's pods have priority 0, the lowest on the full node, but b is within its min: a, at
    # its max, preempts among its own lower-priority pods, and one suffices (a-0).
    tenants.create(tenants.pod("a-hi", a, priority=10, cpu="1"))
    assert tenants.bound(a, "a-hi") == node

    assert tenants.gone(a, ["a-0", "a-1"]) == {"a-0"}
    assert tenants.gone(b, ["b-0", "b-1"]) == set()
    assert tenants.said(a, "a-hi") == f"0/1 nodes are available: {_max_words(a, 'a-hi')}."
