"""KubeSchedulerConfiguration per release, held against the real kube-scheduler of the session's
release (PLUMB_KUBE_VERSION picks it; ``kube_minor``). Each file is given to kube-scheduler
(``--config``, ``--write-config-to``: it writes the profiles it completed and exits, or refuses)
and to plumb deciding as the same release:

- a file both accept completes the same way: the plugins of every extension point after
  defaulting (the default plugins, their order and weights of that release and its gates) and
  each built plugin's args after defaulting (DynamicResources' bindingTimeout, Go's durations);
- what a release added is refused before it by both, plumb saying which release added it and
  which one it decides as; a check a release changed refuses in that release's words;
- ``plumb run`` pinned to an older release refuses at start a file of a later one.

The table they come from is operator/plumb/framework/schedconfig/revisions.py."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from plumb.framework import emulation, schedconfig
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from tests.support.plumb_process import launch_plumb

pytestmark = pytest.mark.integration

_TIMEOUT_SECONDS = 30.0
HEADER = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "{kubeconfig}"}
leaderElection: {leaderElect: false}
"""


@dataclasses.dataclass(frozen=True)
class Refused:
    """kube-scheduler exits non-zero saying each of ``kube_says``; plumb raises ConfigError
    for ``field`` whose text holds ``plumb_says``."""

    kube_says: tuple[str, ...]
    field: str
    plumb_says: str


@dataclasses.dataclass(frozen=True)
class GateRefused:
    """kube-scheduler refuses the --feature-gates flag, and plumb the same gates, saying
    ``says``."""

    says: str


ACCEPTED = None
Outcome = Refused | GateRefused | None


@dataclasses.dataclass(frozen=True)
class ReleaseCase:
    """A file (after HEADER) and, from each release given on, what becomes of it; ``gates``
    go to kube-scheduler's --feature-gates and to plumb's emulation alike."""

    id: str
    body: str
    outcomes: tuple[tuple[int, Outcome], ...]
    gates: Mapping[str, bool] = dataclasses.field(default_factory=dict)

    def outcome(self, minor: int) -> Outcome:
        found: Outcome = ACCEPTED
        for since, outcome in self.outcomes:
            if minor >= since:
                found = outcome
        return found


def _later(field: str, what: str, since: int) -> tuple[int, Outcome]:
    """From v1.34: refused by kube-scheduler as an unknown field (named in full at the top, by
    its name inside args), by plumb as new in v1.``since``."""
    named = field.rsplit(".", 1)[-1] if ".args." in field else field
    return 34, Refused(
        (f'unknown field \\"{named}\\"',), field, f"{what} is new in kube-scheduler v1.{since}"
    )


def _missing(field: str, interface: str, plugin: str, since: int) -> tuple[int, Outcome]:
    """From v1.34: a plugin v1.``since`` brought, which kube-scheduler says does not exist."""
    return 34, Refused(
        (f'{interface} \\"{plugin}\\" does not exist',),
        field,
        f'the plugin "{plugin}" is new in kube-scheduler v1.{since}',
    )


def _at(field: str, plugin: str, point: str, interface: str, since: int) -> tuple[int, Outcome]:
    """From v1.34: a plugin that runs at ``point`` from v1.``since``."""
    return 34, Refused(
        (f'plugin \\"{plugin}\\" does not extend {interface} plugin',),
        field,
        f'the plugin "{plugin}" at {point} is new in kube-scheduler v1.{since}',
    )


_P = "profiles[0].plugins"
_A = "profiles[0].pluginConfig[0].args"
_FORBIDDEN = (
    "Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled"
)

