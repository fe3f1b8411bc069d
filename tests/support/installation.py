"""plumb installed as a user installs it, as the end-to-end tests see it: where the repository
and its manifests are, the names the manifests give, and the records of an image ``make image``
built and of an install on the cluster with a real node."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from plumb_dev.cluster.localnode import images
from plumb_dev.testing import crds, kube
from tests.support.live_cluster import NodeCluster

REPOSITORY = Path(__file__).resolve().parents[2]
MANIFESTS = REPOSITORY / "manifests"
NAMESPACE = "plumb-system"
DEPLOYMENT = "plumb"
SERVICE_ACCOUNT = "plumb"
LEASE = "plumb"
SELECTOR = "app.kubernetes.io/name=plumb"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Image:
    """plumb's image as ``make image`` left it: reference, archive and how long it took."""

    archive: images.ImageArchive
    seconds: float

    @property
    def size_mb(self) -> float:
        return self.archive.archive.stat().st_size / 1e6


@dataclasses.dataclass(frozen=True, kw_only=True)
class Installed:
    """plumb installed from manifests/ on the node cluster, and what the install looked like."""

    cluster: NodeCluster
    image: Image
    kubectl: crds.Kubectl
    overlay: Path
    replicas: int
    # The pod created before the install, and when plumb bound it, from its container's start.
    early_pod: str
    first_pod_seconds: float

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl.check(*args, "-o", "json"))

    def plumb_pods(self) -> list[dict[str, Any]]:
        listing = self.json("get", "pods", "-n", NAMESPACE, "-l", SELECTOR)
        return list(listing["items"])

    def leader(self) -> str:
        """The pod the Lease names."""
        command = (
            "get",
            "lease",
            LEASE,
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        )
        return kube.wait_for("the Lease to name a holder", lambda: self.kubectl.check(*command))

    def logs(self, pod: str) -> str:
        return self.kubectl.check("logs", "-n", NAMESPACE, pod, timeout=60)
