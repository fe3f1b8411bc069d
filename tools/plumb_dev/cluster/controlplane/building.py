"""Finds and runs the script that builds the control plane binaries from their Go modules.

One Kubernetes release at a time: the one asked for, else $PLUMB_KUBE_VERSION, else the
default (``releases.DEFAULT``); each is built once into its own cache directory.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

from plumb_dev.cluster.controlplane import releases

_SCRIPT = "build-control-plane.sh"
# The release the tests, the demo, the benchmark and `plumb cluster` build and run when none is
# named; `make ... KUBE_VERSION=v1.N.x` sets it, and the script reads it too.
KUBE_VERSION_ENV = "PLUMB_KUBE_VERSION"


class BuildError(RuntimeError):
    """The control plane binaries could not be located or built."""


def hack_dir() -> pathlib.Path:
    """The repository's hack/ directory, or the one PLUMB_HACK_DIR names."""
    override = os.environ.get("PLUMB_HACK_DIR")
    if override:
        directory = pathlib.Path(override)
        if not directory.is_dir():
            raise BuildError(
                f"PLUMB_HACK_DIR={override!r} is not a directory; point it at the repository's "
                f"hack/ directory (the one holding {_SCRIPT}) or unset it"
            )
        return directory
    # building.py sits at tools/plumb_dev/cluster/controlplane/, four levels below the repository
    # root.
    directory = pathlib.Path(__file__).resolve().parents[4] / "hack"
    if not directory.is_dir():
        raise BuildError(
            f"no hack/ directory at {directory}: plumb seems to be installed outside its "
            f"repository; set PLUMB_HACK_DIR to the repository's hack/ directory"
        )
    return directory


def chosen_release(kube_version: str | None = None) -> releases.KubeRelease:
    """kube_version, else $PLUMB_KUBE_VERSION, else the default, if the local cluster knows it."""
    version = kube_version or os.environ.get(KUBE_VERSION_ENV) or releases.DEFAULT
    release = releases.RELEASES.get(version)
    if release is None:
        named = "" if kube_version else f" (from ${KUBE_VERSION_ENV})"
        raise BuildError(
            f"Kubernetes {version!r}{named} is not a release the local cluster builds; choose one "
            f"of {', '.join(releases.RELEASES)}"
        )
    return release


def ensure_binaries(kube_version: str | None = None) -> pathlib.Path:
    """Builds etcd and the Kubernetes commands of one release once; returns their directory.

    The release is kube_version, else $PLUMB_KUBE_VERSION, else ``releases.DEFAULT``. The
    script's progress goes straight to our stderr, because a first build takes minutes and a
    silent wait looks like a hang. Later calls reuse the cached binaries and return at once.
    """
    release = chosen_release(kube_version)
    script = hack_dir() / _SCRIPT
    if not script.is_file():
        raise BuildError(
            f"{script} does not exist; set PLUMB_HACK_DIR to a hack/ directory that holds {_SCRIPT}"
        )
    # bash explicitly, so a checkout that lost the executable bit still works.
    result = subprocess.run(
        ["bash", str(script), release.version],
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise BuildError(
            f"{script} {release.version} failed with exit code {result.returncode}; its messages "
            f"are above on stderr (a missing Go toolchain or network access to the Go module "
            f"proxy are the usual causes)"
        )
    lines = result.stdout.strip().splitlines()
    if not lines:
        raise BuildError(f"{script} succeeded but printed no binary directory on stdout")
    bin_dir = pathlib.Path(lines[-1].strip())
    if not bin_dir.is_dir():
        raise BuildError(
            f"{script} printed {str(bin_dir)!r} as its binary directory, which does not exist; "
            f"remove the cache directory it names and run it again"
        )
    return bin_dir
