"""schedconfig per release (schedconfig/revisions.py): each release's extension points, plugins,
default plugins and args fields, the refusal of what a later release has, naming both releases,
and the checks that changed. The same files are held against each release's kube-scheduler in
tests/integration/test_config_releases.py."""

from __future__ import annotations

import dataclasses

import pytest

from plumb.framework import emulation, schedconfig, scoring
from plumb.framework.schedconfig import plugins, revisions
from plumb.scheduler import profiles
from tests.support.schedconfig_files import HEADER

V134_DEFAULTS = [
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 0),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
]


def _parse(body: str, minor: int, **gates: bool) -> schedconfig.Configuration:
    return schedconfig.parse(HEADER + body, kube=emulation.emulate(minor, gates))


def _refusal(body: str, minor: int, **gates: bool) -> schedconfig.ConfigError:
    with pytest.raises(schedconfig.ConfigError) as raised:
        _parse(body, minor, **gates)
    return raised.value


def _defaults(kube: emulation.Emulation) -> list[tuple[str, int]]:
    return [(p.name, p.weight) for p in plugins.default_multi_point(kube).enabled]


# The table ------------------------------------------------------------------------------------


def test_every_row_is_of_a_release_plumb_follows_and_names_gates_plumb_knows() -> None:
    kinds = {
        revisions.POINT,
        revisions.PLUGIN,
        revisions.RUNS_AT,
        revisions.DEFAULT,
        revisions.ORDER,
        revisions.ARGS_FIELD,
        revisions.BEHAVIOUR,
    }
    for row in revisions.REVISIONS:
        assert emulation.OLDEST < row.minor <= emulation.NEWEST, row
        assert row.kind in kinds, row
        assert row.source, row
        assert row.note, row
        for gate in (row.gate, row.also_gate):
            # Either honoured (with each release's default), or off in every release.
            assert not gate or gate in emulation.GATES or gate in revisions.UNHONOURED_GATES
    assert [row.minor for row in revisions.REVISIONS] == sorted(
        row.minor for row in revisions.REVISIONS
    )


def test_each_release_has_the_extension_points_its_types_have() -> None:
    base = plugins.point_names(34)
    assert len(base) == 12
    assert plugins.point_names(35) == base
    assert plugins.point_names(36) == (*base, "placementGenerate", "placementScore")
    assert plugins.point_names(37) == (
        *base,
        "placementGenerate",
        "placementScore",
        "podGroupPostFilter",
    )
    assert plugins.validated_points(36) == base
    assert plugins.validated_points(37) == (*base, "podGroupPostFilter")


def test_each_release_has_the_plugins_its_registry_has_where_they_run() -> None:
    v134 = plugins.registry(34)
    assert len(v134) == 19
    assert plugins.registry(35).keys() - v134.keys() == {"NodeDeclaredFeatures", "GangScheduling"}
    assert plugins.registry(36).keys() - plugins.registry(35).keys() == {
        "TopologyPlacementGenerator",
        "PodGroupPodsCount",
    }
    assert plugins.registry(37).keys() - plugins.registry(36).keys() == {"DeferredPodScheduling"}
    at = {minor: plugins.registry(minor) for minor in emulation.MINORS}
    assert "score" not in at[34]["DynamicResources"]
    assert "score" in at[35]["DynamicResources"]
    assert at[35]["GangScheduling"] == {"preEnqueue", "reserve", "permit"}
    assert at[36]["GangScheduling"] == {"preEnqueue", "permit"}
    assert "placementScore" in at[36]["NodeResourcesFit"]
    assert at[36]["NodeName"] == {"filter"}
    assert at[37]["NodeName"] == {"preFilter", "filter"}
    assert "podGroupPostFilter" in at[37]["DefaultPreemption"]


# Default plugins ------------------------------------------------------------------------------


def test_the_default_plugins_of_each_release() -> None:
    v135 = [(n, 2 if n == "DynamicResources" else w) for n, w in V134_DEFAULTS]
    v136 = [*v135, ("NodeDeclaredFeatures", 0)]
    v137 = list(v136)
    v137[2], v137[3] = v137[3], v137[2]  # NodeName before NodeUnschedulable
    assert _defaults(emulation.emulate(34)) == V134_DEFAULTS
    assert _defaults(emulation.emulate(35)) == v135
    assert _defaults(emulation.emulate(36)) == v136
    assert _defaults(emulation.emulate(37)) == v137
    # v1.35's NodeDeclaredFeatures gate (alpha) puts it in the defaults.
    assert _defaults(emulation.emulate(35, {"NodeDeclaredFeatures": True})) == [
        *v135,
        ("NodeDeclaredFeatures", 0),
    ]


