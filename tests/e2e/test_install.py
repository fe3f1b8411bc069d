"""plumb installed as a user installs it: ``make image``, then ``kubectl apply -k manifests/`` on
the local cluster with its real node; its replicas Ready under a restricted security context,
a 20-replica Deployment placed, the leader's log read with ``kubectl logs`` and piped into
``plumb explain``, and its ServiceAccount's token allowed what plumb does and nothing else."""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plumb.observability import trace
from plumb_dev.testing import builders, crds, kube
from tests.support.installation import NAMESPACE, REPOSITORY, SERVICE_ACCOUNT, Image, Installed

REPLICAS = 20
# Plain API objects beside the real node: the 20 pods are bound there and never run, as in
# Kubernetes' scheduler performance tests. The taint keeps kube-scheduler's pods off them.
FAKE_NODES = 4
FAKE_LABEL = "e2e.plumb.dev/fake"
# The image ships the compiled kernel: a pod loads it rather than compiling it (~30 s here).
KERNEL_READY_SECONDS = 5.0
FIRST_POD_SECONDS = 15.0
IMAGE_MB = 700
USER = "65532:65532"
PLUMB = REPOSITORY / ".venv" / "bin" / "plumb"


def _image_config(image: Image) -> dict[str, Any]:
    """The image's config (user, entrypoint, environment) from its docker-archive."""
    with tarfile.open(image.archive.archive) as archive:
        manifest = json.load(_member(archive, "manifest.json"))
        config: dict[str, Any] = json.load(_member(archive, manifest[0]["Config"]))
    return config


def _member(archive: tarfile.TarFile, name: str) -> io.IOBase:
    handle = archive.extractfile(name)
    assert handle is not None, f"{name} is not a file in the image archive"
    return io.BytesIO(handle.read())


def test_make_image_builds_a_non_root_image_that_starts_plumb(plumb_image: Image) -> None:
    config = _image_config(plumb_image)["config"]
    print(f"image {plumb_image.archive.ref}: {plumb_image.size_mb:.0f} MB")
    assert config["User"] == USER
    assert config["Entrypoint"] == ["plumb"]
    assert config["Cmd"] == ["run"]
    assert "NUMBA_CACHE_DIR=/opt/plumb/numba-cache" in config["Env"]
    assert plumb_image.size_mb < IMAGE_MB, f"the image grew to {plumb_image.size_mb:.0f} MB"


def test_every_replica_is_ready_under_a_restricted_security_context(
    installed: Installed,
) -> None:
    pods = installed.plumb_pods()
    assert len(pods) == installed.replicas
    for pod in pods:
        spec, status = pod["spec"], pod["status"]
        name = pod["metadata"]["name"]
        ready = {c["type"]: c["status"] for c in status["conditions"]}
        assert ready["Ready"] == "True", f"{name} is not Ready: {status}"
        assert spec["nodeName"] == installed.cluster.node.name
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ]
        for container in [*spec["initContainers"], *spec["containers"]]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["capabilities"] == {"drop": ["ALL"]}
        (container,) = spec["containers"]
        assert container["readinessProbe"]
        assert container["livenessProbe"]
        assert container["resources"]["requests"]
        assert container["resources"]["limits"]
        log = installed.logs(name)
        match = re.search(r"kernel ready in ([0-9.]+) s", log)
        assert match, f"{name} never logged its kernel ready:\n{log[-3000:]}"
        seconds = float(match.group(1))
        print(f"{name}: kernel ready in {seconds:.1f} s (loaded from the image's cache)")
        assert seconds < KERNEL_READY_SECONDS, "the kernel was compiled, not loaded from the image"
    print(f"first pod bound {installed.first_pod_seconds:.0f} s after plumb's container started")
    assert installed.first_pod_seconds < FIRST_POD_SECONDS


@pytest.fixture
def fake_nodes(installed: Installed) -> Iterator[list[str]]:
    names = [f"e2e-fake-{i}" for i in range(FAKE_NODES)]
    for name in names:
        node = builders.make_node(name).capacity(cpu=8, memory="32Gi", pods=110)
        installed.cluster.client.create_node(node.label(FAKE_LABEL, "true").taint(FAKE_LABEL).obj())
    yield names
    for name in names:
        installed.cluster.client.delete_node(name)


@pytest.fixture
def workload_namespace(installed: Installed) -> Iterator[str]:
    name = "e2e-web"
    installed.cluster.client.create_namespace(name)
    yield name
    installed.cluster.client.delete_namespace(name)


