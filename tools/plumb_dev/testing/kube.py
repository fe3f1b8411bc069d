"""A small synchronous client for tests, the demo and the benchmark (not the scheduler's path)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from plumb_dev.testing import builders

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
        self.apps = k8s.AppsV1Api(self.api)
        self.batch = k8s.BatchV1Api(self.api)
        self.policy = k8s.PolicyV1Api(self.api)
        self.scheduling = k8s.SchedulingV1Api(self.api)
        self._classes: set[str] = set()

    def close(self) -> None:
        self.api.close()

    @staticmethod
    def _raw(response: Any) -> JSON:
        data: JSON = json.loads(response.data)
        return data

    def create_namespace(self, name: str, *, account: bool = True, timeout: float = 30.0) -> None:
        """Create a namespace and (with account) wait for its default service account.

        ServiceAccount admission refuses pods until kube-controller-manager has made the
        account, which takes a moment after the namespace appears; a control plane without
        controllers or that admission passes account=False.
        """
        self.core.create_namespace(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        if not account:
            return
        wait_for(
            f"the default service account of namespace {name}",
            lambda: self._has_default_account(name),
            timeout=timeout,
            interval=0.05,
        )

    def _has_default_account(self, namespace: str) -> bool:
        try:
            self.core.read_namespaced_service_account("default", namespace)
        except k8s.ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    def create_node(self, body: JSON) -> JSON:
        return self._raw(self.core.create_node(body, _preload_content=False))

    def delete_node(self, name: str) -> None:
        try:
            self.core.delete_node(name)
        except k8s.ApiException as error:
            if error.status != 404:
                raise

    def create_pod(self, body: JSON) -> JSON:
        """Create a pod, and first the test PriorityClass it names (builders.priority)."""
        namespace = body["metadata"].get("namespace", "default")
        spec = body.get("spec") or {}
        name = str(spec.get("priorityClassName") or "")
        if name.startswith(builders.PRIORITY_CLASS_PREFIX) and name not in self._classes:
            self.ensure_priority_class(int(spec["priority"]), spec.get("preemptionPolicy"))
        deadline = time.monotonic() + 15.0
        while True:
            try:
                created = self.core.create_namespaced_pod(namespace, body, _preload_content=False)
            except k8s.ApiException as error:
                # The admission plugin reads classes from its informer: a class just created
                # may take a moment to reach it.
                unseen = error.status == 403 and "no PriorityClass" in str(error.body)
                if not unseen or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                continue
            return self._raw(created)

    def ensure_priority_class(self, value: int, preemption_policy: str | None = None) -> None:
        """Create the test PriorityClass of ``value`` unless it exists (classes are cluster
        objects: they outlive namespaces and are shared by tests)."""
        body = builders.priority_class(value, preemption_policy)
        try:
            self.scheduling.create_priority_class(body)
        except k8s.ApiException as error:
            if error.status != 409:
                raise
        self._classes.add(body["metadata"]["name"])

    def patch_pod(self, namespace: str, name: str, patch: JSON) -> None:
        self.core.patch_namespaced_pod(name, namespace, patch)

    def release(self, namespace: str, name: str) -> None:
        """Remove a pod's finalizers (builders.finalizer), letting its deletion finish."""
        try:
            self.patch_pod(namespace, name, {"metadata": {"finalizers": None}})
        except k8s.ApiException as error:
            if error.status != 404:
                raise

    def pod(self, namespace: str, name: str) -> JSON:
        return self._raw(self.core.read_namespaced_pod(name, namespace, _preload_content=False))

    def pods(self, namespace: str) -> list[JSON]:
        listed = self._raw(self.core.list_namespaced_pod(namespace, _preload_content=False))
        items: list[JSON] = listed["items"]
        return items

    def nodes(self) -> list[JSON]:
        items: list[JSON] = self._raw(self.core.list_node(_preload_content=False))["items"]
        return items

    def delete_namespace(self, name: str) -> None:
        """Delete a namespace with all it holds, without waiting for a kubelet.

        Deleted first, so that no controller can create a pod in it any more; then its pods are
        removed at once, since pods on nodes with no kubelet would never finish terminating.
        The namespace controller removes the rest in the background.
        """
        try:
            self.core.delete_namespace(name)
        except k8s.ApiException as error:
            if error.status != 404:
                raise
        self.delete_pods(name)

    def delete_workloads(self, namespace: str) -> None:
        """Delete a namespace's Deployments, ReplicaSets, StatefulSets and Jobs, then its pods.

        The controllers go first, so none makes a pod again; the pods are then removed at once,
        since pods on nodes with no kubelet would never finish terminating. The namespace
        itself stays (as do its SchedulingPolicies), so that no deletion wakes pods in a
        scheduler started by a later test.
        """
        background = {"propagation_policy": "Background"}
        self.apps.delete_collection_namespaced_deployment(namespace, **background)
        self.apps.delete_collection_namespaced_replica_set(namespace, **background)
        self.apps.delete_collection_namespaced_stateful_set(namespace, **background)
        self.batch.delete_collection_namespaced_job(namespace, **background)
        self.delete_pods(namespace)

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

    def patch_node(self, name: str, patch: JSON) -> None:
        self.core.patch_node(name, patch)

    def create_deployment(self, body: JSON) -> None:
        self.apps.create_namespaced_deployment(body["metadata"]["namespace"], body)

    def patch_deployment(self, namespace: str, name: str, patch: JSON) -> None:
        self.apps.patch_namespaced_deployment(name, namespace, patch)

    def scale_deployment(self, namespace: str, name: str, replicas: int) -> None:
        self.apps.patch_namespaced_deployment_scale(
            name, namespace, {"spec": {"replicas": replicas}}
        )

    def replicasets(self, namespace: str) -> list[JSON]:
        listed = self._raw(self.apps.list_namespaced_replica_set(namespace, _preload_content=False))
        items: list[JSON] = listed["items"]
        return items

    def create_job(self, body: JSON) -> None:
        self.batch.create_namespaced_job(body["metadata"]["namespace"], body)

    def job(self, namespace: str, name: str) -> JSON:
        return self._raw(self.batch.read_namespaced_job(name, namespace, _preload_content=False))

    def create_pdb(self, body: JSON) -> None:
        self.policy.create_namespaced_pod_disruption_budget(body["metadata"]["namespace"], body)

    def pdb(self, namespace: str, name: str) -> JSON:
        return self._raw(
            self.policy.read_namespaced_pod_disruption_budget(
                name, namespace, _preload_content=False
            )
        )

    def force_delete_terminating(self, namespace: str) -> int:
        """Finish the deletion of pods that are terminating; returns how many.

        A node that is only an API object has no kubelet to confirm that a deleted pod's
        containers stopped, so its pods would stay Terminating for ever; this does the
        kubelet's last step for them (a delete with grace period 0).
        """
        finished = 0
        for pod in self.pods(namespace):
            if pod["metadata"].get("deletionTimestamp"):
                try:
                    self.core.delete_namespaced_pod(
                        pod["metadata"]["name"], namespace, grace_period_seconds=0
                    )
                except k8s.ApiException as error:
                    if error.status != 404:
                        raise
                finished += 1
        return finished