@pytest.mark.parametrize("minor", emulation.MINORS)
def test_the_built_in_profile_is_a_files_default_profile_of_the_same_release(minor: int) -> None:
    kube = emulation.emulate(minor)
    built_in = profiles.defaults("plumb", kube).profiles[0]
    from_file = _parse("profiles: [{schedulerName: plumb}]\n", minor).profiles[0]
    assert built_in == dataclasses.replace(from_file, config="")
    assert ("NodeDeclaredFeatures" in built_in.filters) == (minor >= 36)
    assert built_in.kube == kube
    # DynamicResources scores from v1.35 (weight 2).
    assert built_in.weights == (*scoring.DEFAULT_WEIGHTS[:-1], 2 if minor >= 35 else 0)


# What a later release has is refused, naming both releases -------------------------------------


@pytest.mark.parametrize(
    ("body", "since", "field", "what"),
    [
        (
            "profiles: [{schedulerName: a, plugins: {placementScore: {}}}]\n",
            36,
            "profiles[0].plugins.placementScore",
            "the extension point placementScore",
        ),
        (
            "profiles: [{schedulerName: a, plugins: {podGroupPostFilter: {disabled: "
            '[{name: "*"}]}}}]\n',
            37,
            "profiles[0].plugins.podGroupPostFilter",
            "the extension point podGroupPostFilter",
        ),
        (
            "profiles: [{schedulerName: a, plugins: {multiPoint: {enabled: "
            "[{name: NodeDeclaredFeatures}]}}}]\n",
            35,
            "profiles[0].plugins.multiPoint.enabled[0]",
            'the plugin "NodeDeclaredFeatures"',
        ),
        (
            "profiles: [{schedulerName: a, plugins: {permit: {enabled: "
            "[{name: DeferredPodScheduling}]}}}]\n",
            37,
            "profiles[0].plugins.permit.enabled[0]",
            'the plugin "DeferredPodScheduling"',
        ),
        (
            "profiles: [{schedulerName: a, plugins: {score: {enabled: "
            "[{name: DynamicResources, weight: 3}]}}}]\n",
            35,
            "profiles[0].plugins.score.enabled[0]",
            'the plugin "DynamicResources" at score',
        ),
        (
            "profiles: [{schedulerName: a, plugins: {preFilter: {enabled: "
            "[{name: TaintToleration}]}}}]\n",
            37,
            "profiles[0].plugins.preFilter.enabled[0]",
            'the plugin "TaintToleration" at preFilter',
        ),
        (
            "profiles: [{schedulerName: a, pluginConfig: [{name: DynamicResources, "
            "args: {bindingTimeout: 5m}}]}]\n",
            35,
            "profiles[0].pluginConfig[0].args.bindingTimeout",
            "DynamicResourcesArgs.bindingTimeout",
        ),
    ],
)
def test_what_a_later_release_has_is_refused_naming_both_releases(
    body: str, since: int, field: str, what: str
) -> None:
    for minor in range(emulation.OLDEST, since):
        error = _refusal(body, minor)
        assert error.field == field
        assert str(error) == (
            f"{field}: {what} is new in kube-scheduler v1.{since}: plumb decides as "
            f"kube-scheduler v1.{minor}, which refuses it"
        )
    if since < 37 or "bindingTimeout" not in body:
        _parse(body, emulation.NEWEST)  # the release that has it reads it


def test_a_truly_unknown_field_is_still_kube_schedulers_unknown_field() -> None:
    error = _refusal("profiles: [{schedulerName: a, plugins: {placementScores: {}}}]\n", 37)
    assert str(error) == (
        'strict decoding error: unknown field "profiles[0].plugins.placementScores"'
    )


