"""The few API calls the node makes with the admin token: is it Ready, which pods run on it.

Plain HTTPS against the control plane's server with its CA, so starting and stopping the node
needs no client library. Every call returns None (or an empty answer) when the API server does
not answer, since ``down`` must go on without it.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from typing import Any

from plumb_dev.cluster.controlplane import lifecycle as controlplane

_TIMEOUT_SECONDS = 5.0


def request(
    cp: controlplane.ControlPlane,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    """(status, decoded JSON body) of one call; (0, None) if the server gave no answer."""
    address = urllib.parse.urlsplit(cp.server)
    context = ssl.create_default_context(cafile=str(cp.ca_file))
    connection = http.client.HTTPSConnection(
        address.hostname or "", address.port, timeout=_TIMEOUT_SECONDS, context=context
    )
    headers = {"Authorization": f"Bearer {cp.token}", "Accept": "application/json"}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = content_type
    try:
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        raw = response.read()
    except (OSError, http.client.HTTPException):
        return 0, None
    finally:
        connection.close()
    try:
        return response.status, json.loads(raw) if raw else None
    except ValueError:
        return response.status, None


def node_ready(cp: controlplane.ControlPlane, name: str) -> bool:
    status, node = request(cp, "GET", f"/api/v1/nodes/{name}")
    if status != 200 or not isinstance(node, dict):
        return False
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pods_on(cp: controlplane.ControlPlane, node: str) -> list[tuple[str, str]] | None:
    """(namespace, name) of every pod bound to node; None if the API server did not answer."""
    selector = urllib.parse.quote(f"spec.nodeName={node}")
    status, pods = request(cp, "GET", f"/api/v1/pods?fieldSelector={selector}")
    if status != 200 or not isinstance(pods, dict):
        return None
    return [
        (item["metadata"]["namespace"], item["metadata"]["name"]) for item in pods.get("items", [])
    ]


def cordon(cp: controlplane.ControlPlane, node: str) -> None:
    """Marks node unschedulable, so controllers' replacement pods do not land on it again."""
    request(
        cp,
        "PATCH",
        f"/api/v1/nodes/{node}",
        {"spec": {"unschedulable": True}},
        content_type="application/merge-patch+json",
    )


def delete_pod(cp: controlplane.ControlPlane, namespace: str, name: str, grace: int) -> None:
    request(
        cp,
        "DELETE",
        f"/api/v1/namespaces/{namespace}/pods/{name}",
        {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace},
    )
