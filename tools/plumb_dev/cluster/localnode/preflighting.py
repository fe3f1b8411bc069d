"""Whether this machine can run the real node, installing the Debian packages it lacks as root.

The node needs root, cgroups, the overlay filesystem, and from Debian: containerd (for ctr),
runc, the CNI plugins in /usr/lib/cni, iptables, iproute2, buildah (which makes the pause image
and the node's other images) and mmdebstrap (their Debian base); and trixie's containerd
package unpacked into the cache (``cdiruntime``), the containerd the node runs. Missing
packages are installed with apt-get, and trixie's containerd fetched, when that is possible;
otherwise ``preflight`` names what is missing and how to get it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from plumb_dev.cluster.localnode import cdiruntime, network, probing

# What the node runs, by name or path, and the Debian package that provides it.
REQUIRED: dict[str, str] = {
    "containerd": "containerd",
    "ctr": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "runc": "runc",
    **{
        str(network.CNI_BIN_DIR / p): "containernetworking-plugins"
        for p in ("bridge", "host-local", "portmap", "loopback")
    },
    "iptables": "iptables",
    "ip6tables": "iptables",
    "iptables-save": "iptables",
    "ip6tables-save": "iptables",
    "ip": "iproute2",
    "umount": "mount",
    "buildah": "buildah",
    "mmdebstrap": "mmdebstrap",
}
_SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_APT_TIMEOUT_SECONDS = 600


def runtime_missing() -> str:
    return (
        f"the node's containerd (Debian {cdiruntime.SUITE}'s {cdiruntime.PACKAGE} package, "
        f"unpacked into {cdiruntime.packages_dir()}) is not there; `plumb cluster up --node` as "
        f"root fetches it with apt-get download"
    )


def missing_packages() -> list[str]:
    """The Debian packages whose commands are not installed, in a stable order."""
    absent = [
        package
        for command, package in REQUIRED.items()
        if not (
            os.access(command, os.X_OK)
            if "/" in command
            else shutil.which(command, path=_SEARCH_PATH)
        )
    ]
    return list(dict.fromkeys(absent))


def preflight(*, install: bool = True) -> str | None:
    """None if this machine can run the node; otherwise what is missing and what to do.

    With install (and as root), missing packages are installed with apt-get first.
    """
    if os.geteuid() != 0:
        return (
            "the real node needs root (it runs containerd and the kubelet, makes a bridge and "
            f"iptables rules); this process runs as uid {os.geteuid()}: run it as root"
        )
    problem = _kernel_problem()
    if problem is not None:
        return problem
    packages = missing_packages()
    if packages and install:
        _apt_install(packages)
        packages = missing_packages()
    if packages:
        return (
            f"the Debian packages {' '.join(packages)} are not installed and apt-get could not "
            f"install them; install them with `apt-get install --no-install-recommends "
            f"{' '.join(packages)}`"
        )
    if cdiruntime.cached() is None:
        if not install:
            return runtime_missing()
        try:
            cdiruntime.fetch()
        except cdiruntime.FetchError as error:
            return f"{runtime_missing()}, and fetching it failed: {error}"
    return None


def _kernel_problem() -> str | None:
    mounts = probing.cgroup_mounts()
    if not mounts:
        return (
            "no cgroup filesystem is mounted under /sys/fs/cgroup; the kubelet needs cgroups "
            "(v1 controllers cpu and memory, or v2): mount them"
        )
    try:
        filesystems = Path("/proc/filesystems").read_text(encoding="utf-8").split()
    except OSError:
        filesystems = []
    if "overlay" not in filesystems:
        return (
            "the kernel does not offer the overlay filesystem (not in /proc/filesystems); "
            "containerd's overlayfs snapshotter needs it: `modprobe overlay` or a kernel with it"
        )
    return None


def _apt_install(packages: list[str]) -> None:
    """Installs packages; refreshes the package index and retries once if that fails."""
    if shutil.which("apt-get", path=_SEARCH_PATH) is None:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
    for command in (install, ["apt-get", "update"], install):
        try:
            result = subprocess.run(
                command, env=env, capture_output=True, check=False, timeout=_APT_TIMEOUT_SECONDS
            )
        except subprocess.TimeoutExpired:
            return
        if command is install and result.returncode == 0:
            return