def _deployment(namespace: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "schedulerName": "plumb",
                    "nodeSelector": {FAKE_LABEL: "true"},
                    "tolerations": [{"key": FAKE_LABEL, "operator": "Exists"}],
                    "containers": [
                        {
                            "name": "web",
                            "image": image,
                            "imagePullPolicy": "Never",
                            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                        }
                    ],
                },
            },
        },
    }


def test_a_deployment_is_placed_and_the_leaders_log_explains_it(
    installed: Installed, fake_nodes: list[str], workload_namespace: str
) -> None:
    kubectl = installed.kubectl
    body = _deployment(workload_namespace, installed.cluster.image)
    kubectl.check("apply", "-f", "-", stdin=json.dumps(body))

    def placed() -> dict[str, str] | None:
        pods = installed.json("get", "pods", "-n", workload_namespace, "-l", "app=web")["items"]
        where = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}
        return where if len(where) == REPLICAS and all(where.values()) else None

    where = kube.wait_for(f"all {REPLICAS} replicas bound", placed, timeout=60)
    assert set(where.values()) <= set(fake_nodes)
    per_node = {node: list(where.values()).count(node) for node in fake_nodes}
    print(f"{REPLICAS} replicas placed: {per_node}")
    # Spread by the default scoring (balanced allocation, least allocated): 5 on each.
    assert max(per_node.values()) - min(per_node.values()) <= 1

    leader = installed.leader()
    log = kube.wait_for(
        "the leader's log to carry a trace line for every replica",
        lambda: _log_if_complete(installed, leader, workload_namespace, set(where)),
        timeout=30,
        interval=1.0,
    )
    decisions = [
        record
        for record in map(trace.from_log_line, log.splitlines())
        if record is not None and record.pod.startswith(f"{workload_namespace}/")
    ]
    for record in decisions:
        assert record.result == "Scheduled"
        assert record.node == where[record.pod.partition("/")[2]]
    assert "Forbidden" not in log, "plumb was refused something it needs"
    assert " 403" not in log, "plumb was refused something it needs"

    pod = sorted(where)[0]
    target = f"{workload_namespace}/{pod}"
    kubeconfig = shlex.quote(str(installed.cluster.cp.kubeconfig))
    kubectl_cmd = f"{shlex.quote(str(installed.kubectl.binary))} --kubeconfig {kubeconfig}"
    # README's one-liner: the logs of the pod the Lease names.
    holder = (
        f"$({kubectl_cmd} get lease plumb -n {NAMESPACE} -o jsonpath='{{.spec.holderIdentity}}')"
    )
    source = f'{kubectl_cmd} logs -n {NAMESPACE} "{holder}"'
    pipeline = f"{source} | {shlex.quote(str(PLUMB))} explain {target}"
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    print(f"$ {pipeline}\n{result.stdout}")
    assert result.returncode == 0, result.stderr
    assert target in result.stdout
    assert re.search(rf"node:\s+{re.escape(where[pod])}\b", result.stdout), result.stdout


def _log_if_complete(installed: Installed, pod: str, namespace: str, names: set[str]) -> str | None:
    log = installed.logs(pod)
    seen = {
        record.pod.partition("/")[2]
        for record in map(trace.from_log_line, log.splitlines())
        if record is not None and record.pod.startswith(f"{namespace}/")
    }
    return log if names <= seen else None


