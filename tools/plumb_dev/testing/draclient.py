"""Creating and reading resource.k8s.io/v1 objects for tests, the demo and the benchmark: raw
dicts in and out, as ``kube.Kube`` does for pods and nodes; cluster objects (DeviceClasses,
ResourceSlices) remembered so that ``close`` deletes them."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from kubernetes import client as k8s

from plumb_dev.testing import kube

JSON = dict[str, Any]
_AS_SENT = "application/yaml"  # see Dra._sent


@dataclasses.dataclass(frozen=True, order=True)
class DeviceTaken:
    """One result of a claim's status.allocation.devices.results."""

    request: str
    driver: str
    pool: str
    device: str


def allocated(claim: JSON) -> list[DeviceTaken]:
    """The devices a claim's allocation holds, in the order the scheduler wrote them; empty
    when it is not allocated."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [DeviceTaken(r["request"], r["driver"], r["pool"], r["device"]) for r in results]


def reserved_for(claim: JSON) -> list[str]:
    """The names of the pods status.reservedFor lists, in its order."""
    return [str(r["name"]) for r in (claim.get("status") or {}).get("reservedFor") or []]


def generated_claim(pod: JSON, name: str) -> str | None:
    """The claim the resourceclaim controller made for the pod's claim ``name`` (from a
    template), as pod.status.resourceClaimStatuses records it; None before it has."""
    for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if entry.get("name") == name:
            made = entry.get("resourceClaimName")
            return None if made is None else str(made)
    return None


class Dra:
    """resource.k8s.io/v1 through one ``kube.Kube``'s connection."""

    def __init__(self, client: kube.Kube) -> None:
        self.client = client
        self.api = k8s.ResourceV1Api(client.api)
        self._classes: list[str] = []
        self._slices: list[str] = []

    @staticmethod
    def _sent(body: JSON) -> str:
        """The body as kubectl and Go controllers send it: compact JSON. An opaque
        configuration is stored as the bytes it came in; one sent with spaces (the Python
        client's json.dumps) can never be updated by a JSON client, whose copy the API server
        re-encodes compactly and then takes for a change of the immutable spec (kube-scheduler
        writes protobuf and is spared; docs/dra.md, Limits). The API server reads JSON given as
        YAML as it is, so the body goes as a string under that content type."""
        return json.dumps(body, separators=(",", ":"))

    def _post(self, path: str, body: JSON) -> JSON:
        """Create an object from ``body`` sent as ``_sent`` makes it."""
        client = self.api.api_client
        method, url, headers, data, post = client.param_serialize(
            "POST",
            path,
            header_params={"Content-Type": _AS_SENT, "Accept": "application/json"},
            body=self._sent(body),
            auth_settings=["BearerToken"],
        )
        response = client.call_api(method, url, headers, data, post)
        response.read()
        if not 200 <= response.status < 300:
            raise k8s.ApiException(http_resp=response)
        created: JSON = json.loads(response.data)
        return created

    @staticmethod
    def _raw(response: Any) -> JSON:
        data: JSON = json.loads(response.data)
        return data

    # --- cluster objects (deleted by close) ---

    def create_class(self, body: JSON) -> JSON:
        created = self._post("/apis/resource.k8s.io/v1/deviceclasses", body)
        self._classes.append(created["metadata"]["name"])
        return created

    def create_slice(self, body: JSON) -> JSON:
        """Publish a ResourceSlice as a driver would; returns it as the API server kept it
        (fields of features off in the release are dropped)."""
        created = self._raw(self.api.create_resource_slice(body, _preload_content=False))
        self._slices.append(created["metadata"]["name"])
        return created

    def delete_slice(self, name: str) -> None:
        with contextlib.suppress(k8s.ApiException):
            self.api.delete_resource_slice(name)

    def slice(self, name: str) -> JSON:
        return self._raw(self.api.read_resource_slice(name, _preload_content=False))

    def close(self) -> None:
        for name in self._slices:
            self.delete_slice(name)
        for name in self._classes:
            with contextlib.suppress(k8s.ApiException):
                self.api.delete_device_class(name)

    # --- namespaced objects (they go with the namespace) ---

    def create_claim(self, body: JSON) -> JSON:
        namespace = body["metadata"]["namespace"]
        return self._post(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", body)

    def create_template(self, body: JSON) -> JSON:
        namespace = body["metadata"]["namespace"]
        return self._post(
            f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates", body
        )

    def claim(self, namespace: str, name: str) -> JSON:
        return self._raw(
            self.api.read_namespaced_resource_claim(name, namespace, _preload_content=False)
        )

    def claims(self, namespace: str) -> list[JSON]:
        listed = self._raw(
            self.api.list_namespaced_resource_claim(namespace, _preload_content=False)
        )
        items: list[JSON] = listed["items"]
        return items

    def write_claim_status(self, namespace: str, name: str, status: JSON) -> JSON:
        """Replace a claim's status as a scheduler or driver would (read, then update)."""
        body = self.claim(namespace, name)
        body["status"] = status
        return self._raw(
            self.api.replace_namespaced_resource_claim_status(
                name, namespace, body, _preload_content=False
            )
        )

    def wait_allocated(self, namespace: str, name: str, timeout: float = 30.0) -> JSON:
        """The claim once its status.allocation is written."""

        def written() -> JSON | None:
            body = self.claim(namespace, name)
            return body if (body.get("status") or {}).get("allocation") else None

        return kube.wait_for(f"claim {namespace}/{name} to be allocated", written, timeout=timeout)

    def wait_generated(self, namespace: str, pod: str, name: str, timeout: float = 30.0) -> str:
        """The name of the claim the resourceclaim controller made for the pod's claim."""
        return kube.wait_for(
            f"the claim made for {namespace}/{pod}'s {name!r}",
            lambda: generated_claim(self.client.pod(namespace, pod), name),
            timeout=timeout,
        )

    def in_use(self, namespace: str, names: Iterable[str] = ()) -> dict[str, list[DeviceTaken]]:
        """{claim: devices} of the namespace's allocated claims (only ``names`` if given)."""
        wanted = set(names)
        return {
            c["metadata"]["name"]: allocated(c)
            for c in self.claims(namespace)
            if allocated(c) and (not wanted or c["metadata"]["name"] in wanted)
        }
