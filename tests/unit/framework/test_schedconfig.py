"""schedconfig: KubeSchedulerConfiguration files read as kube-scheduler reads them (v1.37 unless
told; what differs per release is in test_schedconfig_revisions.py) and turned into plumb's
scoring profiles (the refusals kube-scheduler shares are held against the
real binary in tests/integration/test_config_refusals.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
import yaml  # type: ignore[import-untyped]

from plumb.backend.records import specs
from plumb.framework import cycle, emulation, schedconfig, scoring
from plumb.kernel import reference
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.schedconfig_files import BAD_FILES, HEADER
from tests.support.small_clusters import cluster, pod

ORDER = schedconfig.SCORE_ORDER


def weight(profile: scoring.Profile, plugin: str) -> int:
    return profile.weights[ORDER.index(plugin)]


def parse(body: str) -> schedconfig.Configuration:
    return schedconfig.parse(HEADER + body)


def refusal(body: str) -> schedconfig.ConfigError:
    with pytest.raises(schedconfig.ConfigError) as raised:
        parse(body)
    return raised.value


TWO_PROFILES = """\
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packing
  plugins:
    multiPoint:
      disabled: [{name: InterPodAffinity}, {name: PodTopologySpread}]
    score:
      enabled: [{name: NodeResourcesFit, weight: 10}, {name: ImageLocality, weight: 3}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 3}, {name: memory, weight: 1}]
