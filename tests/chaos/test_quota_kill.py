"""Scenarios sigkill-quotas and handover-quotas: tenant quotas never exceeded through a SIGKILL
during a burst of several tenants' pods, nor across a leader handover (issue 29).

Four tenant namespaces, each with an ElasticQuota (docs/quotas.md), send more pods than their
quotas hold: the mins add up to far less than the pods ask, two tenants may borrow beyond their
min, and the borrowers' pods come first, so the others must take back what they are owed by
preemption (CapacityScheduling's reclaim, whatever the priority). A thread plays the kubelets'
part for the victims. Until the last fault plumb talks to the API server through the fault
proxy, which holds half the bindings for a moment and drops the other half, and each fault waits,
after its random point, for a binding in flight (``bindings_in_flight_at_kill`` counts them).

While it goes on, a sampler reads the quotas and the pods from the API server about four times
a second and checks item 7 of the invariant (``invariant.quotas``) on each read, so a quota
exceeded for a moment and put right by a later preemption is caught too. At the end the whole
invariant holds and no sample saw a quota exceeded.

- sigkill-quotas: plumb SIGKILLed (twice short, four times full) at random points and started
  again each time; afterwards what the mins add up to is bound, no more, no less.
- handover-quotas: two replicas with Lease leader election (4 s lease); the leader SIGKILLed
  mid-burst (the standby takes over; the killed one comes back as the standby), then the new
  leader stalled (SIGSTOP) past its lease while it binds the second wave; while it is stopped
  the other takes over and some of the reclaiming tenants' pods finish (are deleted), so the
  new leader alone gives out their room; the stalled one, let go on, must stand down without
  sending another binding. Rejected: a build that does not count against its quota a pod it
  did not assume itself (``clustercache.add_pod``) fails both scenarios (run once, in a
  scratch copy): "namespace ...-b: 2500m cpu bound, ElasticQuota quota max 2000m cpu".

Found and fixed (docs/reliability.md): the stalled replica reported as its own, with "the
binding's answer was lost", a binding the new leader made to the node its own dropped try went
to (``false_lost_answer_reports`` counts them: 0 since); after a handover the last room of
the quotas could stay unused (a at 58 of its min 60, its pods refused because the sum of the
mins counted pods nominated by a preemption whose bindings then failed: their nominations were
never cleared). A failed binding now clears the nomination as kube-scheduler does, and both
scenarios require the quotas together full.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, quotaclient, schedulerplugins
from tests.chaos import faultproxy, harness, invariant
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

JSON = dict[str, Any]
POD_CPU = harness.size(500, 100)  # millicores
SCALE = harness.size(1, 15)
POD_MEMORY_MI = 64
POD_MEMORY = f"{POD_MEMORY_MI}Mi"
BINDING_DELAY = 0.5
HELD = (
    faultproxy.Rule(faultproxy.RequestClass.BINDING, faultproxy.Fault.DROP, 0.5),
    faultproxy.Rule(faultproxy.RequestClass.BINDING, faultproxy.Fault.DELAY, 0.5),
)
CATCH_SECONDS = 10.0  # at most, after the random point, for a binding in flight
LOST_ANSWER = "the binding's answer was lost"
FINISHED = harness.size(1, 10)  # bound pods of each reclaiming tenant deleted while stalled
SAMPLE_EVERY = 0.25
# 4 s lease, 3 s renew deadline, 1 s retry (as tests/integration/test_leader.py): short waits.
LEASE = 4.0
LEADER = (
    "--leader-elect",
    "--leader-elect-lease-duration",
    f"{LEASE:g}s",
    "--leader-elect-renew-deadline",
    "3s",
    "--leader-elect-retry-period",
    "1s",
)


@dataclasses.dataclass(frozen=True)
class QuotaTenant:
    """A tenant's quota and demand, in pods (each POD_CPU millicores and POD_MEMORY)."""

    suffix: str
    min: int
    max: int
    pods: int
    borrows: bool  # its pods come first, so it borrows what the others have not taken yet


