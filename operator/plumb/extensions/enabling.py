"""The Python plugins a profile enables: the record a profile keeps of each, and its instance.

A profile keeps plain data (``Enabled``: name, version, points, weight, args as written), so
it can be compared on reload, dumped with a snapshot and replayed; ``instance`` gives the
plugin object that record stands for, made once per (name, version, args) from the registry.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence

from plumb.extensions import arguments, interface, registry


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Enabled:
    """A plugin as a profile runs it: its extension points there (interface's names), its
    score weight (0 when it does not score), its args (canonical JSON), and how its scores
    are normalised and how long a call may take (its class's, kept so a replay knows them)."""

    name: str
    version: str
    points: frozenset[str]
    weight: int = 0
    args: str = "{}"
    normalize: str = interface.AS_IS
    timeout: float = 1.0
    batch_dependent: bool = False
    events: tuple[str, ...] = ()

    def runs(self, point: str) -> bool:
        return point in self.points


class MissingPlugin(LookupError):
    """A record names a plugin this process does not have (a replay elsewhere)."""


_made: dict[tuple[str, str, str], interface.Plugin] = {}
_lock = threading.Lock()


def enable(
    installed: registry.InstalledPlugin, points: frozenset[str], weight: int, raw_args: object
) -> Enabled:
    """The record of ``installed`` enabled at ``points``; its args decoded now, so a bad one
    is refused when the configuration is read (raises arguments.ArgsError)."""
    assert installed.plugin is not None, installed.name
    arguments.decode(installed.plugin.Args, raw_args)
    plugin = installed.plugin
    return Enabled(
        name=installed.name,
        version=installed.version,
        points=points,
        weight=weight,
        args=arguments.canonical(raw_args),
        normalize=plugin.normalize,
        timeout=float(plugin.timeout),
        batch_dependent=bool(plugin.batch_dependent),
        events=tuple(plugin.events),
    )


def differences(enabled: Sequence[Enabled], found: registry.Registry) -> list[str]:
    """How the plugins installed here differ from those a decision was made with: one line per
    plugin missing or of another version (a replay with them may decide otherwise)."""
    lines = []
    usable = found.usable()
    for plugin in enabled:
        here = usable.get(plugin.name)
        if here is None:
            lines.append(
                f"plugin {plugin.name} {plugin.version} decided it; it is not installed here"
            )
        elif here.version != plugin.version:
            lines.append(
                f"plugin {plugin.name} {plugin.version} decided it; {here.version} is installed "
                "here: the replay may decide otherwise"
            )
    return lines


def instance(enabled: Enabled, found: registry.Registry) -> interface.Plugin:
    """The plugin object for ``enabled``, made on first use (its args decoded again)."""
    key = (enabled.name, enabled.version, enabled.args)
    with _lock:
        made = _made.get(key)
        if made is not None:
            return made
    installed = found.usable().get(enabled.name)
    if installed is None or installed.plugin is None:
        raise MissingPlugin(f"the plugin {enabled.name} is not installed")
    plugin = installed.plugin(arguments.decode(installed.plugin.Args, json.loads(enabled.args)))
    with _lock:
        return _made.setdefault(key, plugin)
