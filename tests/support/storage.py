"""PersistentVolumes, claims and StorageClasses made for one test on the real control plane
(cluster-scoped ones deleted afterwards), and plumb's volume store filled from them.

A test module takes the ``storage`` fixture by importing it::

    from tests.support.storage import Storage, storage_fixture  # noqa: F401
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from plumb.backend.cache import volumes
from plumb_dev.testing import kube

JSON = dict[str, Any]


def _raw(response: Any) -> JSON:
    data: JSON = json.loads(response.data)
    return data


class Storage:
    """PVs, claims and StorageClasses for one test (cluster objects deleted afterwards)."""

    def __init__(self, client: kube.Kube, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.storage = k8s.StorageV1Api(client.api)
        self.pvs: list[str] = []
        self.classes: list[str] = []

    def storage_class(self, body: JSON) -> str:
        self.storage.create_storage_class(body)
        self.classes.append(body["metadata"]["name"])
        return str(body["metadata"]["name"])

    def pv(self, body: JSON) -> str:
        body = dict(body)
        body.pop("status", None)
        self.client.core.create_persistent_volume(body)
        self.pvs.append(body["metadata"]["name"])
        return str(body["metadata"]["name"])

    def claim(self, body: JSON) -> None:
        self.client.core.create_namespaced_persistent_volume_claim(self.namespace, body)

    def claim_body(self, name: str) -> JSON:
        return _raw(
            self.client.core.read_namespaced_persistent_volume_claim(
                name, self.namespace, _preload_content=False
            )
        )

    def pv_body(self, name: str) -> JSON:
        return _raw(self.client.core.read_persistent_volume(name, _preload_content=False))

    def wait_bound(self, name: str, timeout: float = 60.0) -> JSON:
        def bound() -> JSON | None:
            body = self.claim_body(name)
            return body if (body.get("status") or {}).get("phase") == "Bound" else None

        return kube.wait_for(f"claim {name} to be Bound", bound, timeout=timeout)

    def store(self) -> volumes.Volumes:
        """The plugins' store, filled from a list of everything (as plumb's feed would)."""
        store = volumes.Volumes()
        store.resync_pvs(
            _raw(self.client.core.list_persistent_volume(_preload_content=False))["items"]
        )
        store.resync_pvcs(
            _raw(
                self.client.core.list_persistent_volume_claim_for_all_namespaces(
                    _preload_content=False
                )
            )["items"]
        )
        store.resync_storage_classes(
            _raw(self.storage.list_storage_class(_preload_content=False))["items"]
        )
        store.resync_csinodes(_raw(self.storage.list_csi_node(_preload_content=False))["items"])
        return store

    def close(self) -> None:
        core = self.client.core
        for claim in _raw(
            core.list_namespaced_persistent_volume_claim(self.namespace, _preload_content=False)
        )["items"]:
            core.delete_namespaced_persistent_volume_claim(
                claim["metadata"]["name"], self.namespace
            )
        for name in self.pvs:
            _ignore_missing(lambda name=name: core.delete_persistent_volume(name))
        for name in self.classes:
            _ignore_missing(lambda name=name: self.storage.delete_storage_class(name))


def _ignore_missing(call: Any) -> None:
    try:
        call()
    except k8s.ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture(name="storage")
def storage_fixture(kube_client: kube.Kube, namespace: str) -> Iterator[Storage]:
    """PVs, claims and StorageClasses for the test, deleted after it."""
    made = Storage(kube_client, namespace)
    yield made
    made.close()
