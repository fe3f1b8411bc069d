"""manifests/ as kustomize renders it, checked without a cluster: what `kubectl apply -k`
would install, its least-privilege RBAC, its pinned image and its one copy of the CRD; and the
optional PodGroup and ElasticQuota CRDs, scheduler-plugins' own files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # no stubs in the dev dependencies

from plumb.framework import schedconfig, scoring
from plumb_dev.cluster.controlplane import building
from plumb_dev.testing import crds, schedulerplugins
from tests.support.installation import MANIFESTS, NAMESPACE, REPOSITORY

CRD_FILE = REPOSITORY / "crds" / "schedulingpolicies.scheduling.plumb.dev.yaml"
PODGROUP_CRD_NAME = "scheduling.x-k8s.io_podgroups.yaml"
ELASTICQUOTA_CRD_NAME = "scheduling.x-k8s.io_elasticquotas.yaml"
# scheduler-plugins' optional CRDs: (kustomization directory, its one file, the CRD's name).
OPTIONAL_CRDS = {
    "podgroups": (crds.PODGROUPS_DIR, PODGROUP_CRD_NAME, crds.PODGROUP_CRD),
    "elasticquotas": (crds.ELASTICQUOTAS_DIR, ELASTICQUOTA_CRD_NAME, crds.ELASTICQUOTA_CRD),
}
# Every verb plumb's ClusterRole may carry, by (group, resource): README and docs/operations.md.
CLUSTER_RULES = {
    ("", "pods"): {"list", "watch", "delete"},
    ("", "pods/binding"): {"create"},
    ("", "pods/status"): {"patch"},
    ("", "nodes"): {"list", "watch"},
    ("", "namespaces"): {"list", "watch"},
    ("", "services"): {"list", "watch"},
    ("", "replicationcontrollers"): {"list", "watch"},
    ("apps", "replicasets"): {"list", "watch"},
    ("apps", "statefulsets"): {"list", "watch"},
    ("policy", "poddisruptionbudgets"): {"list", "watch"},
    ("", "persistentvolumes"): {"get", "list", "watch", "patch"},
    ("", "persistentvolumeclaims"): {"get", "list", "watch", "patch"},
    ("storage.k8s.io", "storageclasses"): {"list", "watch"},
    ("storage.k8s.io", "csinodes"): {"list", "watch"},
    ("storage.k8s.io", "csistoragecapacities"): {"list", "watch"},
    ("storage.k8s.io", "csidrivers"): {"list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"list", "watch"},
    ("resource.k8s.io", "deviceclasses"): {"list", "watch"},
    ("resource.k8s.io", "resourceclaimtemplates"): {"list", "watch"},
    ("resource.k8s.io", "resourceclaims"): {
        "get",
        "list",
        "watch",
        "update",
        "patch",
        "create",
        "delete",
    },
    ("resource.k8s.io", "resourceclaims/status"): {"update", "patch"},
    ("resource.k8s.io", "resourceclaims/binding"): {"update", "patch"},
    ("", "pods/finalizers"): {"update"},
    ("scheduling.k8s.io", "podgroups"): {"get", "list", "watch"},
    ("scheduling.k8s.io", "workloads"): {"get", "list", "watch"},
    ("scheduling.k8s.io", "podgroups/status"): {"patch", "update"},
    ("scheduling.x-k8s.io", "podgroups"): {"get", "list", "watch"},
    ("scheduling.x-k8s.io", "elasticquotas"): {"get", "list", "watch"},
    ("scheduling.x-k8s.io", "elasticquotas/status"): {"patch", "update"},
    ("events.k8s.io", "events"): {"create"},
    ("scheduling.plumb.dev", "schedulingpolicies"): {"list", "watch", "patch"},
    ("scheduling.plumb.dev", "schedulingpolicies/status"): {"patch"},
}


def _render(directory: Path) -> list[dict[str, Any]]:
    kubectl = building.ensure_binaries() / "kubectl"
    result = subprocess.run(
        [str(kubectl), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def rendered() -> dict[tuple[str, str], dict[str, Any]]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in _render(MANIFESTS)}


def _one(rendered: dict[tuple[str, str], dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [doc for (k, _), doc in rendered.items() if k == kind]
    return found


def test_the_kustomization_installs_everything_plumb_needs(
    rendered: dict[tuple[str, str], dict[str, Any]],
) -> None:
    kinds = sorted(kind for kind, _ in rendered)
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "CustomResourceDefinition",
        "Deployment",
        "Namespace",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    for (kind, name), doc in rendered.items():
        if kind not in {
            "Namespace",
            "ClusterRole",
            "ClusterRoleBinding",
            "CustomResourceDefinition",
        }:
            assert doc["metadata"]["namespace"] == NAMESPACE, f"{kind}/{name}"


def test_the_crd_is_the_one_in_crds(rendered: dict[tuple[str, str], dict[str, Any]]) -> None:
    assert _one(rendered, "CustomResourceDefinition") == yaml.safe_load(CRD_FILE.read_text())


def test_the_deployment_pins_the_image_and_runs_restricted(
    rendered: dict[tuple[str, str], dict[str, Any]],
) -> None:
    deployment = _one(rendered, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    images = {c["image"] for c in [*spec["initContainers"], *spec["containers"]]}
    assert images == {"plumb:0.1.0"}, "the kustomization's images: entry pins both containers"
    (container,) = spec["containers"]
    settings = _one(rendered, "ConfigMap")
    assert container["envFrom"] == [{"configMapRef": {"name": settings["metadata"]["name"]}}]
    # Every $(VAR) in the arguments comes from the ConfigMap.
    for arg in container["args"]:
        if "$(" in arg:
            assert arg.split("$(")[1].rstrip(")") in settings["data"], arg
    assert "--leader-elect" in container["args"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_the_rbac_grants_exactly_what_plumb_uses(
    rendered: dict[tuple[str, str], dict[str, Any]],
) -> None:
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in _one(rendered, "ClusterRole")["rules"]:
        assert "resourceNames" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == CLUSTER_RULES
    role = _one(rendered, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    leases = {
        (tuple(rule.get("resourceNames", ())), verb)
        for rule in role["rules"]
        for verb in rule["verbs"]
        if rule["apiGroups"] == ["coordination.k8s.io"] and rule["resources"] == ["leases"]
    }
    assert leases == {((), "create"), (("plumb",), "get"), (("plumb",), "update")}
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        (subject,) = _one(rendered, kind)["subjects"]
        assert subject == {"kind": "ServiceAccount", "name": "plumb", "namespace": NAMESPACE}


def test_the_config_component_runs_plumb_from_a_kube_scheduler_configuration(
    tmp_path: Path,
) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    relative = Path(os.path.relpath(MANIFESTS, overlay))
    (overlay / "kustomization.yaml").write_text(
        f"resources:\n  - {relative}\ncomponents:\n  - {relative / 'components' / 'config'}\n"
    )
    docs = {(doc["kind"], doc["metadata"]["name"]): doc for doc in _render(overlay)}
    container = docs[("Deployment", "plumb")]["spec"]["template"]["spec"]["containers"][0]
    assert "--config=/etc/plumb/scheduler-config.yaml" in container["args"]
    assert not [arg for arg in container["args"] if arg.startswith("--scheduler-name")]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["config"]["mountPath"] == "/etc/plumb"
    assert mounts["config"]["readOnly"]
    # A fixed name, so that an edit reaches the mounted file (and plumb reloads it).
    text = docs[("ConfigMap", "plumb-config")]["data"]["scheduler-config.yaml"]
    config = schedconfig.parse(text)
    assert [profile.name for profile in config.profiles] == ["plumb", "plumb-binpack"]
    assert config.profiles[1].strategy == scoring.MOST_ALLOCATED


@pytest.mark.parametrize("optional", sorted(OPTIONAL_CRDS))
def test_each_optional_kustomization_installs_its_crd_alone(optional: str) -> None:
    directory, file_name, crd_name = OPTIONAL_CRDS[optional]
    (crd,) = _render(directory)
    assert (crd["kind"], crd["metadata"]["name"]) == ("CustomResourceDefinition", crd_name)
    assert crd == yaml.safe_load((directory / file_name).read_text())
    assert [version["name"] for version in crd["spec"]["versions"]] == ["v1alpha1"]


@pytest.mark.parametrize("optional", sorted(OPTIONAL_CRDS))
def test_each_optional_crd_is_scheduler_plugins_own_file(optional: str) -> None:
    module = schedulerplugins.module_copy()
    if module is None:
        pytest.skip(reason=schedulerplugins.NOT_DOWNLOADED)
    directory, file_name, _ = OPTIONAL_CRDS[optional]
    upstream = (module / "config" / "crd" / "bases" / file_name).read_text()
    lines = (directory / file_name).read_text().splitlines(keepends=True)
    header = [line for line in lines if line.startswith("#")]
    assert lines[: len(header)] == header, "the comment lines come first, then the file"
    assert "".join(lines[len(header) :]) == upstream
    assert any(schedulerplugins.VERSION in line for line in header)
