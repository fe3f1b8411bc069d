"""Container images for the real node: built with buildah, cached by content, loaded with ctr.

These images are made here, each at most once per content:

- ``pause``, the pod sandbox's process (``hack/images/pause``, a static Go program), FROM scratch;
- ``debian-base``, Debian bookworm from mmdebstrap: the essential packages and python3-minimal
  (Python 3.11), without documentation, man pages or locales;
- ``test``, a small script on the base that tests run as pods, so that "an image of ours built
  on the base" is exercised by the same ``build`` that builds any Containerfile;
- ``python-base``, Debian bookworm with python3, python3-venv and libstdc++6 (the whole
  standard library, venv's pip, the C++ runtime of numpy's and llvmlite's wheels);
- ``plumb``, the repository's Dockerfile built on ``python-base`` from a context of staged
  wheels (hack/image/stage.sh): what ``make image`` makes and the end-to-end tests run.

An image is a docker-archive file ``cache_dir()/<name>-<key>.tar`` whose reference is
``localhost/plumb/<name>:<key>``, the key being a sha256 over every input of its recipe: a changed
input gives a new file and a new tag, an unchanged one reuses the file without running anything.
An archive is renamed into place only once complete, so an interrupted build is never reused.
``load`` imports an archive into containerd with ``ctr``. Nothing is pulled from or pushed to a
registry: a base enters buildah through ``buildah pull docker-archive:FILE``.

Each build runs buildah with a storage root of its own (the vfs driver, which mounts nothing)
inside a work directory that is removed when the build ends, so a build leaves only its archive
behind, besides the Go build cache and the small blob-info cache that buildah 1.28 run as root
keeps in /var/lib/containers/cache whatever its ``--root`` (no flag moves it).

python3-minimal carries part of the standard library only (no json, asyncio or http): enough for
the test image's script, not for an application that needs more; plumb's image is built on
``python-base`` instead. The public surface below predates the last two images, whose
functions (``ensure_python_base``, ``ensure_plumb_image``) are not yet in ``__all__``.

The key covers the inputs, not the tools: go, buildah and mmdebstrap's versions and the Debian
mirror's state at the first build are not part of it. Remove ``cache_dir()`` to rebuild with
newer ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from plumb_dev.cluster.controlplane import building
from plumb_dev.cluster.localnode import recipes
from plumb_dev.cluster.localnode.recipes import (
    MIRROR_ENV,
    TEST_SCRIPT,
    ImageArchive,
    ImageError,
    Recipe,
    build_recipe,
    cache_dir,
    content_key,
    debian_base_recipe,
    directory_inputs,
    pause_recipe,
)

__all__ = [
    "MIRROR_ENV",
    "TEST_SCRIPT",
    "ImageArchive",
    "ImageError",
    "Recipe",
    "build",
    "build_recipe",
    "cache_dir",
    "content_key",
    "debian_base_recipe",
    "directory_inputs",
    "ensure_debian_base",
    "ensure_pause",
    "ensure_plumb_image",
    "ensure_python_base",
    "ensure_test_image",
    "load",
    "loaded",
    "pause_recipe",
]

_TAIL_LINES = 20
# A first base build takes under a minute; a stalled mirror should fail it, not hang it.
_BUILD_TIMEOUT_SECONDS = 900.0
_CTR_TIMEOUT_SECONDS = 120.0
_STOP_WAIT_SECONDS = 30.0
_INSTALL = {
    "buildah": "install it with `apt-get install -y --no-install-recommends buildah`",
    "mmdebstrap": "install it with `apt-get install -y --no-install-recommends mmdebstrap`",
    "ctr": "it comes with containerd: `apt-get install -y --no-install-recommends containerd`",
    "go": "install Go 1.24 or newer and put it on PATH",
}


# --- Building -----------------------------------------------------------------------------------


def ensure_pause() -> ImageArchive:
    """The pod sandbox image: hack/images/pause built static, alone in an image FROM scratch."""
    try:
        source = building.hack_dir() / "images" / "pause"
    except building.BuildError as error:
        raise ImageError(str(error)) from error
    recipe = pause_recipe(source)

    def make(work: _Work, image: ImageArchive) -> None:
        binary = work.path / recipes.PAUSE
        _run(
            [*recipes.GO_BUILD, "-o", str(binary), "."],
            cwd=source,
            env={**os.environ, **recipes.GO_ENV},
            hint=f"the Go program in {source} must build with CGO_ENABLED=0",
        )
        container = work.buildah("from", "--quiet", "scratch").strip()
        work.buildah("copy", "--quiet", container, str(binary), "/pause")
        work.buildah("config", *recipes.PAUSE_CONFIG, container)
        work.buildah("commit", "--rm", "--quiet", "--format=docker", container, image.ref)

    return _produce(recipe, make, estimate="~10 s")


def ensure_debian_base() -> ImageArchive:
    """Debian bookworm with python3-minimal (Python 3.11) and no docs, FROM scratch.

    The first build downloads its packages from Debian's mirror (deb.debian.org, or the one
    $PLUMB_DEBIAN_MIRROR names).
    """
    mirror = os.environ.get(MIRROR_ENV) or None
    return _debian(debian_base_recipe(mirror), mirror, packages=None, estimate="~40 s")


def ensure_python_base() -> ImageArchive:
    """Debian bookworm with python3, python3-venv and libstdc++6 (Python 3.11 with its whole
    standard library, the pip that venv bundles, and what numpy's and llvmlite's wheels link
    against), no docs, FROM scratch: the BASE of plumb's image.

    The first build downloads its packages from Debian's mirror, as ``ensure_debian_base``.
    """
    mirror = os.environ.get(MIRROR_ENV) or None
    recipe = recipes.python_base_recipe(mirror)
    return _debian(recipe, mirror, packages=recipes.PYTHON_PACKAGES, estimate="~60 s")


def ensure_plumb_image(context: Path) -> ImageArchive:
    """plumb's image from a staged build context: the repository's Dockerfile beside a wheels/
    directory holding plumb's wheel and its runtime dependencies (hack/image/stage.sh), built on
    ``ensure_python_base()`` with no network. The kernel is compiled during the build (~1 min).
    """
    for required in ("Dockerfile", "wheels"):
        if not (context / required).exists():
            raise ImageError(
                f"{context / required} does not exist; stage the build context first with "
                f"`hack/image/stage.sh {context}` (or `make image`)"
            )
    if not any((context / "wheels").glob("plumb-*.whl")):
        raise ImageError(
            f"{context / 'wheels'} holds no plumb-*.whl; stage the build context again with "
            f"`hack/image/stage.sh {context}`"
        )
    return build(recipes.PLUMB, containerfile_dir=context, base=ensure_python_base())


def _debian(
    recipe: Recipe, mirror: str | None, *, packages: Sequence[str] | None, estimate: str
) -> ImageArchive:
    """A base image of Debian's packages from mmdebstrap, added to an image FROM scratch."""

    def make(work: _Work, image: ImageArchive) -> None:
        rootfs = work.path / "rootfs.tar"
        where = mirror or "deb.debian.org (bookworm, bookworm-updates, bookworm-security)"
        extra = {} if packages is None else {"packages": packages}
        _run(
            recipes.mmdebstrap_argv(rootfs, mirror, **extra),
            env=work.env,
            hint=(
                f"mmdebstrap needs network access to Debian's mirror {where}: check that it is "
                f"reachable, or set {recipes.MIRROR_ENV} to a mirror that is"
            ),
        )
        container = work.buildah("from", "--quiet", "scratch").strip()
        # buildah add unpacks a local tar archive into the destination, keeping owners and modes.
        work.buildah("add", "--quiet", container, str(rootfs), "/")
        work.buildah("config", *recipes.BASE_CONFIG, container)
        work.buildah("commit", "--rm", "--quiet", "--format=docker", container, image.ref)

    return _produce(recipe, make, estimate=estimate)


