"""A cache written as JSON, with its journal, and rebuilt from it as of an earlier state.

``dump`` writes what the cache holds now (nodes, their resource columns, placed pods with their
node and state, namespace labels, Service and controller selectors, the DRA objects and the
allocations assumed) and the journal's undo records; ``Dumped.rewind(seq)`` applies the undos
newer than ``seq``, newest first, and builds a fresh ``Cache`` holding what the original held
when its journal stood at ``seq``.

``dump`` is ``capture`` then ``CacheCapture.encode``. The capture copies only the containers, on
the thread that owns the cache; the records they hold are frozen, so the capture stays the cache
as it was while the cache moves on, and the encoding (most of the cost) can run in another
thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import codec
from plumb.backend.cache import journal as journal_module
from plumb.backend.records import objects

FORMAT = "plumb.dev/cache/v1"


class DumpError(ValueError):
    """A file that is not a cache dump, or cannot go back as far as asked."""


def dump(cache: cache_module.Cache) -> dict[str, Any]:
    """The cache and its journal as JSON values."""
    return capture(cache).encode()


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class CacheCapture:
    """The cache and its journal at one instant, not yet encoded: safe to encode in any thread
    while the cache goes on changing (it shares only frozen records with it)."""

    seq: int
    oldest: int
    resources: tuple[str, ...]
    nodes: tuple[objects.NodeInfo | None, ...]  # by name
    pods: tuple[journal_module.Placed, ...]  # in the cache's order; encode() sorts them
    namespaces: Mapping[str, Mapping[str, str]]
    workloads: journal_module.Reworkload
    undos: tuple[journal_module.Undo, ...]  # the journal's, oldest (number oldest + 1) first
    dra: journal_module.DraState = dataclasses.field(default_factory=journal_module.DraState)

    def encode(self) -> dict[str, Any]:
        """The dump's JSON values (the expensive part: run it off the event loop)."""
        return materialise(self.encode_lazily())

    def encode_lazily(self) -> dict[str, Any]:
        """``encode``'s document with its long arrays (nodes, pods, journal) left as iterators
        that encode one record at a time: written out as they go, the records' JSON values
        die young, where a whole document of them (millions of containers) would set off
        full garbage collections, each holding the GIL (and so the event loop) for long."""
        return {
            "format": FORMAT,
            "seq": self.seq,
            "oldest": self.oldest,
            "resources": list(self.resources),
            "nodes": map(codec.encode, self.nodes),
            "pods": map(codec.encode, sorted(self.pods, key=lambda p: p.pod.uid)),
            "namespaces": codec.encode(self.namespaces),
            "workloads": codec.encode(self.workloads),
            "dra": codec.encode(self.dra),
            "journal": (
                {"seq": seq, "undo": type(undo).__name__, **codec.encode(undo)}
                for seq, undo in enumerate(self.undos, self.oldest + 1)
            ),
        }


def materialise(document: Mapping[str, Any]) -> dict[str, Any]:
    """An ``encode_lazily`` document with its iterators run to lists: JSON values."""
    return {key: _materialised(value) for key, value in document.items()}


def _materialised(value: Any) -> Any:
    if isinstance(value, Mapping):
        return materialise(value)
    if isinstance(value, Iterator):
        return list(value)
    return value


def capture(cache: cache_module.Cache) -> CacheCapture:
    """What ``dump`` writes, copied out of ``cache`` without encoding it (cheap: call it on the
    thread that owns the cache, then ``encode`` anywhere)."""
    return CacheCapture(
        seq=cache.journal.seq,
        oldest=cache.journal.oldest,
        resources=tuple(cache.nodes.resources),
        nodes=tuple(cache.nodes.info(name) for name in cache.nodes.names()),
        pods=tuple(cache.placed()),
        # The label mappings are replaced, never changed in place, when a namespace changes.
        namespaces=dict(cache.namespace_labels),
        workloads=cache.workloads.state(),  # copies already
        undos=tuple(undo for _seq, undo in cache.journal.entries()),
        dra=cache.dra.state(),
    )


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
    dra: journal_module.DraState = dataclasses.field(default_factory=journal_module.DraState)

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
        slices = {piece.name: piece for piece in self.dra.slices}
        classes = {device_class.name: device_class for device_class in self.dra.classes}
        claims = {claim.key: claim for claim in self.dra.claims}
        templates = {f"{t.namespace}/{t.name}": t for t in self.dra.templates}
        pending = {p.claim: p for p in self.dra.pending}
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
                case journal_module.Reslice(name=name, slice=piece):
                    _put(slices, name, piece)
                case journal_module.Reclass(name=name, device_class=device_class):
                    _put(classes, name, device_class)
                case journal_module.Reclaim(key=key, claim=claim):
                    _put(claims, key, claim)
                case journal_module.Retemplate(key=key, template=template):
                    _put(templates, key, template)
                case journal_module.Repend(key=key, pending=assumed):
                    _put(pending, key, assumed)
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
        cache.dra.restore(
            journal_module.DraState(
                slices=tuple(slices[k] for k in sorted(slices)),
                classes=tuple(classes[k] for k in sorted(classes)),
                claims=tuple(claims[k] for k in sorted(claims)),
                templates=tuple(templates[k] for k in sorted(templates)),
                pending=tuple(pending[k] for k in sorted(pending)),
            )
        )
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
            # A dump from before DRA has none of it.
            dra=codec.decode(journal_module.DraState, data.get("dra") or {}),
        )
    except (KeyError, TypeError, codec.CodecError) as error:
        raise DumpError(f"a malformed cache dump: {error}") from error


def _undo(entry: Mapping[str, Any]) -> journal_module.Undo:
    kind = journal_module.UNDO_KINDS.get(str(entry.get("undo")))
    if kind is None:
        raise DumpError(f"unknown journal entry {entry.get('undo')!r}")
    return codec.decode(kind, entry)
