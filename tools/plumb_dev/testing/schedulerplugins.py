"""scheduler-plugins' kube-scheduler with its Coscheduling plugin, run against the local control
plane beside plumb, so that gang scheduling on the PodGroup of scheduling.x-k8s.io/v1alpha1 can
be held against the scheduler its users run today; and the same binary with its
CapacityScheduling plugin, for tenant quotas on its ElasticQuota (``start_capacity_scheduling``).

The binary is ``cmd/scheduler`` of sigs.k8s.io/scheduler-plugins v0.34.7 (kube-scheduler v1.34
with the out-of-tree plugins registered), built once by hack/build-scheduler-plugins.sh. It is
started by ``kubescheduler.start`` with one profile that enables Coscheduling as
scheduler-plugins' own manifests/coscheduling/scheduler-config.yaml does, under a schedulerName
of its own, so it takes only the pods that name it. The PodGroup CRD (plumb's
manifests/optional/scheduler-plugins-podgroups/) is installed first: the plugin's informer for
PodGroups must sync before the scheduler starts. CapacityScheduling runs the same way, with the
profile of scheduler-plugins' manifests/capacityscheduling/scheduler-config.yaml under a
schedulerName of its own, after the ElasticQuota CRD (manifests/optional/
scheduler-plugins-elasticquotas/) is installed. A test helper: the scheduler never imports it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from plumb_dev.cluster.controlplane import building
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import crds, kube, kubescheduler

VERSION = "v0.34.7"
SCHEDULER_NAME = "scheduler-plugins"
COSCHEDULING = "Coscheduling"
GROUP = "scheduling.x-k8s.io"
API_VERSION = "v1alpha1"
PODGROUPS = "podgroups"
# The plugin of tenant quotas on ElasticQuota, and the schedulerName its scheduler takes: another
# than Coscheduling's, so that both can run on one control plane.
CAPACITY_SCHEDULING = "CapacityScheduling"
CAPACITY_SCHEDULER_NAME = "capacity-scheduling"
# The label that makes a pod a member of the PodGroup it names, in the pod's own namespace.
POD_GROUP_LABEL = f"{GROUP}/pod-group"
# scheduler-plugins' manifests set 10 s (the plugin's own default is 60 s): how long a member
# that passed the filters waits at Permit for the rest of its group.
PERMIT_WAITING_SECONDS = 10
# Why a check of the module's own files cannot run (``module_copy`` found none).
NOT_DOWNLOADED = (
    f"sigs.k8s.io/scheduler-plugins@{VERSION} is not in the Go module cache "
    "(hack/build-scheduler-plugins.sh downloads it)"
)
_SCRIPT = "build-scheduler-plugins.sh"
_KUBECTL_CACHE = "kubectl-cache"
# Longer than kube-scheduler's start: the plugin syncs its own PodGroup cache first.
_START_TIMEOUT_SECONDS = 90.0


class SchedulerPluginsError(RuntimeError):
    """scheduler-plugins' kube-scheduler could not be built."""


