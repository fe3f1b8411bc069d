"""PodGroups of both APIs through one ``kube.Kube``'s connection: the upstream PodGroup
(scheduling.k8s.io/v1beta1, where GenericWorkload serves it) and scheduler-plugins'
(scheduling.x-k8s.io/v1alpha1, where its CRD is installed)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client as k8s

from plumb_dev.testing import kube

JSON = dict[str, Any]
_APIS = {
    "scheduling.k8s.io/v1beta1": ("scheduling.k8s.io", "v1beta1"),
    "scheduling.x-k8s.io/v1alpha1": ("scheduling.x-k8s.io", "v1alpha1"),
}


class Groups:
    """Create, read and change PodGroups (their bodies from plumb_dev.testing.groupbuilders)."""

    def __init__(self, client: kube.Kube) -> None:
        self.client = client
        self.api = k8s.CustomObjectsApi(client.api)

    def create(self, body: JSON) -> JSON:
        group, version = _APIS[body["apiVersion"]]
        namespace = body["metadata"]["namespace"]
        created = self.api.create_namespaced_custom_object(
            group, version, namespace, "podgroups", body, _preload_content=False
        )
        return _raw(created)

    def get(self, api_version: str, namespace: str, name: str) -> JSON:
        group, version = _APIS[api_version]
        found = self.api.get_namespaced_custom_object(
            group, version, namespace, "podgroups", name, _preload_content=False
        )
        return _raw(found)

    def condition(self, namespace: str, name: str, kind: str) -> tuple[str, str, str] | None:
        """An upstream PodGroup's condition ``kind`` as (status, reason, message)."""
        body = self.get("scheduling.k8s.io/v1beta1", namespace, name)
        for entry in (body.get("status") or {}).get("conditions") or ():
            if entry.get("type") == kind:
                return (entry["status"], entry["reason"], entry.get("message", ""))
        return None


def _raw(response: Any) -> JSON:
    data: JSON = json.loads(response.data)
    return data
