"""One replica's side of the election: campaign for the Lease, renew it, give it up (see the
package docstring for the rules, and the safety rule above all)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from plumb.k8s import client as k8s_client
from plumb.leader.records import ElectionSettings, Record, micro_time

__all__ = ["API_VERSION", "Clock", "Elector", "LeaseApi"]

logger = logging.getLogger("plumb.leader")

JSON = dict[str, Any]
API_VERSION = "coordination.k8s.io/v1"
_EXPIRY_SLACK = 0.01  # seconds past the expiry, so the check sees it expired


class LeaseApi(Protocol):
    """The part of the API client the elector uses (k8s.client.ApiClient; a fake in tests)."""

    async def get_lease(
        self, *, namespace: str, name: str, request_timeout: float | None = ...
    ) -> k8s_client.ApiResponse: ...

    async def create_lease(
        self, *, namespace: str, body: JSON, request_timeout: float | None = ...
    ) -> k8s_client.ApiResponse: ...

    async def replace_lease(
        self, *, namespace: str, name: str, body: JSON, request_timeout: float | None = ...
    ) -> k8s_client.ApiResponse: ...


class Clock(Protocol):
    """Seconds; monotonic for the elector's timing, epoch for the Lease's timestamps."""

    def __call__(self) -> float: ...


class Elector:
    """One replica's side of the election; ``run`` until cancelled, then ``release``."""

    def __init__(
        self,
        api: LeaseApi,
        settings: ElectionSettings,
        *,
        on_change: Callable[[bool], None] = lambda leading: None,
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._api = api
        self.settings = settings
        self._timings = settings.timings
        self.on_change = on_change
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self.leading = False
        self._observed: Record | None = None
        self._observed_at = 0.0  # our clock when the observed record last changed
        self._version: str | None = None  # resourceVersion of the Lease as last read/written
        self._renewed_at = -float("inf")  # our clock when the last successful write was sent
        self._last_problem = ""

    # The safety rule ---------------------------------------------------------------------------

    def may_act(self) -> bool:
        """Whether this replica may bind, post events and write status now."""
        return self.leading and self._clock() < self.deadline()

    def deadline(self) -> float:
        """Our clock's time after which the leader must not act without a new renewal."""
        return self._renewed_at + self._timings.renew_deadline

    @property
    def holder(self) -> str:
        """The identity the Lease names, as last read ("" when free or unread)."""
        return self._observed.holder if self._observed is not None else ""

    # The loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign, lead until a renewal fails past the deadline, campaign again; forever."""
        while True:
            await self._campaign()
            await self._lead()

    async def _campaign(self) -> None:
        """Try every retry period, on a fixed grid (a slow answer does not delay the next try),
        until the lease is ours."""
        period = self._timings.retry_period
        start = self._clock()
        attempt = 0
        while not await self.try_acquire_or_renew():
            attempt += 1
            wake = start + attempt * period
            expires = self._expires_at()
            if expires is not None and self._clock() < expires < wake:
                # Try again right as the holder's lease expires rather than up to a retry
                # period later: that keeps a takeover within lease duration + one retry period
                # of the holder's death (its last renewal reached us up to a period late).
                wake = expires + _EXPIRY_SLACK
                start, attempt = wake, 0
            await self._sleep(max(0.0, wake - self._clock()))
        self._set_leading(True)

    def _expires_at(self) -> float | None:
        """Our clock's time at which the lease as last seen expires; None when free or ours."""
        record = self._observed
        if record is None or not record.holder or record.holder == self.settings.identity:
            return None
        return self._observed_at + record.lease_duration

    async def _lead(self) -> None:
        """Renew every retry period; return when no renewal succeeded before the deadline, or
        the Lease names someone else."""
        period = self._timings.retry_period
        while True:
            next_try = self._renewed_at + period
            renewed = False
            while not renewed:
                await self._sleep(max(0.0, min(next_try, self.deadline()) - self._clock()))
                if not self.may_act() or self.holder not in ("", self.settings.identity):
                    self._lose()
                    return
                renewed = await self.try_acquire_or_renew()
                if not renewed and self.holder not in ("", self.settings.identity):
                    self._lose()
                    return
                next_try += period

    def _lose(self) -> None:
        if self.holder not in ("", self.settings.identity):
            why = f"the Lease names {self.holder} now"
        else:
            why = f"renew failed for {self._clock() - self._renewed_at:.1f} s"
        logger.warning(
            "lost leadership of Lease %s/%s: %s%s",
            self.settings.namespace,
            self.settings.name,
            why,
            f" ({self._last_problem})" if self._last_problem else "",
        )
        self._set_leading(False)

    def _set_leading(self, leading: bool) -> None:
        if leading == self.leading:
            return
        self.leading = leading
        if leading:
            logger.info(
                "became leader: %s holds Lease %s/%s",
                self.settings.identity,
                self.settings.namespace,
                self.settings.name,
            )
        self.on_change(leading)

    # One attempt --------------------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """One read and, when the lease is ours to take or keep, one write; True when it is
        ours now. client-go's tryAcquireOrRenew."""
        sent = self._clock()
        now = self._wall()
        namespace, name = self.settings.namespace, self.settings.name
        timeout = self._request_timeout()
        try:
            response = await self._api.get_lease(
                namespace=namespace, name=name, request_timeout=timeout
            )
        except k8s_client.TransportError as error:
            return self._failed(f"cannot read the Lease: {error}")
        mine = Record(
            holder=self.settings.identity,
            lease_duration=max(1, round(self._timings.lease_duration)),
            acquire_time=micro_time(now),
            renew_time=micro_time(now),
        )
        if response.status == 404:
            body = {
                "apiVersion": API_VERSION,
                "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace},
                "spec": mine.spec(),
            }
            return await self._write(body, mine, sent, create=True)
        if not response.ok:
            return self._failed(
                f"cannot read Lease {namespace}/{name}: HTTP {response.status}: "
                f"{response.message()}"
            )
        lease = response.body if isinstance(response.body, dict) else {}
        record = Record.of(lease)
        self._version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock()
        held_by_me = record.holder == self.settings.identity
        if (
            record.holder
            and not held_by_me
            and self._observed_at + record.lease_duration > self._clock()
        ):
            self._last_problem = ""
            return False  # someone else holds it and it has not expired
        if held_by_me and self.leading:
            mine = dataclasses.replace(
                mine, acquire_time=record.acquire_time, transitions=record.transitions
            )
        else:
            mine = dataclasses.replace(mine, transitions=record.transitions + 1)
        body = dict(lease)
        body["spec"] = mine.spec()
        return await self._write(body, mine, sent, create=False)

    async def _write(self, body: JSON, record: Record, sent: float, *, create: bool) -> bool:
        namespace, name = self.settings.namespace, self.settings.name
        timeout = self._request_timeout()
        try:
            if create:
                response = await self._api.create_lease(
                    namespace=namespace, body=body, request_timeout=timeout
                )
            else:
                response = await self._api.replace_lease(
                    namespace=namespace, name=name, body=body, request_timeout=timeout
                )
        except k8s_client.TransportError as error:
            return self._failed(f"cannot write the Lease: {error}")
        if not response.ok:
            # 409: someone wrote it since we read it; the next attempt reads it again.
            hint = ""
            if response.status == 404:
                hint = f"; create namespace {namespace} or pass --leader-elect-resource-namespace"
            elif response.status == 403:
                hint = "; plumb's Role must allow get, create and update on leases there"
            return self._failed(
                f"cannot {'create' if create else 'update'} Lease {namespace}/{name}: "
                f"HTTP {response.status}: {response.message()}{hint}"
            )
        written = response.body if isinstance(response.body, dict) else body
        self._version = str((written.get("metadata") or {}).get("resourceVersion") or "")
        self._observed = record
        self._observed_at = self._clock()
        self._renewed_at = sent
        self._last_problem = ""
        return True

    def _failed(self, problem: str) -> bool:
        if problem != self._last_problem:
            logger.warning("leader election: %s", problem)
        self._last_problem = problem
        return False

    def _request_timeout(self) -> float:
        # A request hanging past the deadline is no use to a leader; a candidate just retries.
        timeout = self._timings.renew_deadline / 2
        if self.leading:
            timeout = min(timeout, max(0.1, self.deadline() - self._clock()))
        return timeout

    # Shutdown -----------------------------------------------------------------------------------

    async def release(self) -> bool:
        """Give the lease up at once if we hold it (client-go's ReleaseOnCancel): no holder, so
        a standby need not wait for it to expire. Call after acting has stopped."""
        was_leading = self.leading
        self._set_leading(False)
        if not was_leading or self._observed is None or self._version is None:
            return False
        now = micro_time(self._wall())
        released = Record(
            holder="",
            lease_duration=1,
            acquire_time=now,
            renew_time=now,
            transitions=self._observed.transitions,
        )
        body = {
            "apiVersion": API_VERSION,
            "kind": "Lease",
            "metadata": {
                "name": self.settings.name,
                "namespace": self.settings.namespace,
                "resourceVersion": self._version,
            },
            "spec": released.spec(),
        }
        try:
            response = await self._api.replace_lease(
                namespace=self.settings.namespace,
                name=self.settings.name,
                body=body,
                request_timeout=self._timings.retry_period,
            )
        except k8s_client.TransportError as error:
            logger.warning("could not release the lease (it will expire instead): %s", error)
            return False
        if not response.ok:
            logger.warning(
                "could not release the lease (it will expire instead): HTTP %d: %s",
                response.status,
                response.message(),
            )
            return False
        logger.info("released the lease %s/%s", self.settings.namespace, self.settings.name)
        return True
