"""The resourceclaim controller the dra workload runs beside the schedulers: that controller
alone, with the schedulers' client limits, and when it is ready."""

from __future__ import annotations

from pathlib import Path

from plumb_dev.bench import claimcontroller
from plumb_dev.cluster.controlplane import lifecycle as controlplane

LOG = """\
E1204 21:25:58.806572   22126 options.go:205] The manifest file is empty, ignoring.
I1204 21:25:58.816401   22126 controllermanager.go:764] "Controller starting..."
I1204 21:25:58.820696   22126 controller.go:795] "Starting resource claim controller"
I1204 21:25:58.820713   22126 shared_informer.go:524] "Waiting for caches to sync"
"""
SYNCED = 'I1204 21:25:58.920907   22126 shared_informer.go:531] "Caches are synced"\n'


def _plane(tmp_path: Path) -> controlplane.ControlPlane:
    return controlplane.ControlPlane(
        directory=tmp_path,
        bin_dir=tmp_path / "bin",
        kube_version="v1.37.2",
        kubeconfig=tmp_path / "kubeconfig",
        server="https://127.0.0.1:6443",
        token="t",
        ca_file=tmp_path / "ca.crt",
        etcd_pid=1,
        apiserver_pid=2,
    )


def test_only_the_resourceclaim_controller_runs_with_the_schedulers_limits(tmp_path: Path) -> None:
    command = claimcontroller.command(_plane(tmp_path))
    assert command[0] == str(tmp_path / "bin" / "kube-controller-manager")
    assert f"--kubeconfig={tmp_path / 'kubeconfig'}" in command
    assert "--controllers=resourceclaim-controller" in command
    assert [flag for flag in command if flag.startswith("--controllers")] == [
        "--controllers=resourceclaim-controller"
    ]
    assert {"--kube-api-qps=5000", "--kube-api-burst=5000", "--leader-elect=false"} <= set(command)


def test_it_is_ready_once_its_caches_synced_after_it_started() -> None:
    assert not claimcontroller.synced(LOG)
    assert claimcontroller.synced(LOG + SYNCED)
    # A sync logged before the controller started is another informer's.
    assert not claimcontroller.synced(SYNCED + LOG)
