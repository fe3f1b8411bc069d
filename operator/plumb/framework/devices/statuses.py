"""A claim's ``status.allocation`` as kube-scheduler's PreBind writes it, from an Allocation.

The JSON of resource.k8s.io/v1 AllocationResult in the API's field order: ``devices``
(``results``: request, driver, pool, device, then adminAccess, tolerations, binding
conditions, shareID and consumedCapacity when set; ``config``: source, requests, opaque),
``nodeSelector`` when the allocation is not reachable from every node, ``allocationTimestamp``
when PreBind stamps one (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus).
Quantities are written as Quantity.String() writes them.

Pure: no I/O.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from plumb.backend.records import draobjects, specs
from plumb.framework.devices import capacities


def allocation_body(allocation: draobjects.Allocation, *, timestamp: str = "") -> dict[str, Any]:
    """The JSON body of ``status.allocation`` (``timestamp``: allocationTimestamp, RFC 3339;
    "" takes the allocation's own, if any)."""
    devices: dict[str, Any] = {}
    if allocation.devices:
        devices["results"] = [_result(r) for r in allocation.devices]
    if allocation.config:
        devices["config"] = [_config(source, opaque) for source, opaque in allocation.config]
    body: dict[str, Any] = {"devices": devices}
    if allocation.node_selection is not None:
        body["nodeSelector"] = node_selector_body(allocation.node_selection)
    stamp = timestamp or allocation.timestamp
    if stamp:
        body["allocationTimestamp"] = stamp
    return body


def timestamp(when: datetime.datetime) -> str:
    """metav1.Time as JSON: RFC 3339 in UTC, to the second ("2026-01-02T03:04:05Z")."""
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _result(result: draobjects.AllocatedDevice) -> dict[str, Any]:
    body: dict[str, Any] = {
        "request": result.request,
        "driver": result.driver,
        "pool": result.pool,
        "device": result.device,
    }
    if result.admin_access is not None:
        body["adminAccess"] = result.admin_access
    if result.tolerations:
        body["tolerations"] = [_toleration(t) for t in result.tolerations]
    if result.binding_conditions:
        body["bindingConditions"] = list(result.binding_conditions)
    if result.binding_failure_conditions:
        body["bindingFailureConditions"] = list(result.binding_failure_conditions)
    if result.share_id:
        body["shareID"] = result.share_id
    if result.consumed_capacity:
        body["consumedCapacity"] = _quantities(result.consumed_capacity)
    return body


def _quantities(amounts: Mapping[str, draobjects.Quantity]) -> dict[str, str]:
    return {
        name: capacities.canonical(q.value, capacities.quantity_format(q.text))
        for name, q in sorted(amounts.items())
    }


def _toleration(toleration: draobjects.DeviceToleration) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if toleration.key:
        body["key"] = toleration.key
    if toleration.operator:
        body["operator"] = toleration.operator
    if toleration.value:
        body["value"] = toleration.value
    if toleration.effect:
        body["effect"] = toleration.effect
    if toleration.toleration_seconds is not None:
        body["tolerationSeconds"] = toleration.toleration_seconds
    return body


def _config(source: str, opaque: draobjects.Opaque) -> dict[str, Any]:
    body: dict[str, Any] = {"source": source}
    if opaque.requests:
        body["requests"] = list(opaque.requests)
    inner: dict[str, Any] = {"driver": opaque.driver}
    if opaque.parameters is not None:
        inner["parameters"] = opaque.parameters
    body["opaque"] = inner
    return body


def node_selector_body(selection: draobjects.NodeSelection) -> dict[str, Any]:
    """A core/v1 NodeSelector (an allocation's: its terms; a node name or all nodes are
    written as kube-scheduler would select them)."""
    if selection.node_name:
        field = specs.Requirement("metadata.name", "In", (selection.node_name,))
        terms: tuple[specs.NodeSelectorTerm, ...] = (specs.NodeSelectorTerm(fields=(field,)),)
    else:
        terms = selection.terms or ()
    return {"nodeSelectorTerms": [_term(t) for t in terms]}


def _term(term: specs.NodeSelectorTerm) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if term.expressions:
        body["matchExpressions"] = [_requirement(r) for r in term.expressions]
    if term.fields:
        body["matchFields"] = [_requirement(r) for r in term.fields]
    return body


def _requirement(requirement: specs.Requirement) -> dict[str, Any]:
    body: dict[str, Any] = {"key": requirement.key, "operator": requirement.operator}
    if requirement.values:
        body["values"] = list(requirement.values)
    return body
