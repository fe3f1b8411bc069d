"""plumb run's --emulated-version and --feature-gates, and the release read from the server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from plumb import cli
from plumb.app import runtime
from plumb.framework import emulation
from plumb.k8s import client as k8s_client
from plumb.scheduler import profiles


class VersionServer:
    """Answers GET /version with ``body`` (status ``status``), or raises ``error``."""

    def __init__(self, body: Any = None, status: int = 200, error: Exception | None = None):
        self.body, self.status, self.error = body, status, error

    async def request(self, method: str, path: str) -> k8s_client.ApiResponse:
        assert (method, path) == ("GET", "/version")
        if self.error is not None:
            raise self.error
        return k8s_client.ApiResponse(status=self.status, body=self.body)


def _settings(**changes: Any) -> runtime.RunSettings:
    return runtime.RunSettings(
        kubeconfig=None, context=None, served=profiles.defaults("plumb"), **changes
    )


def _emulation(server: VersionServer, **changes: Any) -> tuple[int, str]:
    kube = asyncio.run(runtime.emulation_for(server, _settings(**changes)))
    return kube.minor, kube.server


def test_plumb_decides_as_the_servers_release() -> None:
    assert _emulation(VersionServer({"gitVersion": "v1.34.4", "minor": "34"})) == (34, "v1.34.4")
    assert _emulation(VersionServer({"gitVersion": "v1.36.3"})) == (36, "v1.36.3")


def test_the_emulated_version_wins_over_the_servers() -> None:
    server = VersionServer({"gitVersion": "v1.37.2"})
    assert _emulation(server, emulated_version=34) == (34, "v1.37.2")


def test_an_unreadable_version_decides_as_the_newest_release_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert _emulation(VersionServer({"message": "forbidden"}, status=403)) == (37, "")
    assert _emulation(VersionServer(error=OSError("connection refused"))) == (37, "")
    assert "--emulated-version picks the release" in caplog.text


def test_a_gate_the_servers_release_lacks_stops_the_start() -> None:
    server = VersionServer({"gitVersion": "v1.34.4"})
    with pytest.raises(runtime.StartError, match=r"kube-scheduler v1\.34 has no such gate"):
        _emulation(server, feature_gates={"NodeDeclaredFeatures": True})


def test_the_profiles_are_built_for_the_release_in_force() -> None:
    kube = asyncio.run(runtime.emulation_for(VersionServer({"gitVersion": "v1.35.4"}), _settings()))
    served = runtime.served_for(_settings(), kube)
    assert [p.kube.minor for p in served.profiles] == [35]
    assert served.profiles[0].name == "plumb"


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--emulated-version", "1.33"], "1.33 is not one plumb decides as; it follows 1.34"),
        (["--emulated-version", "one.two"], "is not a version of the form 1.N"),
        (["--feature-gates", "Made=true"], "unrecognized feature gate: Made"),
        (["--feature-gates", "NodeDeclaredFeatures=false"], "feature is locked to true"),
        (
            ["--emulated-version", "1.34", "--feature-gates", "VolumeLimitScaling=true"],
            "kube-scheduler v1.34 has no such gate",
        ),
    ],
)
def test_bad_emulation_flags_are_refused_before_plumb_connects(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["run", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --")
    assert says in err


def test_a_file_of_a_later_release_stops_the_start_naming_both_releases_once(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.yaml"
    text = (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles: [{schedulerName: a, pluginConfig: [{name: DynamicResources, "
        "args: {bindingTimeout: 5m}}]}]\n"
    )
    config.write_text(text)
    settings = _settings(config=config, config_bytes=text.encode())
    kube = asyncio.run(runtime.emulation_for(VersionServer({"gitVersion": "v1.34.4"}), settings))
    with pytest.raises(runtime.StartError) as raised:
        runtime.served_for(settings, kube)
    assert str(raised.value) == (
        f"{config}: profiles[0].pluginConfig[0].args.bindingTimeout: "
        "DynamicResourcesArgs.bindingTimeout is new in kube-scheduler v1.35: plumb decides as "
        "kube-scheduler v1.34, which refuses it"
    )
    # v1.35 has the field; its default gates forbid it, in kube-scheduler's words.
    with pytest.raises(runtime.StartError, match="DRADeviceBindingConditions or DRAResource"):
        runtime.served_for(settings, emulation.emulate(35))
    assert runtime.served_for(settings, emulation.emulate(36)).profiles[0].name == "a"
