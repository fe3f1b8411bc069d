"""The Kubernetes releases the local cluster can run, and what its parts are given differently.

Each release has its Go module in hack/k8s/<release>/ (hack/build-control-plane.sh builds it).
Everything the control plane passes differently from one release to another is a field of
``Release``, filled in ``RELEASES`` below, one row per release: a reader scans one table, and
``config`` builds the flags from the row of the release it runs. What stays the same for all of
them stays in ``config``: every kube-apiserver and kube-scheduler flag, and the kubelet's and
kube-proxy's configuration fields (each still there in v1.37.2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True, kw_only=True)
class KubeRelease:
    """One release the local cluster runs, and what its parts are given that others' are not."""

    version: str
    # kube-controller-manager's --controllers=*,-name,...: node lifecycle is off, since the
    # scale nodes are API objects with no kubelet to renew their leases, and node lifecycle
    # would taint them unreachable and evict their pods after 5 minutes; so are the cloud and
    # bootstrap-token controllers, which have nothing to act on here. Each release refuses a
    # name it does not know, and v1.37 removed cloud-node-lifecycle.
    controllers_off: tuple[str, ...]
    # The group/version that serves Workload (and, from v1.36, PodGroup) when the GenericWorkload
    # gate is on; kube-apiserver serves it only when also asked with --runtime-config, since it
    # is alpha or beta (featuregates.apiserver_flags). None: the release has no such gate.
    workload_api: str | None

    @property
    def minor(self) -> int:
        """The minor release: 37 for v1.37.2."""
        return int(self.version.split(".")[1])


_UP_TO_1_36 = ("nodelifecycle", "cloud-node-lifecycle", "bootstrapsigner", "tokencleaner")
_FROM_1_37 = ("nodelifecycle", "bootstrapsigner", "tokencleaner")
_SCHEDULING = "scheduling.k8s.io"

RELEASES: Mapping[str, KubeRelease] = {
    release.version: release
    for release in (
        KubeRelease(version="v1.34.4", controllers_off=_UP_TO_1_36, workload_api=None),
        KubeRelease(
            version="v1.35.4", controllers_off=_UP_TO_1_36, workload_api=f"{_SCHEDULING}/v1alpha1"
        ),
        KubeRelease(
            version="v1.36.3", controllers_off=_UP_TO_1_36, workload_api=f"{_SCHEDULING}/v1alpha2"
        ),
        KubeRelease(
            version="v1.37.2", controllers_off=_FROM_1_37, workload_api=f"{_SCHEDULING}/v1beta1"
        ),
    )
}
"""Every release the local cluster builds and runs, oldest first."""

# hack/versions.env's KUBE_VERSION and OLDEST_KUBE_VERSION (tests/tools/cluster/controlplane/
# test_releases.py keeps them equal): the demo, the tests and the benchmark run the newest release
# plumb follows; `make test-long` runs the side-by-side suites against the oldest as well.
DEFAULT = "v1.37.2"
OLDEST = next(iter(RELEASES))