# (verb, resource, extra kubectl arguments): what plumb does, each allowed.
ALLOWED = [
    ("list", "pods", ["-A"]),
    ("watch", "pods", ["-A"]),
    ("create", "pods", ["--subresource=binding", "-n", "default"]),
    ("patch", "pods", ["--subresource=status", "-n", "default"]),
    ("delete", "pods", ["-n", "default"]),
    ("watch", "nodes", []),
    ("list", "namespaces", []),
    ("watch", "replicasets.apps", ["-A"]),
    ("watch", "statefulsets.apps", ["-A"]),
    ("list", "services", ["-A"]),
    ("list", "replicationcontrollers", ["-A"]),
    ("list", "poddisruptionbudgets.policy", ["-A"]),
    ("watch", "poddisruptionbudgets.policy", ["-A"]),
    ("create", "events.events.k8s.io", ["-n", "default"]),
    ("watch", "resourceslices.resource.k8s.io", []),
    ("list", "deviceclasses.resource.k8s.io", []),
    ("watch", "resourceclaims.resource.k8s.io", ["-A"]),
    ("patch", "resourceclaims.resource.k8s.io", ["--subresource=status", "-n", "default"]),
    ("update", "resourceclaims.resource.k8s.io", ["--subresource=binding", "-n", "default"]),
    ("watch", "schedulingpolicies.scheduling.plumb.dev", ["-A"]),
    ("patch", "schedulingpolicies.scheduling.plumb.dev", ["--subresource=status", "-A"]),
    ("create", "leases.coordination.k8s.io", ["-n", NAMESPACE]),
    ("get", "leases.coordination.k8s.io/plumb", ["-n", NAMESPACE]),
    ("update", "leases.coordination.k8s.io/plumb", ["-n", NAMESPACE]),
]
# What plumb never does, each denied.
DENIED = [
    ("get", "secrets", ["-n", NAMESPACE]),
    ("list", "secrets", ["-A"]),
    ("delete", "nodes", []),
    ("patch", "nodes", []),
    ("patch", "pods", ["-n", "default"]),
    ("update", "pods", ["-n", "default"]),
    ("create", "pods", ["-n", "default"]),
    ("deletecollection", "pods", ["-n", "default"]),
    ("create", "pods", ["--subresource=eviction", "-n", "default"]),
    ("update", "pods", ["--subresource=status", "-n", "default"]),
    ("get", "pods", ["-n", "default"]),
    ("get", "poddisruptionbudgets.policy", ["-n", "default"]),
    ("delete", "poddisruptionbudgets.policy", ["-n", "default"]),
    ("patch", "events.events.k8s.io", ["-n", "default"]),
    ("delete", "resourceslices.resource.k8s.io", []),
    ("update", "deviceclasses.resource.k8s.io", []),
    ("get", "configmaps", ["-n", "kube-system"]),
    ("update", "leases.coordination.k8s.io/kube-scheduler", ["-n", "kube-system"]),
    ("update", "leases.coordination.k8s.io/other", ["-n", NAMESPACE]),
    ("delete", "schedulingpolicies.scheduling.plumb.dev", ["-n", "default"]),
    ("*", "*", []),
]


def test_the_service_account_may_do_what_plumb_does_and_nothing_else(
    installed: Installed, tmp_path: Path
) -> None:
    kubectl = installed.kubectl
    account = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
    for verb, resource, extra in [*ALLOWED, *DENIED]:
        answer = kubectl.run("auth", "can-i", f"--as={account}", verb, resource, *extra)
        expected = "yes" if (verb, resource, extra) in ALLOWED else "no"
        assert answer.stdout.strip() == expected, (
            f"kubectl auth can-i --as={account} {verb} {resource} {' '.join(extra)}: "
            f"{answer.stdout.strip()} {answer.stderr.strip()}, expected {expected}"
        )

    # A real token of the account, from the TokenRequest API, in a kubeconfig of its own.
    token = kubectl.check("create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE).strip()
    cp = installed.cluster.cp
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": cp.server, "certificate-authority": str(cp.ca_file)},
            }
        ],
        "users": [{"name": "plumb", "user": {"token": token}}],
        "contexts": [{"name": "plumb", "context": {"cluster": "c", "user": "plumb"}}],
        "current-context": "plumb",
    }
    kubeconfig = tmp_path / "plumb-token.kubeconfig"
    kubeconfig.write_text(json.dumps(config))
    as_plumb = crds.Kubectl(
        binary=kubectl.binary, kubeconfig=kubeconfig, cache_dir=tmp_path / "cache"
    )
    whoami = json.loads(as_plumb.check("auth", "whoami", "-o", "json"))
    assert whoami["status"]["userInfo"]["username"] == account
    as_plumb.check("get", "pods", "-A")  # what plumb lists: allowed
    pod = installed.plumb_pods()[0]["metadata"]["name"]
    node = installed.cluster.node.name
    spec_patch = json.dumps({"spec": {"activeDeadlineSeconds": 1}})
    # Server-side dry runs are authorized like real requests, and change nothing if allowed.
    refused = {
        "read secrets": ("get", "secrets", "-n", NAMESPACE),
        "delete a node": ("delete", "node", node, "--dry-run=server"),
        "patch a pod's spec": (
            "patch",
            "pod",
            pod,
            "-n",
            NAMESPACE,
            "--type=merge",
            "-p",
            spec_patch,
            "--dry-run=server",
        ),
    }
    for what, args in refused.items():
        result = as_plumb.run(*args)
        assert result.returncode != 0, f"plumb's token may {what}: {result.stdout}"
        assert "Forbidden" in result.stderr, f"{what}: {result.stderr}"
        assert f'User "{account}" cannot' in result.stderr, result.stderr
