"""Watches of one pod the integration tests follow from its creation: each value a field took,
as a watcher (the cluster autoscaler, a controller) would see it."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import urllib3
from kubernetes import watch as k8s_watch

from plumb_dev.testing import kube


class NominationWatch:
    """A watch of one pod from its creation: each change of its status.nominatedNodeName."""

    def __init__(self, client: kube.Kube, namespace: str, name: str) -> None:
        self._client = client
        self._namespace = namespace
        self._name = name
        self._watch = k8s_watch.Watch()
        self.seen: list[str | None] = []
        self.bound = threading.Event()
        listed = client.core.list_namespaced_pod(namespace, field_selector=f"metadata.name={name}")
        self._version = listed.metadata.resource_version
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> NominationWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._watch.stop()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        # stop() ends the stream under the reader's feet.
        with contextlib.suppress(urllib3.exceptions.ProtocolError):
            self._follow()

    def _follow(self) -> None:
        for event in self._watch.stream(
            self._client.core.list_namespaced_pod,
            self._namespace,
            field_selector=f"metadata.name={self._name}",
            resource_version=self._version,
            timeout_seconds=300,
        ):
            pod: Any = event["object"]
            value = pod.status.nominated_node_name if pod.status else None
            if not self.seen or self.seen[-1] != value:
                self.seen.append(value)
            if pod.spec.node_name:
                self.bound.set()