def ensure_test_image() -> ImageArchive:
    """The base plus ``plumb-test-pod``, a script that prints numbered lines and sleeps.

    Its default command prints "plumb-test-pod N" every second; tests usually override it.
    """
    base = ensure_debian_base()
    with tempfile.TemporaryDirectory(prefix="plumb-test-image-") as directory:
        context = Path(directory)
        (context / "Containerfile").write_text(recipes.TEST_CONTAINERFILE)
        script = context / "plumb-test-pod"
        script.write_text(recipes.TEST_SCRIPT_SOURCE)
        script.chmod(0o755)
        return build(recipes.TEST, containerfile_dir=context, base=base)


def build(
    name: str,
    *,
    containerfile_dir: Path,
    base: ImageArchive | None,
    build_args: Mapping[str, str] | None = None,
    containerfile: str | None = None,
) -> ImageArchive:
    """Builds the Containerfile in ``containerfile_dir`` with ``buildah bud``, once per content.

    The directory is the build context and every file in it counts for the key, so stage into
    it only what the image needs. With a ``base``, the build argument BASE names it (write
    ``ARG BASE`` then ``FROM ${BASE}``); it is the only image a FROM may name besides scratch.
    ``containerfile`` is a file name inside the directory; by default buildah picks
    Containerfile, then Dockerfile. RUN steps have no network.
    """
    if containerfile is not None:
        path = (containerfile_dir / containerfile).resolve()
        if not path.is_file() or containerfile_dir.resolve() not in path.parents:
            raise ImageError(
                f"containerfile {containerfile!r} is not a file inside {containerfile_dir}; name "
                f"a file of the build context, whose content the cache key covers"
            )
    arguments = dict(build_args or {})
    if base is not None:
        if "BASE" in arguments:
            raise ImageError(
                f"build argument BASE={arguments['BASE']!r} given together with base={base.ref}; "
                f"the base sets BASE itself: drop one of them"
            )
        if not base.archive.is_file():
            raise ImageError(
                f"the base archive {base.archive} does not exist; build the base with its "
                f"ensure_* function and pass what it returns"
            )
        arguments["BASE"] = base.ref
    recipe = build_recipe(
        name,
        containerfile_dir=containerfile_dir,
        base=base,
        build_args=arguments,
        containerfile=containerfile,
    )

    def make(work: _Work, image: ImageArchive) -> None:
        if base is not None:
            work.buildah("pull", "--quiet", f"docker-archive:{base.archive}")
        file_args = ["--file", str(containerfile_dir / containerfile)] if containerfile else []
        work.buildah(
            "bud",
            *recipes.BUD_FLAGS,
            f"--tag={image.ref}",
            *(f"--build-arg={key}={value}" for key, value in sorted(arguments.items())),
            *file_args,
            str(containerfile_dir),
            hint=(
                f"buildah could not build {containerfile_dir}; remember that FROM may name only "
                f"scratch or the base (as ${{BASE}}) and that RUN steps have no network"
            ),
        )

    return _produce(recipe, make, estimate="~10 s")


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Work:
    """One build's directory: buildah's storage, temporary files, the archive until complete."""

    path: Path

    @property
    def env(self) -> dict[str, str]:
        # buildah and mmdebstrap put their large temporary files in TMPDIR (/var/tmp and /tmp
        # by default): keep them here, where the build's end removes them.
        return {**os.environ, "TMPDIR": str(self.path / "tmp")}

    def buildah(self, *args: str, hint: str = "buildah could not make the image") -> str:
        argv = [
            "buildah",
            f"--root={self.path / 'storage'}",
            f"--runroot={self.path / 'run'}",
            "--storage-driver=vfs",
            *args,
        ]
        return _run(argv, env=self.env, hint=hint)


