"""The Kubernetes releases the local cluster runs: the table matches hack/, each release gets the
flags it accepts, the release is chosen and recorded as said. No server runs here."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest

from plumb_dev import commands
from plumb_dev.cluster.controlplane import building, config, lifecycle, pki, releases

HACK = Path(__file__).resolve().parents[4] / "hack"
LAYOUT = config.Layout(directory=Path("/c"))
SIGNING = pki.Pair(cert=Path("/c/pki/ca.crt"), key=Path("/c/pki/ca.key"))


def test_every_release_has_its_go_module_in_hack_and_every_module_a_release() -> None:
    modules = sorted(path.name for path in (HACK / "k8s").iterdir() if path.is_dir())
    assert modules == list(releases.RELEASES) == ["v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2"]
    for version, release in releases.RELEASES.items():
        module = (HACK / "k8s" / version / "go.mod").read_text()
        assert f"\nrequire k8s.io/kubernetes {version}\n" in module
        staging = set(re.findall(r"^\t(k8s\.io/\S+) => \1 (\S+)$", module, re.MULTILINE))
        assert {tag for _, tag in staging} == {f"v0.{release.minor}.{version.rsplit('.', 1)[1]}"}
        assert (HACK / "k8s" / version / "go.sum").is_file()
        assert (HACK / "k8s" / version / "tools.go").is_file()


def test_the_streaming_modules_are_replaced_from_v1_36_on() -> None:
    for version, release in releases.RELEASES.items():
        module = (HACK / "k8s" / version / "go.mod").read_text()
        replaced = "k8s.io/cri-streaming => " in module and "k8s.io/streaming => " in module
        assert replaced == (release.minor >= 36), version


def test_the_default_and_the_oldest_are_the_ones_hack_versions_env_names() -> None:
    pinned = dict(
        line.split("=", 1)
        for line in (HACK / "versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert pinned["KUBE_VERSION"] == releases.DEFAULT == "v1.37.2"
    assert pinned["OLDEST_KUBE_VERSION"] == releases.OLDEST == "v1.34.4"


def _controllers(version: str) -> str:
    args = config.controller_manager_args(
        LAYOUT, cluster_signing=SIGNING, release=releases.RELEASES[version]
    )
    [controllers] = [arg for arg in args if arg.startswith("--controllers=")]
    return controllers


@pytest.mark.parametrize("version", ["v1.34.4", "v1.35.4", "v1.36.3"])
def test_up_to_v1_36_the_cloud_node_lifecycle_controller_is_turned_off_by_name(
    version: str,
) -> None:
    assert _controllers(version) == (
        "--controllers=*,-nodelifecycle,-cloud-node-lifecycle,-bootstrapsigner,-tokencleaner"
    )


def test_v1_37_is_not_given_the_cloud_node_lifecycle_name_it_refuses() -> None:
    assert (
        _controllers("v1.37.2") == "--controllers=*,-nodelifecycle,-bootstrapsigner,-tokencleaner"
    )


def test_the_other_controller_manager_flags_are_the_same_for_every_release() -> None:
    def others(version: str) -> list[str]:
        args = config.controller_manager_args(
            LAYOUT, cluster_signing=SIGNING, release=releases.RELEASES[version]
        )
        return [arg for arg in args if not arg.startswith("--controllers=")]

    assert {tuple(others(version)) for version in releases.RELEASES} == {tuple(others("v1.34.4"))}


def test_the_release_is_the_one_named_else_the_environments_else_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(building.KUBE_VERSION_ENV, raising=False)
    assert building.chosen_release().version == "v1.37.2"
    monkeypatch.setenv(building.KUBE_VERSION_ENV, "v1.36.3")
    assert building.chosen_release().version == "v1.36.3"
    assert building.chosen_release("v1.34.4").version == "v1.34.4"


def test_an_unknown_release_is_refused_with_the_known_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    known = "v1.34.4, v1.35.4, v1.36.3, v1.37.2"
    with pytest.raises(building.BuildError, match=f"'v1.33.0' is not .*one of {known}$"):
        building.chosen_release("v1.33.0")
    monkeypatch.setenv(building.KUBE_VERSION_ENV, "1.37")
    with pytest.raises(building.BuildError, match=r"'1.37' \(from \$PLUMB_KUBE_VERSION\)"):
        building.ensure_binaries()


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_ensure_binaries_builds_the_release_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hack = tmp_path / "hack"
    hack.mkdir()
    # Stands in for the build script: makes and prints a directory named after its argument.
    _executable(
        hack / "build-control-plane.sh",
        f'mkdir -p "{tmp_path}/bin-$1"; echo "{tmp_path}/bin-$1"\n',
    )
    monkeypatch.setenv("PLUMB_HACK_DIR", str(hack))
    monkeypatch.setenv(building.KUBE_VERSION_ENV, "v1.35.4")
    assert building.ensure_binaries("v1.37.2") == tmp_path / "bin-v1.37.2"
    assert building.ensure_binaries() == tmp_path / "bin-v1.35.4"


def _apiserver_saying(bin_dir: Path, answer: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    _executable(bin_dir / config.APISERVER, f"#!/bin/sh\necho '{answer}'\n")
    return bin_dir


def test_the_release_is_what_the_binaries_say(tmp_path: Path) -> None:
    bin_dir = _apiserver_saying(tmp_path / "bin", "Kubernetes v1.37.2")
    assert lifecycle.release_of(bin_dir) == releases.RELEASES["v1.37.2"]


def test_binaries_of_a_release_without_a_row_are_refused(tmp_path: Path) -> None:
    bin_dir = _apiserver_saying(tmp_path / "bin", "Kubernetes v1.33.0")
    with pytest.raises(lifecycle.ControlPlaneError) as raised:
        lifecycle.release_of(bin_dir)
    assert "--version answered 'Kubernetes v1.33.0'" in str(raised.value)
    assert "v1.34.4, v1.35.4, v1.36.3, v1.37.2 only" in str(raised.value)


def _state(tmp_path: Path, **fields: object) -> Path:
    directory = tmp_path / "cluster"
    directory.mkdir()
    state = {
        "directory": str(directory),
        "bin_dir": "/bin-dir",
        "kubeconfig": str(directory / "kubeconfig"),
        "server": "https://127.0.0.1:6443",
        "token": "t",
        "ca_file": str(directory / "pki" / "ca.crt"),
        "etcd_pid": 101,
        "apiserver_pid": 102,
        "controller_manager_pid": 0,
        "scheduler_pid": 0,
        **fields,
    }
    (directory / config.STATE_FILE).write_text(json.dumps(state))
    return directory


def test_the_state_file_records_the_release(tmp_path: Path) -> None:
    directory = _state(tmp_path, format=3, kube_version="v1.37.2")
    plane = lifecycle.load(directory)
    assert plane is not None
    assert plane.kube_version == "v1.37.2"


def test_a_state_file_from_before_releases_were_recorded_is_v1_34_4(tmp_path: Path) -> None:
    plane = lifecycle.load(_state(tmp_path, format=2))
    assert plane is not None
    assert plane.kube_version == "v1.34.4"


def test_plumb_cluster_takes_a_known_release_and_refuses_another(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = commands._parser()
    args = parser.parse_args(["cluster", "up", "--kube-version", "v1.37.2"])
    assert args.kube_version == "v1.37.2"
    assert parser.parse_args(["cluster", "build"]).kube_version is None
    with pytest.raises(SystemExit):
        parser.parse_args(["cluster", "up", "--kube-version", "v1.38.0"])
    assert (
        "'v1.38.0' is not a release the local cluster builds; choose one of "
        "v1.34.4, v1.35.4, v1.36.3, v1.37.2"
    ) in capsys.readouterr().err


def test_plumb_cluster_help_names_the_releases(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: argparse wraps at hyphens
    with pytest.raises(SystemExit):
        commands._parser().parse_args(["cluster", "--help"])
    assert (
        "build, up: the Kubernetes release, one of v1.34.4, v1.35.4, v1.36.3, v1.37.2 "
        "(default: $PLUMB_KUBE_VERSION, else v1.37.2)"
    ) in capsys.readouterr().out
