"""kube-scheduler v1.34.4's in-tree plugins and how a profile's plugins become the plugin list
of each extension point: the defaults merged with the profile's enabled and disabled sets
(v1/default_plugins.go), then the framework's checks, its multiPoint expansion and its score
weights (framework/runtime/framework.go)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from plumb.framework.schedconfig import errors

# Extension points in the order the framework builds them (getExtensionPoints), each with the
# Go interface name its messages use.
POINTS = (
    ("preFilter", "PreFilterPlugin"),
    ("filter", "FilterPlugin"),
    ("postFilter", "PostFilterPlugin"),
    ("reserve", "ReservePlugin"),
    ("preScore", "PreScorePlugin"),
    ("score", "ScorePlugin"),
    ("preBind", "PreBindPlugin"),
    ("bind", "BindPlugin"),
    ("postBind", "PostBindPlugin"),
    ("permit", "PermitPlugin"),
    ("preEnqueue", "PreEnqueuePlugin"),
    ("queueSort", "QueueSortPlugin"),
)
POINT_NAMES = tuple(point for point, _ in POINTS)

# The in-tree registry (framework/plugins/registry.go) and the extension points each plugin
# implements, read from the plugins' methods.
REGISTRY: Mapping[str, frozenset[str]] = {
    "DynamicResources": frozenset(
        {"preEnqueue", "preFilter", "filter", "postFilter", "reserve", "preBind"}
    ),
    "ImageLocality": frozenset({"score"}),
    "TaintToleration": frozenset({"filter", "preScore", "score"}),
    "NodeName": frozenset({"filter"}),
    "NodePorts": frozenset({"preFilter", "filter"}),
    "NodeAffinity": frozenset({"preFilter", "filter", "preScore", "score"}),
    "PodTopologySpread": frozenset({"preFilter", "filter", "preScore", "score"}),
    "NodeUnschedulable": frozenset({"filter"}),
    "NodeResourcesFit": frozenset({"preFilter", "filter", "preScore", "score"}),
    "NodeResourcesBalancedAllocation": frozenset({"preScore", "score"}),
    "VolumeBinding": frozenset({"preFilter", "filter", "reserve", "preBind", "preScore", "score"}),
    "VolumeRestrictions": frozenset({"preFilter", "filter"}),
    "VolumeZone": frozenset({"preFilter", "filter"}),
    "NodeVolumeLimits": frozenset({"preFilter", "filter"}),
    "InterPodAffinity": frozenset({"preFilter", "filter", "preScore", "score"}),
    "PrioritySort": frozenset({"queueSort"}),
    "DefaultBinder": frozenset({"bind"}),
    "DefaultPreemption": frozenset({"preEnqueue", "postFilter"}),
    "SchedulingGates": frozenset({"preEnqueue"}),
}

# Plugins removed from the v1 API: validation names them before the framework sees them.
REMOVED = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")


@dataclasses.dataclass(frozen=True, slots=True)
class Plugin:
    """One enabled entry; weight 0 when the file sets none (the internal type's zero)."""

    name: str
    weight: int = 0
    path: str = dataclasses.field(default="", compare=False)


@dataclasses.dataclass(frozen=True, slots=True)
class PluginSet:
    enabled: tuple[Plugin, ...] = ()
    disabled: tuple[str, ...] = ()


# The default multiPoint set (DynamicResourceAllocation is on by default in v1.34, so
# DynamicResources sits before DefaultPreemption).
DEFAULT_MULTI_POINT = PluginSet(
    enabled=(
        Plugin("SchedulingGates"),
        Plugin("PrioritySort"),
        Plugin("NodeUnschedulable"),
        Plugin("NodeName"),
        Plugin("TaintToleration", 3),
        Plugin("NodeAffinity", 2),
        Plugin("NodePorts"),
        Plugin("NodeResourcesFit", 1),
        Plugin("VolumeRestrictions"),
        Plugin("NodeVolumeLimits"),
        Plugin("VolumeBinding"),
        Plugin("VolumeZone"),
        Plugin("PodTopologySpread", 2),
        Plugin("InterPodAffinity", 2),
        Plugin("DynamicResources"),
        Plugin("DefaultPreemption"),
        Plugin("NodeResourcesBalancedAllocation", 1),
        Plugin("ImageLocality", 1),
        Plugin("DefaultBinder"),
    )
)

_MAX_INT64 = 2**63 - 1
_MAX_NODE_SCORE = 100


def plugin_set(raw: Mapping[str, Any] | None, path: str) -> PluginSet:
    """A decoded PluginSet (already type-checked)."""
    raw = raw or {}
    enabled = tuple(
        Plugin(str(p.get("name") or ""), int(p.get("weight") or 0), f"{path}.enabled[{i}]")
        for i, p in enumerate(raw.get("enabled") or ())
        if p is not None
    )
    disabled = tuple(str(p.get("name") or "") for p in raw.get("disabled") or () if p is not None)
    return PluginSet(enabled, disabled)


def merge(default: PluginSet, custom: PluginSet) -> PluginSet:
    """mergePluginSet: the defaults less the disabled ones (all for "*"), a default the custom
    set enables again replaced in place, then the other custom plugins in their order."""
    disabled = custom.disabled + default.disabled
    replaced: set[int] = set()
    custom_index = {plugin.name: i for i, plugin in enumerate(custom.enabled)}
    enabled: list[Plugin] = []
    if "*" not in disabled:
        for plugin in default.enabled:
            if plugin.name in disabled:
                continue
            if plugin.name in custom_index:
                index = custom_index[plugin.name]
                plugin = custom.enabled[index]
                replaced.add(index)
            enabled.append(plugin)
    enabled.extend(p for i, p in enumerate(custom.enabled) if i not in replaced)
    return PluginSet(tuple(enabled), disabled)


def merged(raw_plugins: Mapping[str, Any] | None, path: str) -> dict[str, PluginSet]:
    """A profile's plugins after defaulting: every extension point and multiPoint."""
    sets = {point: PluginSet() for point in POINT_NAMES}
    sets["multiPoint"] = DEFAULT_MULTI_POINT
    if raw_plugins is None:
        return sets
    for point in (*POINT_NAMES, "multiPoint"):
        custom = plugin_set(raw_plugins.get(point), f"{path}.{point}")
        sets[point] = merge(sets[point], custom)
    return sets


def enabled_names(sets: Mapping[str, PluginSet]) -> set[str]:
    """Every plugin enabled at some extension point (the plugins the framework builds)."""
    return {plugin.name for s in sets.values() for plugin in s.enabled}


@dataclasses.dataclass(frozen=True, slots=True)
class Framework:
    """The plugins a profile runs at each extension point, in order, and the score weights."""

    points: Mapping[str, tuple[str, ...]]
    weights: Mapping[str, int]
    weight_paths: Mapping[str, str]


def build(sets: Mapping[str, PluginSet], scheduler_name: str, path: str) -> Framework:
    """NewFramework's checks and lists, raising its refusals (each names plumb's field)."""

    def refuse(where: str, message: str) -> errors.ConfigError:
        return errors.framework(where, scheduler_name, message)

    points: dict[str, list[str]] = {}
    for point, interface in POINTS:
        names: list[str] = []
        for plugin in sets[point].enabled:
            where = plugin.path or f"{path}.plugins.{point}"
            if plugin.name not in REGISTRY:
                raise refuse(where, f'{interface} "{plugin.name}" does not exist')
            if point not in REGISTRY[plugin.name]:
                raise refuse(where, f'plugin "{plugin.name}" does not extend {interface} plugin')
            if plugin.name in names:
                raise refuse(where, f'plugin "{plugin.name}" already registered as "{interface}"')
            names.append(plugin.name)
        points[point] = names

    multi = sets["multiPoint"].enabled
    if multi:
        for point, interface in POINTS:
            if "*" in sets[point].disabled:
                continue
            listed = points[point]
            overrides: list[str] = []
            expanded: list[str] = []
            for plugin in multi:
                where = plugin.path or f"{path}.plugins.multiPoint"
                if plugin.name not in REGISTRY:
                    raise refuse(where, f'{interface} "{plugin.name}" does not exist')
                if point not in REGISTRY[plugin.name] or plugin.name in sets[point].disabled:
                    continue
                if plugin.name in listed:
                    if plugin.name not in overrides:
                        overrides.append(plugin.name)
                    continue
                if plugin.name in expanded:
                    raise refuse(
                        where, f'plugin "{plugin.name}" already registered as "{interface}"'
                    )
                expanded.append(plugin.name)
            first = [name for name in listed if name in overrides]
            rest = [name for name in listed if name not in overrides]
            points[point] = first + expanded + rest

    if len(points["queueSort"]) != 1:
        raise refuse(
            f"{path}.plugins.queueSort",
            "only one queue sort plugin required for profile with scheduler name "
            f'"{scheduler_name}", but got {len(points["queueSort"])}',
        )
    if not points["bind"]:
        raise refuse(
            f"{path}.plugins.bind",
            "at least one bind plugin is needed for profile with scheduler name "
            f'"{scheduler_name}"',
        )
    weights, weight_paths = _weights(sets["score"].enabled + multi, scheduler_name, path)
    return Framework(
        points={point: tuple(names) for point, names in points.items()},
        weights=weights,
        weight_paths=weight_paths,
    )


def _weights(
    plugins: Sequence[Plugin], scheduler_name: str, path: str
) -> tuple[dict[str, int], dict[str, str]]:
    """getScoreWeights: the score entry's weight before multiPoint's, 0 meaning 1, and its
    overflow check in Go's int64 arithmetic (which wraps, so a negative weight passes only
    where nothing follows it)."""
    weights: dict[str, int] = {}
    paths: dict[str, str] = {}
    total = 0
    negative = ""
    for plugin in plugins:
        if "score" not in REGISTRY[plugin.name] or plugin.name in weights:
            continue
        weight = plugin.weight or 1
        weights[plugin.name] = weight
        where = f"{plugin.path}.weight" if plugin.path else f"{path}.plugins.multiPoint"
        paths[plugin.name] = where
        if weight < 0 and not negative:
            negative = where
        if weight * _MAX_NODE_SCORE > _wrap(_MAX_INT64 - total):
            # Only a negative weight before this one gets here: name that one.
            raise errors.framework(
                negative or where, scheduler_name, "total score of Score plugins could overflow"
            )
        total = _wrap(total + weight * _MAX_NODE_SCORE)
    return weights, paths


def _wrap(value: int) -> int:
    return ((value + 2**63) % 2**64) - 2**63