CASES = (
    ReleaseCase("no-profiles", "", ()),
    ReleaseCase(
        "two-profiles-and-durations",
        "profiles:\n"
        "- schedulerName: a\n"
        "  pluginConfig:\n"
        "  - {name: DynamicResources, args: {filterTimeout: 1500ms}}\n"
        "- schedulerName: b\n"
        "  plugins:\n"
        "    multiPoint: {disabled: [{name: PodTopologySpread}]}\n"
        "    score: {enabled: [{name: NodeResourcesFit, weight: 5}], disabled: [{name: '*'}]}\n"
        "  pluginConfig:\n"
        "  - name: NodeResourcesFit\n"
        "    args: {scoringStrategy: {type: MostAllocated}}\n",
        (),
    ),
    ReleaseCase(
        "placement-score-point",
        "profiles: [{schedulerName: a, plugins: {placementScore: {enabled: "
        "[{name: PodGroupPodsCount, weight: 2}]}}}]\n",
        (_later(f"{_P}.placementScore", "the extension point placementScore", 36), (36, ACCEPTED)),
    ),
    ReleaseCase(
        "placement-score-negative-weight",
        "profiles: [{schedulerName: a, plugins: {placementScore: {enabled: "
        "[{name: PodGroupPodsCount, weight: -1}]}}}]\n",
        (
            _later(f"{_P}.placementScore", "the extension point placementScore", 36),
            (
                36,
                Refused(
                    ("placement score plugins: total score of Score plugins could overflow",),
                    f"{_P}.placementScore.enabled[0].weight",
                    "placement score plugins: total score",
                ),
            ),
        ),
    ),
    ReleaseCase(
        "pod-group-post-filter-point",
        "profiles: [{schedulerName: a, plugins: {podGroupPostFilter: {disabled: "
        "[{name: DynamicResources}]}}}]\n",
        (
            _later(f"{_P}.podGroupPostFilter", "the extension point podGroupPostFilter", 37),
            (37, ACCEPTED),
        ),
    ),
    ReleaseCase(
        "pod-group-post-filter-without-args",
        "profiles: [{schedulerName: a, plugins: {multiPoint: {disabled: "
        "[{name: DefaultPreemption}]}, podGroupPostFilter: {enabled: "
        "[{name: DefaultPreemption}]}}}]\n",
        (
            _later(f"{_P}.podGroupPostFilter", "the extension point podGroupPostFilter", 37),
            (
                37,
                Refused(
                    (
                        'initializing plugin \\"DefaultPreemption\\": got args of type <nil>, '
                        "want *DefaultPreemptionArgs",
                    ),
                    f"{_P}.podGroupPostFilter.enabled[0]",
                    "got args of type <nil>, want *DefaultPreemptionArgs",
                ),
            ),
        ),
    ),
    ReleaseCase(
        "removed-plugin-at-pod-group-post-filter",
        "profiles: [{schedulerName: a, plugins: {podGroupPostFilter: {enabled: "
        "[{name: EBSLimits}]}}}]\n",
        (
            _later(f"{_P}.podGroupPostFilter", "the extension point podGroupPostFilter", 37),
            (
                37,
                Refused(
                    (
                        f'{_P}.podGroupPostFilter.enabled[0]: Invalid value: \\"EBSLimits\\": '
                        "was invalid",
                    ),
                    f"{_P}.podGroupPostFilter.enabled[0]",
                    "was invalid",
                ),
            ),
        ),
    ),
    ReleaseCase(
        "node-declared-features-plugin",
        "profiles: [{schedulerName: a, plugins: {filter: {enabled: "
        "[{name: NodeDeclaredFeatures}]}}}]\n",
        (
            _missing(f"{_P}.filter.enabled[0]", "FilterPlugin", "NodeDeclaredFeatures", 35),
            (35, ACCEPTED),
        ),
    ),
    ReleaseCase(
        # On: alpha in v1.35, where it puts the plugin in the defaults; on and locked later.
        # (Off from v1.36 kube-scheduler refuses: gates on by default depend on it.)
        "node-declared-features-gate",
        "profiles: [{schedulerName: a}]\n",
        ((34, GateRefused("unrecognized feature gate: NodeDeclaredFeatures")), (35, ACCEPTED)),
        gates={"NodeDeclaredFeatures": True},
    ),
    ReleaseCase(
        "gang-scheduling-plugin",
        "profiles: [{schedulerName: a, plugins: {permit: {enabled: [{name: GangScheduling}]}}}]\n",
        (_missing(f"{_P}.permit.enabled[0]", "PermitPlugin", "GangScheduling", 35), (35, ACCEPTED)),
    ),
    ReleaseCase(
        "gang-scheduling-at-reserve",
        "profiles: [{schedulerName: a, plugins: {reserve: {enabled: [{name: GangScheduling}]}}}]\n",
        (
            _missing(f"{_P}.reserve.enabled[0]", "ReservePlugin", "GangScheduling", 35),
            (35, ACCEPTED),
            (
                36,
                Refused(
                    ('plugin \\"GangScheduling\\" does not extend ReservePlugin plugin',),
                    f"{_P}.reserve.enabled[0]",
                    'plugin "GangScheduling" does not extend ReservePlugin plugin',
                ),
            ),
        ),
    ),
    ReleaseCase(
        "deferred-pod-scheduling-plugin",
        "profiles: [{schedulerName: a, plugins: {permit: {enabled: "
        "[{name: DeferredPodScheduling}]}}}]\n",
        (
            _missing(f"{_P}.permit.enabled[0]", "PermitPlugin", "DeferredPodScheduling", 37),
            (37, ACCEPTED),
        ),
    ),
    ReleaseCase(
        "dynamic-resources-score",
        "profiles: [{schedulerName: a, plugins: {score: {enabled: "
        "[{name: DynamicResources, weight: 3}]}}}]\n",
        (
            _at(f"{_P}.score.enabled[0]", "DynamicResources", "score", "ScorePlugin", 35),
            (35, ACCEPTED),
        ),
    ),
    ReleaseCase(
        "node-name-pre-filter",
        "profiles: [{schedulerName: a, plugins: {preFilter: {enabled: [{name: NodeName}]}}}]\n",
        (
            _at(f"{_P}.preFilter.enabled[0]", "NodeName", "preFilter", "PreFilterPlugin", 37),
            (37, ACCEPTED),
        ),
    ),
    ReleaseCase(
        "binding-timeout",
        "profiles: [{schedulerName: a, pluginConfig: [{name: DynamicResources, "
        "args: {bindingTimeout: 120s}}]}]\n",
        (
            _later(f"{_A}.bindingTimeout", "DynamicResourcesArgs.bindingTimeout", 35),
            (35, Refused((f"{_A}.bindingTimeout: {_FORBIDDEN}",), f"{_A}.bindingTimeout", "")),
            (36, ACCEPTED),
        ),
    ),
    ReleaseCase(
        "binding-timeout-with-its-gate",
        "profiles: [{schedulerName: a, pluginConfig: [{name: DynamicResources, "
        "args: {filterTimeout: 1m}}]}]\n",
        (),
        gates={"DRADeviceBindingConditions": True},
    ),
    ReleaseCase(
        "binding-timeout-without-its-gate",
        "profiles: [{schedulerName: a, pluginConfig: [{name: DynamicResources, "
        "args: {bindingTimeout: 1h}}]}]\n",
        (
            _later(f"{_A}.bindingTimeout", "DynamicResourcesArgs.bindingTimeout", 35),
            (35, Refused((f"{_A}.bindingTimeout: {_FORBIDDEN}",), f"{_A}.bindingTimeout", "")),
        ),
        gates={"DRADeviceBindingConditions": False},
    ),
    ReleaseCase(
        "binding-timeout-below-a-second",
        "profiles: [{schedulerName: a, pluginConfig: [{name: DynamicResources, "
        "args: {bindingTimeout: 0.5s}}]}]\n",
        (
            _later(f"{_A}.bindingTimeout", "DynamicResourcesArgs.bindingTimeout", 35),
            (35, Refused((f"{_A}.bindingTimeout: {_FORBIDDEN}",), f"{_A}.bindingTimeout", "")),
            (
                36,
                Refused(
                    (
                        f'{_A}.bindingTimeout: Invalid value: \\"500ms\\": must be at least 1 '
                        "second",
                    ),
                    f"{_A}.bindingTimeout",
                    'Invalid value: "500ms": must be at least 1 second',
                ),
            ),
        ),
    ),
    ReleaseCase(
        "ratio-with-another-type",
        "profiles: [{schedulerName: a, pluginConfig: [{name: NodeResourcesFit, args: "
        "{scoringStrategy: {type: MostAllocated, requestedToCapacityRatio: "
        "{shape: [{utilization: 0, score: 0}]}}}}]}]\n",
        (
            (34, ACCEPTED),
            (
                36,
                Refused(
                    (
                        "scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when "
                        "type is not RequestedToCapacityRatio",
                    ),
                    f"{_A}.scoringStrategy.requestedToCapacityRatio",
                    "must be nil when type is not RequestedToCapacityRatio",
                ),
            ),
        ),
    ),
    ReleaseCase(
        "negative-score-weight",
        "profiles: [{schedulerName: a, plugins: {score: {enabled: "
        "[{name: TaintToleration, weight: -1}]}}}]\n",
        (
            (
                34,
                Refused(
                    (
                        "creating profile for scheduler name a: total score of Score plugins "
                        "could overflow",
                    ),
                    f"{_P}.score.enabled[0].weight",
                    "a: total score of Score plugins could overflow",
                ),
            ),
            (
                36,
                Refused(
                    (
                        "creating profile for scheduler name a: score plugins: total score of "
                        "Score plugins could overflow",
                    ),
                    f"{_P}.score.enabled[0].weight",
                    "a: score plugins: total score of Score plugins could overflow",
                ),
            ),
        ),
    ),
)