"""


# Defaults ------------------------------------------------------------------------------------


# v1.37's defaults (parse's release unless told) run every filter plumb has, NodeDeclaredFeatures
# included; tests/unit/framework/test_schedconfig_revisions.py holds the other releases'.
_CONFIGURED_FILTERS = frozenset(scoring.FILTERS)


@pytest.mark.parametrize("minor", emulation.MINORS)
def test_the_default_profile_is_scorings_default(minor: int) -> None:
    kube = emulation.emulate(minor)
    profile = schedconfig.default_profile("default-scheduler", kube)
    # NodeDeclaredFeatures is a default filter from v1.36 (its gate on), none before.
    filters = _CONFIGURED_FILTERS - ({"NodeDeclaredFeatures"} if minor < 36 else set())
    # DynamicResources scores from v1.35 (weight 2); v1.34's has no Score.
    weights = scoring.DEFAULT_WEIGHTS if minor >= 35 else (*scoring.DEFAULT_WEIGHTS[:-1], 0)
    assert profile == scoring.Profile(
        name="default-scheduler", filters=filters, kube=kube, weights=weights
    )
    assert len(ORDER) == len(scoring.DEFAULT_WEIGHTS)


def test_a_file_with_one_named_profile_gives_the_default_profile() -> None:
    text = HEADER + "profiles: [{schedulerName: mine}]\n"
    parsed = schedconfig.parse(text)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    assert parsed.digest == digest
    assert parsed.profiles == (
        dataclasses.replace(schedconfig.default_profile("mine"), config=digest),
    )
    assert (parsed.initial_backoff, parsed.max_backoff) == (1.0, 10.0)
    assert parsed.ignored == ()


def test_no_profiles_means_one_default_scheduler() -> None:
    parsed = parse("")
    assert [p.name for p in parsed.profiles] == ["default-scheduler"]
    assert dataclasses.replace(parsed.profiles[0], config="") == scoring.Profile(
        name="default-scheduler", filters=_CONFIGURED_FILTERS
    )


def test_bytes_and_backoffs() -> None:
    text = (HEADER + "podInitialBackoffSeconds: 3\npodMaxBackoffSeconds: 30\n").encode()
    parsed = schedconfig.parse(text)
    assert (parsed.initial_backoff, parsed.max_backoff) == (3.0, 30.0)
    assert parsed.digest == hashlib.sha256(text).hexdigest()[:16]


# Two profiles, YAML and JSON -----------------------------------------------------------------


def test_two_profiles_defaults_and_bin_packing() -> None:
    parsed = parse(TWO_PROFILES)
    default, packing = parsed.profiles
    assert dataclasses.replace(default, config="") == scoring.Profile(
        name="default-scheduler", filters=_CONFIGURED_FILTERS
    )
    assert packing.name == "bin-packing"
    assert packing.config == parsed.digest
    assert packing.strategy == scoring.MOST_ALLOCATED
    assert packing.fit_resources == (("cpu", 3), ("memory", 1))
    assert packing.weights == (10, 1, 3, 2, 0, 0, 0, 3, 1, 2)
    assert "InterPodAffinity" not in packing.filters
    assert "PodTopologySpread" not in packing.filters
    assert "NodeResourcesFit" in packing.filters
    assert packing.preemption


def test_json_reads_as_yaml_does() -> None:
    document = yaml.safe_load(HEADER + TWO_PROFILES)
    from_json = schedconfig.parse(json.dumps(document))
    from_yaml = parse(TWO_PROFILES)
    assert [dataclasses.replace(p, config="") for p in from_json.profiles] == [
        dataclasses.replace(p, config="") for p in from_yaml.profiles
    ]
    assert from_json.digest != from_yaml.digest


# Plugins: "*", multiPoint, weights -------------------------------------------------------------


def test_star_disables_every_default_at_one_point() -> None:
    profile = parse(
        'profiles: [{schedulerName: a, plugins: {score: {disabled: [{name: "*"}], '
        "enabled: [{name: ImageLocality, weight: 4}]}}}]\n"
    ).profiles[0]
    assert profile.weights == (0, 0, 0, 0, 0, 0, 0, 4, 0, 0)
    assert profile.filters == _CONFIGURED_FILTERS


def test_star_at_filter_keeps_only_the_filters_enabled_there() -> None:
    profile = parse(
        'profiles: [{schedulerName: a, plugins: {filter: {disabled: [{name: "*"}], '
        "enabled: [{name: NodeResourcesFit}, {name: TaintToleration}]}}}]\n"
    ).profiles[0]
    assert profile.filters == frozenset({"NodeResourcesFit", "TaintToleration"})
    assert profile.weights == scoring.DEFAULT_WEIGHTS


def test_disabling_default_preemption_at_post_filter() -> None:
    profile = parse(
        "profiles: [{schedulerName: a, plugins: {postFilter: "
        "{disabled: [{name: DefaultPreemption}]}}}]\n"
    ).profiles[0]
    assert not profile.preemption


def test_multi_point_weights_and_their_override_at_score() -> None:
    profile = parse(
        "profiles: [{schedulerName: a, plugins: {"
        "multiPoint: {enabled: [{name: TaintToleration, weight: 7}, {name: NodeAffinity, "
        "weight: 9}]}, score: {enabled: [{name: NodeAffinity, weight: 4}]}}}]\n"
    ).profiles[0]
    assert weight(profile, "TaintToleration") == 7
    # The score extension point's own weight wins over multiPoint's.
    assert weight(profile, "NodeAffinity") == 4


def test_multi_point_disable_removes_every_point() -> None:
    profile = parse(
        "profiles: [{schedulerName: a, plugins: {multiPoint: "
        "{disabled: [{name: TaintToleration}]}}}]\n"
    ).profiles[0]
    assert weight(profile, "TaintToleration") == 0
    assert "TaintToleration" not in profile.filters


def test_weight_zero_is_one_as_in_kube_scheduler() -> None:
    profile = parse(
        "profiles: [{schedulerName: a, plugins: {score: {enabled: "
        "[{name: TaintToleration, weight: 0}]}}}]\n"
    ).profiles[0]
    assert weight(profile, "TaintToleration") == 1


def test_score_disabled_keeps_the_filter() -> None:
    profile = parse(
        "profiles: [{schedulerName: a, plugins: {score: {disabled: "
        "[{name: PodTopologySpread}]}}}]\n"
    ).profiles[0]
    assert weight(profile, "PodTopologySpread") == 0
    assert "PodTopologySpread" in profile.filters


# Arguments -----------------------------------------------------------------------------------


def test_every_argument_is_mapped() -> None:
    body = """\
