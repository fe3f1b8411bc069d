"""The DRA store's answers for extended resources backed by DRA: which DeviceClass backs a
resource (kube-scheduler's ExtendedResourceCache), and the claim made for a pod's."""

from __future__ import annotations

from typing import Any

from plumb.backend.cache import dra
from plumb.backend.records import draobjects
from tests.support.dra_bodies import claim_body

GPU = "example.com/gpu"


def class_body(
    name: str, resource: str = "", created: str = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    spec = {"extendedResourceName": resource} if resource else {}
    return {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}


def store_with(*bodies: dict[str, Any]) -> dra.DraStore:
    store = dra.DraStore()
    for body in bodies:
        store.on_class(body, body["metadata"]["name"])
    return store


def backing(store: dra.DraStore, resource: str) -> str | None:
    found = store.extended_class(resource)
    return None if found is None else found.name


def test_a_class_backs_its_extended_resource_name_and_its_implicit_name() -> None:
    store = store_with(class_body("gpu", GPU), class_body("tpu"))
    assert backing(store, GPU) == "gpu"
    assert backing(store, f"{draobjects.IMPLICIT_EXTENDED_PREFIX}gpu") == "gpu"
    assert backing(store, f"{draobjects.IMPLICIT_EXTENDED_PREFIX}tpu") == "tpu"
    assert backing(store, "example.com/tpu") is None
    assert backing(store, "example.com/nic") is None


def test_of_two_classes_naming_one_resource_the_newer_backs_it_then_the_first_by_name() -> None:
    # What a migration from one class to another looks like.
    store = store_with(
        class_body("old", GPU, "2026-01-01T00:00:00Z"),
        class_body("new", GPU, "2026-02-01T00:00:00Z"),
    )
    assert backing(store, GPU) == "new"
    store = store_with(class_body("b", GPU), class_body("a", GPU))
    assert backing(store, GPU) == "a"


def test_a_class_changed_or_deleted_backs_it_no_more() -> None:
    store = store_with(class_body("gpu", GPU))
    store.on_class(class_body("gpu", "example.com/accelerator"), "gpu")
    assert backing(store, GPU) is None
    assert backing(store, "example.com/accelerator") == "gpu"
    store.on_class(None, "gpu")
    assert backing(store, "example.com/accelerator") is None
    assert backing(store, f"{draobjects.IMPLICIT_EXTENDED_PREFIX}gpu") is None


def extended_claim(name: str, owner: str) -> dict[str, Any]:
    body = claim_body(name, owner=owner)
    body["metadata"]["annotations"] = {draobjects.EXTENDED_CLAIM_ANNOTATION: "true"}
    return body


def test_the_claim_made_for_a_pod_is_found_by_its_owner_and_annotation() -> None:
    store = dra.DraStore()
    store.on_claim(
        extended_claim("web-extended-resources-ab12c", "pod-1"),
        "ml",
        "web-extended-resources-ab12c",
    )
    # Owned by the pod but not annotated: a template's claim, not the extended resources'.
    store.on_claim(claim_body("web-gpu", owner="pod-1"), "ml", "web-gpu")
    found = store.extended_claim("pod-1")
    assert found is not None
    assert found.name == "web-extended-resources-ab12c"
    assert store.extended_claim("pod-2") is None
    store.on_claim(None, "ml", "web-extended-resources-ab12c")
    assert store.extended_claim("pod-1") is None


def test_a_claim_prebind_wrote_is_found_before_the_watch_shows_it() -> None:
    store = dra.DraStore()
    written = draobjects.parse_claim(extended_claim("web-extended-resources-ab12c", "pod-1"))
    store.assume_written(written, "pod-1")
    found = store.extended_claim("pod-1")
    assert found is not None
    assert found.name == "web-extended-resources-ab12c"
    store.forget(written.key)
    assert store.extended_claim("pod-1") is None
