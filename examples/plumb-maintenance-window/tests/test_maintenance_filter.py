"""MaintenanceWindow over hand-built NodeViews: windows, lead time, unreadable values, args."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from plumb.extensions import arguments, enabling, interface, judgements, registry
from plumb.framework.schedconfig import configuration, errors

from plumb_maintenance_window import intervals, maintenance
from plumb_maintenance_window.maintenance import MaintenanceWindow

KEY = maintenance.DEFAULT_ANNOTATION
WINDOW = "2026-12-05T02:00:00Z/2026-12-05T04:00:00Z"
POD = interface.PodView(
    namespace="default",
    name="web-0",
    uid="uid-web-0",
    labels={},
    requests={"cpu": 100},
    priority=0,
    scheduler_name="plumb",
)


def at(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def view(annotations: Sequence[Mapping[str, str]], now: float) -> interface.NodeView:
    """A NodeView of one node per mapping (its annotations), nothing else on them."""
    count = len(annotations)
    return interface.NodeView(
        tuple(f"node-{i:04d}" for i in range(count)),
        now=now,
        labels=lambda key: np.full(count, "", dtype=np.object_),
        annotations=lambda key: np.array([a.get(key, "") for a in annotations], dtype=np.object_),
        allocatable=lambda resource: np.zeros(count, dtype=np.int64),
        requested=lambda resource: np.zeros(count, dtype=np.int64),
        taints=lambda key: np.zeros(count, dtype=np.bool_),
    )


def rejected(plugin: MaintenanceWindow, nodes: interface.NodeView) -> dict[str, list[int]]:
    """The filter's answer as reason -> indices of the nodes rejected for it."""
    answer = plugin.filter(POD, nodes) or []
    for rejection in answer:
        assert rejection.unresolvable
        assert rejection.fails.dtype == np.bool_
        assert rejection.fails.shape == (len(nodes),)
    return {r.reason: np.flatnonzero(r.fails).tolist() for r in answer}


def test_nodes_without_a_window_pass() -> None:
    nodes = view([{}, {"other": "x"}, {KEY: ""}], now=at("2026-12-05T03:00:00Z"))
    assert MaintenanceWindow().filter(POD, nodes) is None


@pytest.mark.parametrize(
    ("now", "inside"),
    [
        ("2026-12-05T01:59:59Z", False),
        ("2026-12-05T02:00:00Z", True),  # the start is inside
        ("2026-12-05T03:00:00Z", True),
        ("2026-12-05T03:59:59.5Z", True),
        ("2026-12-05T04:00:00Z", False),  # the end is not
        ("2026-12-06T03:00:00Z", False),
    ],
)
def test_a_node_is_avoided_during_its_window_only(now: str, inside: bool) -> None:
    nodes = view([{KEY: WINDOW}, {}], now=at(now))
    expected = {maintenance.IN_WINDOW: [0]} if inside else {}
    assert rejected(MaintenanceWindow(), nodes) == expected


def test_lead_seconds_avoid_the_node_before_the_window_starts() -> None:
    plugin = MaintenanceWindow(maintenance.WindowArgs(lead_seconds=600))
    assert rejected(plugin, view([{KEY: WINDOW}], now=at("2026-12-05T01:49:59Z"))) == {}
    assert rejected(plugin, view([{KEY: WINDOW}], now=at("2026-12-05T01:50:00Z"))) == {
        maintenance.IN_WINDOW: [0]
    }
    assert rejected(plugin, view([{KEY: WINDOW}], now=at("2026-12-05T04:00:00Z"))) == {}


def test_several_windows_and_offsets() -> None:
    value = (
        "2026-12-01T00:00:00Z/2026-12-01T01:00:00Z, "
        "2026-12-05T03:00:00+01:00/2026-12-05T05:00:00+01:00"  # 02:00Z to 04:00Z
    )
    nodes = view([{KEY: value}, {KEY: WINDOW}], now=at("2026-12-05T02:30:00Z"))
    assert rejected(MaintenanceWindow(), nodes) == {maintenance.IN_WINDOW: [0, 1]}
    later = view([{KEY: value}], now=at("2026-12-05T04:30:00Z"))
    assert rejected(MaintenanceWindow(), later) == {}


@pytest.mark.parametrize(
    "value",
    [
        "tomorrow night",
        "2026-12-05T02:00:00/2026-12-05T04:00:00",  # no offset
        "2026-12-05/2026-12-06",  # dates alone
        "2026-12-05T04:00:00Z/2026-12-05T02:00:00Z",  # ends before it starts
        "2026-12-05T02:00:00Z/2026-12-05T02:00:00Z",  # empty
        f"{WINDOW},",  # an empty interval after the comma
        "2026-12-05T02:00:00Z",  # no end
        "2026-13-05T02:00:00Z/2026-12-05T04:00:00Z",  # no 13th month
        " , ",
    ],
)
def test_an_unreadable_window_rejects_the_node_and_never_raises(value: str) -> None:
    nodes = view([{KEY: value}, {}], now=at("2030-01-01T00:00:00Z"))
    assert rejected(MaintenanceWindow(), nodes) == {maintenance.UNREADABLE: [0]}
    assert intervals.schedule(value).problem


