"""A profile enables an installed Python plugin by name, as it enables a built-in one, with its
args validated when the file is read."""

from __future__ import annotations

import pytest

from plumb.extensions import interface, registry
from plumb.framework import schedconfig
from plumb.framework.schedconfig.errors import ConfigError
from tests.support import sample_plugins

FOUND = registry.of(sample_plugins.RackFilter, sample_plugins.CheapScore, sample_plugins.Gatekeeper)

HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def _parse(body: str) -> schedconfig.Configuration:
    return schedconfig.parse(HEAD + body, extensions=FOUND)


def test_plugins_enabled_at_their_points_with_weights_and_args() -> None:
    config = _parse(
        """
profiles:
- schedulerName: plumb
  plugins:
    filter: {enabled: [{name: RackFilter}]}
    score: {enabled: [{name: CheapScore, weight: 3}]}
    multiPoint: {enabled: [{name: Gatekeeper}]}
  pluginConfig:
  - name: RackFilter
    args: {label: topology.example.com/rack, allowed: [r1, r2]}
"""
    )
    (profile,) = config.profiles
    by_name = {e.name: e for e in profile.extensions}
    assert by_name["RackFilter"].points == {interface.FILTER}
    assert (
        by_name["RackFilter"].args == '{"allowed":["r1","r2"],"label":"topology.example.com/rack"}'
    )
    assert by_name["CheapScore"].points == {interface.SCORE}
    assert by_name["CheapScore"].weight == 3
    assert by_name["CheapScore"].normalize == interface.REVERSED
    assert by_name["Gatekeeper"].points == {
        interface.PRE_FILTER,
        interface.RESERVE,
        interface.PERMIT,
        interface.PRE_BIND,
    }
    assert by_name["Gatekeeper"].weight == 0
    # kube-scheduler's own plugins are as they were.
    assert "NodeAffinity" in profile.filters
    assert not any(line.startswith("profiles[0].pluginConfig[0]") for line in config.ignored)


def test_a_plugins_bad_args_are_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError) as caught:
        _parse(
            """
profiles:
- plugins: {filter: {enabled: [{name: RackFilter}]}}
  pluginConfig:
  - name: RackFilter
    args: {allowed: [r1, 2]}
"""
        )
    assert caught.value.field == "profiles[0].pluginConfig[0].args.allowed[1]"
    assert "the plugin RackFilter (tests.support.sample_plugins:RackFilter) refuses its args: " in (
        str(caught.value)
    )
    assert "must be a string, got number 2" in str(caught.value)


def test_a_plugin_at_a_point_it_does_not_implement_is_refused_as_kube_scheduler_words_it() -> None:
    with pytest.raises(ConfigError, match='plugin "RackFilter" does not extend ScorePlugin plugin'):
        _parse("profiles:\n- plugins: {score: {enabled: [{name: RackFilter, weight: 1}]}}\n")


def test_a_plugin_not_installed_does_not_exist() -> None:
    with pytest.raises(ConfigError, match='FilterPlugin "Elsewhere" does not exist'):
        _parse("profiles:\n- plugins: {filter: {enabled: [{name: Elsewhere}]}}\n")