def ensure_binary() -> Path:
    """Builds scheduler-plugins' kube-scheduler once (minutes the first time); its path.

    The script's progress goes straight to our stderr, so a first build does not look hung.
    """
    script = building.hack_dir() / _SCRIPT
    result = subprocess.run(
        ["bash", str(script)], stdout=subprocess.PIPE, stderr=None, text=True, check=False
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise SchedulerPluginsError(
            f"{script} failed with exit code {result.returncode}; its messages are above on "
            f"stderr (a missing Go toolchain or no access to the Go module proxy are the usual "
            f"causes)"
        )
    return Path(lines[-1].strip())


def module_copy() -> Path | None:
    """scheduler-plugins' module as the build downloaded it into the Go module cache, to hold
    plumb's copies (its PodGroup CRD, its Coscheduling profile) against; None where Go or the
    module is not there."""
    go = shutil.which("go")
    if go is None:
        return None
    result = subprocess.run(
        [go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30, check=False
    )
    if result.returncode != 0 or not result.stdout.strip():
        return None
    directory = Path(result.stdout.strip()) / "sigs.k8s.io" / f"scheduler-plugins@{VERSION}"
    return directory if directory.is_dir() else None


def profile(
    scheduler_name: str = SCHEDULER_NAME,
    *,
    permit_waiting_seconds: int = PERMIT_WAITING_SECONDS,
    group_backoff_seconds: int | None = None,
) -> dict[str, Any]:
    """The KubeSchedulerConfiguration profile of scheduler-plugins' Coscheduling manifest:
    Coscheduling at every extension point it has (multiPoint), and as the only queue sort,
    with its arguments; ``group_backoff_seconds`` sets podGroupBackoffSeconds (0 by default:
    no group backoff)."""
    args: dict[str, Any] = {"permitWaitingTimeSeconds": permit_waiting_seconds}
    if group_backoff_seconds is not None:
        args["podGroupBackoffSeconds"] = group_backoff_seconds
    return {
        "schedulerName": scheduler_name,
        "plugins": {
            "multiPoint": {"enabled": [{"name": COSCHEDULING}]},
            "queueSort": {"enabled": [{"name": COSCHEDULING}], "disabled": [{"name": "*"}]},
        },
        "pluginConfig": [{"name": COSCHEDULING, "args": args}],
    }


def capacity_profile(scheduler_name: str = CAPACITY_SCHEDULER_NAME) -> dict[str, Any]:
    """The KubeSchedulerConfiguration profile of scheduler-plugins' CapacityScheduling manifest:
    CapacityScheduling at every extension point it has (multiPoint: PreFilter with its
    PreFilterExtensions, Reserve and Unreserve, PostFilter), and as the only PostFilter, so
    that its own preemption replaces DefaultPreemption (and DynamicResources' PostFilter)."""
    return {
        "schedulerName": scheduler_name,
        "plugins": {
            "multiPoint": {"enabled": [{"name": CAPACITY_SCHEDULING}]},
            "postFilter": {
                "enabled": [{"name": CAPACITY_SCHEDULING}],
                "disabled": [{"name": "*"}],
            },
        },
    }


def install_podgroups(plane: controlplane.ControlPlane, cache_dir: Path) -> list[str]:
    """Applies the PodGroup CRD (``kubectl apply -k``) and waits until it is served."""
    kubectl = crds.Kubectl.of(plane, cache_dir=cache_dir)
    return crds.install(kubectl, crds.PODGROUPS_DIR)


def install_elasticquotas(plane: controlplane.ControlPlane, cache_dir: Path) -> list[str]:
    """Applies the ElasticQuota CRD (``kubectl apply -k``) and waits until it is served."""
    kubectl = crds.Kubectl.of(plane, cache_dir=cache_dir)
    return crds.install(kubectl, crds.ELASTICQUOTAS_DIR)


def start(
    plane: controlplane.ControlPlane,
    directory: Path,
    *,
    scheduler_name: str = SCHEDULER_NAME,
    permit_waiting_seconds: int = PERMIT_WAITING_SECONDS,
    group_backoff_seconds: int | None = None,
    timeout: float = _START_TIMEOUT_SECONDS,
) -> kubescheduler.KubeScheduler:
    """Builds it if needed, installs the PodGroup CRD, and starts it against plane with the
    Coscheduling profile (no leader election, like ``kubescheduler.start``); its
    configuration, certificates and log go to directory. Stop it as any kube-scheduler."""
    binary = ensure_binary()
    install_podgroups(plane, directory / _KUBECTL_CACHE)
    return kubescheduler.start(
        plane,
        directory,
        scheduler_name=scheduler_name,
        profiles=[
            profile(
                scheduler_name,
                permit_waiting_seconds=permit_waiting_seconds,
                group_backoff_seconds=group_backoff_seconds,
            )
        ],
        binary=binary,
        timeout=timeout,
    )


def start_capacity_scheduling(
    plane: controlplane.ControlPlane,
    directory: Path,
    *,
    scheduler_name: str = CAPACITY_SCHEDULER_NAME,
    timeout: float = _START_TIMEOUT_SECONDS,
) -> kubescheduler.KubeScheduler:
    """Builds it if needed, installs the ElasticQuota CRD (the plugin's informer for
    ElasticQuotas must sync before the scheduler starts), and starts it against plane with the
    CapacityScheduling profile (``capacity_profile``); its configuration, certificates and log
    go to directory. Stop it as any kube-scheduler."""
    binary = ensure_binary()
    install_elasticquotas(plane, directory / _KUBECTL_CACHE)
    return kubescheduler.start(
        plane,
        directory,
        scheduler_name=scheduler_name,
        profiles=[capacity_profile(scheduler_name)],
        binary=binary,
        timeout=timeout,
    )


# --- PodGroups -----------------------------------------------------------------------------------


def pod_group(
    name: str,
    namespace: str,
    *,
    min_member: int,
    schedule_timeout_seconds: int | None = None,
    min_resources: Mapping[str, str] | None = None,
) -> kube.JSON:
    """A PodGroup of scheduling.x-k8s.io/v1alpha1: its pods carry ``POD_GROUP_LABEL: name``."""
    spec: dict[str, Any] = {"minMember": min_member}
    if schedule_timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = schedule_timeout_seconds
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    return {
        "apiVersion": f"{GROUP}/{API_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def create_pod_group(client: kube.Kube, body: kube.JSON) -> kube.JSON:
    """Creates a PodGroup (the CRD must be installed: ``install_podgroups``)."""
    created: kube.JSON = k8s.CustomObjectsApi(client.api).create_namespaced_custom_object(
        GROUP, API_VERSION, body["metadata"]["namespace"], PODGROUPS, body
    )
    return created