def _kube_scheduler(
    plane: controlplane.ControlPlane, text: str, gates: Mapping[str, bool], tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], Path]:
    binary = plane.bin_dir / "kube-scheduler"
    assert os.access(binary, os.X_OK), f"{binary} is missing; build the control plane first"
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    written = tmp_path / "written.yaml"
    command = [str(binary), f"--config={config}", "--secure-port=0", f"--write-config-to={written}"]
    if gates:
        flags = ",".join(f"{name}={str(on).lower()}" for name, on in gates.items())
        command.append(f"--feature-gates={flags}")
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=_TIMEOUT_SECONDS, check=False
    )
    return result, written


def _plugins(profile: Mapping[str, Any]) -> dict[str, Any]:
    """A completed profile's plugin sets, and its args without apiVersion and kind."""
    sets = {
        point: (
            [(p["name"], p.get("weight") or 0) for p in (plugin_set or {}).get("enabled") or ()],
            [p["name"] for p in (plugin_set or {}).get("disabled") or ()],
        )
        for point, plugin_set in profile["plugins"].items()
    }
    args = {}
    for entry in profile.get("pluginConfig") or ():
        fields = {k: v for k, v in (entry["args"] or {}).items() if k not in ("apiVersion", "kind")}
        if entry["name"] == "VolumeBinding":
            # Its score's shape follows StorageCapacityScoring: the volumes section's
            # (docs/versions.md), held against kube-scheduler by its own tests.
            fields.pop("shape", None)
        args[entry["name"]] = fields
    return {"schedulerName": profile["schedulerName"], "plugins": sets, "args": args}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_kube_scheduler_and_plumb_read_the_file_alike(
    case: ReleaseCase,
    control_plane: controlplane.ControlPlane,
    kube_minor: int,
    tmp_path: Path,
) -> None:
    text = HEADER.replace("{kubeconfig}", str(control_plane.kubeconfig)) + case.body
    result, written = _kube_scheduler(control_plane, text, case.gates, tmp_path)
    output = result.stdout + result.stderr
    outcome = case.outcome(kube_minor)
    if isinstance(outcome, GateRefused):
        assert result.returncode != 0, f"kube-scheduler accepted {case.id}:\n{output[-3000:]}"
        assert outcome.says in output, output[-3000:]
        with pytest.raises(emulation.EmulationError, match=re.escape(outcome.says)):
            emulation.emulate(kube_minor, case.gates)
        return
    kube = emulation.emulate(kube_minor, case.gates)
    if outcome is ACCEPTED:
        assert result.returncode == 0, f"kube-scheduler refused {case.id}:\n{output[-3000:]}"
        parsed = schedconfig.parse(text, kube=kube)
        theirs = yaml.safe_load(written.read_text(encoding="utf-8"))["profiles"]
        assert [_plugins(p) for p in parsed.completed] == [_plugins(p) for p in theirs]
        return
    assert result.returncode != 0, f"kube-scheduler accepted {case.id}:\n{output[-3000:]}"
    for words in outcome.kube_says:
        assert words in output, f"kube-scheduler did not say {words!r}:\n{output[-3000:]}"
    with pytest.raises(schedconfig.ConfigError) as raised:
        schedconfig.parse(text, kube=kube)
    assert raised.value.field == outcome.field, str(raised.value)
    assert outcome.plumb_says in str(raised.value)
    if "is new in kube-scheduler" in outcome.plumb_says:
        assert str(raised.value).endswith(
            f"plumb decides as kube-scheduler v1.{kube_minor}, which refuses it"
        )


