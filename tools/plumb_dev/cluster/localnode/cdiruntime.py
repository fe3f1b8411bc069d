"""The node's containerd: Debian trixie's package (1.7, which injects CDI devices), unpacked into
the cache.

Bookworm's containerd 1.6 predates CDI: its CRI API has no ``CDI_devices`` field, so the devices
a DRA driver prepares for a container (which the kubelet passes in that field alone since
Kubernetes 1.31) are dropped without a word and the container starts without them (docs/dra.md,
"On the real node"). Trixie's containerd reads the field and applies the driver's CDI spec when
``enable_cdi`` is on. It needs only libc (2.34 or newer; bookworm has 2.36), so its binaries run
here as they are: ``fetch`` downloads the package with ``apt-get download`` (a private sources
list and state, so the host's apt configuration and package database are untouched) and unpacks
it with ``dpkg-deb -x`` into ``<cache>/containerd-deb/<version>``, renamed into place once
complete; nothing is installed. The node runs that ``containerd`` and its runc shim; ``ctr`` and
runc stay bookworm's.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from plumb_dev.cluster.localnode import recipes

SUITE = "trixie"
PACKAGE = "containerd"
# What the node runs from the package: the daemon, and the shim it starts for each pod (found on
# the daemon's PATH, where this package's directory comes first).
BINARIES = ("containerd", "containerd-shim-runc-v2")
_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
_DEFAULT_MIRROR = "http://deb.debian.org/debian"
_SECURITY = "http://deb.debian.org/debian-security"
_APT_TIMEOUT_SECONDS = 600
_VERSION = re.compile(r"\b(\d+)\.(\d+)\.(\d+)")


class FetchError(RuntimeError):
    """The containerd package could not be downloaded or unpacked."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Runtime:
    """One unpacked containerd package: where its binaries are and its Debian version."""

    root: Path
    version: str

    @property
    def bin_dir(self) -> Path:
        return self.root / "usr" / "bin"

    @property
    def containerd(self) -> Path:
        return self.bin_dir / "containerd"

    def complete(self) -> bool:
        return all(os.access(self.bin_dir / b, os.X_OK) for b in BINARIES)


def packages_dir() -> Path:
    """$PLUMB_CACHE_DIR/containerd-deb, or ~/.cache/plumb/containerd-deb."""
    return recipes.cache_dir().parent / "containerd-deb"


def cached() -> Runtime | None:
    """The newest complete unpacked package in the cache, or None."""
    directory = packages_dir()
    if not directory.is_dir():
        return None
    found = [
        Runtime(root=entry, version=entry.name)
        for entry in directory.iterdir()
        if not entry.name.startswith(".")
    ]
    complete = sorted((r for r in found if r.complete()), key=lambda r: _version_key(r.version))
    return complete[-1] if complete else None


def _version_key(version: str) -> tuple[int, ...]:
    match = _VERSION.search(version)
    return tuple(int(part) for part in match.groups()) if match else (0, 0, 0)


def ensure() -> Runtime:
    """The cached package, else the one ``fetch`` downloads."""
    return cached() or fetch()


def fetch() -> Runtime:
    """Downloads trixie's containerd package and unpacks it into the cache; returns it."""
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise FetchError(f"{tool} is not on PATH: the node's containerd comes from Debian")
    directory = packages_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=directory) as scratch:
        work = Path(scratch)
        apt = _private_apt(work)
        _run([*apt, "update"], hint=f"apt-get could not read Debian {SUITE}'s package lists")
        downloads = work / "downloads"
        downloads.mkdir()
        _run(
            [*apt, "download", PACKAGE], hint=f"apt-get could not download {PACKAGE}", cwd=downloads
        )
        debs = sorted(downloads.glob(f"{PACKAGE}_*.deb"))
        if len(debs) != 1:
            raise FetchError(f"apt-get download {PACKAGE} left {[d.name for d in debs]}")
        version = _run(
            ["dpkg-deb", "--field", str(debs[0]), "Version"],
            hint=f"{debs[0].name} is not a Debian package",
        ).strip()
        unpacked = work / "unpacked"
        _run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)], hint=f"could not unpack {debs[0]}")
        runtime = Runtime(root=directory / version.replace(":", "_"), version=version)
        if not Runtime(root=unpacked, version=version).complete():
            raise FetchError(f"{debs[0].name} lacks one of {', '.join(BINARIES)} in /usr/bin")
        if not runtime.complete():
            shutil.rmtree(runtime.root, ignore_errors=True)
            os.replace(unpacked, runtime.root)
    return runtime


def _private_apt(work: Path) -> list[str]:
    """apt-get with its own sources, lists, cache and an empty package database in ``work``."""
    mirror = (os.environ.get(recipes.MIRROR_ENV) or _DEFAULT_MIRROR).rstrip("/")
    signed = f"[signed-by={_KEYRING}]"
    (work / "sources.list").write_text(
        f"deb {signed} {mirror} {SUITE} main\n"
        f"deb {signed} {mirror} {SUITE}-updates main\n"
        f"deb {signed} {_SECURITY} {SUITE}-security main\n",
        encoding="utf-8",
    )
    for folder in ("parts", "state/lists/partial", "cache/archives/partial"):
        (work / folder).mkdir(parents=True)
    (work / "status").touch()
    options = {
        "Dir::Etc::SourceList": work / "sources.list",
        "Dir::Etc::SourceParts": work / "parts",
        "Dir::Etc::Preferences": work / "parts" / "none",
        "Dir::Etc::PreferencesParts": work / "parts",
        "Dir::State": work / "state",
        "Dir::State::status": work / "status",
        "Dir::Cache": work / "cache",
        # The files are root's, in root's cache: apt's _apt user could not write them.
        "APT::Sandbox::User": "root",
    }
    return ["apt-get", "-q", *(f"-o{key}={value}" for key, value in options.items())]


def _run(argv: list[str], *, hint: str, cwd: Path | None = None) -> str:
    try:
        result = subprocess.run(
            argv,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=_APT_TIMEOUT_SECONDS,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    except subprocess.TimeoutExpired as error:
        raise FetchError(f"{hint}: {argv[0]} did not finish in {error.timeout} s") from error
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-10:])
        raise FetchError(f"{hint} (exit code {result.returncode}):\n{tail}")
    return result.stdout
