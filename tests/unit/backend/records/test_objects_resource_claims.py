"""A pod's DRA claims, and the status write that names a template's claim, which must reach
the queue as an update (the pod waits for it)."""

from __future__ import annotations

import copy
from typing import Any

from plumb.backend.records import draobjects, objects


def body(statuses: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending"}
    if statuses is not None:
        status["resourceClaimStatuses"] = statuses
    return {
        "metadata": {
            "namespace": "ml",
            "name": "train",
            "uid": "u1",
            "generation": 1,
            "resourceVersion": "10",
        },
        "spec": {
            "schedulerName": "plumb",
            "containers": [{"name": "c", "image": "i"}],
            "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                {"name": "shared", "resourceClaimName": "team-gpus"},
            ],
        },
        "status": status,
    }


def test_the_pod_keeps_its_claims_in_spec_order() -> None:
    pod = objects.parse_pod(body())
    assert pod.resource_claims == (
        draobjects.PodResourceClaim(name="gpu", template_name="one-gpu"),
        draobjects.PodResourceClaim(name="shared", claim_name="team-gpus"),
    )
    assert pod.claim_statuses == {}


def test_the_controller_naming_the_claim_is_an_update_even_through_the_reparse_shortcut() -> None:
    before = objects.parse_pod(body())
    written = copy.deepcopy(body([{"name": "gpu", "resourceClaimName": "train-gpu-7x2"}]))
    written["metadata"]["resourceVersion"] = "11"
    for known in (None, before):  # parsed afresh, and from the known pod (same generation)
        after = objects.parse_pod(written, known=known)
        assert after.claim_statuses == {"gpu": "train-gpu-7x2"}
        assert after != before


def test_a_claim_the_controller_decided_not_to_make_is_named_empty() -> None:
    pod = objects.parse_pod(body([{"name": "gpu"}]))
    assert pod.claim_statuses == {"gpu": ""}
