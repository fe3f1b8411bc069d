"""Installs the repository's CustomResourceDefinitions (crds/) on a control plane with the
kubectl built beside it, and waits until the API server serves them.

A helper for tests and the demo, run from a checkout; the scheduler never imports it.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from pathlib import Path

from plumb_dev.cluster.controlplane import lifecycle as controlplane

POLICY_CRD = "schedulingpolicies.scheduling.plumb.dev"

# crds.py sits at tools/plumb_dev/testing/, three levels below the repository root.
_REPOSITORY = Path(__file__).resolve().parents[3]
CRD_DIR = _REPOSITORY / "crds"
EXAMPLES_DIR = _REPOSITORY / "manifests" / "examples"
# scheduler-plugins' PodGroup CRD, an optional part of plumb's manifests.
PODGROUPS_DIR = _REPOSITORY / "manifests" / "optional" / "scheduler-plugins-podgroups"
PODGROUP_CRD = "podgroups.scheduling.x-k8s.io"
# scheduler-plugins' ElasticQuota CRD (tenant quotas), optional beside it.
ELASTICQUOTAS_DIR = _REPOSITORY / "manifests" / "optional" / "scheduler-plugins-elasticquotas"
ELASTICQUOTA_CRD = "elasticquotas.scheduling.x-k8s.io"
KUSTOMIZATION = "kustomization.yaml"


class KubectlError(RuntimeError):
    """kubectl exited non-zero where success was needed; the message carries its stderr."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Kubectl:
    """The control plane's own kubectl, pointed at its kubeconfig.

    ``cache_dir`` keeps kubectl's discovery cache out of ~/.kube, where a cache written for an
    earlier control plane on the same port could hide a resource that was just installed.
    """

    binary: Path
    kubeconfig: Path
    cache_dir: Path | None = None

    @classmethod
    def of(cls, plane: controlplane.ControlPlane, *, cache_dir: Path | None = None) -> Kubectl:
        return cls(
            binary=plane.bin_dir / "kubectl", kubeconfig=plane.kubeconfig, cache_dir=cache_dir
        )

    def run(
        self, *args: str, stdin: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl with ``args``; the caller judges the exit code."""
        command = [str(self.binary), "--kubeconfig", str(self.kubeconfig)]
        if self.cache_dir is not None:
            command += ["--cache-dir", str(self.cache_dir)]
        return subprocess.run(
            [*command, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def check(self, *args: str, stdin: str | None = None, timeout: float = 60.0) -> str:
        """Run kubectl with ``args`` and return its stdout, or raise with its stderr."""
        result = self.run(*args, stdin=stdin, timeout=timeout)
        if result.returncode != 0:
            raise KubectlError(
                f"kubectl {' '.join(args)} exited with {result.returncode}: {result.stderr.strip()}"
            )
        return result.stdout


def install(kubectl: Kubectl, directory: Path = CRD_DIR, *, timeout: float = 60.0) -> list[str]:
    """Apply every CRD in ``directory`` and wait until each is Established; return their names.

    A directory with a kustomization.yaml is applied as a person would, with ``kubectl apply
    -k`` (manifests/optional/...). Established means the API server serves the new resource,
    so a create right after this returns does not meet a 404.
    """
    if not directory.is_dir():
        raise FileNotFoundError(
            f"no CRD directory at {directory}: the helper reads the repository's crds/, so run "
            f"from a checkout (an installed plumb does not carry it)"
        )
    how = "-k" if (directory / KUSTOMIZATION).is_file() else "-f"
    applied = kubectl.check("apply", how, str(directory), "-o", "name").split()
    if not applied:
        raise KubectlError(f"kubectl apply {how} {directory} applied nothing; is it empty?")
    # A CRD just created may have no status.conditions yet, and kubectl wait then fails at once
    # (".status.conditions accessor error: <nil>") instead of waiting: ask again until the
    # deadline.
    deadline = time.monotonic() + timeout
    while True:
        left = max(1.0, deadline - time.monotonic())
        result = kubectl.run(
            "wait",
            "--for=condition=Established",
            f"--timeout={left:.0f}s",
            *applied,
            timeout=left + 10,
        )
        if result.returncode == 0:
            return [name.rpartition("/")[2] for name in applied]
        if "accessor error" not in result.stderr or time.monotonic() >= deadline:
            raise KubectlError(
                f"kubectl wait --for=condition=Established {' '.join(applied)} exited with "
                f"{result.returncode}: {result.stderr.strip()}"
            )
        time.sleep(0.2)
