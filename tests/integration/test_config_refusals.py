"""Invalid KubeSchedulerConfiguration files, each refused by the real kube-scheduler of the
session's release (non-zero exit, a message naming the field) and by plumb's schedconfig.parse
deciding as that release (ConfigError naming the same field), and a valid file both accept;
YAML go-yaml refuses is refused in its words, and ``plumb run`` refuses such a file at start.
What a release added or changed is in test_config_releases.py."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from pathlib import Path

import pytest

from plumb.framework import emulation, schedconfig
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from tests.support import schedconfig_files
from tests.support.plumb_process import launch_plumb

pytestmark = pytest.mark.integration

# kube-scheduler refuses a bad file before it connects; an accepted one would run until
# stopped. Refusals take well under a second.
_REFUSAL_TIMEOUT_SECONDS = 20.0
_START_TIMEOUT_SECONDS = 30.0
_STARTED = "Starting Kubernetes Scheduler"

HEADER = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "{kubeconfig}"}
leaderElection: {leaderElect: false}
"""


@dataclasses.dataclass(frozen=True)
class RefusalCase:
    """A file (``{header}`` stands for apiVersion, kind, the kubeconfig and no leader
    election), what kube-scheduler's message must contain, and plumb's ConfigError.field;
    ``changed``: from the release given on, what kube-scheduler says and the field instead."""

    id: str
    text: str
    kube_says: tuple[str, ...]
    field: str
    changed: tuple[tuple[int, tuple[str, ...], str], ...] = ()

    def expected(self, minor: int) -> tuple[tuple[str, ...], str]:
        """What kube-scheduler v1.``minor`` says, and the field plumb names."""
        says, field = self.kube_says, self.field
        for since, later_says, later_field in self.changed:
            if minor >= since:
                says, field = later_says, later_field
        return says, field


# v1.36 validates NodeResourcesFit's ratio by its type, and names its shape in full
# (schedconfig/revisions.py, FIT_RATIO_BY_TYPE).
_RATIO = "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio"


