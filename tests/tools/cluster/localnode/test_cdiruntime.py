"""Which unpacked containerd the node runs, and the private apt that fetches it."""

from __future__ import annotations

from pathlib import Path

import pytest

from plumb_dev.cluster.localnode import cdiruntime


def _unpack(root: Path, version: str, binaries: tuple[str, ...] = cdiruntime.BINARIES) -> Path:
    bin_dir = root / "containerd-deb" / version / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    for name in binaries:
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_the_newest_complete_package_is_the_one_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUMB_CACHE_DIR", str(tmp_path))
    assert cdiruntime.cached() is None
    _unpack(tmp_path, "1.7.9~ds1-1")
    newest = _unpack(tmp_path, "1.7.24~ds1-6+deb13u1")
    # Without its shim a package cannot run pods; a fetch still in progress is hidden.
    _unpack(tmp_path, "1.7.30~ds1-1", binaries=("containerd",))
    _unpack(tmp_path, ".fetch-abc")
    runtime = cdiruntime.cached()
    assert runtime is not None
    assert runtime.version == "1.7.24~ds1-6+deb13u1"
    assert runtime.containerd == newest / "containerd"


def test_the_fetch_reads_trixie_without_the_hosts_apt_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLUMB_DEBIAN_MIRROR", raising=False)
    argv = cdiruntime._private_apt(tmp_path)
    options = dict(a.removeprefix("-o").split("=", 1) for a in argv if a.startswith("-o"))
    # Every list, cache and the package database are the scratch directory's: the host's
    # sources, pins and installed packages play no part, and nothing of the host's is written.
    assert options["Dir::Etc::SourceList"] == str(tmp_path / "sources.list")
    assert options["Dir::State"] == str(tmp_path / "state")
    assert options["Dir::State::status"] == str(tmp_path / "status")
    assert options["Dir::Cache"] == str(tmp_path / "cache")
    assert (tmp_path / "status").read_text() == ""
    suites = [line.split()[-2] for line in (tmp_path / "sources.list").read_text().splitlines()]
    assert suites == ["trixie", "trixie-updates", "trixie-security"]
