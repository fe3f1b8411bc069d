"""What each of the real node's images is made from, and the content key that names it.

Pure: no tool runs here, so that what a key covers can be tested without building anything.
``images`` builds from these recipes and loads the results into containerd.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

PAUSE = "pause"
DEBIAN_BASE = "debian-base"
PYTHON_BASE = "python-base"
TEST = "test"
PLUMB = "plumb"
REF_PREFIX = "localhost/plumb/"
MIRROR_ENV = "PLUMB_DEBIAN_MIRROR"
# Where the test image's script lives; tests that override command/args may call it themselves.
TEST_SCRIPT = "/usr/local/bin/plumb-test-pod"

_KEY_HEX_DIGITS = 12
# A name is one path component of a reference: lowercase, digits and inner separators.
_NAME = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")

GO_ENV = {"CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"}
GO_BUILD = ("go", "build", "-trimpath", "-ldflags=-s -w")
# The upstream pause image runs as 65535 too: it needs no privilege to wait and reap.
PAUSE_CONFIG = ("--entrypoint", '["/pause"]', "--user", "65535:65535")

_SUITE = "bookworm"
_BASE_PACKAGES = ("python3-minimal",)
# The full standard library (json, asyncio, ssl, http) that an application like plumb needs, and
# venv with its bundled pip wheel, so that a Dockerfile's builder stage can install wheels with
# no network: Debian's python3 has no pip of its own. libstdc++6 for numpy's and llvmlite's
# manylinux wheels, which link against it (python:3.12-slim has it too).
PYTHON_PACKAGES = ("python3", "python3-venv", "libstdc++6")
_DPKG_OPTIONS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
)
# mmdebstrap copies the host's resolv.conf and hostname into the tree; the runtime mounts its
# own over them, so the image keeps empty files rather than this machine's settings.
_FORGET_HOST = 'for f in etc/resolv.conf etc/hostname; do : > "$1/$f"; chmod 0644 "$1/$f"; done'
BASE_CONFIG = (
    "--cmd",
    '["/bin/sh"]',
    "--env",
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    # Locales are excluded; C.UTF-8 is built into glibc and keeps Python's I/O in UTF-8.
    "--env",
    "LANG=C.UTF-8",
)
# RUN steps get no network (no registry, no package index is reachable by design) and never a
# pull: FROM names an image of ours that was pulled from its docker-archive beforehand.
BUD_FLAGS = ("--pull=never", "--network=none", "--layers=false", "--format=docker", "--quiet")

TEST_CONTAINERFILE = f"""\
ARG BASE
FROM ${{BASE}}
COPY plumb-test-pod {TEST_SCRIPT}
CMD ["{TEST_SCRIPT}"]
"""
TEST_SCRIPT_SOURCE = '''\
#!/usr/bin/python3
"""Prints a numbered line to stdout every second until stopped: a pod whose logs tests read.

Usage: plumb-test-pod [PREFIX [INTERVAL_SECONDS]]
"""

import signal
import sys
import time

# As PID 1 of a container the process ignores SIGTERM unless it handles it: exit at once rather
# than wait out the pod's grace period.
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
prefix = sys.argv[1] if len(sys.argv) > 1 else "plumb-test-pod"
interval = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
n = 0
while True:
    print(f"{prefix} {n}", flush=True)
    n += 1
    time.sleep(interval)
'''


@dataclasses.dataclass(frozen=True, kw_only=True)
class ImageArchive:
    """An image of ours: its reference and the docker-archive file that holds it."""

    ref: str
    archive: Path

    @property
    def key(self) -> str:
        """The content key, which is also the reference's tag."""
        return self.ref.rpartition(":")[2]