CASES = (
    # YAML go-yaml itself refuses (issue 24): no field, go-yaml's words.
    RefusalCase(
        "yaml-int-abc",
        "{header}podMaxBackoffSeconds: !!int abc\n",
        ("yaml: cannot decode !!str `abc` as a !!int",),
        "",
    ),
    RefusalCase(
        "yaml-timestamp-month-13",
        "{header}podMaxBackoffSeconds: !!timestamp 2020-13-45\n",
        ("yaml: cannot decode !!str `2020-13-45` as a !!timestamp",),
        "",
    ),
    RefusalCase(
        "yaml-billion-laughs",
        "{header}" + schedconfig_files.laughs().removeprefix(schedconfig_files.HEADER),
        ("yaml: document contains excessive aliasing",),
        "",
    ),
    RefusalCase(
        "unknown-field",
        "{header}profiles: [{schedulerName: a, pluginss: {}}]\n",
        ('strict decoding error: unknown field \\"profiles[0].pluginss\\"',),
        "profiles[0].pluginss",
    ),
    RefusalCase(
        "duplicate-field-yaml",
        "{header}profiles:\n- schedulerName: a\n  schedulerName: b\n",
        ('key "schedulerName" already set in map',),
        "profiles[0].schedulerName",
    ),
    RefusalCase(
        "duplicate-field-json",
        '{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",'
        ' "clientConnection": {"kubeconfig": "{kubeconfig}"},'
        ' "profiles": [{"schedulerName": "a", "schedulerName": "b"}]}\n',
        ('duplicate field \\"profiles[0].schedulerName\\"',),
        "profiles[0].schedulerName",
    ),
    RefusalCase(
        "wrong-api-version",
        "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n"
        'clientConnection: {kubeconfig: "{kubeconfig}"}\n',
        (
            'no kind \\"KubeSchedulerConfiguration\\" is registered for version '
            '\\"kubescheduler.config.k8s.io/v1beta3\\"',
        ),
        "apiVersion",
    ),
    RefusalCase(
        "wrong-type",
        "{header}profiles: [{schedulerName: a, plugins: {score: {enabled: "
        "[{name: TaintToleration, weight: abc}]}}}]\n",
        (
            "cannot unmarshal string into Go struct field",
            "profiles.plugins.score.enabled.weight of type int32",
        ),
        "profiles[0].plugins.score.enabled[0].weight",
    ),
    RefusalCase(
        "unknown-plugin",
        "{header}profiles: [{schedulerName: a, plugins: {score: {enabled: [{name: Foo}]}}}]\n",
        ('ScorePlugin \\"Foo\\" does not exist',),
        "profiles[0].plugins.score.enabled[0]",
    ),
    RefusalCase(
        "unknown-plugin-multipoint",
        "{header}profiles: [{schedulerName: a, plugins: {multiPoint: {enabled: "
        "[{name: ImageLocality}, {name: Nope}]}}}]\n",
        ('PreFilterPlugin \\"Nope\\" does not exist',),
        "profiles[0].plugins.multiPoint.enabled[1]",
    ),
    RefusalCase(
        "plugin-at-wrong-point",
        "{header}profiles: [{schedulerName: a, plugins: {score: {enabled: "
        "[{name: PrioritySort}]}}}]\n",
        ('plugin \\"PrioritySort\\" does not extend ScorePlugin plugin',),
        "profiles[0].plugins.score.enabled[0]",
    ),
    RefusalCase(
        "removed-plugin",
        "{header}profiles: [{schedulerName: a, plugins: {filter: {enabled: "
        "[{name: EBSLimits}]}}}]\n",
        ('profiles[0].plugins.filter.enabled[0]: Invalid value: \\"EBSLimits\\": was invalid',),
        "profiles[0].plugins.filter.enabled[0]",
    ),
    RefusalCase(
        "negative-weight",
        "{header}profiles: [{schedulerName: a, plugins: {score: {enabled: "
        "[{name: TaintToleration, weight: -1}]}}}]\n",
        ("total score of Score plugins could overflow",),
        "profiles[0].plugins.score.enabled[0].weight",
    ),
    RefusalCase(
        "no-queue-sort",
        '{header}profiles: [{schedulerName: a, plugins: {queueSort: {disabled: [{name: "*"}]}}}]\n',
        ('only one queue sort plugin required for profile with scheduler name \\"a\\", but got 0',),
        "profiles[0].plugins.queueSort",
    ),
    RefusalCase(
        "duplicate-scheduler-name",
        "{header}profiles: [{schedulerName: a}, {schedulerName: a}]\n",
        ("profiles[1].schedulerName: Duplicate value",),
        "profiles[1].schedulerName",
    ),
    RefusalCase(
        "missing-scheduler-name",
        "{header}profiles: [{schedulerName: a}, {}]\n",
        ("profiles[1].schedulerName: Required value",),
        "profiles[1].schedulerName",
    ),
    RefusalCase(
        "different-queue-sort",
        "{header}profiles: [{schedulerName: a}, {schedulerName: b, plugins: {queueSort: "
        '{disabled: [{name: "*"}], enabled: [{name: PrioritySort}]}}}]\n',
        ("profiles[1].plugins.queueSort: Invalid value", "must be the same for all profiles"),
        "profiles[1].plugins.queueSort",
    ),
    RefusalCase(
        "different-queue-sort-args",
        "{header}profiles: [{schedulerName: a}, {schedulerName: b, pluginConfig: "
        "[{name: PrioritySort, args: {x: 1}}]}]\n",
        ('initializing profiles: different queue sort plugin args for profile \\"b\\"',),
        "profiles[1].pluginConfig[0].args",
    ),
    RefusalCase(
        "duplicate-plugin-config",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: InterPodAffinity, "
        "args: {hardPodAffinityWeight: 1}}, {name: InterPodAffinity}]}]\n",
        ('profiles[0].pluginConfig[1]: Duplicate value: \\"InterPodAffinity\\"',),
        "profiles[0].pluginConfig[1]",
    ),
    RefusalCase(
        "unknown-field-in-args",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: InterPodAffinity, "
        "args: {hardPodAffinityWeightt: 1}}]}]\n",
        (
            "decoding .profiles[0].pluginConfig[0]",
            "decoding args for plugin InterPodAffinity: strict decoding error: unknown field "
            '\\"hardPodAffinityWeightt\\"',
        ),
        "profiles[0].pluginConfig[0].args.hardPodAffinityWeightt",
    ),
    RefusalCase(
        "args-of-another-kind",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: InterPodAffinity, "
        "args: {kind: NodeAffinityArgs, apiVersion: kubescheduler.config.k8s.io/v1}}]}]\n",
        ("args for plugin InterPodAffinity were not of type InterPodAffinityArgs",),
        "profiles[0].pluginConfig[0].args.kind",
    ),
    RefusalCase(
        "bad-scoring-strategy-type",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: NodeResourcesFit, "
        "args: {scoringStrategy: {type: Bogus}}}]}]\n",
        (
            'initializing plugin \\"NodeResourcesFit\\": scoringStrategy.type: '
            'Unsupported value: \\"Bogus\\"',
        ),
        "profiles[0].pluginConfig[0].args.scoringStrategy.type",
    ),
    RefusalCase(
        "rtcr-shape-not-increasing",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: NodeResourcesFit, args: "
        "{scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: "
        "{shape: [{utilization: 50, score: 0}, {utilization: 50, score: 10}]}}}}]}]\n",
        (
            "scoringStrategy.shape[1].utilization: Invalid value: 50: values must be sorted in "
            "increasing order",
        ),
        "profiles[0].pluginConfig[0].args.scoringStrategy.shape[1].utilization",
        (
            (
                36,
                (
                    "scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid "
                    "value: 50: values must be sorted in increasing order",
                ),
                f"{_RATIO}.shape[1].utilization",
            ),
        ),
    ),
    RefusalCase(
        "rtcr-shape-out-of-range",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: NodeResourcesFit, args: "
        "{scoringStrategy: {type: RequestedToCapacityRatio, requestedToCapacityRatio: "
        "{shape: [{utilization: 0, score: 0}, {utilization: 100, score: 11}]}}}}]}]\n",
        ("scoringStrategy.shape[1].score: Invalid value: 11: not in valid range [0, 10]",),
        "profiles[0].pluginConfig[0].args.scoringStrategy.shape[1].score",
        (
            (
                36,
                (
                    "scoringStrategy.requestedToCapacityRatio.shape[1].score: Invalid value: 11: "
                    "not in valid range [0, 10]",
                ),
                f"{_RATIO}.shape[1].score",
            ),
        ),
    ),
    RefusalCase(
        "rtcr-without-shape",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: NodeResourcesFit, args: "
        "{scoringStrategy: {type: RequestedToCapacityRatio}}}]}]\n",
        ("nil pointer dereference", "noderesources"),
        _RATIO,
        (
            (
                36,
                (
                    "scoringStrategy.requestedToCapacityRatio: Required value: must be specified "
                    "when type is RequestedToCapacityRatio",
                ),
                _RATIO,
            ),
        ),
    ),
    RefusalCase(
        "resource-weight-out-of-range",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: NodeResourcesFit, args: "
        "{scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 101}]}}}]}]\n",
        (
            "scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not "
            "in valid range (0, 100]",
        ),
        "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight",
    ),
    RefusalCase(
        "balanced-weight-not-1",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: "
        "NodeResourcesBalancedAllocation, args: {resources: [{name: cpu, weight: 2}]}}]}]\n",
        ("profiles[0].pluginConfig[0].args.resources[0].weight: Invalid value: 2: must be 1",),
        "profiles[0].pluginConfig[0].args.resources[0].weight",
    ),
    RefusalCase(
        "hard-pod-affinity-weight-101",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: InterPodAffinity, "
        "args: {hardPodAffinityWeight: 101}}]}]\n",
        (
            "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: 101: not in "
            "valid range [0, 100]",
        ),
        "profiles[0].pluginConfig[0].args.hardPodAffinityWeight",
    ),
    RefusalCase(
        "defaulting-type-bogus",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: PodTopologySpread, "
        "args: {defaultingType: Bogus}}]}]\n",
        ('profiles[0].pluginConfig[0].args.defaultingType: Unsupported value: \\"Bogus\\"',),
        "profiles[0].pluginConfig[0].args.defaultingType",
    ),
    RefusalCase(
        "system-with-default-constraints",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: PodTopologySpread, args: "
        "{defaultingType: System, defaultConstraints: [{maxSkew: 1, topologyKey: zone, "
        "whenUnsatisfiable: ScheduleAnyway}]}}]}]\n",
        (
            "profiles[0].pluginConfig[0].args.defaultingType: Invalid value: "
            '\\"System\\": when .defaultConstraints are not empty',
        ),
        "profiles[0].pluginConfig[0].args.defaultingType",
    ),
    RefusalCase(
        "default-constraint-when-unsatisfiable",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: PodTopologySpread, args: "
        "{defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: zone, "
        "whenUnsatisfiable: Sometimes}]}}]}]\n",
        (
            "profiles[0].pluginConfig[0].args.defaultConstraints[0].whenUnsatisfiable: "
            'Unsupported value: \\"Sometimes\\"',
        ),
        "profiles[0].pluginConfig[0].args.defaultConstraints[0].whenUnsatisfiable",
    ),
    RefusalCase(
        # null in a list of structs is Go's zero value (a crash in plumb before issue 24).
        "default-constraint-null",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: PodTopologySpread, args: "
        "{defaultingType: List, defaultConstraints: [null]}}]}]\n",
        (
            "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew: Invalid value: 0: "
            "not in valid range (0, inf)",
        ),
        "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew",
    ),
    RefusalCase(
        "default-constraint-max-skew",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: PodTopologySpread, args: "
        "{defaultingType: List, defaultConstraints: [{maxSkew: 0, topologyKey: zone, "
        "whenUnsatisfiable: DoNotSchedule}]}}]}]\n",
        (
            "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew: Invalid value: 0: "
            "not in valid range (0, inf)",
        ),
        "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew",
    ),
    RefusalCase(
        "added-affinity-operator",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: NodeAffinity, args: "
        "{addedAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
        "[{matchExpressions: [{key: zone, operator: Near, values: [a]}]}]}}}}]}]\n",
        (
            "profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuring"
            "Execution.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "
            '\\"Near\\"',
        ),
        "profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuring"
        "Execution.nodeSelectorTerms[0].matchExpressions[0].operator",
    ),
    RefusalCase(
        "preemption-both-zero",
        "{header}profiles: [{schedulerName: a, pluginConfig: [{name: DefaultPreemption, args: "
        "{minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 0}}]}]\n",
        (
            "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 0: "
            "cannot be zero at the same time as minCandidateNodesAbsolute",
        ),
        "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage",
    ),
    RefusalCase(
        "percentage-of-nodes-101",
        "{header}percentageOfNodesToScore: 101\n",
        ("percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]",),
        "percentageOfNodesToScore",
    ),
    RefusalCase(
        "initial-backoff-zero",
        "{header}podInitialBackoffSeconds: 0\n",
        ("podInitialBackoffSeconds: Invalid value: 0: must be greater than 0",),
        "podInitialBackoffSeconds",
    ),
    RefusalCase(
        "max-backoff-below-initial",
        "{header}podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n",
        (
            "podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to "
            "PodInitialBackoffSeconds",
        ),
        "podMaxBackoffSeconds",
    ),
)

