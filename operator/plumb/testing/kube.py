"""A small synchronous client for tests, the demo and the benchmark (not the scheduler's path)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client as k8s
from kubernetes import config as k8s_config

T = TypeVar("T")
JSON = dict[str, Any]


class WaitTimeout(AssertionError):
    """A condition did not come true in time; the message says what was awaited."""


def wait_for(
    what: str, probe: Callable[[], T | None], *, timeout: float = 30.0, interval: float = 0.1
) -> T:
    """Call ``probe`` until it returns something truthy, or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Kube:
    """Raw-dict access to the few resources the tests and the demo touch."""

    def __init__(self, kubeconfig: Path) -> None:
        self.api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
        self.core = k8s.CoreV1Api(self.api)

    def close(self) -> None:
        self.api.close()

    @staticmethod
    def _raw(response: Any) -> JSON:
        data: JSON = json.loads(response.data)
        return data

    def create_namespace(self, name: str) -> None:
        self.core.create_namespace(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )

    def create_node(self, body: JSON) -> JSON:
        return self._raw(self.core.create_node(body, _preload_content=False))

    def delete_node(self, name: str) -> None:
        try:
            self.core.delete_node(name)
        except k8s.ApiException as error:
            if error.status != 404:
                raise

    def create_pod(self, body: JSON) -> JSON:
        namespace = body["metadata"].get("namespace", "default")
        return self._raw(self.core.create_namespaced_pod(namespace, body, _preload_content=False))

    def pod(self, namespace: str, name: str) -> JSON:
        return self._raw(self.core.read_namespaced_pod(name, namespace, _preload_content=False))

    def pods(self, namespace: str) -> list[JSON]:
        listed = self._raw(self.core.list_namespaced_pod(namespace, _preload_content=False))
        items: list[JSON] = listed["items"]
        return items

    def nodes(self) -> list[JSON]:
        items: list[JSON] = self._raw(self.core.list_node(_preload_content=False))["items"]
        return items

    def delete_pods(self, namespace: str) -> None:
        """Delete every pod of a namespace at once: there is no kubelet to wait for."""
        self.core.delete_collection_namespaced_pod(
            namespace, grace_period_seconds=0, propagation_policy="Background"
        )

    def events(self, namespace: str, name: str | None = None) -> list[JSON]:
        selector = f"involvedObject.name={name}" if name else None
        listed = self._raw(
            self.core.list_namespaced_event(
                namespace, field_selector=selector, _preload_content=False
            )
        )
        items: list[JSON] = listed["items"]
        return items