TENANTS = (
    QuotaTenant("a", min=4 * SCALE, max=8 * SCALE, pods=10 * SCALE, borrows=True),
    QuotaTenant("b", min=4 * SCALE, max=4 * SCALE, pods=10 * SCALE, borrows=False),
    QuotaTenant("c", min=6 * SCALE, max=6 * SCALE, pods=10 * SCALE, borrows=False),
    QuotaTenant("d", min=2 * SCALE, max=6 * SCALE, pods=10 * SCALE, borrows=True),
)
FITS = sum(t.min for t in TENANTS)  # the sum of mins: what the quotas together allow
CPU_PER_NODE = 4
NODES = FITS * POD_CPU // (CPU_PER_NODE * 1000) * 2  # twice the room: the quotas bind first


@pytest.fixture
def tenants(
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, QuotaTenant]]:
    """The CRD (before plumb starts: it reads ElasticQuotas only if they are served then), a
    namespace and an ElasticQuota per tenant; afterwards the quotas go (another scenario's
    preemption would be CapacityScheduling's while any quota is left) and the pods with them."""
    schedulerplugins.install_elasticquotas(plane, tmp_path_factory.mktemp("quota-kubectl"))
    api = quotaclient.ElasticQuotaClient(client)
    slug = "q" + uuid.uuid4().hex[:6]
    made: dict[str, QuotaTenant] = {}
    try:
        for tenant in TENANTS:
            name = f"{slug}-{tenant.suffix}"
            client.create_namespace(name, account=False)
            made[name] = tenant
            api.create(
                quotaclient.elastic_quota(
                    name,
                    # Memory with room to spare (twice the pods' own): cpu binds first.
                    minimum={"cpu": _cpu(tenant.min), "memory": _memory(tenant.min)},
                    maximum={"cpu": _cpu(tenant.max), "memory": _memory(tenant.max)},
                )
            )
        yield made
    finally:
        for name in made:
            api.delete(name)
            client.delete_pods(name)


def _cpu(pods: int) -> str:
    return f"{pods * POD_CPU}m"


def _memory(pods: int) -> str:
    return f"{pods * 2 * POD_MEMORY_MI}Mi"


def _bodies(tenants: dict[str, QuotaTenant], *, first: bool) -> list[JSON]:
    """The pods of the tenants that borrow (first) or of the others, interleaved."""
    chosen = [(name, t) for name, t in tenants.items() if t.borrows == first]
    return [
        builders.make_pod(f"p-{i}", name)
        .scheduler(harness.SCHEDULER)
        .req(cpu=f"{POD_CPU}m", memory=POD_MEMORY)
        .obj()
        for i in range(max(t.pods for _, t in chosen))
        for name, t in chosen
        if i < t.pods
    ]


class BindingCounter(faultproxy.FaultProxy):
    """The fault proxy, counting the bindings it holds now (sent, not yet answered)."""

    def __init__(self, upstream: str, **kwargs: Any) -> None:
        super().__init__(upstream, **kwargs)
        self.in_flight = 0  # written on the proxy's loop, read by the test's thread

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        kind = faultproxy.classify(request.method, request.raw_path)
        if kind is not faultproxy.RequestClass.BINDING:
            return await super()._answer(request)
        self.in_flight += 1
        try:
            return await super()._answer(request)
        finally:
            self.in_flight -= 1

    def catch(self) -> int:
        """Waits (up to CATCH_SECONDS) for a binding in flight; how many there are."""
        deadline = time.monotonic() + CATCH_SECONDS
        while not self.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.in_flight


