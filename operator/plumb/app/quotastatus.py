"""ElasticQuota status.used, written as scheduler-plugins' ElasticQuota controller writes it, so
that a cluster that runs plumb instead of scheduler-plugins keeps ``kubectl get eq`` true.

The controller (scheduler-plugins v0.34.7, pkg/controllers/elasticquota_controller.go) sums, per
namespace, the requests of the pods whose phase is Running (each pod: the larger, per resource,
of its containers' sum and its largest init container; its overhead is not counted), starting
from a zero for every resource the quota's min or max names; it patches status.used only when
that differs from what is there (quantities compared by value). plumb does the same on the
leader every ``INTERVAL`` seconds for each quota, reading the Running pods from the API server
(the scheduler's cache does not follow pod phases). What the scheduler enforces is a different
figure: the requests of the pods bound or assumed (docs/quotas.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from fractions import Fraction
from typing import Any
from urllib.parse import quote

from plumb.backend.cache import quotas
from plumb.backend.records import quotaobjects
from plumb.backend.records.quotaobjects import ElasticQuota
from plumb.k8s import client as k8s_client
from plumb.k8s import quantities

logger = logging.getLogger(__name__)

INTERVAL = 2.0
JSON = dict[str, Any]
_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def decimal(value: Fraction) -> str:
    """A quantity in Kubernetes' canonical DecimalSI form: the largest power of 1000 that
    leaves a whole mantissa (1.5 → "1500m", 2000000000 → "2G"); nano units at most."""
    if value == 0:
        return "0"
    for exponent in sorted(_SUFFIXES, reverse=True):
        mantissa = value / Fraction(10) ** exponent
        if mantissa.denominator == 1:
            return f"{mantissa.numerator}{_SUFFIXES[exponent]}"
    nanos = -(-value * 10**9 // 1)  # rounded up, as Kubernetes rounds a finer value
    return f"{nanos}n"


def pod_request(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    """The controller's computePodResourceRequest: max(sum of containers, each init
    container) per resource; the overhead left out (its result is discarded there)."""
    spec = pod.get("spec") or {}
    summed: dict[str, Fraction] = {}
    for container in spec.get("containers") or ():
        for name, text in _requests(container).items():
            summed[name] = summed.get(name, Fraction(0)) + text
    for container in spec.get("initContainers") or ():
        for name, text in _requests(container).items():
            summed[name] = max(summed.get(name, Fraction(0)), text)
    return summed


def _requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
    raw = (container.get("resources") or {}).get("requests") or {}
    return {str(name): quantities.parse(text) for name, text in raw.items()}


def used_of(quota: ElasticQuota, running: list[JSON]) -> dict[str, Fraction]:
    """status.used for ``quota`` given its namespace's Running pods."""
    used = {name: Fraction(0) for name in (*(quota.min or {}), *(quota.max or {}))}
    for pod in running:
        for name, value in pod_request(pod).items():
            used[name] = used.get(name, Fraction(0)) + value
    return used


def written(quota: ElasticQuota) -> dict[str, Fraction] | None:
    """status.used as it is now, by value (None: unreadable, so rewritten)."""
    try:
        return {name: quantities.parse(text) for name, text in quota.used.items()}
    except quantities.QuantityError:
        return None


class QuotaStatus:
    """Keeps every ElasticQuota's status.used current while this replica leads."""

    def __init__(self, api: k8s_client.ApiClient, store: quotas.QuotaStore) -> None:
        self._api = api
        self._store = store

    async def run(self) -> None:
        while True:
            await self.sync_all()
            await asyncio.sleep(INTERVAL)

    async def sync_all(self) -> None:
        for quota in list(self._store):
            try:
                await self.sync(quota)
            except (TimeoutError, k8s_client.StatusError, OSError) as error:
                logger.warning(
                    "could not write the status of ElasticQuota %s: %s", quota.key, error
                )

    async def sync(self, quota: ElasticQuota) -> bool:
        """Writes the quota's status.used if it differs; whether it wrote."""
        namespace = quote(quota.namespace)
        running, _ = await self._api.list_all(
            f"/api/v1/namespaces/{namespace}/pods?fieldSelector=status.phase%3DRunning"
        )
        used = used_of(quota, running)
        if used == written(quota):
            return False
        path = (
            f"/apis/{quotaobjects.GROUP}/{quotaobjects.VERSION}/namespaces/{namespace}/"
            f"{quotaobjects.PLURAL}/{quote(quota.name)}/status"
        )
        wanted: dict[str, str | None] = {name: decimal(value) for name, value in used.items()}
        # A merge patch keeps the keys it does not name: the ones no longer used go as null.
        wanted.update({name: None for name in quota.used if name not in used})
        body = {"status": {"used": wanted}}
        response = await self._api.request(
            "PATCH", path, body=body, content_type=k8s_client.MERGE_PATCH
        )
        if not response.ok and response.status != 404:
            logger.warning(
                "could not write the status of ElasticQuota %s: HTTP %d: %s",
                quota.key,
                response.status,
                response.message(),
            )
            return False
        return response.ok
