"""Python scheduling plugins for the tests: each does one thing a test can see (a filter by a
node label, a score by a node label, a plugin that raises, hangs or answers in the wrong shape
for pods whose name says so). Run as ``python -m tests.support.sample_plugins run ...``: plumb
with these plugins installed beside the real ones."""

from __future__ import annotations

import dataclasses
import functools
import sys
import threading
import time
from typing import ClassVar

import numpy as np

from plumb.extensions import interface, registry

# A pod whose name starts with one of these makes the plugins below misbehave for it alone.
RAISE, HANG, WRONG = "raise-", "hang-", "wrong-"
HANG_SECONDS = 3.0
released = threading.Event()  # set by a test to let a hanging call return at once


def _misbehave(pod: interface.PodView, count: int) -> object | None:
    """What the plugin answers instead, for a pod named to make it misbehave."""
    if pod.name.startswith(RAISE):
        raise RuntimeError(f"cannot judge {pod.name}")
    if pod.name.startswith(HANG):
        released.wait(HANG_SECONDS)
        return None
    if pod.name.startswith(WRONG):
        return np.zeros(count + 1, dtype=np.int64)
    return None


@dataclasses.dataclass(frozen=True)
class RackArgs:
    """The label a node must carry with a value from ``allowed``."""

    label: str = "plumb.test/rack"
    allowed: tuple[str, ...] = ("a",)

    def __post_init__(self) -> None:
        if not self.allowed:
            raise ValueError("allowed: name at least one rack")


class RackFilter(interface.Plugin):
    """Rejects the nodes whose rack label is not allowed (those without it: unresolvable)."""

    name = "RackFilter"
    version = "1.0"
    Args = RackArgs
    timeout = 0.5
    events = (interface.NODE_CHANGED,)

    def filter(self, pod: interface.PodView, nodes: interface.NodeView) -> object:
        wrong = _misbehave(pod, len(nodes))
        if wrong is not None:
            return wrong
        args: RackArgs = self.args
        rack = nodes.label(args.label)
        return [
            interface.FilterRejection(rack == "", "node(s) had no rack label", unresolvable=True),
            interface.FilterRejection(
                ~np.isin(rack, list(args.allowed)) & (rack != ""), "node(s) were in another rack"
            ),
        ]


class CheapScore(interface.Plugin):
    """Prefers nodes with a lower plumb.test/price label (a node without one scores 0)."""

    name = "CheapScore"
    version = "2.0"
    normalize = interface.REVERSED
    timeout = 0.5

    def score(self, pod: interface.PodView, nodes: interface.NodeView) -> object:
        wrong = _misbehave(pod, len(nodes))
        if wrong is not None:
            return wrong
        price = nodes.label("plumb.test/price")
        highest = max((int(p) for p in price if p), default=0)
        return np.array([int(p) if p else highest for p in price], dtype=np.int64)


class Gatekeeper(interface.Plugin):
    """Refuses pods labelled plumb.test/refuse at PreFilter, Reserve or Permit (the label's
    value says which), and records what it reserved."""

    name = "Gatekeeper"
    version = "1.0"
    reserved: ClassVar[list[tuple[str, str]]] = []
    unreserved: ClassVar[list[tuple[str, str]]] = []

    def pre_filter(self, pod: interface.PodView, nodes: interface.NodeView) -> object:
        if pod.labels.get("plumb.test/refuse") == "PreFilter":
            return interface.Status("the gate is closed")
        return None

    def reserve(self, pod: interface.PodView, node: str) -> object:
        if pod.labels.get("plumb.test/refuse") == "Reserve":
            return interface.Status("no room in the ledger")
        self.reserved.append((pod.key, node))
        return None

    def unreserve(self, pod: interface.PodView, node: str) -> None:
        self.unreserved.append((pod.key, node))

    def permit(self, pod: interface.PodView, node: str) -> object:
        if pod.labels.get("plumb.test/refuse") == "Permit":
            return interface.Status("not permitted today")
        if pod.name.startswith(HANG):
            time.sleep(HANG_SECONDS)
        return None

    async def pre_bind(self, pod: interface.PodView, node: str) -> object:
        if pod.labels.get("plumb.test/refuse") == "PreBind":
            return interface.Status("the ledger is closed")
        return None


class Curfew(interface.Plugin):
    """Rejects the nodes whose plumb.test/curfew label (seconds since the epoch) has passed by
    the cycle's clock: a plugin that reads the time."""

    name = "Curfew"
    version = "1.0"

    def filter(self, pod: interface.PodView, nodes: interface.NodeView) -> object:
        curfew = nodes.label("plumb.test/curfew")
        passed = np.array([bool(c) and nodes.now >= float(c) for c in curfew], dtype=np.bool_)
        return interface.FilterRejection(passed, "node(s) were past their curfew")


def _installed_and_samples(builtin: frozenset[str]) -> registry.Registry:
    """What is installed, and the sample plugins beside it."""
    found = registry.discover(builtin)
    return registry.Registry(
        {**found.plugins, **registry.of(RackFilter, CheapScore, Gatekeeper, Curfew).plugins}
    )


if __name__ == "__main__":
    # ``python -m tests.support.sample_plugins run ...``: plumb with the sample plugins installed,
    # as if a distribution declared them (a real plumb process on the real control plane).
    from plumb import cli

    registry.installed = functools.cache(_installed_and_samples)
    sys.exit(cli.main(sys.argv[1:]))