def test_plumb_run_refuses_at_start_a_file_of_a_later_release_than_it_decides_as(
    control_plane: controlplane.ControlPlane, kube_minor: int, tmp_path: Path
) -> None:
    """On a cluster older than v1.37 plumb follows the server's release and refuses a v1.37
    file once it has read /version (exit 1); on v1.37, --emulated-version 1.36 pins the older
    release, and the flags are refused before plumb connects (exit 2). Either way the message
    names both releases, once."""
    config = tmp_path / "config.yaml"
    config.write_text(
        HEADER.replace("{kubeconfig}", str(control_plane.kubeconfig))
        + "profiles: [{schedulerName: a, plugins: {podGroupPostFilter: {disabled: "
        "[{name: DynamicResources}]}}}]\n",
        encoding="utf-8",
    )
    pinned = kube_minor == emulation.NEWEST
    minor = emulation.NEWEST - 1 if pinned else kube_minor
    log = tmp_path / "plumb.log"
    extra = ("--emulated-version", f"1.{minor}") if pinned else ()
    process = launch_plumb(control_plane.kubeconfig, log, "--config", str(config), *extra)
    try:
        code = process.wait(timeout=120)  # the kernel loads before plumb connects
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = log.read_text(errors="replace")
    assert code == (2 if pinned else 1), output[-3000:]
    says = (
        f"error: {config}: profiles[0].plugins.podGroupPostFilter: the extension point "
        f"podGroupPostFilter is new in kube-scheduler v1.37: plumb decides as kube-scheduler "
        f"v1.{minor}, which refuses it\n"
    )
    assert says in output  # the line ends there: the release is not named again after it
    # Once in the refusal, and once where plumb logs which release it decides as (on start).
    assert output.count(f"kube-scheduler v1.{minor}") == (1 if pinned else 2)
    if not pinned:
        assert f"deciding as kube-scheduler v1.{minor} (the API server is v1.{minor}." in output
    assert "Traceback" not in output