class QuotaSampler:
    """Checks the quotas (invariant item 7) on the API server's objects, again and again, from
    a thread with a connection of its own, until stopped; also finishes the deletion of
    terminating pods, as the nodes' kubelets would (the victims of the reclaims)."""

    def __init__(self, plane: controlplane.ControlPlane, namespaces: list[str]) -> None:
        self._client = kube.Kube(plane.kubeconfig)
        self._namespaces = namespaces
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.samples = 0
        self.reaped = 0
        self.seen: list[str] = []

    def __enter__(self) -> QuotaSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self._client.close()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            for namespace in self._namespaces:
                self.reaped += self._client.force_delete_terminating(namespace)
            found = invariant.quotas(self._client)
            self.samples += 1
            self.seen += [f"sample {self.samples}: {problem}" for problem in found]


def test_sigkill_during_a_burst_of_several_tenants_pods_never_exceeds_a_quota(
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    tenants: dict[str, QuotaTenant],
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    tmp_path: Path,
) -> None:
    nodes = harness.create_nodes(
        client, harness.nodes(NODES, prefix=node_prefix, cpu=str(CPU_PER_NODE))
    )
    kills = harness.size(2, 4)
    names = list(tenants)
    first_wave, second_wave = _bodies(tenants, first=True), _bodies(tenants, first=False)
    proxy = BindingCounter(plane.server, ca_file=plane.ca_file, delay=BINDING_DELAY)
    with proxy, QuotaSampler(plane, names) as sampler:
        proxy.set_rules(HELD)
        plumb = start_plumb(kubeconfig=proxy.write_kubeconfig(tmp_path / "kc", plane.token))
        rng = random.Random(29)
        # The borrowers' pods created first, so they are ahead in the queue; then the others'.
        for burst in _bursts(plane, first_wave):
            burst.join()
        bursts = _bursts(plane, second_wave)
        restarts, caught = [], []
        for kill in range(kills):
            target = int(FITS * (kill + rng.random()) / (kills + 1) * 0.9) + 1
            harness.wait_until(f"{target} pods bound", _at_least(client, names, target), 300)
            caught.append(proxy.catch())
            assert plumb.kill() == -9
            if kill == kills - 1:
                proxy.set_rules([])  # the rest at full speed
            began = time.monotonic()
            plumb.start()
            restarts.append(round(time.monotonic() - began, 1))
        for burst in bursts:
            burst.join()
        per_tenant = _settled(client, tenants)
        verdict = invariant.check(client, names, plumb)
    harness.record(
        "sigkill-quotas",
        pods=len(first_wave) + len(second_wave),
        nodes=len(nodes),
        tenants=len(tenants),
        faults=f"{kills} SIGKILL; until the last, bindings dropped or held {BINDING_DELAY} s",
        violations=len(verdict.violations) + len(sampler.seen),
        recovery_s=verdict.cache_matched_after,
        restart_s=restarts,
        bindings_in_flight_at_kill=caught,
        quota_samples=sampler.samples,
        victims=sampler.reaped,
        bound=verdict.bound,
        per_tenant=list(per_tenant.values()),
    )
    assert not verdict.violations, verdict.summary()
    assert not sampler.seen, f"quotas exceeded while the burst went on: {sampler.seen[:20]}"
    assert sum(per_tenant.values()) == FITS, per_tenant  # no room left unused
    # The short run's timing does not always leave a borrower to reclaim from (1 run in 5):
    # the full one must have reclaimed; the short one records how many victims it saw.
    assert sampler.reaped > 0 or not harness.FULL, "no tenant borrowed and gave back"
    # The kills landed where it matters: with bindings in flight.
    assert sum(caught) > 0, caught


