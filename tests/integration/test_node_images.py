"""The real node's images, built for real with go, mmdebstrap and buildah and loaded with ctr.

The first run builds them (about a minute, with network access to Debian's mirror); later runs
reuse the cached archives. containerd runs here only as a throwaway instance on a socket in a
temporary directory, with its CRI plugin off: nothing listens on the network.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from plumb_dev.cluster.localnode import images


def _missing() -> str:
    needs = []
    if os.geteuid() != 0:
        needs.append("root (buildah, mmdebstrap and containerd need it)")
    tools = ("go", "buildah", "mmdebstrap", "containerd", "ctr", "unshare", "nsenter", "chroot")
    needs += [f"`{tool}` on PATH" for tool in tools if shutil.which(tool) is None]
    if not needs:
        return ""
    return (
        f"building and loading images needs {', '.join(needs)}; apt-get install -y "
        f"--no-install-recommends buildah mmdebstrap containerd, and Go 1.24+"
    )


_MISSING = _missing()
pytestmark = [pytest.mark.integration, pytest.mark.skipif(bool(_MISSING), reason=_MISSING)]

_T = TypeVar("_T")
_CACHED_CALL_SECONDS = 1.0
_CONTAINERD_START_SECONDS = 20.0


@pytest.fixture(scope="module")
def built() -> dict[str, images.ImageArchive]:
    return {
        "pause": images.ensure_pause(),
        "base": images.ensure_debian_base(),
        "test": images.ensure_test_image(),
    }


def test_a_second_call_reuses_the_archive_without_building(
    built: dict[str, images.ImageArchive],
) -> None:
    for name, ensure in (
        ("pause", images.ensure_pause),
        ("base", images.ensure_debian_base),
        ("test", images.ensure_test_image),
    ):
        first = built[name]
        before = first.archive.stat()
        started = time.monotonic()
        again = ensure()
        elapsed = time.monotonic() - started
        assert again == first, f"{name}: a second call gave another image"
        assert elapsed < _CACHED_CALL_SECONDS, f"{name}: a cached call took {elapsed:.1f} s"
        after = again.archive.stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), (
            f"{name}: the archive was rewritten"
        )


def test_each_archive_holds_one_image_tagged_with_its_key(
    built: dict[str, images.ImageArchive],
) -> None:
    for image in built.values():
        manifest = _manifest(image.archive)
        assert image.archive.name == f"{image.ref.split('/')[-1].replace(':', '-')}.tar"
        assert manifest["RepoTags"] == [image.ref]
        assert re.fullmatch(r"localhost/plumb/[a-z-]+:[0-9a-f]{12}", image.ref)


def test_the_pause_image_is_one_static_binary_run_unprivileged(
    built: dict[str, images.ImageArchive], tmp_path: Path
) -> None:
    pause = built["pause"]
    config = _config(pause.archive)
    assert config["config"]["Entrypoint"] == ["/pause"]
    assert config["config"]["User"] == "65535:65535"
    files = _layer_files(pause.archive)
    assert [name for layer in files for name in layer] == ["pause"]
    binary = _extract_member(pause.archive, "pause", tmp_path)
    # A static binary has no program interpreter (PT_INTERP names ld-linux in a dynamic one).
    assert b"ld-linux" not in binary.read_bytes()


def test_pause_reaps_orphans_and_exits_zero_on_sigterm(
    built: dict[str, images.ImageArchive], tmp_path: Path
) -> None:
    binary = _extract_member(built["pause"].archive, "pause", tmp_path)
    # PID 1 of a new PID namespace, as in a pod that shares its process namespace: orphans of
    # that namespace become its children.
    with subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", str(binary)]) as outer:
        try:
            pause_pid = _wait_for(lambda: _children(outer.pid), "pause to start")[0]
            time.sleep(0.3)  # let it install its signal handlers
            # sh starts a sleep and exits at once: the sleep is orphaned and handed to pause.
            subprocess.run(
                ["nsenter", "--target", str(pause_pid), "--pid", "--", "sh", "-c", "sleep 0.5 &"],
                check=True,
            )
            orphans = _children(pause_pid)
            assert orphans, "the orphaned sleep was not handed to pause; the test proves nothing"
            time.sleep(1.0)
            zombies = [pid for pid in _children(pause_pid) if _state(pid) == "Z"]
            assert not zombies, f"pause left zombies {zombies} (orphans were {orphans})"
            os.kill(pause_pid, signal.SIGTERM)
            assert outer.wait(timeout=5) == 0
        finally:
            if outer.poll() is None:
                outer.kill()


def test_the_base_has_python_and_no_documentation(built: dict[str, images.ImageArchive]) -> None:
    base = built["base"]
    assert _config(base.archive)["config"]["Cmd"] == ["/bin/sh"]
    (files,) = _layer_files(base.archive)
    assert "usr/bin/python3.11" in files
    assert "usr/bin/python3" in files
    # Each package keeps its copyright file and no other documentation (empty directories and
    # dangling symlinks that dpkg leaves cost nothing).
    regular = _layer_files(base.archive, regular_only=True)[0]
    docs = [f for f in regular if f.startswith("usr/share/doc/") and f.count("/") > 3]
    docs = [f for f in docs if not f.endswith("/copyright")]
    manuals = [f for f in regular if f.startswith("usr/share/man/")]
    assert not docs, f"documentation kept: {docs[:5]}"
    assert not manuals, f"man pages kept: {manuals[:5]}"
    # usrmerge would have pulled in the full perl (perl-base is essential and stays).
    assert not [f for f in files if "/libperl.so" in f], "the full perl is in the base"
    assert not [f for f in files if f.startswith("dev/")], "device nodes kept"


def test_the_test_image_runs_its_script_on_the_base(
    built: dict[str, images.ImageArchive], tmp_path: Path
) -> None:
    base, test = built["base"], built["test"]
    base_layers = _config(base.archive)["rootfs"]["diff_ids"]
    test_layers = _config(test.archive)["rootfs"]["diff_ids"]
    assert test_layers[: len(base_layers)] == base_layers, "the test image is not on the base"
    assert _config(test.archive)["config"]["Cmd"] == [images.TEST_SCRIPT]
    root = tmp_path / "rootfs"
    _unpack(test.archive, root, tmp_path / "archive")
    with subprocess.Popen(
        ["chroot", str(root), images.TEST_SCRIPT, "hello", "0.1"],
        stdout=subprocess.PIPE,
        text=True,
    ) as script:
        try:
            assert script.stdout is not None
            lines = [script.stdout.readline().strip() for _ in range(3)]
            assert lines == ["hello 0", "hello 1", "hello 2"]
            script.send_signal(signal.SIGTERM)
            assert script.wait(timeout=5) == 0
        finally:
            if script.poll() is None:
                script.kill()


@pytest.fixture
def containerd() -> Iterator[Path]:
    """A containerd of this test's own, in a temporary directory, with no CRI plugin."""
    # Not under tmp_path: a unix socket's path must stay under 108 bytes.
    directory = Path(tempfile.mkdtemp(prefix="plumb-containerd-"))
    socket = directory / "containerd.sock"
    config = directory / "config.toml"
    config.write_text(
        f"""version = 2
root = "{directory / "root"}"
state = "{directory / "state"}"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{directory / "opt"}"
"""
    )
    log = (directory / "containerd.log").open("w")
    process = subprocess.Popen(
        ["containerd", "--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_for(
            lambda: socket.is_socket() and _ctr_answers(socket),
            f"containerd to serve {socket} (log: {directory / 'containerd.log'})",
            timeout=_CONTAINERD_START_SECONDS,
        )
        yield socket
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        for point in sorted(_mounts_under(directory), reverse=True):
            subprocess.run(["umount", "--lazy", str(point)], check=False)
        left = _mounts_under(directory)
        assert not left, f"mounts left under the throwaway containerd: {left}"
        shutil.rmtree(directory)


def test_load_imports_the_pause_image_once(
    built: dict[str, images.ImageArchive], containerd: Path
) -> None:
    pause, test = built["pause"], built["test"]
    assert not images.loaded(pause.ref, containerd_address=containerd)
    images.load(pause, containerd_address=containerd)
    assert images.loaded(pause.ref, containerd_address=containerd)
    # Loading again is a no-op, and only what was loaded is listed.
    images.load(pause, containerd_address=containerd)
    assert images.loaded(pause.ref, containerd_address=containerd)
    assert not images.loaded(test.ref, containerd_address=containerd)
    assert not images.loaded(pause.ref, containerd_address=containerd, namespace="default")


def test_load_without_containerd_names_the_socket(
    built: dict[str, images.ImageArchive], tmp_path: Path
) -> None:
    with pytest.raises(images.ImageError, match="no containerd socket at"):
        images.load(built["pause"], containerd_address=tmp_path / "missing.sock")


# --- helpers -----------------------------------------------------------------------------------


def _manifest(archive: Path) -> dict[str, Any]:
    with tarfile.open(archive) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        (manifest,) = json.load(member)
    assert isinstance(manifest, dict)
    return manifest


def _config(archive: Path) -> dict[str, Any]:
    with tarfile.open(archive) as tar:
        member = tar.extractfile(_manifest(archive)["Config"])
        assert member is not None
        config = json.load(member)
    assert isinstance(config, dict)
    return config


def _layer_files(archive: Path, *, regular_only: bool = False) -> list[list[str]]:
    """The names in each layer of the image, bottom layer first, without a leading './'."""
    layers = []
    with tarfile.open(archive) as outer:
        for name in _manifest(archive)["Layers"]:
            member = outer.extractfile(name)
            assert member is not None
            with tarfile.open(fileobj=member) as layer:
                entries = [m for m in layer.getmembers() if m.isreg() or not regular_only]
                layers.append([m.name.removeprefix("./") for m in entries])
    return layers


def _extract_member(archive: Path, path: str, directory: Path) -> Path:
    """Copies one file out of the image's layers (the topmost that has it)."""
    target = directory / Path(path).name
    with tarfile.open(archive) as outer:
        for name in reversed(_manifest(archive)["Layers"]):
            member = outer.extractfile(name)
            assert member is not None
            with tarfile.open(fileobj=member) as layer:
                names = {n.removeprefix("./"): n for n in layer.getnames()}
                if path in names:
                    data = layer.extractfile(names[path])
                    assert data is not None
                    target.write_bytes(data.read())
                    target.chmod(0o755)
                    return target
    raise AssertionError(f"{path} is in no layer of {archive}")


def _unpack(archive: Path, root: Path, scratch: Path) -> None:
    """The image's root filesystem: its layers unpacked in order (ours have no whiteouts)."""
    scratch.mkdir()
    root.mkdir()
    subprocess.run(["tar", "-xf", str(archive), "-C", str(scratch)], check=True)
    for layer in _manifest(archive)["Layers"]:
        subprocess.run(["tar", "-xf", str(scratch / layer), "-C", str(root)], check=True)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return ""


def _ctr_answers(socket: Path) -> bool:
    result = subprocess.run(
        ["ctr", "--address", str(socket), "version"], capture_output=True, check=False
    )
    return result.returncode == 0


def _mounts_under(directory: Path) -> list[Path]:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    points = [Path(line.split(" ")[4]) for line in lines]
    return [p for p in points if p == directory or directory in p.parents]


def _wait_for(condition: Callable[[], _T], what: str, *, timeout: float = 5.0) -> _T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
