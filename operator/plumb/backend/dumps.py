"""A cache written as JSON, with its journal, and rebuilt from it as of an earlier state.

``dump`` writes what the cache holds now (nodes, their resource columns, placed pods with their
node and state, namespace labels, Service and controller selectors) and the journal's undo
records; ``Dumped.rewind(seq)`` applies the undos newer than ``seq``, newest first, and builds a
fresh ``Cache`` holding what the original held when its journal stood at ``seq``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from plumb.backend import cache as cache_module
from plumb.backend import codec, objects
from plumb.backend import journal as journal_module

FORMAT = "plumb.dev/cache/v1"


class DumpError(ValueError):
    """A file that is not a cache dump, or cannot go back as far as asked."""


def dump(cache: cache_module.Cache) -> dict[str, Any]:
    """The cache and its journal as JSON values."""
    nodes = [cache.nodes.info(name) for name in cache.nodes.names()]
    return {
        "format": FORMAT,
        "seq": cache.journal.seq,
        "oldest": cache.journal.oldest,
        "resources": list(cache.nodes.resources),
        "nodes": codec.encode(nodes),
        "pods": codec.encode(sorted(cache.placed(), key=lambda p: p.pod.uid)),
        "namespaces": codec.encode(dict(cache.namespace_labels)),
        "workloads": codec.encode(cache.workloads.state()),
        "journal": [
            {"seq": seq, "undo": type(undo).__name__, **codec.encode(undo)}
            for seq, undo in cache.journal.entries()
        ],
    }


@dataclasses.dataclass(frozen=True, kw_only=True)
class Dumped:
    """A dump read back: the state at ``seq`` and the undos that reach back to ``oldest``."""

    seq: int
    oldest: int
    resources: tuple[str, ...]
    nodes: Mapping[str, objects.NodeInfo]
    pods: Mapping[str, journal_module.Placed]
    namespaces: Mapping[str, Mapping[str, str]]
    workloads: journal_module.Reworkload
    journal: tuple[tuple[int, journal_module.Undo], ...]

    def rewind(self, seq: int) -> cache_module.Cache:
        """A cache as the dumped one was when its journal stood at ``seq``."""
        if not self.oldest <= seq <= self.seq:
            raise DumpError(
                f"the dump reaches back to cache state {self.oldest} and was taken at "
                f"{self.seq}; state {seq} is outside it (dump sooner after the decision, or "
                "keep a longer journal with --journal)"
            )
        nodes, pods = dict(self.nodes), dict(self.pods)
        namespaces: dict[str, Mapping[str, str]] = dict(self.namespaces)
        workloads = self.workloads
        for at, undo in reversed(self.journal):
            if at <= seq:
                break
            match undo:
                case journal_module.Unplace(uid=uid):
                    pods.pop(uid, None)
                case journal_module.Replace(placed=placed):
                    pods[placed.pod.uid] = placed
                case journal_module.Restate(uid=uid, state=state):
                    pods[uid] = dataclasses.replace(pods[uid], state=state)
                case journal_module.Renode(name=name, node=node):
                    _put(nodes, name, node)
                case journal_module.Renamespace(name=name, labels=labels):
                    _put(namespaces, name, labels)
                case journal_module.Reworkload():
                    workloads = undo
        cache = cache_module.Cache()
        for resource in self.resources:
            cache.nodes.column(resource)
        for name, labels in sorted(namespaces.items()):
            cache.set_namespace(name, labels)
        cache.workloads.restore(workloads)
        for name in sorted(nodes):
            cache.upsert_node(nodes[name])
        for uid in sorted(pods):
            cache.place(pods[uid])
        return cache


def _put(into: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        into.pop(key, None)
    else:
        into[key] = value


def load(data: Mapping[str, Any]) -> Dumped:
    """A dump from the JSON values ``dump`` wrote."""
    if data.get("format") != FORMAT:
        raise DumpError(f"not a plumb cache dump (format {data.get('format')!r}, want {FORMAT})")
    try:
        nodes = codec.decode(tuple[objects.NodeInfo, ...], data["nodes"])
        pods = codec.decode(tuple[journal_module.Placed, ...], data["pods"])
        entries = tuple((int(entry["seq"]), _undo(entry)) for entry in data["journal"])
        return Dumped(
            seq=int(data["seq"]),
            oldest=int(data["oldest"]),
            resources=tuple(str(r) for r in data["resources"]),
            nodes={node.name: node for node in nodes},
            pods={placed.pod.uid: placed for placed in pods},
            namespaces=codec.decode(dict[str, Mapping[str, str]], data["namespaces"]),
            workloads=codec.decode(journal_module.Reworkload, data["workloads"]),
            journal=entries,
        )
    except (KeyError, TypeError, codec.CodecError) as error:
        raise DumpError(f"a malformed cache dump: {error}") from error


def _undo(entry: Mapping[str, Any]) -> journal_module.Undo:
    kind = journal_module.UNDO_KINDS.get(str(entry.get("undo")))
    if kind is None:
        raise DumpError(f"unknown journal entry {entry.get('undo')!r}")
    return codec.decode(kind, entry)
