"""The SchedulingPolicy CRD on the real API server: the server itself refuses nonsense with an
error naming the field, fills in the defaults, accepts the worked examples, and `kubectl get
spol` shows the printer columns from what the status subresource holds."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import subprocess
import uuid
from typing import Any

import pytest

from plumb_dev.testing import crds, kube

pytestmark = pytest.mark.integration

JSON = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
_DROP = object()

# Every field set, each to a valid value: the invalid cases below change one thing at a time,
# and test_the_valid_base_policy_is_accepted proves that the one thing is what was refused.
_VALID_SPEC: JSON = {
    "selector": {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "track", "operator": "NotIn", "values": ["canary"]}],
    },
    "priority": 5,
    "topology": [
        {"topologyKey": ZONE, "maxSkew": 1, "minDomains": 3, "whenUnsatisfiable": "DoNotSchedule"},
        {"topologyKey": HOSTNAME, "maxSkew": 2, "whenUnsatisfiable": "ScheduleAnyway"},
    ],
    "scoring": {
        "strategy": "LeastAllocated",
        "weights": {
            "resources": 1,
            "balance": 1,
            "spread": 2,
            "affinity": 2,
            "taints": 3,
            "zoneHealth": 1,
        },
    },
    "zoneHealth": {"topologyKey": ZONE, "window": "5m", "staleAfter": "2m"},
    "deviationBudget": {
        "maxViolations": 3,
        "window": "1h30m",
        "failureRateThreshold": 0.15,
        "onExhausted": "Block",
    },
    "preemption": {
        "exemptQoS": ["Guaranteed", "Burstable"],
        "victimOrder": "QoSThenPriority",
        "scope": "SameNamespace",
        "maxVictimsPerPod": 3,
    },
    "gangs": {"topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
    "quotaSLO": {
        "objective": 0.99,
        "window": "10m",
        "tolerance": "1m",
        "evaluationPeriod": "30s",
        "ceiling": 30,
        "step": {"drop": 5, "release": 2},
        "scheduling": {"within": "30s"},
    },
}


def _policy(name: str, spec: JSON) -> JSON:
    return {
        "apiVersion": "scheduling.plumb.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def _edited(spec: JSON, edits: dict[str, Any]) -> JSON:
    """A copy of ``spec`` with each dotted path ("topology.0.maxSkew") set, or removed (_DROP)."""
    result = copy.deepcopy(spec)
    for path, value in edits.items():
        *parents, last = path.split(".")
        node: Any = result
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: Any = int(last) if isinstance(node, list) else last
        if value is _DROP:
            del node[key]
        elif isinstance(node, list) and key == len(node):
            node.append(value)
        else:
            node[key] = value
    return result


@dataclasses.dataclass(frozen=True, kw_only=True)
class Invalid:
    """A policy the API server must refuse: what changed, the field the error names, and a
    fragment of what the error says about it."""

    id: str
    edits: dict[str, Any]
    field: str
    says: str


INVALID = [
    # Topology.
    Invalid(
        id="maxSkew-0",
        edits={"topology.0.maxSkew": 0},
        field="spec.topology[0].maxSkew",
        says="should be greater than or equal to 1",
    ),
    Invalid(
        id="maxSkew-negative",
        edits={"topology.1.maxSkew": -2},
        field="spec.topology[1].maxSkew",
        says="should be greater than or equal to 1",
    ),
    Invalid(
        # Found by the fuzzing scenario (tests/chaos/test_fuzz.py): format int32 alone is not
        # enforced, so the schema said nothing and only the status did.
        id="maxSkew-over-int32",
        edits={"topology.0.maxSkew": 2147483648},
        field="spec.topology[0].maxSkew",
        says="should be less than or equal to 2147483647",
    ),
    Invalid(
        id="minDomains-0",
        edits={"topology.0.minDomains": 0},
        field="spec.topology[0].minDomains",
        says="should be greater than or equal to 1",
    ),
    Invalid(
        id="minDomains-with-ScheduleAnyway",
        edits={"topology.1.minDomains": 2},
        field="spec.topology[1].minDomains",
        says="minDomains applies only with whenUnsatisfiable DoNotSchedule",
    ),
    Invalid(
        id="whenUnsatisfiable-unknown",
        edits={"topology.0.whenUnsatisfiable": "Sometimes"},
        field="spec.topology[0].whenUnsatisfiable",
        says='Unsupported value: "Sometimes"',
    ),
    Invalid(
        id="topologyKey-duplicate",
        edits={"topology.1.topologyKey": ZONE},
        field="spec.topology[1]",
        says="Duplicate value",
    ),
    Invalid(
        id="topologyKey-empty",
        edits={"topology.0.topologyKey": ""},
        field="spec.topology[0].topologyKey",
        says="should be at least 1 chars long",
    ),
    Invalid(
        id="topologyKey-missing",
        edits={"topology.1.topologyKey": _DROP},
        field="spec.topology[1].topologyKey",
        says="Required value",
    ),
    Invalid(
        id="topologyKey-not-a-label-key",
        edits={"topology.0.topologyKey": "zone name"},
        field="spec.topology[0].topologyKey",
        says="should match",
    ),
    # Scoring.
    Invalid(
        id="weight-101",
        edits={"scoring.weights.spread": 101},
        field="spec.scoring.weights.spread",
        says="should be less than or equal to 100",
    ),
    Invalid(
        id="weight-negative",
        edits={"scoring.weights.taints": -1},
        field="spec.scoring.weights.taints",
        says="should be greater than or equal to 0",
    ),
    Invalid(
        id="strategy-unknown",
        edits={"scoring.strategy": "Random"},
        field="spec.scoring.strategy",
        says='Unsupported value: "Random"',
    ),
    # Deviation budget.
    Invalid(
        id="failureRateThreshold-0",
        edits={"deviationBudget.failureRateThreshold": 0},
        field="spec.deviationBudget.failureRateThreshold",
        says="should be greater than 0",
    ),
    Invalid(
        id="failureRateThreshold-1.5",
        edits={"deviationBudget.failureRateThreshold": 1.5},
        field="spec.deviationBudget.failureRateThreshold",
        says="should be less than or equal to 1",
    ),
    Invalid(
        id="maxViolations-negative",
        edits={"deviationBudget.maxViolations": -1},
        field="spec.deviationBudget.maxViolations",
        says="should be greater than or equal to 0",
    ),
    Invalid(
        id="onExhausted-unknown",
        edits={"deviationBudget.onExhausted": "Panic"},
        field="spec.deviationBudget.onExhausted",
        says='Unsupported value: "Panic"',
    ),
    Invalid(
        id="window-in-words",
        edits={"deviationBudget.window": "ten minutes"},
        field="spec.deviationBudget.window",
        says="must be a duration between 1ms and 24h such as 30s, 5m or 1h30m",
    ),
    Invalid(
        id="window-negative",
        edits={"deviationBudget.window": "-5m"},
        field="spec.deviationBudget.window",
        says="got -5m",
    ),
    Invalid(
        id="window-zero",
        edits={"deviationBudget.window": "0s"},
        field="spec.deviationBudget.window",
        says="got 0s",
    ),
    Invalid(
        id="window-over-a-day",
        edits={"deviationBudget.window": "36h"},
        field="spec.deviationBudget.window",
        says="got 36h",
    ),
    # Zone health.
    Invalid(
        id="staleAfter-in-days",
        edits={"zoneHealth.staleAfter": "1d"},
        field="spec.zoneHealth.staleAfter",
        says="must be a duration",
    ),
    Invalid(
        id="staleAfter-longer-than-window",
        edits={"zoneHealth.staleAfter": "10m"},
        field="spec.zoneHealth.staleAfter",
        says="staleAfter (10m) must not be longer than window (5m)",
    ),
    # Selector.
    Invalid(
        id="selector-missing",
        edits={"selector": _DROP},
        field="spec.selector",
        says="Required value",
    ),
    Invalid(
        id="selector-empty",
        edits={"selector": {}},
        field="spec.selector",
        says="an empty selector would govern every pod in the namespace",
    ),
    Invalid(
        id="selector-empty-lists",
        edits={"selector": {"matchLabels": {}, "matchExpressions": []}},
        field="spec.selector",
        says="must have at least one matchLabels entry or matchExpressions term",
    ),
    Invalid(
        id="operator-unknown",
        edits={"selector.matchExpressions.0.operator": "Near"},
        field="spec.selector.matchExpressions[0].operator",
        says='Unsupported value: "Near"',
    ),
    Invalid(
        id="In-without-values",
        edits={"selector.matchExpressions.0": {"key": "track", "operator": "In"}},
        field="spec.selector.matchExpressions[0].values",
        says="operator In needs at least one value",
    ),
    Invalid(
        id="NotIn-with-empty-values",
        edits={"selector.matchExpressions.0.values": []},
        field="spec.selector.matchExpressions[0].values",
        says="operator NotIn needs at least one value",
    ),
    Invalid(
        id="Exists-with-values",
        edits={"selector.matchExpressions.0.operator": "Exists"},
        field="spec.selector.matchExpressions[0].values",
        says="operator Exists takes no values",
    ),
    Invalid(
        id="expression-key-empty",
        edits={"selector.matchExpressions.0.key": ""},
        field="spec.selector.matchExpressions[0].key",
        says="should be at least 1 chars long",
    ),
    Invalid(
        id="label-key-invalid",
        edits={"selector.matchLabels.-web": "x"},
        field="spec.selector.matchLabels",
        says='key "-web" is not a label key',
    ),
    Invalid(
        id="label-value-invalid",
        edits={"selector.matchLabels.app": "web server"},
        field="spec.selector.matchLabels.app",
        says="should match",
    ),
    # Preemption.
    Invalid(
        id="victimOrder-unknown",
        edits={"preemption.victimOrder": "Random"},
        field="spec.preemption.victimOrder",
        says='Unsupported value: "Random"',
    ),
    Invalid(
        id="scope-unknown",
        edits={"preemption.scope": "Namespace"},
        field="spec.preemption.scope",
        says='Unsupported value: "Namespace"',
    ),
    Invalid(
        id="exemptQoS-unknown",
        edits={"preemption.exemptQoS.1": "Premium"},
        field="spec.preemption.exemptQoS[1]",
        says='Unsupported value: "Premium"',
    ),
    Invalid(
        id="exemptQoS-duplicate",
        edits={"preemption.exemptQoS.1": "Guaranteed"},
        field="spec.preemption.exemptQoS[1]",
        says='Duplicate value: "Guaranteed"',
    ),
    Invalid(
        id="exemptQoS-too-many",
        edits={"preemption.exemptQoS": ["Guaranteed", "Burstable", "BestEffort", "BestEffort"]},
        field="spec.preemption.exemptQoS",
        says="must have at most 3 items",
    ),
    Invalid(
        id="maxVictimsPerPod-0",
        edits={"preemption.maxVictimsPerPod": 0},
        field="spec.preemption.maxVictimsPerPod",
        says="should be greater than or equal to 1",
    ),
    Invalid(
        id="maxVictimsPerPod-over-10000",
        edits={"preemption.maxVictimsPerPod": 10001},
        field="spec.preemption.maxVictimsPerPod",
        says="should be less than or equal to 10000",
    ),
    # Topology for gangs.
    Invalid(
        id="gangs-topologyKey-not-a-label-key",
        edits={"gangs.topologyKey": "-rack"},
        field="spec.gangs.topologyKey",
        says="should match",
    ),
    Invalid(
        id="gangs-topologyKey-missing",
        edits={"gangs.topologyKey": _DROP},
        field="spec.gangs.topologyKey",
        says="Required value",
    ),
    Invalid(
        id="gangs-whenUnsatisfiable-unknown",
        edits={"gangs.whenUnsatisfiable": "Sometimes"},
        field="spec.gangs.whenUnsatisfiable",
        says='supported values: "DoNotSchedule", "ScheduleAnyway"',
    ),
    # SLO-elastic quotas.
    Invalid(
        id="quotaSLO-two-sources",
        edits={"quotaSLO.prometheus": {"url": "http://prom:9090", "query": "up"}},
        field="spec.quotaSLO",
        says="set exactly one of scheduling",
    ),
    Invalid(
        id="quotaSLO-objective-0",
        edits={"quotaSLO.objective": 0},
        field="spec.quotaSLO.objective",
        says="should be greater than 0",
    ),
    Invalid(
        id="quotaSLO-window-not-a-duration",
        edits={"quotaSLO.window": "ten minutes"},
        field="spec.quotaSLO.window",
        says="must be a duration",
    ),
    # Types and shape.
    Invalid(
        id="priority-not-a-number",
        edits={"priority": "high"},
        field="spec.priority",
        says="must be of type integer",
    ),
    Invalid(
        id="unknown-field",
        edits={"topology.0.maxskew": 2},
        field="spec.topology[0].maxskew",
        says="unknown field",
    ),
]


@pytest.fixture(scope="module")
def policy_namespace(kube_client: kube.Kube, policy_crd: crds.Kubectl) -> str:
    name = f"policy-crd-{uuid.uuid4().hex[:6]}"
    kube_client.create_namespace(name)
    return name


def _apply(kubectl: crds.Kubectl, namespace: str, body: JSON) -> subprocess.CompletedProcess[str]:
    # --validate=strict (kubectl's default, spelled out) makes the server refuse unknown fields.
    return kubectl.run(
        "apply", "--validate=strict", "-n", namespace, "-f", "-", stdin=json.dumps(body)
    )


def _get(kubectl: crds.Kubectl, namespace: str, name: str) -> JSON:
    got: JSON = json.loads(kubectl.check("get", "spol", "-n", namespace, name, "-o", "json"))
    return got


def test_the_valid_base_policy_is_accepted(policy_crd: crds.Kubectl, policy_namespace: str) -> None:
    applied = _apply(policy_crd, policy_namespace, _policy("base", _VALID_SPEC))
    assert applied.returncode == 0, applied.stderr
    assert _get(policy_crd, policy_namespace, "base")["spec"] == _VALID_SPEC


def test_the_table_has_twenty_or_more_distinct_cases() -> None:
    assert len(INVALID) >= 20
    assert len({case.id for case in INVALID}) == len(INVALID)


def test_empty_preemption_rules_come_back_with_their_defaults(
    policy_crd: crds.Kubectl, policy_namespace: str
) -> None:
    spec = {"selector": {"matchLabels": {"app": "tenant"}}, "preemption": {}}
    applied = _apply(policy_crd, policy_namespace, _policy("preemption-defaults", spec))
    assert applied.returncode == 0, applied.stderr
    got = _get(policy_crd, policy_namespace, "preemption-defaults")["spec"]
    # No exemptions and no cap unless written; the order and scope are kube-scheduler's.
    assert got["preemption"] == {"victimOrder": "Priority", "scope": "Cluster"}


@pytest.mark.parametrize("case", INVALID, ids=[case.id for case in INVALID])
def test_the_api_server_refuses_an_invalid_policy_naming_the_field(
    policy_crd: crds.Kubectl, policy_namespace: str, case: Invalid
) -> None:
    name = re.sub(r"[^a-z0-9]+", "-", case.id.lower())
    applied = _apply(policy_crd, policy_namespace, _policy(name, _edited(_VALID_SPEC, case.edits)))
    print(f"{case.id}: {applied.stderr.strip()}")
    assert applied.returncode != 0, f"{case.id} was accepted: {applied.stdout}"
    assert case.field in applied.stderr
    assert case.says in applied.stderr
    missing = policy_crd.run("get", "spol", "-n", policy_namespace, name)
    assert "NotFound" in missing.stderr, f"{case.id} left a policy behind: {missing.stdout}"


def test_gangs_without_when_unsatisfiable_comes_back_do_not_schedule(
    policy_crd: crds.Kubectl, policy_namespace: str
) -> None:
    spec = {"selector": {"matchLabels": {"app": "train"}}, "gangs": {"topologyKey": "rack"}}
    applied = _apply(policy_crd, policy_namespace, _policy("gangs-defaults", spec))
    assert applied.returncode == 0, applied.stderr
    got = _get(policy_crd, policy_namespace, "gangs-defaults")["spec"]
    assert got["gangs"] == {"topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"}


def test_a_minimal_policy_comes_back_with_the_defaults_filled_in(
    policy_crd: crds.Kubectl, policy_namespace: str
) -> None:
    spec = {
        "selector": {"matchLabels": {"app": "api"}},
        "topology": [{"topologyKey": ZONE}],
        "deviationBudget": {},
    }
    applied = _apply(policy_crd, policy_namespace, _policy("minimal", spec))
    assert applied.returncode == 0, applied.stderr
    assert _get(policy_crd, policy_namespace, "minimal")["spec"] == {
        "selector": {"matchLabels": {"app": "api"}},
        "priority": 0,
        "topology": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
        "scoring": {
            "strategy": "LeastAllocated",
            "weights": {
                "resources": 1,
                "balance": 1,
                "spread": 2,
                "affinity": 2,
                "taints": 3,
                "zoneHealth": 1,
            },
        },
        "zoneHealth": {"topologyKey": ZONE, "window": "5m", "staleAfter": "2m"},
        "deviationBudget": {
            "maxViolations": 3,
            "window": "10m",
            "failureRateThreshold": 0.15,
            "onExhausted": "Block",
        },
    }


def test_the_worked_examples_apply_cleanly(policy_crd: crds.Kubectl, namespace: str) -> None:
    examples = sorted(path.name for path in crds.EXAMPLES_DIR.glob("*.yaml"))
    assert examples == ["api-zone-health.yaml", "batch-binpack.yaml", "web-zone-spread.yaml"]
    applied = policy_crd.run(
        "apply", "--validate=strict", "-n", namespace, "-f", str(crds.EXAMPLES_DIR)
    )
    assert applied.returncode == 0, applied.stderr
    assert applied.stderr == "", "the examples drew warnings"
    listed = json.loads(policy_crd.check("get", "spol", "-n", namespace, "-o", "json"))
    specs = {item["metadata"]["name"]: item["spec"] for item in listed["items"]}
    assert sorted(specs) == ["api-zone-health", "batch-binpack", "web-zone-spread"]
    # What each example leaves out comes back defaulted.
    assert specs["batch-binpack"]["zoneHealth"] == {
        "topologyKey": ZONE,
        "window": "5m",
        "staleAfter": "2m",
    }
    assert specs["batch-binpack"]["scoring"]["strategy"] == "MostAllocated"
    assert specs["web-zone-spread"]["topology"][1] == {
        "topologyKey": HOSTNAME,
        "maxSkew": 2,
        "whenUnsatisfiable": "ScheduleAnyway",
    }
    assert specs["api-zone-health"]["deviationBudget"]["onExhausted"] == "Revert"


def _rows(kubectl: crds.Kubectl, namespace: str, *extra: str) -> list[list[str]]:
    table = kubectl.check("get", "spol", "-n", namespace, *extra)
    return [line.split() for line in table.strip().splitlines()]


@pytest.fixture
def reported(policy_crd: crds.Kubectl, namespace: str) -> str:
    """A policy named "web" in ``namespace``, before plumb has written any status."""
    applied = _apply(
        policy_crd, namespace, _policy("web", {"selector": {"matchLabels": {"app": "web"}}})
    )
    assert applied.returncode == 0, applied.stderr
    return "web"


_STATUS: JSON = {
    "observedGeneration": 1,
    "activeGeneration": 1,
    "matchedPods": 12,
    "domains": {ZONE: {"zone-a": 4, "zone-b": 4, "zone-c": 4}},
    "skew": {ZONE: 0},
    "skewSummary": "0/1",
    "budget": {
        "used": 1,
        "remaining": 2,
        "windowStart": "2025-01-01T10:00:00Z",
        "failureRate": 0.05,
    },
    "lastDecision": {"pod": "web-7", "node": "node-3", "deviation": False},
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Compiled",
            "message": "policy compiled; governs 12 pods",
            "observedGeneration": 1,
            "lastTransitionTime": "2025-01-01T10:00:00Z",
        }
    ],
}


def test_kubectl_get_spol_shows_the_printer_columns_from_the_status(
    policy_crd: crds.Kubectl, namespace: str, reported: str
) -> None:
    header, row = _rows(policy_crd, namespace)
    assert header == ["NAME", "READY", "MATCHED", "SKEW", "BUDGET", "AGE"]
    assert row[0] == reported
    assert len(row) == 2, f"columns filled before any status was written: {row}"

    policy_crd.check(
        "patch",
        "spol",
        reported,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": _STATUS}),
    )
    header, row = _rows(policy_crd, namespace)
    assert row[:5] == [reported, "True", "12", "0/1", "2"]
    header, row = _rows(policy_crd, namespace, "-o", "wide")
    assert header[-3:] == ["PRIORITY", "ACTIVE", "REASON"]
    assert row[-3:] == ["0", "1", "Compiled"]
    # A status write is not a spec change: the generation plumb compares against stays put.
    assert _get(policy_crd, namespace, reported)["metadata"]["generation"] == 1


def test_status_is_written_only_through_its_subresource(
    policy_crd: crds.Kubectl, namespace: str, reported: str
) -> None:
    policy_crd.check(
        "patch",
        "spol",
        reported,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"priority": 7}, "status": {"matchedPods": 99}}),
    )
    got = _get(policy_crd, namespace, reported)
    assert got["spec"]["priority"] == 7
    assert "status" not in got
    assert got["metadata"]["generation"] == 2


def test_a_partial_status_lands_but_a_mistyped_one_is_refused(
    policy_crd: crds.Kubectl, namespace: str, reported: str
) -> None:
    def write(status: JSON) -> subprocess.CompletedProcess[str]:
        return policy_crd.run(
            "patch",
            "spol",
            reported,
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )

    # Only type and status in a condition: a reconciler that has not yet got a reason still
    # gets its Ready=False through.
    partial = write({"conditions": [{"type": "Ready", "status": "False"}]})
    assert partial.returncode == 0, partial.stderr
    assert _rows(policy_crd, namespace)[1][:2] == [reported, "False"]
    mistyped = write({"matchedPods": "twelve"})
    assert mistyped.returncode != 0
    assert "status.matchedPods" in mistyped.stderr