VALID = """\
{header}podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
profiles:
- schedulerName: spread-out
  plugins:
    score:
      enabled:
      - {name: TaintToleration, weight: 0}
- schedulerName: bin-packing
  plugins:
    multiPoint:
      disabled: [{name: InterPodAffinity}, {name: PodTopologySpread}]
    score:
      enabled: [{name: NodeResourcesFit, weight: 5}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
  - name: PodTopologySpread
    args: {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: zone,
      whenUnsatisfiable: ScheduleAnyway}]}
"""


def render(text: str, kubeconfig: Path) -> str:
    header = HEADER.replace("{kubeconfig}", str(kubeconfig))
    return text.replace("{header}", header).replace("{kubeconfig}", str(kubeconfig))


def _binary(plane: controlplane.ControlPlane) -> Path:
    binary = plane.bin_dir / "kube-scheduler"
    assert os.access(binary, os.X_OK), f"{binary} is missing; build the control plane first"
    return binary


@pytest.mark.differential
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_kube_scheduler_and_plumb_refuse(
    case: RefusalCase, control_plane: controlplane.ControlPlane, kube_minor: int, tmp_path: Path
) -> None:
    kube_says, field = case.expected(kube_minor)
    text = render(case.text, control_plane.kubeconfig)
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [str(_binary(control_plane)), f"--config={config}", "--secure-port=0"],
        capture_output=True,
        text=True,
        timeout=_REFUSAL_TIMEOUT_SECONDS,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, f"kube-scheduler accepted {case.id}:\n{output[-2000:]}"
    for words in kube_says:
        assert words in output, f"kube-scheduler did not say {words!r}:\n{output[-3000:]}"

    with pytest.raises(schedconfig.ConfigError) as raised:
        schedconfig.parse(text, kube=emulation.emulate(kube_minor))
    assert raised.value.field == field, str(raised.value)
    assert field in str(raised.value)