def _produce(
    recipe: Recipe, make: Callable[[_Work, ImageArchive], None], *, estimate: str
) -> ImageArchive:
    """The recipe's archive: the cached one, or one ``make`` builds into a work directory."""
    directory = cache_dir()
    image = recipe.image(directory)
    if image.archive.is_file():
        return image
    if ":" in str(directory):
        raise ImageError(
            f"the cache directory {directory} contains ':', which buildah's docker-archive:PATH "
            f"syntax cannot carry; set PLUMB_CACHE_DIR to a path without one"
        )
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory / f".{recipe.name}-{recipe.key}.lock"):
        # Another process may have built it while this one waited for the lock.
        if image.archive.is_file():
            return image
        print(
            f"building image {recipe.name} (first time only, {estimate})...",
            file=sys.stderr,
            flush=True,
        )
        started = time.monotonic()
        with _work_dir(directory, recipe.name) as work:
            make(work, image)
            partial = work.path / "image.tar"
            work.buildah("push", "--quiet", image.ref, f"docker-archive:{partial}:{image.ref}")
            os.replace(partial, image.archive)
        size = image.archive.stat().st_size / 1e6
        print(
            f"built image {image.ref} in {time.monotonic() - started:.1f} s "
            f"({size:.0f} MB, {image.archive})",
            file=sys.stderr,
            flush=True,
        )
    return image


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``path`` so that concurrent callers build an image only once.

    The file is removed before the lock is released, so none are left behind. A caller that was
    waiting on the removed file proceeds and finds the archive; at worst, after a failure, two
    callers build at once, and the second rename replaces an archive with an equal one.
    """
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _work_dir(directory: Path, name: str) -> Iterator[_Work]:
    path = Path(tempfile.mkdtemp(prefix=f".build-{name}-", dir=directory))
    (path / "tmp").mkdir()
    try:
        yield _Work(path=path)
    finally:
        _remove(path)


def _remove(path: Path) -> None:
    """Removes a work directory, unmounting first anything a killed tool left mounted in it.

    Removing through a mount point would delete what is mounted there, which may be the host's.
    """
    for mount_point in sorted(_mounts_under(path), reverse=True):
        subprocess.run(["umount", "--lazy", str(mount_point)], check=False, capture_output=True)
    left = _mounts_under(path)
    if left:
        raise ImageError(
            f"{path} still has mounts ({', '.join(map(str, left))}) that could not be unmounted; "
            f"unmount them by hand, then remove {path}"
        )
    shutil.rmtree(path)


def _mounts_under(path: Path) -> list[Path]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        # The fifth field is the mount point, with space, tab, newline and backslash escaped in
        # octal.
        raw = line.split(" ")[4]
        point = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), raw))
        if point == path or path in point.parents:
            found.append(point)
    return found


# --- Loading into containerd --------------------------------------------------------------------


def load(
    image: ImageArchive,
    *,
    containerd_address: Path,
    namespace: str = "k8s.io",
    ctr: str = "ctr",
) -> None:
    """Imports the image into containerd's ``namespace`` unless its reference is there already.

    A reference's tag is its content key, so a present reference is the same image.
    """
    if loaded(image.ref, containerd_address=containerd_address, namespace=namespace, ctr=ctr):
        return
    if not image.archive.is_file():
        raise ImageError(
            f"the archive {image.archive} of {image.ref} does not exist; build it again with "
            f"the ensure_* function that made it"
        )
    _run(
        _ctr_argv(ctr, containerd_address, namespace, "images", "import", str(image.archive)),
        timeout=_CTR_TIMEOUT_SECONDS,
        hint=f"containerd at {containerd_address} refused the archive",
    )
    if not loaded(image.ref, containerd_address=containerd_address, namespace=namespace, ctr=ctr):
        raise ImageError(
            f"{image.archive} was imported into containerd namespace {namespace!r} but "
            f"{image.ref} is not listed there: the archive names another image; remove the "
            f"archive so that it is built again"
        )


def loaded(
    ref: str, *, containerd_address: Path, namespace: str = "k8s.io", ctr: str = "ctr"
) -> bool:
    """Whether containerd's ``namespace`` lists the image ``ref``."""
    listing = _run(
        _ctr_argv(ctr, containerd_address, namespace, "images", "list", "--quiet"),
        timeout=_CTR_TIMEOUT_SECONDS,
        hint=f"check that containerd is serving {containerd_address}",
    )
    return ref in listing.split()


