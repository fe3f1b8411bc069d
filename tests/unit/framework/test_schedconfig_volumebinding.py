"""VolumeBindingArgs.shape in a KubeSchedulerConfiguration, per release: refused while
StorageCapacityScoring is off (v1.34 to v1.36 by default), defaulted and validated as
kube-scheduler does where it is on (v1.37), and read into Profile.capacity_shape."""

from __future__ import annotations

import pytest

from plumb.framework import emulation, schedconfig
from plumb.framework.plugins import volumecapacity

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def _file(args: str) -> str:
    entry = f"{{name: VolumeBinding, args: {args}}}"
    return HEADER + f"profiles: [{{schedulerName: a, pluginConfig: [{entry}]}}]\n"


def _parse(args: str, minor: int = 37, **gates: bool) -> schedconfig.Configuration:
    return schedconfig.parse(_file(args), kube=emulation.emulate(minor, gates))


def _refusal(args: str, minor: int = 37, **gates: bool) -> schedconfig.ConfigError:
    with pytest.raises(schedconfig.ConfigError) as raised:
        _parse(args, minor, **gates)
    return raised.value


@pytest.mark.parametrize("minor", [34, 35, 36])
def test_a_shape_is_refused_while_the_gate_is_off(minor: int) -> None:
    error = _refusal("{shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}", minor)
    assert error.field == "profiles[0].pluginConfig[0].args.shape"
    assert str(error) == (
        'profiles[0].pluginConfig[0].args.shape: Invalid value: [{"Utilization":0,"Score":0},'
        '{"Utilization":100,"Score":10}]: unexpected field `shape`, remove it or turn on the '
        "feature gate StorageCapacityScoring"
    )
    # An empty list is a shape given; null is none.
    assert "turn on the feature gate" in str(_refusal("{shape: []}", minor))
    assert _parse("{shape: null}", minor).profiles[0].capacity_shape == volumecapacity.DEFAULT_SHAPE


def test_a_shape_is_read_where_the_gate_is_on() -> None:
    given = "{shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}"
    assert _parse(given).profiles[0].capacity_shape == ((0, 0), (100, 10))
    assert _parse(given, 34, StorageCapacityScoring=True).profiles[0].capacity_shape == (
        (0, 0),
        (100, 10),
    )
    for empty in ("{}", "{shape: []}", "{shape: null}"):
        assert _parse(empty).profiles[0].capacity_shape == volumecapacity.DEFAULT_SHAPE


@pytest.mark.parametrize(
    ("shape", "field", "words"),
    [
        (
            "[{utilization: 50, score: 0}, {utilization: 50, score: 10}]",
            "shape[1].utilization",
            "Invalid value: 50: values must be sorted in increasing order",
        ),
        (
            "[{utilization: 0, score: 0}, {utilization: 101, score: 10}]",
            "shape[1].utilization",
            "Invalid value: 101: not in valid range [0, 100]",
        ),
        (
            "[{utilization: 0, score: 11}]",
            "shape[0].score",
            "Invalid value: 11: not in valid range [0, 10]",
        ),
    ],
)
def test_a_bad_shape_is_refused_in_kube_schedulers_words(
    shape: str, field: str, words: str
) -> None:
    error = _refusal(f"{{shape: {shape}}}")
    assert error.field == f"profiles[0].pluginConfig[0].args.{field}"
    assert str(error) == f"profiles[0].pluginConfig[0].args.{field}: {words}"


def test_the_default_profile_scores_with_the_default_shape() -> None:
    profile = schedconfig.default_profile("plumb", emulation.emulate(37))
    assert profile.capacity_shape == volumecapacity.DEFAULT_SHAPE


def test_a_bind_timeout_plumb_does_not_follow_is_noted() -> None:
    assert _parse("{bindTimeoutSeconds: 600}").ignored == ()
    (note,) = _parse("{bindTimeoutSeconds: 30}").ignored
    assert note.startswith("profiles[0].pluginConfig[0].args.bindTimeoutSeconds")
    error = _refusal("{bindTimeoutSeconds: -1}")
    assert error.field == "profiles[0].pluginConfig[0].args.bindTimeoutSeconds"
