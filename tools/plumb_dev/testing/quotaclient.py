"""scheduler-plugins' ElasticQuotas (scheduling.x-k8s.io/v1alpha1, one per namespace: a
guaranteed ``min`` and a ceiling ``max`` for its pods' requests) for tests: their bodies, and
creating, reading, changing and deleting them through one ``kube.Kube``'s connection. The CRD
must be installed (``schedulerplugins.install_elasticquotas``). A test helper: the scheduler
never imports it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s

from plumb_dev.testing import kube

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
PLURAL = "elasticquotas"
KIND = "ElasticQuota"
# scheduler-plugins' example names its quota after nothing in particular; one per namespace is
# all CapacityScheduling reads (the first its list returns), so the tests use one name.
DEFAULT_NAME = "quota"


def elastic_quota(
    namespace: str,
    *,
    minimum: Mapping[str, str] | None = None,
    maximum: Mapping[str, str] | None = None,
    name: str = DEFAULT_NAME,
) -> kube.JSON:
    """An ElasticQuota body: ``minimum`` is spec.min, ``maximum`` spec.max. One left out is
    left out of the spec (no guarantee, no ceiling); one given sets only the resources it
    names: CapacityScheduling takes a resource a given spec.max does not name as 0 for cpu,
    memory and ephemeral-storage, and as unlimited for extended resources."""
    spec: dict[str, Any] = {}
    if minimum is not None:
        spec["min"] = dict(minimum)
    if maximum is not None:
        spec["max"] = dict(maximum)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


class ElasticQuotaClient:
    """Create, read, change and delete ElasticQuotas (bodies from ``elastic_quota``)."""

    def __init__(self, client: kube.Kube) -> None:
        self.api = k8s.CustomObjectsApi(client.api)

    def create(self, body: kube.JSON) -> kube.JSON:
        namespace = body["metadata"]["namespace"]
        created = self.api.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, body, _preload_content=False
        )
        return _raw(created)

    def get(self, namespace: str, name: str = DEFAULT_NAME) -> kube.JSON:
        found = self.api.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _preload_content=False
        )
        return _raw(found)

    def set_spec(
        self, namespace: str, spec: Mapping[str, Any], name: str = DEFAULT_NAME
    ) -> kube.JSON:
        """Replaces the spec as a whole (a merge patch with ``spec: null`` first would let a
        watcher see an empty spec in between): a field the new spec leaves out is gone."""
        body = self.get(namespace, name)
        body["spec"] = dict(spec)
        replaced = self.api.replace_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, body, _preload_content=False
        )
        return _raw(replaced)

    def delete(self, namespace: str, name: str = DEFAULT_NAME) -> None:
        """Deletes one, if it is there."""
        try:
            self.api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except k8s.ApiException as error:
            if error.status != 404:
                raise

    def everywhere(self) -> list[kube.JSON]:
        """Every ElasticQuota of the cluster, in all namespaces."""
        listed = _raw(
            self.api.list_cluster_custom_object(GROUP, VERSION, PLURAL, _preload_content=False)
        )
        items: list[kube.JSON] = listed["items"]
        return items


def _raw(response: Any) -> kube.JSON:
    data: kube.JSON = json.loads(response.data)
    return data
