"""The Python plugins installed beside plumb, found through the ``plumb.plugins`` entry points.

Each entry point names a ``Plugin`` subclass (``name = "package.module:Class"``). A plugin that
cannot be imported, is not a Plugin, has no name, takes a built-in plugin's name or implements
no extension point stays listed with its problem (``plumb plugins`` shows it) and cannot be
enabled; the others can, by name, in any profile.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from plumb.extensions import interface

GROUP = "plumb.plugins"

# The extension points as a KubeSchedulerConfiguration's plugin sets name them.
CONFIG_POINTS = {
    interface.PRE_FILTER: "preFilter",
    interface.FILTER: "filter",
    interface.SCORE: "score",
    interface.RESERVE: "reserve",
    interface.PERMIT: "permit",
    interface.PRE_BIND: "preBind",
    interface.POST_BIND: "postBind",
}


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class InstalledPlugin:
    """One entry point: the plugin's name, where it comes from, its extension points (in
    interface.METHODS' order), or why it cannot be used (``problem``)."""

    name: str
    entry: str
    distribution: str
    version: str
    points: tuple[str, ...] = ()
    problem: str = ""
    plugin: type[interface.Plugin] | None = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(frozen=True, slots=True)
class Registry:
    """The installed plugins by name (those with a problem too)."""

    plugins: Mapping[str, InstalledPlugin] = dataclasses.field(default_factory=dict)

    def usable(self) -> Mapping[str, InstalledPlugin]:
        return {name: p for name, p in self.plugins.items() if not p.problem}

    def config_points(self) -> Mapping[str, frozenset[str]]:
        """Each usable plugin's extension points in the configuration's names (``filter``,
        ``score``, ...), as the in-tree registry lists a built-in's."""
        return {
            name: frozenset(CONFIG_POINTS[point] for point in p.points)
            for name, p in self.usable().items()
        }


EMPTY = Registry()


def points_of(plugin: type[interface.Plugin]) -> tuple[str, ...]:
    """The extension points a plugin class implements: the methods it defines."""
    return tuple(
        point
        for point, method in interface.METHODS.items()
        if callable(getattr(plugin, method, None))
    )


def examine(
    plugin: Any, entry: str, distribution: str, version: str, builtin: Iterable[str] = ()
) -> InstalledPlugin:
    """An entry point's object as an InstalledPlugin plugin, its problem said if it has one."""

    def broken(name: str, problem: str) -> InstalledPlugin:
        return InstalledPlugin(
            name=name, entry=entry, distribution=distribution, version=version, problem=problem
        )

    if not (inspect.isclass(plugin) and issubclass(plugin, interface.Plugin)):
        return broken(entry, "is not a subclass of plumb.extensions.interface.Plugin")
    name = plugin.name
    if not name:
        return broken(entry, "sets no name")
    if name in set(builtin):
        return broken(name, f"takes the name of kube-scheduler's in-tree plugin {name}")
    points = points_of(plugin)
    if not points:
        return broken(name, "implements no extension point")
    if plugin.normalize not in interface.NORMALIZATIONS:
        return broken(
            name,
            f"normalize is {plugin.normalize!r}, not one of {', '.join(interface.NORMALIZATIONS)}",
        )
    unknown = [event for event in plugin.events if event not in interface.EVENTS]
    if unknown:
        return broken(name, f"events {unknown} are not among {', '.join(interface.EVENTS)}")
    if plugin.timeout <= 0:
        return broken(name, f"timeout is {plugin.timeout}; it must be above 0 seconds")
    return InstalledPlugin(
        name=name,
        entry=entry,
        distribution=distribution,
        version=plugin.version or version,
        points=points,
        plugin=plugin,
    )


def of(*plugins: type[interface.Plugin], version: str = "0") -> Registry:
    """A registry of these classes, as if each were installed (tests, the examples' own)."""
    found = {}
    for plugin in plugins:
        entry = f"{plugin.__module__}:{plugin.__qualname__}"
        installed = examine(plugin, entry, plugin.__module__, version)
        found[installed.name] = installed
    return Registry(found)


def discover(builtin: Iterable[str] = ()) -> Registry:
    """The plugins the environment's distributions declare, loaded; a second entry point of
    the same name is a problem of its own (listed under its entry)."""
    found: dict[str, InstalledPlugin] = {}
    names = frozenset(builtin)
    for point in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda p: p.value):
        distribution = point.dist.name if point.dist is not None else ""
        version = point.dist.version if point.dist is not None else ""
        try:
            loaded = point.load()
        except Exception as error:  # a broken package must not stop plumb
            installed = InstalledPlugin(
                name=point.name,
                entry=point.value,
                distribution=distribution,
                version=version,
                problem=f"cannot be imported: {type(error).__name__}: {error}",
            )
        else:
            installed = examine(loaded, point.value, distribution, version, names)
        if installed.name in found:
            installed = dataclasses.replace(
                installed,
                name=installed.entry,
                problem=f"{installed.name} is also declared by {found[installed.name].entry}",
            )
        found[installed.name] = installed
    return Registry(found)


@functools.cache
def installed(builtin: frozenset[str]) -> Registry:
    """``discover`` once per process: the plugins plumb runs with (``builtin``: the in-tree
    plugins' names, which no plugin may take)."""
    return discover(builtin)
