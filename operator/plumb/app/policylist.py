"""Every SchedulingPolicy, listed before the first pod is scheduled (at start and at takeover).

The CRD not installed (404) means no policies: plumb schedules by its profiles alone. Any other
failure (429, 5xx, a timeout, a refused connection) is retried with a backoff, 1 s doubling to
30 s: scheduling pods without the policies that govern them would place them against their
rules, and nothing could be scheduled meanwhile anyway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from plumb.k8s import client as k8s_client

logger = logging.getLogger(__name__)

PATH = "/apis/scheduling.plumb.dev/v1alpha1/schedulingpolicies"
MAX_BACKOFF = 30.0


async def list_policies(
    api: k8s_client.ApiClient,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> list[dict[str, Any]] | None:
    """The policies; None when the CRD is not installed."""
    failures = 0
    while True:
        try:
            items, _version = await api.list_all(PATH)
        except k8s_client.StatusError as error:
            if error.status == 404:
                logger.warning("no SchedulingPolicies: the CRD is not installed (%s)", error)
                return None
            failures += 1
            delay = _backoff(failures)
            logger.warning("listing SchedulingPolicies failed (%s); again in %.0f s", error, delay)
        except k8s_client.TransportError as error:
            failures += 1
            delay = _backoff(failures)
            logger.warning("listing SchedulingPolicies failed (%s); again in %.0f s", error, delay)
        else:
            return items
        await sleep(delay)


def _backoff(failures: int) -> float:
    return float(min(MAX_BACKOFF, 2 ** (failures - 1)))
