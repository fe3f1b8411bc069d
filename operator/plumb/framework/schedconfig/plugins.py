"""kube-scheduler's in-tree plugins and how a profile's plugins become the plugin list of each
extension point: the defaults merged with the profile's enabled and disabled sets
(v1/default_plugins.go), then the framework's checks, its multiPoint expansion and its score
weights (framework/runtime/framework.go). v1.34.4's are written out here; ``points``,
``registry`` and ``default_multi_point`` give each release's, with revisions.py's rows."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from plumb.framework import emulation
from plumb.framework.schedconfig import errors, revisions

# v1.34.4's extension points in the order the framework builds them (getExtensionPoints), each
# with the Go interface name its messages use; later ones follow (``points``).
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

# v1.34.4's in-tree registry (framework/plugins/registry.go) and the extension points each
# plugin implements, read from the plugins' methods; ``registry`` gives each release's.
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
class PluginEntry:
    """One enabled entry; weight 0 when the file sets none (the internal type's zero)."""

    name: str
    weight: int = 0
    path: str = dataclasses.field(default="", compare=False)


@dataclasses.dataclass(frozen=True, slots=True)
class PluginSet:
    enabled: tuple[PluginEntry, ...] = ()
    disabled: tuple[str, ...] = ()


# v1.34.4's default multiPoint set (DynamicResourceAllocation is on by default in v1.34, so
# DynamicResources sits before DefaultPreemption); ``default_multi_point`` gives each release's.
DEFAULT_MULTI_POINT = PluginSet(
    enabled=(
        PluginEntry("SchedulingGates"),
        PluginEntry("PrioritySort"),
        PluginEntry("NodeUnschedulable"),
        PluginEntry("NodeName"),
        PluginEntry("TaintToleration", 3),
        PluginEntry("NodeAffinity", 2),
        PluginEntry("NodePorts"),
        PluginEntry("NodeResourcesFit", 1),
        PluginEntry("VolumeRestrictions"),
        PluginEntry("NodeVolumeLimits"),
        PluginEntry("VolumeBinding"),
        PluginEntry("VolumeZone"),
        PluginEntry("PodTopologySpread", 2),
        PluginEntry("InterPodAffinity", 2),
        PluginEntry("DynamicResources"),
        PluginEntry("DefaultPreemption"),
        PluginEntry("NodeResourcesBalancedAllocation", 1),
        PluginEntry("ImageLocality", 1),
        PluginEntry("DefaultBinder"),
    )
)

_MAX_INT64 = 2**63 - 1
_MAX_NODE_SCORE = 100


def points(minor: int = emulation.NEWEST) -> tuple[tuple[str, str], ...]:
    """The extension points of v1.``minor`` with their Go interface names, in the framework's
    order."""
    return POINTS + tuple(
        (row.name, row.interface) for row in revisions.rows(revisions.POINT, minor)
    )


def point_names(minor: int = emulation.NEWEST) -> tuple[str, ...]:
    return tuple(point for point, _ in points(minor))


def validated_points(minor: int = emulation.NEWEST) -> tuple[str, ...]:
    """The extension points whose enabled plugins validation holds against the removed ones
    (validation.go's stagesToPluginSet)."""
    later = (row.name for row in revisions.rows(revisions.POINT, minor) if row.validated)
    return (*(point for point, _ in POINTS), *later)


def registry(minor: int = emulation.NEWEST) -> Mapping[str, frozenset[str]]:
    """v1.``minor``'s in-tree plugins and the extension points each runs at."""
    plugins = {name: set(at) for name, at in REGISTRY.items()}
    for row in revisions.REVISIONS:
        if row.minor > minor or row.kind not in (revisions.PLUGIN, revisions.RUNS_AT):
            continue
        at = plugins.setdefault(row.name, set())
        if row.added:
            at.update(row.points)
        else:
            at.difference_update(row.points)
    return {name: frozenset(at) for name, at in plugins.items()}


def default_multi_point(kube: emulation.Emulation = emulation.NEWEST_EMULATION) -> PluginSet:
    """The default multiPoint set of the release ``kube`` decides as, with its gates
    (getDefaultPlugins and applyFeatureGates)."""
    enabled = list(DEFAULT_MULTI_POINT.enabled)
    for row in revisions.rows(revisions.ORDER, kube.minor):
        moved = next(p for p in enabled if p.name == row.name)
        enabled.remove(moved)
        enabled.insert(next(i for i, p in enumerate(enabled) if p.name == row.before), moved)
    newest: dict[str, revisions.Revision] = {}
    for row in revisions.rows(revisions.DEFAULT, kube.minor):
        newest[row.name] = row  # a newer row replaces an older one, keeping its place
    for name, row in newest.items():
        present = next((i for i, p in enumerate(enabled) if p.name == name), None)
        wanted = row.added and revisions.gates_on(row, kube)
        if present is not None:
            if wanted:
                enabled[present] = PluginEntry(name, row.weight)
            else:
                del enabled[present]
        elif wanted:
            index = next((i for i, p in enumerate(enabled) if p.name == row.before), None)
            enabled.insert(len(enabled) if index is None else index, PluginEntry(name, row.weight))
    return PluginSet(enabled=tuple(enabled))


def plugin_set(raw: Mapping[str, Any] | None, path: str) -> PluginSet:
    """A decoded PluginSet (already type-checked)."""
    raw = raw or {}
    enabled = tuple(
        PluginEntry(str(p.get("name") or ""), int(p.get("weight") or 0), f"{path}.enabled[{i}]")
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
    enabled: list[PluginEntry] = []
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


def merged(
    raw_plugins: Mapping[str, Any] | None,
    path: str,
    kube: emulation.Emulation = emulation.NEWEST_EMULATION,
) -> dict[str, PluginSet]:
    """A profile's plugins after defaulting: every extension point of the release and
    multiPoint."""
    sets = {point: PluginSet() for point in point_names(kube.minor)}
    sets["multiPoint"] = default_multi_point(kube)
    if raw_plugins is None:
        return sets
    for point in sets:
        custom = plugin_set(raw_plugins.get(point), f"{path}.{point}")
        sets[point] = merge(sets[point], custom)
    return sets


def v1(plugin_set: PluginSet) -> dict[str, list[dict[str, Any]]]:
    """A plugin set in kubescheduler.config.k8s.io/v1's form (empty lists left out)."""
    out: dict[str, list[dict[str, Any]]] = {}
    if plugin_set.enabled:
        out["enabled"] = [{"name": p.name, "weight": p.weight} for p in plugin_set.enabled]
    if plugin_set.disabled:
        out["disabled"] = [{"name": name} for name in plugin_set.disabled]
    return out


def enabled_names(sets: Mapping[str, PluginSet]) -> set[str]:
    """Every plugin enabled at some extension point (the plugins the framework builds)."""
    return {plugin.name for s in sets.values() for plugin in s.enabled}


def args_names(sets: Mapping[str, PluginSet], minor: int = emulation.NEWEST) -> set[str]:
    """The plugins that get their default args (pluginsNames): those enabled at multiPoint or
    at a point whose plugins get them (not v1.37's podGroupPostFilter)."""
    without = {row.name for row in revisions.rows(revisions.POINT, minor) if not row.default_args}
    return {
        plugin.name for point, s in sets.items() if point not in without for plugin in s.enabled
    }


@dataclasses.dataclass(frozen=True, slots=True)
class Framework:
    """The plugins a profile runs at each extension point, in order, and the score weights."""

    points: Mapping[str, tuple[str, ...]]
    weights: Mapping[str, int]
    weight_paths: Mapping[str, str]


def build(
    sets: Mapping[str, PluginSet],
    scheduler_name: str,
    path: str,
    kube: emulation.Emulation = emulation.NEWEST_EMULATION,
    extensions: Mapping[str, frozenset[str]] | None = None,
) -> Framework:
    """NewFramework's checks and lists, raising its refusals (each names plumb's field); a
    plugin, or a plugin at an extension point, of a later release than ``kube`` is refused
    saying so. ``extensions``: the installed Python plugins and their points, registered
    beside the in-tree ones (as an out-of-tree registry joins kube-scheduler's)."""
    minor = kube.minor
    plugins = {**registry(minor), **(extensions or {})}

    def refuse(where: str, message: str) -> errors.ConfigError:
        return errors.framework(where, scheduler_name, message)

    def check_exists(plugin: PluginEntry, where: str, interface: str) -> None:
        if plugin.name in plugins:
            return
        row = revisions.later(revisions.PLUGIN, plugin.name, minor)
        if row is not None:
            raise errors.later(where, f'the plugin "{plugin.name}"', row.minor, minor)
        raise refuse(where, f'{interface} "{plugin.name}" does not exist')

    lists: dict[str, list[str]] = {}
    for point, interface in points(minor):
        names: list[str] = []
        for plugin in sets[point].enabled:
            where = plugin.path or f"{path}.plugins.{point}"
            check_exists(plugin, where, interface)
            if point not in plugins[plugin.name]:
                row = revisions.later_point_of(plugin.name, point, minor)
                if row is not None:
                    what = f'the plugin "{plugin.name}" at {point}'
                    raise errors.later(where, what, row.minor, minor)
                raise refuse(where, f'plugin "{plugin.name}" does not extend {interface} plugin')
            if plugin.name in names:
                raise refuse(where, f'plugin "{plugin.name}" already registered as "{interface}"')
            names.append(plugin.name)
        lists[point] = names

    multi = sets["multiPoint"].enabled
    if multi:
        for point, interface in points(minor):
            if "*" in sets[point].disabled:
                continue
            listed = lists[point]
            overrides: list[str] = []
            expanded: list[str] = []
            for plugin in multi:
                where = plugin.path or f"{path}.plugins.multiPoint"
                check_exists(plugin, where, interface)
                if point not in plugins[plugin.name] or plugin.name in sets[point].disabled:
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
            lists[point] = first + expanded + rest

    if len(lists["queueSort"]) != 1:
        raise refuse(
            f"{path}.plugins.queueSort",
            "only one queue sort plugin required for profile with scheduler name "
            f'"{scheduler_name}", but got {len(lists["queueSort"])}',
        )
    if not lists["bind"]:
        raise refuse(
            f"{path}.plugins.bind",
            "at least one bind plugin is needed for profile with scheduler name "
            f'"{scheduler_name}"',
        )
    # v1.36's "at most one placement generate plugin" cannot fail: one plugin generates
    # placements, and a plugin is listed once per point.
    prefix = "score plugins: " if revisions.applies(revisions.SCORE_WEIGHT_PREFIX, minor) else ""
    weights, weight_paths = _weights(
        sets["score"].enabled + multi, "score", plugins, scheduler_name, path, prefix
    )
    if "placementScore" in lists:
        _weights(
            sets["placementScore"].enabled + multi,
            "placementScore",
            plugins,
            scheduler_name,
            path,
            "placement score plugins: ",
        )
    return Framework(
        points={point: tuple(names) for point, names in lists.items()},
        weights=weights,
        weight_paths=weight_paths,
    )


def _weights(
    enabled: Sequence[PluginEntry],
    point: str,
    plugins: Mapping[str, frozenset[str]],
    scheduler_name: str,
    path: str,
    prefix: str,
) -> tuple[dict[str, int], dict[str, str]]:
    """getValidScoreWeights (v1.34: getScoreWeights) for the plugins of ``point`` (score, or
    from v1.36 placementScore): the point's entry's weight before multiPoint's, 0 meaning 1,
    and its overflow check in Go's int64 arithmetic (which wraps, so a negative weight passes
    only where nothing follows it); ``prefix`` begins its error from v1.36."""
    weights: dict[str, int] = {}
    paths: dict[str, str] = {}
    total = 0
    negative = ""
    for plugin in enabled:
        if point not in plugins[plugin.name] or plugin.name in weights:
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
                negative or where,
                scheduler_name,
                f"{prefix}total score of Score plugins could overflow",
            )
        total = _wrap(total + weight * _MAX_NODE_SCORE)
    return weights, paths


def _wrap(value: int) -> int:
    return ((value + 2**63) % 2**64) - 2**63