@pytest.mark.long  # in make test-long (short there too); sigkill-quotas stays in make test
def test_leader_handovers_during_a_burst_of_several_tenants_pods_never_exceed_a_quota(
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    tenants: dict[str, QuotaTenant],
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    tmp_path: Path,
) -> None:
    nodes = harness.create_nodes(
        client, harness.nodes(NODES, prefix=node_prefix, cpu=str(CPU_PER_NODE))
    )
    names = list(tenants)
    first_wave, second_wave = _bodies(tenants, first=True), _bodies(tenants, first=False)
    proxy = BindingCounter(plane.server, ca_file=plane.ca_file, delay=BINDING_DELAY)
    with proxy, QuotaSampler(plane, names) as sampler:
        proxy.set_rules(HELD)
        kubeconfig = proxy.write_kubeconfig(tmp_path / "kc", plane.token)
        lease = ("--leader-elect-resource-namespace", names[0])
        replicas = [start_plumb(*LEADER, *lease, kubeconfig=kubeconfig) for _ in range(2)]
        harness.wait_until("a replica to lead", lambda: any(_leads(r) for r in replicas), 30)
        leader = next(r for r in replicas if _leads(r))
        standby = next(r for r in replicas if r is not leader)
        rng = random.Random(2929)
        caught = []

        # The leader SIGKILLed mid-way through the first wave, the borrowers' pods.
        bursts = _bursts(plane, first_wave)
        borrowed = sum(t.max for t in tenants.values() if t.borrows)
        target = int(borrowed * (0.2 + 0.5 * rng.random())) + 1
        harness.wait_until(f"{target} pods bound", _at_least(client, names, target), 300)
        caught.append(proxy.catch())
        assert leader.kill() == -9
        killed_at = time.monotonic()
        harness.wait_until("the standby to lead", lambda: _leads(standby) >= 1, 60)
        handovers = [round(time.monotonic() - killed_at, 1)]
        leader.start()  # back, as the standby
        leader, standby = standby, leader

        # The new leader stalled past its lease while it binds the second wave, which takes
        # back what the borrowers hold beyond their min.
        others = [name for name, t in tenants.items() if not t.borrows]
        owed = sum(tenants[name].min for name in others)
        bursts += _bursts(plane, second_wave)
        target = int(owed * 0.3 * rng.random()) + 1
        harness.wait_until(f"{target} pods bound", _at_least(client, others, target), 300)
        caught.append(proxy.catch())
        assert leader.process is not None
        led_before = _leads(standby)
        leader.process.send_signal(signal.SIGSTOP)
        stalled_at = time.monotonic()
        try:
            harness.wait_until("the standby to lead", lambda: _leads(standby) > led_before, 60)
            handovers.append(round(time.monotonic() - stalled_at, 1))
            took_over = time.time()
            # While the stalled one still holds its old picture, some of the others' pods
            # finish (deleted): the new leader alone must give their room to the next.
            finished = _finish(client, others, FINISHED)
            refilled: float | None = None
            with contextlib.suppress(kube.WaitTimeout):
                refilled = harness.wait_until(
                    "the new leader to fill the room", lambda: _bound(client, names) >= FITS, 30
                )
        finally:
            leader.process.send_signal(signal.SIGCONT)
        harness.wait_until(
            "the stalled leader to stand down", lambda: "lost leadership" in leader.output(), 30
        )
        proxy.set_rules([])
        for burst in bursts:
            burst.join()
        per_tenant = _settled(client, tenants)
        verdict = invariant.check(client, names, standby, replicas=[leader])
    # Found here and fixed: the stalled replica, let go on, reported as its own a binding the
    # new leader made to the node its dropped try went to (Scheduler.stand_down now drops the
    # term's lost answers). Counted apart, and a violation like any other.
    false = _false_reports(leader, standby)
    violations = list(verdict.violations)
    late = [
        line
        for line in leader.lines()
        if line.get("result") == invariant.SCHEDULED
        and line.get("bind_ms") is not None
        and invariant._epoch(str(line["time"])) - float(line["bind_ms"]) / 1000 > took_over
    ]
    harness.record(
        "handover-quotas",
        pods=len(first_wave) + len(second_wave),
        nodes=len(nodes),
        tenants=len(tenants),
        faults="leader SIGKILLed, then the next one stalled (SIGSTOP) past its 4 s lease; "
        f"until then bindings dropped or held {BINDING_DELAY} s",
        violations=len(violations) + len(sampler.seen) + len(late),
        recovery_s=verdict.cache_matched_after,
        handover_s=handovers,
        finished_while_stalled=finished,
        refilled_s=refilled,
        quotas_full=sum(per_tenant.values()) == FITS,
        bindings_in_flight_at_kill=caught,
        quota_samples=sampler.samples,
        victims=sampler.reaped,
        bound=verdict.bound,
        per_tenant=list(per_tenant.values()),
        false_lost_answer_reports=len(false),
    )
    assert not violations, "\n  ".join(violations)
    assert not sampler.seen, f"quotas exceeded while the burst went on: {sampler.seen[:20]}"
    assert not late, f"the stalled leader bound after the handover: {late[:5]}"
    # The short run's timing does not always leave a borrower to reclaim from (1 run in 5):
    # the full one must have reclaimed; the short one records how many victims it saw.
    assert sampler.reaped > 0 or not harness.FULL, "no tenant borrowed and gave back"
    assert sum(caught) > 0, caught


