"""Preemption side by side, which pods a PodDisruptionBudget protects: one whose selector selects
by a label's absence (``app NotIn [other]``, ``release DoesNotExist``) and a pod with no labels at
all; under plumb and under the real kube-scheduler v1.34.4, as test_preemption_parity.py
describes.

The selector alone matches a pod with no labels (a missing key is "not in" any set). kube-scheduler
does not count such a pod under any PDB: its filterPodsWithPDBViolation (v1.34;
FilterVictimsWithPDBViolation in v1.37) skips a pod without labels before looking at the PDBs,
so that pod is never a PDB-violating victim, while a pod with labels, none of them the selector's
key, is matched and protected. Each scenario is built so that the other reading (the unlabeled
pod protected too) or no PDB at all would choose another victim.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from plumb_dev.testing import kube
from tests.support.preemption_scenes import (
    Occupant,
    Scene,
    scene_fixture,  # noqa: F401
)
from tests.support.preemption_steps import INSUFFICIENT_CPU
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

# In `make test-long` with the other parity modules; the unit tests pin the rule in `make test`.
pytestmark = [pytest.mark.integration, pytest.mark.long]

_GUARD = "guard"
_LABELED = {"app": "web"}
_NOT_IN = {"key": "app", "operator": "NotIn", "values": ["other"]}
_DOES_NOT_EXIST = {"key": "release", "operator": "DoesNotExist"}


def _guard(scene: Scene, expression: Mapping[str, Any]) -> None:
    """Creates the PDB "guard" over the pods that ``expression`` (its one matchExpressions
    entry) selects, allowing no disruption (maxUnavailable 0)."""
    scene.client.create_pdb(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": _GUARD, "namespace": scene.namespace},
            "spec": {"selector": {"matchExpressions": [dict(expression)]}, "maxUnavailable": 0},
        }
    )


def _allows_none(scene: Scene) -> None:
    """Waits until kube-controller-manager's disruption controller has judged the PDB (its
    DisruptionAllowed condition) and checks that the status it wrote allows no disruption."""

    def judged() -> dict[str, Any] | None:
        status = scene.client.pdb(scene.namespace, _GUARD).get("status") or {}
        kinds = {c.get("type") for c in status.get("conditions") or []}
        return status if "DisruptionAllowed" in kinds else None

    status = kube.wait_for("the disruption controller to judge the PDB", judged, timeout=60)
    assert status.get("disruptionsAllowed", 0) == 0, status


def test_an_unlabeled_pod_is_not_reprieved_first_under_a_notin_pdb(scene: Scene) -> None:
    """One node of 2 cpu with two 1-cpu pods: "bare" of priority 5 with no labels, "labeled"
    (app=web) of priority 0; a PDB allowing no disruption selects ``app NotIn [other]``. The
    preemptor asks 1 cpu, so one pod must go. "labeled" is matched, so it is reprieved first
    and stays; "bare", whose labels are none, is no PDB's, and goes although it is the more
    important. Were it protected too (or the PDB ignored), both would be reprieved by
    importance: "bare" would stay and "labeled" go."""
    (node,) = scene.add_nodes("n")
    _guard(scene, _NOT_IN)
    scene.stage([Occupant("bare", node, 5), Occupant("labeled", node, 0, labels=_LABELED)])
    _allows_none(scene)
    histogram = f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("1"), victims=1)
    assert outcome == scene.preempted(deleted={"bare"}, node=node, histogram=histogram)


def test_the_node_of_an_unlabeled_pod_has_no_violation_under_a_doesnotexist_pdb(
    scene: Scene,
) -> None:
    """Two nodes of 2 cpu, each full with one 2-cpu pod: on "a" "bare" of priority 20 with no
    labels, on "b" "labeled" (app=web) of priority 10; a PDB allowing no disruption selects
    ``release DoesNotExist``. The preemptor asks 2 cpu. PDB violations come first: 1 on b
    (labeled is matched, having labels but no release), 0 on a (bare has no labels). So a's
    pod goes. Were bare protected too (1 violation each) or the PDB ignored, the lower victim
    priority would pick b."""
    a, b = scene.add_nodes("a", "b")
    _guard(scene, _DOES_NOT_EXIST)
    scene.stage(
        [
            Occupant("bare", a, 20, cpu="2"),
            Occupant("labeled", b, 10, cpu="2", labels=_LABELED),
        ]
    )
    _allows_none(scene)
    histogram = f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}."
    outcome = scene.preempt(scene.preemptor("2"), victims=1)
    assert outcome == scene.preempted(deleted={"bare"}, node=a, histogram=histogram)