def _ctr_argv(ctr: str, address: Path, namespace: str, *args: str) -> list[str]:
    # ctr waits for a socket that is not there; say so at once instead.
    if not address.is_socket():
        raise ImageError(
            f"no containerd socket at {address}; start containerd first, or pass the address its "
            f"configuration's [grpc] section names"
        )
    return [ctr, "--address", str(address), "--namespace", namespace, *args]


# --- Running the tools --------------------------------------------------------------------------


def _run(
    argv: Sequence[str],
    *,
    hint: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = _BUILD_TIMEOUT_SECONDS,
) -> str:
    """Runs a command to completion and returns its stdout; raises ImageError if it fails."""
    command = shlex.join(argv)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=env,
            cwd=cwd,
            # Its own process group, so that stopping it stops what it started (mmdebstrap runs
            # apt and dpkg, buildah runs runc).
            start_new_session=True,
        )
    except FileNotFoundError:
        tool = Path(argv[0]).name
        advice = _INSTALL.get(tool, f"install {tool} or pass the path to it")
        raise ImageError(f"`{argv[0]}` was not found (running `{command}`); {advice}") from None
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(process)
        raise ImageError(
            f"`{command}` did not finish within {timeout:.0f} s and was stopped; {hint}"
        ) from None
    except BaseException:
        # Interrupted (Ctrl-C): stop the tool before its work directory is removed under it.
        _stop(process)
        raise
    if process.returncode != 0:
        lines = (stderr.strip() or stdout.strip()).splitlines()[-_TAIL_LINES:]
        output = "last lines of its output:\n" + "\n".join(lines) if lines else "it printed nothing"
        raise ImageError(
            f"`{command}` failed with exit code {process.returncode}; {hint}; {output}"
        )
    return stdout


def _stop(process: subprocess.Popen[str]) -> None:
    """Stops a command's process group: SIGTERM, so that it cleans up, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.communicate(timeout=_STOP_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            continue
        return