def _finish(client: kube.Kube, names: list[str], count: int) -> int:
    """Deletes ``count`` bound pods of each namespace at once, as if they had finished."""
    done = 0
    for name in names:
        bound = [p for p in client.pods(name) if p["spec"].get("nodeName")][:count]
        for pod in bound:
            client.core.delete_namespaced_pod(pod["metadata"]["name"], name, grace_period_seconds=0)
            done += 1
    return done


def _bursts(plane: controlplane.ControlPlane, bodies: list[JSON]) -> list[harness.Burst]:
    """One burst per namespace of ``bodies``, started."""
    namespaces = dict.fromkeys(b["metadata"]["namespace"] for b in bodies)
    return [
        harness.Burst(
            plane.kubeconfig, ns, [b for b in bodies if b["metadata"]["namespace"] == ns]
        ).start()
        for ns in namespaces
    ]


def _leads(replica: harness.RestartablePlumb) -> int:
    """How many times the replica (over its runs) became leader."""
    return replica.output().count("became leader")


def _bound_per_tenant(client: kube.Kube, names: list[str]) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter({name: 0 for name in names})
    for name in names:
        counts[name] += sum(
            bool(p["spec"].get("nodeName")) and not p["metadata"].get("deletionTimestamp")
            for p in client.pods(name)
        )
    return dict(counts)


def _bound(client: kube.Kube, names: list[str]) -> int:
    return sum(_bound_per_tenant(client, names).values())


def _at_least(client: kube.Kube, names: list[str], count: int) -> Callable[[], bool]:
    return lambda: _bound(client, names) >= count


def _settled(client: kube.Kube, tenants: dict[str, QuotaTenant]) -> dict[str, int]:
    """Waits until the quotas together are full (what the mins add up to is bound, no
    terminating victim left), then returns each tenant's bound pods."""
    names = list(tenants)
    try:
        harness.wait_until("the quotas together full", lambda: _bound(client, names) >= FITS, 120)
    except kube.WaitTimeout as error:
        raise AssertionError(f"{error}: {_bound_per_tenant(client, names)}") from None
    return _bound_per_tenant(client, names)


def _false_reports(stalled: harness.RestartablePlumb, leader: harness.RestartablePlumb) -> set[str]:
    """uids the stalled replica reported bound by a try of its own whose answer was lost (its
    try was dropped, never sent on) when the binding was the new leader's: the lost-answer
    report's fault this scenario found (docs/reliability.md), none since the fix."""
    theirs = {
        str(line["uid"])
        for line in leader.lines()
        if line.get("result") == invariant.SCHEDULED and not line.get("message")
    }
    return {
        str(line["uid"])
        for line in stalled.lines()
        if line.get("result") == invariant.SCHEDULED
        and str(line.get("message", "")).startswith(LOST_ANSWER)
        and line.get("uid") in theirs
    }