def test_a_v137_file_loads_when_plumb_decides_as_v137() -> None:
    parsed = _parse(
        "profiles:\n"
        "- schedulerName: a\n"
        "  plugins:\n"
        "    preFilter: {enabled: [{name: NodeName}]}\n"
        "    placementGenerate: {enabled: [{name: TopologyPlacementGenerator}]}\n"
        "    placementScore: {enabled: [{name: PodGroupPodsCount, weight: 2}]}\n"
        "    podGroupPostFilter: {disabled: [{name: DynamicResources}]}\n"
        "    permit: {enabled: [{name: DeferredPodScheduling}, {name: GangScheduling}]}\n"
        "  pluginConfig:\n"
        "  - {name: DynamicResources, args: {filterTimeout: 5s, bindingTimeout: 2m}}\n",
        37,
    )
    profile = parsed.profiles[0]
    assert profile.filters == frozenset(scoring.FILTERS)
    assert profile.weights == scoring.DEFAULT_WEIGHTS
    # Each plugin that changes nothing under the default gates is named, and why.
    notes = [line for line in parsed.ignored if "changes nothing" in line]
    assert [line.split(":")[0] for line in notes] == [
        "profiles[0].plugins.permit.enabled[0]",
        "profiles[0].plugins.permit.enabled[1]",
        "profiles[0].plugins.placementGenerate.enabled[0]",
        "profiles[0].plugins.placementScore.enabled[0]",
    ]
    assert "InPlacePodVerticalScalingSchedulerPreemption, off" in notes[0]


# DynamicResourcesArgs.bindingTimeout ---------------------------------------------------------

_BINDING = (
    "profiles: [{{schedulerName: a, pluginConfig: [{{name: DynamicResources, "
    "args: {{bindingTimeout: {value}}}}}]}}]\n"
)


def test_binding_timeout_needs_both_gates_in_the_releases_that_have_it() -> None:
    forbidden = (
        "profiles[0].pluginConfig[0].args.bindingTimeout: Forbidden: "
        "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled"
    )
    body = _BINDING.format(value="2m")
    assert str(_refusal(body, 35)) == forbidden  # DRADeviceBindingConditions alpha, off
    _parse(body, 35, DRADeviceBindingConditions=True)
    _parse(body, 36)
    assert str(_refusal(body, 36, DRADeviceBindingConditions=False)) == forbidden
    _parse(body, 37)


@pytest.mark.parametrize(
    ("value", "printed"), [("500ms", "500ms"), ("0.5s", "500ms"), ('"0"', "0s")]
)
def test_binding_timeout_is_at_least_a_second_printed_as_go_prints_it(
    value: str, printed: str
) -> None:
    error = _refusal(_BINDING.format(value=value), 37)
    assert str(error) == (
        f'profiles[0].pluginConfig[0].args.bindingTimeout: Invalid value: "{printed}": '
        "must be at least 1 second"
    )
    _parse(_BINDING.format(value="1s"), 37)


def test_binding_timeout_defaults_to_ten_minutes_with_both_gates_on() -> None:
    default = schedconfig.args.default
    assert default("DynamicResources", emulation.emulate(34)) == {"filterTimeout": "10s"}
    assert default("DynamicResources", emulation.emulate(35)) == {"filterTimeout": "10s"}
    both = {"filterTimeout": "10s", "bindingTimeout": "10m0s"}
    assert default("DynamicResources", emulation.emulate(36)) == both
    assert default("DynamicResources", emulation.emulate(37)) == both
    assert (
        default("DynamicResources", emulation.emulate(35, {"DRADeviceBindingConditions": True}))
        == both
    )


def test_a_negative_filter_timeout_is_printed_as_go_prints_it() -> None:
    error = _refusal(
        "profiles: [{schedulerName: a, pluginConfig: [{name: DynamicResources, "
        "args: {filterTimeout: -1500ms}}]}]\n",
        34,
    )
    assert error.message == 'Invalid value: "-1.5s": must be zero or positive'


# Checks that changed --------------------------------------------------------------------------

_RATIO = (
    "profiles: [{{schedulerName: a, pluginConfig: [{{name: NodeResourcesFit, args: "
    "{{scoringStrategy: {strategy}}}}}]}}]\n"
)