class ImageError(RuntimeError):
    """An image could not be built, found or loaded."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Recipe:
    """What one image is made from: its name and every input its key covers, by label."""

    name: str
    inputs: Mapping[str, bytes]

    @property
    def key(self) -> str:
        return content_key(self.inputs)

    def image(self, directory: Path) -> ImageArchive:
        """Where the image built from this recipe lives in ``directory``, and its reference."""
        key = self.key
        return ImageArchive(
            ref=f"{REF_PREFIX}{self.name}:{key}", archive=directory / f"{self.name}-{key}.tar"
        )


def cache_dir() -> Path:
    """Where image archives are kept: $PLUMB_CACHE_DIR/images, or ~/.cache/plumb/images."""
    root = os.environ.get("PLUMB_CACHE_DIR") or str(Path.home() / ".cache" / "plumb")
    return Path(root) / "images"


def content_key(inputs: Mapping[str, bytes]) -> str:
    """The first 12 hex digits of a sha256 over labelled inputs, in label order.

    Each label and value is length-prefixed, so moving bytes between them changes the key.
    """
    digest = hashlib.sha256()
    for label in sorted(inputs):
        for part in (label.encode(), inputs[label]):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    return digest.hexdigest()[:_KEY_HEX_DIGITS]


def directory_inputs(directory: Path, *, label: str) -> dict[str, bytes]:
    """Every entry under ``directory`` as an input labelled ``label`` + its relative path.

    A file counts by its permission bits and content, a symlink by its target, a directory by
    its existence (an empty one can still be copied); timestamps and owners do not count.
    """
    if not directory.is_dir():
        raise ImageError(
            f"{directory} is not a directory; give the directory that holds the sources"
        )
    inputs: dict[str, bytes] = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).as_posix()
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            value = b"symlink\n" + os.readlink(path).encode()
        elif stat.S_ISDIR(mode):
            value = b"directory\n"
        elif stat.S_ISREG(mode):
            value = f"file {stat.S_IMODE(mode):o}\n".encode() + path.read_bytes()
        else:
            raise ImageError(
                f"{path} is neither a file, a directory nor a symlink (mode {mode:o}); an image's "
                f"sources may hold only those: move it out of {directory}"
            )
        inputs[label + relative] = value
    return inputs


def pause_recipe(source: Path) -> Recipe:
    """The pause image from the Go program in ``source`` (main.go and go.mod)."""
    for required in ("main.go", "go.mod"):
        if not (source / required).is_file():
            raise ImageError(
                f"{source / required} does not exist; the pause image is built from the Go "
                f"program in the repository's hack/images/pause"
            )
    inputs = directory_inputs(source, label="source/")
    inputs["go build"] = _encode([*GO_BUILD, *sorted(f"{k}={v}" for k, v in GO_ENV.items())])
    inputs["config"] = _encode(PAUSE_CONFIG)
    return Recipe(name=PAUSE, inputs=inputs)


def debian_base_recipe(mirror: str | None) -> Recipe:
    """The Debian base from mmdebstrap, with Debian's own mirrors or ``mirror``."""
    inputs = {
        "mmdebstrap": _encode(mmdebstrap_argv(Path("OUTPUT"), mirror)),
        "config": _encode(BASE_CONFIG),
    }
    return Recipe(name=DEBIAN_BASE, inputs=inputs)


def python_base_recipe(mirror: str | None) -> Recipe:
    """The Python runtime base from mmdebstrap: python3 (3.11), python3-venv and libstdc++6."""
    inputs = {
        "mmdebstrap": _encode(mmdebstrap_argv(Path("OUTPUT"), mirror, packages=PYTHON_PACKAGES)),
        "config": _encode(BASE_CONFIG),
    }
    return Recipe(name=PYTHON_BASE, inputs=inputs)


def build_recipe(
    name: str,
    *,
    containerfile_dir: Path,
    base: ImageArchive | None,
    build_args: Mapping[str, str],
    containerfile: str | None,
) -> Recipe:
    """An image from a Containerfile: every file of its directory, the base and the arguments."""
    _check_name(name)
    inputs = directory_inputs(containerfile_dir, label="context/")
    inputs["base"] = b"" if base is None else base.ref.encode()
    inputs["build args"] = json.dumps(sorted(build_args.items())).encode()
    inputs["containerfile"] = (containerfile or "").encode()
    inputs["bud"] = _encode(BUD_FLAGS)
    return Recipe(name=name, inputs=inputs)


def _encode(argv: Sequence[str]) -> bytes:
    return json.dumps(list(argv)).encode()


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ImageError(
            f"image name {name!r} is not usable in a reference: use lowercase letters and digits, "
            f"with '.', '_' or '-' between them (like 'plumb' or 'debian-base')"
        )


def mmdebstrap_argv(
    output: Path, mirror: str | None, *, packages: Sequence[str] = _BASE_PACKAGES
) -> list[str]:
    """mmdebstrap's command line for a base of Debian's essential packages plus ``packages``."""
    argv = [
        "mmdebstrap",
        "--mode=root",
        "--variant=essential",
        "--format=tar",
        f"--include={','.join(packages)}",
        # Merged /usr through the usr-is-merged package: the usrmerge package, which apt picks
        # otherwise, pulls in perl and makes the image half as big again.
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        f"--customize-hook={_FORGET_HOST}",
        # No device nodes in the image: the runtime gives every container its own /dev.
        "--skip=output/dev",
        *(f"--dpkgopt={option}" for option in _DPKG_OPTIONS),
        _SUITE,
        str(output),
    ]
    # Without a mirror mmdebstrap uses deb.debian.org and adds the updates and security suites.
    if mirror:
        argv.append(mirror)
    return argv
