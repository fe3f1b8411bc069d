"""Test doubles for the scheduler's unit tests: an API whose bindings answer from a script, a
clock the test moves by hand, the reference kernel as the scheduler's kernel, and a scheduler
built from them."""

from __future__ import annotations

import logging
from typing import Any

from plumb import binder, claimreservations, events, groupconditions
from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.framework import emulation
from plumb.k8s import client as k8s_client
from plumb.kernel import contract, reference
from plumb.observability import metrics as metrics_module
from plumb.observability import tracing

Answer = k8s_client.ApiResponse | Exception
"""What a fake API answers a request with: a response, or an error the client raised."""


class FakeApi:
    """Bindings answered from ``script`` in order (then 201 Created), and recorded; events
    recorded and accepted; status patches accepted."""

    def __init__(self, *script: Answer) -> None:
        self.script = list(script)
        self.binds: list[tuple[str, str]] = []
        self.events: list[dict[str, Any]] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.deletes: list[tuple[str, str]] = []

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, traceparent: str | None = None
    ) -> k8s_client.ApiResponse:
        self.binds.append((name, node))
        outcome = self.script.pop(0) if self.script else k8s_client.ApiResponse(status=201, body={})
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def create_event(
        self, *, namespace: str, event: dict[str, Any]
    ) -> k8s_client.ApiResponse:
        self.events.append(event)
        return k8s_client.ApiResponse(status=201, body={})

    async def patch_pod_status(
        self, *, namespace: str, name: str, patch: dict[str, Any]
    ) -> k8s_client.ApiResponse:
        self.patches.append((name, patch))
        return k8s_client.ApiResponse(status=200, body={})

    async def delete_pod(self, *, namespace: str, name: str, uid: str) -> k8s_client.ApiResponse:
        self.deletes.append((name, uid))
        return k8s_client.ApiResponse(status=200, body={})


class ManualClock:
    """Seconds that move only when the test moves them (``now``, or ``advance``)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def reference_kernel(cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
    return reference.run(cluster, batch)


def make_scheduler(
    api: FakeApi,
    clock: ManualClock,
    *,
    kernel: contract.KernelRunner = reference_kernel,
    log: logging.Logger | None = None,
    batch_size: int = scheduler_module.DEFAULT_BATCH,
    metrics: metrics_module.Metrics | None = None,
    kube: emulation.Emulation = emulation.NEWEST_EMULATION,
    claim_api: claimreservations.ExtendedClaimApi | None = None,
    group_api: groupconditions.GroupStatusApi | None = None,
) -> scheduler_module.Scheduler:
    """A scheduler over ``api`` on ``clock``, deciding as the release ``kube``; its trace lines
    go to ``log`` when given; its ResourceClaim writes go to ``claim_api``."""
    return scheduler_module.Scheduler(
        served=scheduler_module.defaults("plumb", kube),
        binder=binder.Binder(api),
        recorder=events.Recorder(api, instance="test", clock=clock),
        kernel=kernel,
        batch_size=batch_size,
        queue=queue_module.SchedulingQueue(clock=clock),
        tracer=None if log is None else tracing.Tracer(log=log, clock=clock),
        metrics=metrics,
        claim_api=claim_api,
        group_api=group_api,
    )