@pytest.mark.differential
def test_kube_scheduler_and_plumb_accept_the_valid_file(
    control_plane: controlplane.ControlPlane, kube_minor: int, tmp_path: Path
) -> None:
    text = render(VALID, control_plane.kubeconfig)
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    log = tmp_path / "kube-scheduler.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(_binary(control_plane)), f"--config={config}", "--secure-port=0", "--v=2"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + _START_TIMEOUT_SECONDS
        while _STARTED not in log.read_text(errors="replace"):
            assert process.poll() is None, f"kube-scheduler refused:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "kube-scheduler did not start in time"
            time.sleep(0.1)
        assert process.poll() is None
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    parsed = schedconfig.parse(text, kube=emulation.emulate(kube_minor))
    assert [p.name for p in parsed.profiles] == ["spread-out", "bin-packing"]
    assert (parsed.initial_backoff, parsed.max_backoff) == (2.0, 20.0)
    # Weight 0 is 1 in kube-scheduler, not "off".
    assert parsed.profiles[0].weights[schedconfig.SCORE_ORDER.index("TaintToleration")] == 1
    assert parsed.profiles[1].strategy == "MostAllocated"


def test_plumb_run_refuses_a_file_beyond_the_readers_bounds_at_start(
    control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    text, says = schedconfig_files.BAD_FILES["billion-laughs"]
    config = tmp_path / "laughs.yaml"
    config.write_text(text, encoding="utf-8")
    log = tmp_path / "plumb.log"
    process = launch_plumb(control_plane.kubeconfig, log, "--config", str(config))
    try:
        # Refused before it connects; the kernel, loaded first, takes a few seconds.
        code = process.wait(timeout=_START_TIMEOUT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = log.read_text(errors="replace")
    assert code == 2, output[-3000:]
    assert f"error: {config}: {says}" in output
    assert "Traceback" not in output
