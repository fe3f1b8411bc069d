"""Finds and runs the scripts that build the control plane binaries from their Go modules.

One Kubernetes release at a time: the one asked for, else $PLUMB_KUBE_VERSION, else the
default (``releases.DEFAULT``); each is built once into its own cache directory. Jaeger, which
only ``plumb cluster up --tracing`` runs, is built by its own script, once, only when asked for.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

from plumb_dev.cluster.controlplane import releases

_SCRIPT = "build-control-plane.sh"
_JAEGER_SCRIPT = "build-jaeger.sh"
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
    script's progress goes to our stderr. Later calls reuse the cached binaries and return at
    once.
    """
    release = chosen_release(kube_version)
    bin_dir = _run(_SCRIPT, release.version)
    if not bin_dir.is_dir():
        raise BuildError(
            f"{_SCRIPT} printed {str(bin_dir)!r} as its binary directory, which does not exist; "
            f"remove the cache directory it names and run it again"
        )
    return bin_dir


def ensure_jaeger() -> pathlib.Path:
    """Builds Jaeger (v1.75.0's ``jaeger`` command: Jaeger v2) once; returns the binary's path.

    The first build downloads and compiles a large module graph: many minutes on 2 cores, its
    progress on our stderr. Later calls reuse the cached binary (~/.cache/plumb/jaeger-...).
    """
    binary = _run(_JAEGER_SCRIPT)
    if not os.access(binary, os.X_OK):
        raise BuildError(
            f"{_JAEGER_SCRIPT} printed {str(binary)!r} as Jaeger's binary, which is not an "
            f"executable file; remove the cache directory it names and run it again"
        )
    return binary


def _run(name: str, *args: str) -> pathlib.Path:
    """Runs hack/<name> with args; the path it prints on its last line."""
    script = hack_dir() / name
    if not script.is_file():
        raise BuildError(
            f"{script} does not exist; set PLUMB_HACK_DIR to a hack/ directory that holds {name}"
        )
    # bash explicitly, so a checkout that lost the executable bit still works. The script's
    # progress goes straight to our stderr, because a first build takes minutes and a silent
    # wait looks like a hang.
    result = subprocess.run(
        ["bash", str(script), *args],
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
        check=False,
    )
    command = " ".join([str(script), *args])
    if result.returncode != 0:
        raise BuildError(
            f"{command} failed with exit code {result.returncode}; its messages are above on "
            f"stderr (a missing Go toolchain or network access to the Go module proxy are the "
            f"usual causes)"
        )
    lines = result.stdout.strip().splitlines()
    if not lines:
        raise BuildError(f"{command} succeeded but printed no path on stdout")
    return pathlib.Path(lines[-1].strip())
