"""A pod's later events reuse what was read from its spec while its generation stays the same."""

from __future__ import annotations

import copy
import dataclasses

from plumb.backend.records import objects
from plumb_dev.testing.builders import make_pod

# A pending pod of the first generation of its spec.
PENDING = (
    make_pod("web-1")
    .uid("u-1")
    .req(cpu="250m", memory="64Mi")
    .label("app", "web")
    .spread("topology.kubernetes.io/zone", max_skew=1)
    .generation(1)
)


def _same_fields(left: objects.PodInfo, right: objects.PodInfo) -> None:
    for field in dataclasses.fields(objects.PodInfo):
        assert getattr(left, field.name) == getattr(right, field.name), field.name


def test_a_binding_reuses_what_the_spec_gave_and_reads_the_rest_again() -> None:
    # A binding sets spec.nodeName without a new generation; the status moves on too.
    known = objects.parse_pod(PENDING.obj())
    bound = PENDING.copy().node("node-a").resource_version("42").owner("ReplicaSet", "web-7d").obj()
    bound["status"] = {
        "phase": "Running",
        "qosClass": "Burstable",
        "startTime": "2026-12-02T04:00:00Z",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
    }

    reused = objects.parse_pod(bound, known=known)

    _same_fields(reused, objects.parse_pod(bound))
    assert reused.node_name == "node-a"
    assert reused.owner == ("ReplicaSet", "web-7d")
    assert reused.scheduling is known.scheduling  # not parsed again
    assert reused.requests is known.requests


def test_a_new_generation_is_parsed_again() -> None:
    known = objects.parse_pod(PENDING.obj())
    resized = PENDING.copy().generation(2).req(cpu="1", memory="64Mi").obj()

    reparsed = objects.parse_pod(resized, known=known)

    assert reparsed.requests["cpu"] == 1000
    assert reparsed.generation == 2


def test_new_labels_are_parsed_again_even_in_the_same_generation() -> None:
    # Labels change without a new generation, and constraints may read them (matchLabelKeys).
    known = objects.parse_pod(PENDING.obj())
    relabelled = PENDING.copy().label("app", "api").obj()

    reparsed = objects.parse_pod(relabelled, known=known)

    _same_fields(reparsed, objects.parse_pod(relabelled))
    assert reparsed.labels["app"] == "api"
    assert reparsed.scheduling is not known.scheduling


def test_without_a_generation_or_with_another_uid_nothing_is_reused() -> None:
    no_generation = PENDING.obj()
    del no_generation["metadata"]["generation"]
    known = objects.parse_pod(no_generation)
    assert known.generation == 0
    assert objects.parse_pod(copy.deepcopy(no_generation), known=known).scheduling is not (
        known.scheduling
    )

    known = objects.parse_pod(PENDING.obj())
    recreated = PENDING.copy().uid("u-2").req(cpu="2", memory="64Mi").obj()
    assert objects.parse_pod(recreated, known=known).requests["cpu"] == 2000