profiles:
- schedulerName: a
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: cpu, weight: 2}, {name: example.com/gpu}]
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
  - name: NodeResourcesBalancedAllocation
    args: {resources: [{name: cpu, weight: 1}, {name: memory}, {name: example.com/gpu}]}
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,
         minDomains: 3, nodeAffinityPolicy: Ignore, nodeTaintsPolicy: Honor,
         matchLabelKeys: [app]}
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}
  - name: InterPodAffinity
    args: {hardPodAffinityWeight: 50}
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions: [{key: pool, operator: In, values: [a, b]}]
            matchFields: [{key: metadata.name, operator: NotIn, values: [n1]}]
          - {}
          - matchExpressions: [{key: cores, operator: Gt, values: ["4"]}]
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 5
          preference: {matchExpressions: [{key: disk, operator: Exists}]}
        - weight: 0
          preference: {matchExpressions: [{key: never, operator: Exists}]}
"""
    profile = parse(body).profiles[0]
    assert profile.strategy == scoring.REQUESTED_TO_CAPACITY_RATIO
    assert profile.fit_resources == (("cpu", 2), ("example.com/gpu", 1))
    assert profile.fit_shape == ((0, 0), (100, 10))
    assert profile.balanced_resources == (("cpu", 1), ("memory", 1), ("example.com/gpu", 1))
    assert profile.spread_defaulting == "List"
    assert profile.spread_defaults == (
        specs.SpreadConstraint(
            max_skew=2,
            topology_key="topology.kubernetes.io/zone",
            when_unsatisfiable="DoNotSchedule",
            selector=None,
            min_domains=3,
            node_affinity_policy="Ignore",
            node_taints_policy="Honor",
            match_label_keys=("app",),
        ),
        specs.SpreadConstraint(
            max_skew=1,
            topology_key="kubernetes.io/hostname",
            when_unsatisfiable="ScheduleAnyway",
            selector=None,
        ),
    )
    assert profile.hard_pod_affinity_weight == 50
    assert profile.added_required == (
        specs.NodeSelectorTerm(
            expressions=(specs.Requirement("pool", "In", ("a", "b")),),
            fields=(specs.Requirement("metadata.name", "NotIn", ("n1",)),),
        ),
        specs.NodeSelectorTerm(expressions=(specs.Requirement("cores", "Gt", ("4",)),)),
    )
    assert profile.added_preferred == (
        (5, specs.NodeSelectorTerm(expressions=(specs.Requirement("disk", "Exists"),))),
    )


def test_system_defaulting_and_no_added_affinity_by_default() -> None:
    profile = parse(
        "profiles: [{schedulerName: a, pluginConfig: [{name: PodTopologySpread, "
        "args: {defaultingType: System}}]}]\n"
    ).profiles[0]
    assert (profile.spread_defaulting, profile.spread_defaults) == ("System", ())
    assert profile.added_required is None


def test_args_of_a_plugin_not_enabled_keep_the_defaults_and_are_noted() -> None:
    parsed = parse(
        "profiles: [{schedulerName: a, plugins: {multiPoint: {disabled: "
        "[{name: NodeResourcesFit}]}}, pluginConfig: [{name: NodeResourcesFit, "
        "args: {scoringStrategy: {type: Bogus}}}]}]\n"
    )
    # kube-scheduler validates NodeResourcesFit's args only when it builds the plugin.
    assert parsed.profiles[0].strategy == scoring.LEAST_ALLOCATED
    assert weight(parsed.profiles[0], "NodeResourcesFit") == 0
    assert any("NodeResourcesFit is not enabled" in line for line in parsed.ignored)


def test_ignored_fields_are_listed() -> None:
    parsed = parse(
        "parallelism: 8\npercentageOfNodesToScore: 50\nleaderElection: {leaderElect: false}\n"
        "profiles: [{schedulerName: a, percentageOfNodesToScore: 20, pluginConfig: ["
        "{name: NodeResourcesFit, args: {ignoredResources: [example.com/foo]}}, "
        "{name: DefaultPreemption, args: {minCandidateNodesAbsolute: 10}}, "
        "{name: MyPlugin, args: {anything: [1, 2]}}]}]\n"
    )
    fields = [line.split(":")[0] for line in parsed.ignored]
    assert fields == [
        "parallelism",
        "percentageOfNodesToScore",
        "leaderElection",
        "profiles[0].pluginConfig[1].args",
        "profiles[0].pluginConfig[2].args",
        "profiles[0].percentageOfNodesToScore",
    ]


# Refusals (kube-scheduler's own are also checked against the binary) ----------------------------


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (
            "profiles: [{schedulerName: a, plugins: {score: {enabled: [{name: Foo}]}}}]\n",
            "profiles[0].plugins.score.enabled[0]",
            'ScorePlugin "Foo" does not exist',
        ),
        (
            "profiles: [{schedulerName: a, plugins: {Score: {}}}]\n",
            "profiles[0].plugins.Score",
            'strict decoding error: unknown field "profiles[0].plugins.Score"',
        ),
        (
            "profiles: [{schedulerName: a, plugins: {filter: {enabled: [{name: NodeName}, "
            "{name: NodeName}]}}}]\n",
            "profiles[0].plugins.filter.enabled[1]",
            'plugin "NodeName" already registered as "FilterPlugin"',
        ),
        (
            'profiles: [{schedulerName: a, plugins: {bind: {disabled: [{name: "*"}]}}}]\n',
            "profiles[0].plugins.bind",
            'at least one bind plugin is needed for profile with scheduler name "a"',
        ),
        (
            "leaderElection: {leaseDuration: 5s, renewDeadline: 10s}\n",
            "leaderElection.leaseDuration",
            "must be greater than `RenewDeadline`",
        ),
        (
            "leaderElection: {leaseDuration: soon}\n",
            "leaderElection.leaseDuration",
            'time: invalid duration "soon"',
        ),
        (
            "extenders: [{urlPrefix: http://x, prioritizeVerb: p}]\n",
            "extenders[0].weight",
            "must have a positive weight applied to it",
        ),
        (
            "profiles: [{schedulerName: a, pluginConfig: [{name: NodeAffinity, args: "
            "{addedAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, "
            "preference: {matchExpressions: [{key: x, operator: Gt, values: [a]}]}}]}}}]}]\n",
            "profiles[0].pluginConfig[0].args.addedAffinity."
            "preferredDuringSchedulingIgnoredDuringExecution[0].matchExpressions[0].values[0]",
            "the value must be an integer",
        ),
    ],
)
def test_kube_scheduler_refusals(body: str, field: str, words: str) -> None:
    error = refusal(body)
    assert error.field == field
    assert words in str(error)


def test_error_text_is_kube_schedulers() -> None:
    error = refusal(
        "profiles: [{schedulerName: a, pluginConfig: [{name: InterPodAffinity, "
        "args: {hardPodAffinityWeight: 101}}]}]\n"
    )
    assert str(error) == (
        "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: 101: "
        "not in valid range [0, 100]"
    )
    assert error.message == "Invalid value: 101: not in valid range [0, 100]"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # kube-scheduler accepts these, and plumb would schedule differently with them.
        (
            "profiles: [{schedulerName: a, plugins: {preEnqueue: {disabled: "
            "[{name: SchedulingGates}]}}}]\n",
            "profiles[0].plugins.preEnqueue",
        ),
        (
            "profiles: [{schedulerName: a, plugins: {preFilter: {disabled: "
            "[{name: NodeResourcesFit}]}}}]\n",
            "profiles[0].plugins.preFilter",
        ),
        (
            "profiles: [{schedulerName: a, plugins: {preScore: {disabled: "
            "[{name: TaintToleration}]}}}]\n",
            "profiles[0].plugins.preScore",
        ),
        (
            # The last score plugin: kube-scheduler's wrapping overflow check lets it through.
            "profiles: [{schedulerName: a, plugins: {multiPoint: {enabled: "
            "[{name: ImageLocality, weight: -5}]}}}]\n",
            "profiles[0].plugins.multiPoint.enabled[0].weight",
        ),
        (
            "profiles: [{schedulerName: a, pluginConfig: [{name: InterPodAffinity, "
            "args: {ignorePreferredTermsOfExistingPods: true}}]}]\n",
            "profiles[0].pluginConfig[0].args.ignorePreferredTermsOfExistingPods",
        ),
    ],
)
def test_plumb_refuses_what_it_would_do_differently(body: str, field: str) -> None:
    error = refusal(body)
    assert error.field == field
    assert "plumb refuses" in str(error)


def test_unknown_fields_are_all_named() -> None:
    error = refusal("profiles: [{schedulerName: a, foo: 1, bar: 2}]\n")
    assert str(error) == (
        'strict decoding error: unknown field "profiles[0].foo", unknown field "profiles[0].bar"'
    )


def test_plugin_config_for_an_unknown_plugin_is_accepted_and_noted() -> None:
    parsed = parse("profiles: [{schedulerName: a, pluginConfig: [{name: Foo, args: {x: 1}}]}]\n")
    assert parsed.profiles[0].weights == scoring.DEFAULT_WEIGHTS
    assert parsed.ignored[0].startswith("profiles[0].pluginConfig[0].args")


def test_yaml_booleans_are_go_yamls() -> None:
    # go-yaml v2 (sigs.k8s.io/yaml) reads y and n as booleans, so kube-scheduler refuses them
    # where a string belongs.
    error = refusal("extenders: [{urlPrefix: y}]\n")
    assert error.field == "extenders[0].urlPrefix"
    assert "cannot unmarshal bool" in str(error)


def test_wrong_kind() -> None:
    error = refusal_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Config\n")
    assert error.field == "kind"


def refusal_text(text: str) -> schedconfig.ConfigError:
    with pytest.raises(schedconfig.ConfigError) as raised:
        schedconfig.parse(text)
    return raised.value


# The reader's bounds: what kube-scheduler's go-yaml refuses, refused in its words ---------------


@pytest.mark.parametrize(("text", "says"), BAD_FILES.values(), ids=list(BAD_FILES))
def test_a_bad_yaml_file_is_refused_naming_its_problem(text: str, says: str) -> None:
    error = refusal_text(text)
    assert says in str(error)
    assert error.field == ""


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("!!bool maybe", "line 3: cannot decode !!str `maybe` as a !!bool"),
        ("!!float abc", "line 3: cannot decode !!str `abc` as a !!float"),
        ("!!int 1.5", "line 3: cannot decode !!float `1.5` as a !!int"),
        ("!!binary z", "failed to decode base64 data"),
        ("!!python/name:os.system x", "could not determine a constructor"),
    ],
)
def test_a_value_its_tag_cannot_hold_is_refused(value: str, says: str) -> None:
    assert says in str(refusal(f"podMaxBackoffSeconds: {value}\n"))


def test_a_plain_value_that_only_looks_like_a_date_is_a_string_as_in_go_yaml() -> None:
    error = refusal("podMaxBackoffSeconds: 2020-13-45\n")
    assert error.field == "podMaxBackoffSeconds"
    assert "cannot unmarshal string into Go struct field podMaxBackoffSeconds" in str(error)


def _args_nested(depth: int) -> str:
    # An unknown plugin's args are not decoded (noted and ignored), so only the bound refuses.
    return (
        "profiles: [{schedulerName: a, pluginConfig: [{name: Foo, args: {x: "
        + "[" * depth
        + "]" * depth
        + "}}]}]\n"
    )


def test_nesting_up_to_the_bound_is_read_and_past_it_refused_in_every_form() -> None:
    # The document, profiles, a profile, pluginConfig, its item, args: 6 levels above x.
    parsed = parse(_args_nested(94))
    assert parsed.ignored[0].startswith("profiles[0].pluginConfig[0].args")
    too_deep = "exceeded max depth of 100"
    assert too_deep in str(refusal(_args_nested(95)))
    block = "".join(f"{'  ' * i}- \n" for i in range(150))
    assert too_deep in str(refusal("profiles:\n" + block))
    assert too_deep in str(refusal("profiles: " + "{a: " * 2000 + "\n"))
    json_text = '{"profiles": ' + "[" * 5000 + "]" * 5000 + "}"
    assert f"json: {too_deep}" in str(refusal_text(json_text))
    # Written shallow, nested deep once the aliases are expanded.
    deep = "a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 60 + "*a" + "]" * 60 + "\n"
    assert too_deep in str(refusal(deep))


def test_an_anchor_that_contains_itself_is_refused() -> None:
    error = refusal("profiles: &p [{schedulerName: a}, *p]\n")
    assert str(error) == "yaml: line 3: anchor 'p' value contains itself"


def test_anchors_within_go_yamls_allowance_are_read() -> None:
    parsed = parse(
        "profiles:\n"
        "- schedulerName: a\n"
        "  pluginConfig: &packing\n"
        "  - {name: NodeResourcesFit, args: {scoringStrategy: {type: MostAllocated}}}\n"
        "- {schedulerName: b, pluginConfig: *packing}\n"
    )
    assert [p.strategy for p in parsed.profiles] == [scoring.MOST_ALLOCATED] * 2


def test_a_control_character_is_refused() -> None:
    assert "yaml: unacceptable character #x0000" in str(refusal("profiles: [a\x00]\n"))


# Extenders (buildExtenders) and NodeResourcesFit's ignored resources ---------------------------

GPU_EXTENDER = (
    "extenders:\n"
    "- {urlPrefix: 'http://a/', filterVerb: filter, ignorable: true, httpTimeout: 30s}\n"
    "- urlPrefix: http://b\n"
    "  prioritizeVerb: prio\n"
    "  weight: 2\n"
    "  nodeCacheCapable: true\n"
    "  httpTimeout: -1s\n"
    "  managedResources:\n"
    "  - {name: example.com/gpu, ignoredByScheduler: true}\n"
    "  - {name: example.com/fpga}\n"
)


def test_extenders_are_carried_in_the_order_kube_scheduler_calls_them() -> None:
    parsed = parse(GPU_EXTENDER)
    first, second = parsed.extenders
    # Not ignorable first, then the ignorable ones.
    assert (first.name, second.name) == ("http://b", "http://a/")
    assert (first.prioritize_verb, first.weight, first.node_cache_capable) == ("prio", 2, True)
    assert first.http_timeout is None  # negative: no timeout
    assert second.http_timeout == 30.0
    assert [(r.name, r.ignored_by_scheduler) for r in first.managed_resources] == [
        ("example.com/gpu", True),
        ("example.com/fpga", False),
    ]
    assert parse("extenders: [{urlPrefix: http://x}]\n").extenders[0].http_timeout == 5.0


def test_ignored_by_scheduler_replaces_every_profile_s_ignored_resources() -> None:
    parsed = parse(
        GPU_EXTENDER + "profiles:\n"
        "- schedulerName: a\n"
        "  pluginConfig: [{name: NodeResourcesFit, args: {ignoredResources: [example.com/x], "
        "ignoredResourceGroups: [vendor.io]}}]\n"
        "- schedulerName: b\n"
    )
    a, b = parsed.profiles
    assert a.fit_ignored == b.fit_ignored == frozenset({"example.com/gpu"})
    assert (a.fit_ignored_groups, b.fit_ignored_groups) == (frozenset({"vendor.io"}), frozenset())
    completed = parsed.completed[0]["pluginConfig"]
    fit = next(entry["args"] for entry in completed if entry["name"] == "NodeResourcesFit")
    assert fit["ignoredResources"] == ["example.com/gpu"]


def test_the_file_s_ignored_resources_count_without_extenders() -> None:
    profile = parse(
        "profiles: [{schedulerName: a, pluginConfig: [{name: NodeResourcesFit, args: "
        "{ignoredResources: [example.com/x], ignoredResourceGroups: [vendor.io]}}]}]\n"
    ).profiles[0]
    assert (profile.fit_ignored, profile.fit_ignored_groups) == (
        frozenset({"example.com/x"}),
        frozenset({"vendor.io"}),
    )
    assert not parse("profiles: [{schedulerName: a}]\n").profiles[0].fit_ignored


def test_ignored_by_scheduler_needs_node_resources_fit_in_every_profile() -> None:
    disabled = (
        "profiles: [{schedulerName: a}, {schedulerName: b, plugins: {multiPoint: "
        "{disabled: [{name: NodeResourcesFit}]}}}]\n"
    )
    error = refusal(GPU_EXTENDER + disabled)
    assert str(error).startswith(
        "couldn't build extenders: can't find NodeResourcesFitArgs in plugin config"
    )
    assert error.field == "profiles[1].pluginConfig"
    # Without an ignoredByScheduler resource nothing is looked for.
    assert parse("extenders: [{urlPrefix: http://x, filterVerb: f}]\n" + disabled).extenders


BASE64 = "illegal base64 data at input byte"


@pytest.mark.parametrize(
    ("tls", "field", "words"),
    [
        (
            "{insecure: true, caData: YWJj}",
            "extenders[0].tlsConfig",
            "couldn't build extenders: specifying a root certificates file with the insecure "
            "flag is not allowed",
        ),
        (
            '{caData: "YWJj\\nYWJj"}',  # decodes (newlines are skipped) to no PEM
            "extenders[0].tlsConfig",
            "couldn't build extenders: unable to load root certificates: unable to parse bytes "
            "as PEM block",
        ),
        ("{caData: 'not base64!'}", "extenders[0].tlsConfig.caData", f"{BASE64} 3"),
        ("{certData: YWJj=}", "extenders[0].tlsConfig.certData", f"{BASE64} 4"),
        ("{keyData: YWJjZA}", "extenders[0].tlsConfig.keyData", f"{BASE64} 4"),
    ],
)
def test_tls_settings_are_refused_as_kube_scheduler_refuses_them(
    tls: str, field: str, words: str
) -> None:
    # The words are v1.37.2's, from the binary run with each file.
    error = refusal(f'extenders: [{{urlPrefix: "http://x", tlsConfig: {tls}}}]\n')
    assert error.field == field
    assert str(error).startswith(words)


def test_tls_data_is_base64_decoded() -> None:
    parsed = parse("extenders: [{urlPrefix: x, tlsConfig: {serverName: s, keyData: YWJj}}]\n")
    tls = parsed.extenders[0].tls
    assert tls is not None
    assert (tls.key_data, tls.server_name) == (b"abc", "s")


def test_an_ignored_resource_is_not_checked_by_the_fit_filter() -> None:
    # kube-scheduler's fitsRequest skips ignored extended resources (by name or group); others
    # are still checked.
    c = cluster([make_node("n1").capacity(cpu="4", memory="8Gi")])

    def decide(config: str, **requests: int) -> cycle.Decision:
        profile = parse(config).profiles[0]
        wanted = pod(make_pod("p").req(cpu="1", **requests), "u")
        prepared = cycle.prepare([wanted], c.snapshot(), c, profile)
        assert prepared.compiled is not None
        (decision,) = cycle.explain(
            prepared.compiled, reference.run(prepared.compiled.cluster, prepared.compiled.batch)
        )
        return decision

    assert decide(GPU_EXTENDER, **{"example.com/gpu": 1}).node == "n1"
    assert decide(GPU_EXTENDER, **{"example.com/fpga": 1}).message.startswith(
        "0/1 nodes are available: 1 Insufficient example.com/fpga."
    )
    groups = (
        "profiles: [{schedulerName: a, pluginConfig: [{name: NodeResourcesFit, args: "
        "{ignoredResourceGroups: [example.com]}}]}]\n"
    )
    assert decide(groups, **{"example.com/fpga": 1}).node == "n1"
    assert decide(groups, **{"other.io/fpga": 1}).node is None