def test_requested_to_capacity_ratio_is_checked_by_type_from_v136() -> None:
    shape = "{shape: [{utilization: 50, score: 0}, {utilization: 50, score: 10}]}"
    unsorted = _RATIO.format(
        strategy=f"{{type: RequestedToCapacityRatio, requestedToCapacityRatio: {shape}}}"
    )
    base = "profiles[0].pluginConfig[0].args.scoringStrategy"
    for minor in (34, 35):
        assert _refusal(unsorted, minor).field == f"{base}.shape[1].utilization"
    for minor in (36, 37):
        assert _refusal(unsorted, minor).field == (
            f"{base}.requestedToCapacityRatio.shape[1].utilization"
        )
    missing = _RATIO.format(strategy="{type: RequestedToCapacityRatio}")
    assert "panics" in str(_refusal(missing, 35))
    assert (
        'initializing plugin "NodeResourcesFit": scoringStrategy.requestedToCapacityRatio: '
        "Required value: must be specified when type is RequestedToCapacityRatio"
    ) in str(_refusal(missing, 36))
    with_other_type = _RATIO.format(
        strategy="{type: MostAllocated, requestedToCapacityRatio: "
        "{shape: [{utilization: 0, score: 0}]}}"
    )
    assert _parse(with_other_type, 35).profiles[0].strategy == scoring.MOST_ALLOCATED
    error = _refusal(with_other_type, 36)
    assert error.field == f"{base}.requestedToCapacityRatio"
    assert error.message == "Forbidden: must be nil when type is not RequestedToCapacityRatio"


def test_the_weights_overflow_error_says_which_weights_from_v136() -> None:
    body = (
        "profiles: [{schedulerName: a, plugins: {score: {enabled: "
        "[{name: TaintToleration, weight: -1}]}}}]\n"
    )
    assert _refusal(body, 35).message == "total score of Score plugins could overflow"
    assert _refusal(body, 36).message == (
        "score plugins: total score of Score plugins could overflow"
    )
    placement = (
        "profiles: [{schedulerName: a, plugins: {placementScore: {enabled: "
        "[{name: PodGroupPodsCount, weight: -1}]}}}]\n"
    )
    error = _refusal(placement, 37)
    assert error.field == "profiles[0].plugins.placementScore.enabled[0].weight"
    assert error.message == "placement score plugins: total score of Score plugins could overflow"


def test_a_plugin_enabled_only_at_pod_group_post_filter_gets_no_args() -> None:
    body = (
        "profiles: [{schedulerName: a, plugins: {multiPoint: {disabled: "
        "[{name: DefaultPreemption}]}, podGroupPostFilter: {enabled: "
        "[{name: DefaultPreemption}]}}}]\n"
    )
    error = _refusal(body, 37)
    assert error.field == "profiles[0].plugins.podGroupPostFilter.enabled[0]"
    assert error.message == (
        'initializing plugin "DefaultPreemption": got args of type <nil>, want '
        "*DefaultPreemptionArgs"
    )
    with_args = body.replace("}}}]\n", "}}, pluginConfig: [{name: DefaultPreemption}]}]\n")
    assert not _parse(with_args, 37).profiles[0].preemption


def test_removed_plugins_are_refused_at_pod_group_post_filter_too() -> None:
    error = _refusal(
        "profiles: [{schedulerName: a, plugins: {podGroupPostFilter: {enabled: "
        "[{name: EBSLimits}]}}}]\n",
        37,
    )
    assert error.field == "profiles[0].plugins.podGroupPostFilter.enabled[0]"
    assert "was invalid in version" in error.message


def test_the_completed_profile_is_what_kube_scheduler_writes_back() -> None:
    parsed = _parse(
        "profiles: [{schedulerName: a, plugins: {score: {disabled: [{name: '*'}]}}, "
        "pluginConfig: [{name: DynamicResources, args: {filterTimeout: 90s}}]}]\n",
        36,
    )
    (completed,) = parsed.completed
    assert completed["schedulerName"] == "a"
    assert completed["plugins"]["score"] == {"disabled": [{"name": "*"}]}
    assert completed["plugins"]["placementScore"] == {}
    assert completed["plugins"]["multiPoint"]["enabled"][-1] == {
        "name": "NodeDeclaredFeatures",
        "weight": 0,
    }
    configs = {entry["name"]: entry["args"] for entry in completed["pluginConfig"]}
    assert list(configs) == sorted(configs)
    # Durations as Go prints them; bindingTimeout's default, both gates being on in v1.36.
    assert configs["DynamicResources"] == {"filterTimeout": "1m30s", "bindingTimeout": "10m0s"}