def test_each_node_gets_its_own_reason() -> None:
    nodes = view([{KEY: WINDOW}, {KEY: "soon"}, {}, {KEY: WINDOW}], now=at("2026-12-05T03:00:00Z"))
    assert rejected(MaintenanceWindow(), nodes) == {
        maintenance.IN_WINDOW: [0, 3],
        maintenance.UNREADABLE: [1],
    }


def test_the_annotation_key_comes_from_the_args() -> None:
    args = arguments.decode(maintenance.WindowArgs, {"annotation": "example.com/drain-at"})
    plugin = MaintenanceWindow(args)
    nodes = view([{KEY: WINDOW}, {"example.com/drain-at": WINDOW}], now=at("2026-12-05T03:00:00Z"))
    assert rejected(plugin, nodes) == {maintenance.IN_WINDOW: [1]}


def test_the_time_is_the_views_clock() -> None:
    # The same nodes, two cycles' clocks: the verdict follows NodeView.now, not the wall clock.
    plugin = MaintenanceWindow()
    assert rejected(plugin, view([{KEY: WINDOW}], now=at("2026-12-05T03:00:00Z")))
    assert not rejected(plugin, view([{KEY: WINDOW}], now=at("2026-12-05T05:00:00Z")))


def test_five_thousand_nodes_parse_each_distinct_value_once() -> None:
    intervals.schedule.cache_clear()
    values = [WINDOW, "2026-12-06T02:00:00Z/2026-12-06T04:00:00Z", "garbage", ""]
    annotations = [{KEY: values[i % 4]} for i in range(5000)]
    nodes = view(annotations, now=at("2026-12-05T03:00:00Z"))
    found = rejected(MaintenanceWindow(), nodes)
    assert found[maintenance.IN_WINDOW] == list(range(0, 5000, 4))
    assert found[maintenance.UNREADABLE] == list(range(2, 5000, 4))
    rejected(MaintenanceWindow(), nodes)
    assert intervals.schedule.cache_info().misses == 3


def test_plumb_accepts_its_answers() -> None:
    found = registry.of(MaintenanceWindow)
    installed = found.plugins["MaintenanceWindow"]
    assert installed.problem == ""
    assert installed.points == (interface.FILTER,)
    enabled = enabling.enable(installed, frozenset({interface.FILTER}), 0, {"leadSeconds": 60})
    plugin = enabling.instance(enabled, found)
    nodes = view([{KEY: WINDOW}, {KEY: "soon"}, {}], now=at("2026-12-05T01:59:30Z"))
    judgement = judgements.judge(POD, nodes, [(enabled, plugin)])
    assert judgement.failure is None
    assert [(r.reason, r.fails.tolist()) for r in judgement.rejections] == [
        (maintenance.IN_WINDOW, [True, False, False]),
        (maintenance.UNREADABLE, [False, True, False]),
    ]


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"leadSeconds": "ten"}, "leadSeconds", 'must be an integer, got string "ten"'),
        ({"windowAnnotation": KEY}, "windowAnnotation", "unknown field"),
        ({"leadSeconds": -5}, "", "leadSeconds: must be 0 or more, got -5"),
        ({"annotation": "not a key"}, "", "annotation: 'not a key' is not an annotation key"),
    ],
)
def test_bad_args_are_refused_naming_the_field(
    raw: Mapping[str, object], field: str, words: str
) -> None:
    with pytest.raises(arguments.ArgsError) as refused:
        arguments.decode(MaintenanceWindow.Args, raw)
    assert refused.value.field == field
    assert refused.value.message == words


def test_args_in_either_spelling() -> None:
    snake = arguments.decode(MaintenanceWindow.Args, {"lead_seconds": 30})
    camel = arguments.decode(MaintenanceWindow.Args, {"leadSeconds": 30})
    assert snake == camel == maintenance.WindowArgs(lead_seconds=30)
    assert arguments.decode(MaintenanceWindow.Args, None) == maintenance.WindowArgs()


PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: plumb
    plugins:
      multiPoint:
        enabled:
          - name: MaintenanceWindow
    pluginConfig:
      - name: MaintenanceWindow
        args:
          annotation: example.com/maintenance
          leadSeconds: LEAD
"""


def test_a_profile_enables_it_with_its_args() -> None:
    found = registry.of(MaintenanceWindow)
    read = configuration.parse(PROFILE.replace("LEAD", "900"), extensions=found)
    (enabled,) = read.profiles[0].extensions
    assert enabled.name == "MaintenanceWindow"
    assert enabled.points == frozenset({interface.FILTER})
    assert enabled.events == (interface.NODE_ADDED, interface.NODE_CHANGED)
    plugin = enabling.instance(enabled, found)
    assert isinstance(plugin, MaintenanceWindow)
    assert plugin.settings == maintenance.WindowArgs(
        annotation="example.com/maintenance", lead_seconds=900
    )
    with pytest.raises(errors.ConfigError) as refused:
        configuration.parse(PROFILE.replace("LEAD", "soon"), extensions=found)
    assert str(refused.value) == (
        "profiles[0].pluginConfig[0].args.leadSeconds: the plugin MaintenanceWindow "
        "(plumb_maintenance_window.maintenance:MaintenanceWindow) refuses its args: "
        'must be an integer, got string "soon"'
    )
