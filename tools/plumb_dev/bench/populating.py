"""Creating and removing a run's namespace, nodes and pods through the API, many at a time.

Pod creation is the benchmark's input rate, so it runs with many concurrent requests over one
aiohttp connection pool; the time each create was sent and answered is kept per pod.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from plumb.k8s import client as k8s_client

JSON = dict[str, Any]
CREATORS = 32
"""Concurrent create requests: enough that creation outruns any scheduler on loopback."""


class PopulateError(RuntimeError):
    """The API server refused to create or delete the bench's objects."""


# Deleting 11,000 pods in one request takes the API server well over the client's usual 30 s
# on 2 cores (the large workload timed out there).
DELETE_TIMEOUT = 300.0
GATEWAY_TIMEOUT = 504


def _refused(method: str, path: str, response: k8s_client.ApiResponse) -> PopulateError:
    return PopulateError(
        f"{method} {path}: HTTP {response.status}: {response.message()}; is the control "
        f"plane healthy and empty of a previous bench run?"
    )


async def _checked(api: k8s_client.ApiClient, method: str, path: str, **kwargs: Any) -> JSON:
    response = await api.request(method, path, **kwargs)
    if not response.ok:
        raise _refused(method, path, response)
    body: JSON = response.body if isinstance(response.body, dict) else {}
    return body


async def delete_collection(
    api: k8s_client.ApiClient, path: str, params: Mapping[str, str]
) -> None:
    """DELETE a collection, asked again while the API server answers 504: its own request
    timeout (a minute) cuts a deletion of 30,000 pods short, and what it deleted stays deleted.
    """
    deadline = time.monotonic() + DELETE_TIMEOUT
    while True:
        response = await api.request(
            "DELETE",
            path,
            params=params,
            body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            request_timeout=DELETE_TIMEOUT,
        )
        if response.ok:
            return
        if response.status != GATEWAY_TIMEOUT or time.monotonic() > deadline:
            raise _refused("DELETE", path, response)


async def unfinalize(api: k8s_client.ApiClient, path: str, items: Sequence[JSON]) -> None:
    """Takes the finalizers off those of ``items`` (objects listed at collection ``path``) that
    have any: in the bench no controller is there to, and they would never finish deleting."""
    names = [item["metadata"]["name"] for item in items if item["metadata"].get("finalizers")]

    async def clear(index: int) -> None:
        name = names[index]
        patch = {"metadata": {"finalizers": None}}
        response = await api.request(
            "PATCH", f"{path}/{quote(name)}", body=patch, content_type=k8s_client.MERGE_PATCH
        )
        if not response.ok and response.status != 404:
            raise _refused("PATCH", f"{path}/{name}", response)

    await many(len(names), clear)


async def create_namespace(api: k8s_client.ApiClient, name: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    await _checked(api, "POST", "/api/v1/namespaces", body=body)


async def many(count: int, create: Callable[[int], Any], concurrency: int = CREATORS) -> None:
    """Runs create(i) for i in range(count) with at most concurrency running at once."""
    indices = iter(range(count))

    async def worker() -> None:
        for index in indices:
            await create(index)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, count))))


async def create_nodes(api: k8s_client.ApiClient, bodies: Sequence[JSON]) -> None:
    async def create(index: int) -> None:
        await _checked(api, "POST", "/api/v1/nodes", body=bodies[index])

    await many(len(bodies), create)


async def create_pods(
    api: k8s_client.ApiClient,
    namespace: str,
    bodies: Sequence[JSON],
    *,
    sent: dict[str, float] | None = None,
    answered: dict[str, float] | None = None,
) -> None:
    """Creates the pods; records in sent/answered the monotonic time each create went out and
    came back, by pod name."""
    path = f"/api/v1/namespaces/{quote(namespace)}/pods"

    async def create(index: int) -> None:
        body = bodies[index]
        name = body["metadata"]["name"]
        if sent is not None:
            sent[name] = time.monotonic()
        await _checked(api, "POST", path, body=body)
        if answered is not None:
            answered[name] = time.monotonic()

    await many(len(bodies), create)


async def list_pods(api: k8s_client.ApiClient, namespace: str) -> list[JSON]:
    items, _ = await api.list_all(f"/api/v1/namespaces/{quote(namespace)}/pods")
    return items


async def list_nodes(api: k8s_client.ApiClient, selector: str) -> list[JSON]:
    items, _ = await api.list_all(f"/api/v1/nodes?labelSelector={quote(selector)}")
    return items


async def delete_run(api: k8s_client.ApiClient, namespace: str, node_selector: str) -> None:
    """Deletes every pod of namespace at once (no kubelet to wait for) and the run's nodes, and
    waits until both are gone, so the next scheduler sees none of them.

    The namespace itself stays: without kube-controller-manager nothing would finish deleting it.
    """
    await delete_collection(api, f"/api/v1/namespaces/{quote(namespace)}/pods", {})
    await delete_collection(api, "/api/v1/nodes", {"labelSelector": node_selector})

    async def remaining() -> int:
        return len(await list_pods(api, namespace)) + len(await list_nodes(api, node_selector))

    await wait_gone(f"pods in {namespace} and nodes ({node_selector})", remaining)


GONE_SECONDS = 120.0


async def wait_gone(what: str, remaining: Callable[[], Awaitable[int]]) -> None:
    """Until remaining() counts none of what was deleted; raises after GONE_SECONDS."""
    deadline = time.monotonic() + GONE_SECONDS
    while True:
        left = await remaining()
        if not left:
            return
        if time.monotonic() > deadline:
            raise PopulateError(
                f"{left} {what} are still there {GONE_SECONDS:.0f} s after deleting them; look "
                f"for finalizers on them"
            )
        await asyncio.sleep(0.2)
