"""Small clusters for unit tests: pods and nodes from builders into a cache, and decisions."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import snapshot
from plumb.backend.records import objects
from plumb.framework import cycle
from plumb_dev.testing.builders import NodeBuilder, PodBuilder


def pod(builder: PodBuilder, uid: str) -> objects.PodInfo:
    """The record the cache keeps of the builder's pod, under ``uid`` (the builder is left as
    it was)."""
    return objects.parse_pod(builder.copy().uid(uid).obj())


def cluster(nodes: Iterable[NodeBuilder], bound: Iterable[PodBuilder] = ()) -> cache_module.Cache:
    """A cache holding these nodes, and these pods bound where their builders say."""
    c = cache_module.Cache()
    for node in nodes:
        c.upsert_node(objects.parse_node(node.obj()))
    for i, builder in enumerate(bound):
        c.add_pod(pod(builder, f"bound-{i}"))
    return c


def schedule(c: cache_module.Cache, builder: PodBuilder, uid: str = "pending") -> cycle.Decision:
    return cycle.schedule(pod(builder, uid), c.snapshot(), c)


def one_at_a_time(c: cache_module.Cache, builders: Iterable[PodBuilder]) -> list[str | None]:
    """Schedule each pod in turn, assuming it where it lands before the next one."""
    placed: list[str | None] = []
    for i, builder in enumerate(builders):
        info = pod(builder, f"pending-{i}")
        decision = cycle.schedule(info, c.snapshot(), c)
        if decision.node is not None:
            c.assume(info, decision.node)
        placed.append(decision.node)
    return placed


def statics(*nodes: NodeBuilder) -> snapshot.NodeStatics:
    """Name-ordered node statics (no resources) for the static plugins' tests."""
    infos = sorted((objects.parse_node(n.obj()) for n in nodes), key=lambda info: info.name)
    n = len(infos)
    return snapshot.NodeStatics(infos, np.zeros(n, np.uint64), np.zeros((n, 4), np.int64))
