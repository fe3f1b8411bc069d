"""Feature gates of the local control plane: the flags each part gets, the gates read from the
binaries' --help, a gate they do not know refused before anything starts, the gates recorded in
the state file, and ``plumb cluster up --feature-gates``. No server runs here."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from plumb_dev import commands
from plumb_dev.cluster.controlplane import config, featuregates, lifecycle, releases

# The shape of v1.37.2's kube-apiserver --help around the flag (abridged).
HELP = """\
Feature gates flags:

      --feature-gates colonSeparatedMultimapStringString   Comma-separated list of \
component:key=value pairs that describe feature gates for alpha/experimental features of \
different components.
                                                           If the component is not specified, \
defaults to "kube". For example: --feature-gates 'wardle:featureA=true,wardle:featureB=false' \
--feature-gates 'kube:featureC=true'Options are:
                                                           kube:APIResponseCompression=true|false \
(BETA - default=true)
                                                           kube:GenericWorkload=true|false \
(BETA - default=false)
                                                           kube:TopologyAwareWorkloadScheduling=\
true|false (ALPHA - default=false)
      --runtime-config mapStringString                     A set of key=value pairs:
                                         Later=true|false (not a gate: another flag's option)
"""
# v1.34's: no GenericWorkload.
HELP_V1_34 = HELP.replace("GenericWorkload", "AnotherGate")


def test_the_gates_are_read_from_the_feature_gates_section_of_help_only() -> None:
    assert featuregates.listed(HELP) == {
        "APIResponseCompression",
        "GenericWorkload",
        "TopologyAwareWorkloadScheduling",
    }
    assert featuregates.listed("Usage:\n  --v int  verbosity\n") == frozenset()


def test_the_flags_name_the_gates_sorted_as_kubernetes_reads_them() -> None:
    gates = {"TopologyAwareWorkloadScheduling": False, "GenericWorkload": True}
    assert featuregates.flags(gates) == [
        "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=false"
    ]
    assert featuregates.flags({}) == []


@pytest.mark.parametrize(
    ("version", "served"),
    [
        ("v1.35.4", "scheduling.k8s.io/v1alpha1"),
        ("v1.36.3", "scheduling.k8s.io/v1alpha2"),
        ("v1.37.2", "scheduling.k8s.io/v1beta1"),
    ],
)
def test_generic_workload_has_the_api_server_serve_the_releases_workload_api(
    version: str, served: str
) -> None:
    release = releases.RELEASES[version]
    assert featuregates.apiserver_flags({"GenericWorkload": True}, release) == [
        "--feature-gates=GenericWorkload=true",
        f"--runtime-config={served}=true",
    ]
    # Off (or absent), the API version stays off, as by default.
    assert featuregates.apiserver_flags({"GenericWorkload": False}, release) == [
        "--feature-gates=GenericWorkload=false"
    ]
    assert featuregates.apiserver_flags({}, release) == []


def test_v1_34_has_no_workload_api() -> None:
    assert releases.RELEASES["v1.34.4"].workload_api is None


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _binaries(directory: Path, version: str, help_text: str) -> Path:
    """Stand-ins for a release's binaries: --version and --help answer as the release's do;
    etcd writes a file if it is ever started."""
    directory.mkdir()
    (directory / "help.txt").write_text(help_text)
    for name in (config.APISERVER, config.CONTROLLER_MANAGER, config.SCHEDULER):
        _executable(
            directory / name,
            f'#!/bin/sh\nif [ "$1" = --version ]; then echo "Kubernetes {version}"; '
            f'else cat "{directory / "help.txt"}"; fi\n',
        )
    _executable(directory / config.ETCD, f'#!/bin/sh\ntouch "{directory / "etcd-ran"}"\n')
    return directory


def test_a_gate_the_release_does_not_know_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    bin_dir = _binaries(tmp_path / "bin", "v1.34.4", HELP_V1_34)
    cluster = tmp_path / "cluster"
    with pytest.raises(lifecycle.ControlPlaneError) as raised:
        lifecycle.start(cluster, bin_dir=bin_dir, feature_gates={"GenericWorkload": True})
    assert str(raised.value).startswith(
        "unknown feature gate for Kubernetes v1.34.4: 'GenericWorkload'; nothing was started."
    )
    assert not (bin_dir / "etcd-ran").exists()
    assert lifecycle.load(cluster) is None


def test_a_misspelt_gate_is_refused_with_the_closest_name(tmp_path: Path) -> None:
    bin_dir = _binaries(tmp_path / "bin", "v1.37.2", HELP)
    with pytest.raises(lifecycle.ControlPlaneError) as raised:
        lifecycle.check_feature_gates(bin_dir, {"GenericWorkLoad": True, "Nope": False})
    assert str(raised.value).startswith(
        "unknown feature gates for Kubernetes v1.37.2: 'GenericWorkLoad' (did you mean "
        "GenericWorkload?), 'Nope'; nothing was started."
    )
    lifecycle.check_feature_gates(bin_dir, {"GenericWorkload": True})


def test_a_gate_one_part_does_not_know_is_refused_naming_that_part() -> None:
    known_by = {
        config.APISERVER: frozenset({"GenericWorkload", "OnlyHere"}),
        config.CONTROLLER_MANAGER: frozenset({"GenericWorkload", "OnlyHere"}),
        config.SCHEDULER: frozenset({"GenericWorkload"}),
    }
    with pytest.raises(lifecycle.ControlPlaneError, match=r"'OnlyHere' \(kube-scheduler does not"):
        featuregates.check({"OnlyHere": True}, known_by, "v1.37.2")
    featuregates.check({"GenericWorkload": True}, known_by, "v1.37.2")


def _state(tmp_path: Path, **fields: object) -> Path:
    directory = tmp_path / "cluster"
    directory.mkdir()
    state = {
        "format": 3,
        "directory": str(directory),
        "bin_dir": "/bin-dir",
        "kube_version": "v1.37.2",
        "kubeconfig": str(directory / "kubeconfig"),
        "server": "https://127.0.0.1:6443",
        "token": "t",
        "ca_file": str(directory / "pki" / "ca.crt"),
        "etcd_pid": 101,
        "apiserver_pid": 102,
        "controller_manager_pid": 103,
        "scheduler_pid": 0,
        **fields,
    }
    (directory / config.STATE_FILE).write_text(json.dumps(state))
    return directory


def test_the_state_file_records_the_gates(tmp_path: Path) -> None:
    plane = lifecycle.load(_state(tmp_path, feature_gates={"GenericWorkload": True}))
    assert plane is not None
    assert plane.feature_gates == {"GenericWorkload": True}


def test_a_state_file_without_gates_is_a_plane_started_with_none(tmp_path: Path) -> None:
    plane = lifecycle.load(_state(tmp_path))
    assert plane is not None
    assert plane.feature_gates == {}


def test_a_state_file_with_gates_that_are_not_booleans_is_refused(tmp_path: Path) -> None:
    with pytest.raises(lifecycle.ControlPlaneError, match="'feature_gates' should map names"):
        lifecycle.load(_state(tmp_path, feature_gates={"GenericWorkload": "yes"}))


def test_plumb_cluster_up_takes_the_gates_in_kubernetes_syntax(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = commands._parser()
    args = parser.parse_args(
        [
            "cluster",
            "up",
            "--feature-gates",
            "GenericWorkload=true, TopologyAwareWorkloadScheduling=False",
        ]
    )
    assert args.feature_gates == {
        "GenericWorkload": True,
        "TopologyAwareWorkloadScheduling": False,
    }
    assert parser.parse_args(["cluster", "up"]).feature_gates == {}
    with pytest.raises(SystemExit):
        parser.parse_args(["cluster", "up", "--feature-gates", "GenericWorkload=yes"])
    assert "invalid value of GenericWorkload=yes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["cluster", "up", "--feature-gates", "GenericWorkload"])
    assert "missing bool value for GenericWorkload" in capsys.readouterr().err


def test_plumb_cluster_help_explains_the_gates(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: argparse wraps at hyphens
    with pytest.raises(SystemExit):
        commands._parser().parse_args(["cluster", "--help"])
    out = capsys.readouterr().out
    assert "--feature-gates Name=true,..." in out
    assert "GenericWorkload=true also serves its API (scheduling.k8s.io/v1beta1 on v1.37)" in out
