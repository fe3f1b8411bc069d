"""The configuration in force: the profiles plumb serves (one per schedulerName) and the queue's
backoff, from a KubeSchedulerConfiguration file or kube-scheduler's defaults.

The scheduler reads ``Served`` once per batch, so a reload (``Scheduler.reconfigure``) switches
every profile at once between two batches; the queue, the cache and bindings in flight stay.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping

from plumb.backend import queue
from plumb.backend.records import objects
from plumb.extensions import extenders as extenders_module
from plumb.framework import emulation, schedconfig, scoring


class ReconfigureError(ValueError):
    """A valid configuration that cannot replace the running one without a restart."""


# The gate that has a resizing pod's pod-level requests read from its status (emulation.GATES).
POD_LEVEL_RESIZE = "InPlacePodLevelResourcesVerticalScaling"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Served:
    """Profiles by schedulerName, the queue's backoff, the file's hash ("" built in), and its
    HTTP extenders in the order kube-scheduler calls them (extenders.ordered): every profile
    consults them."""

    profiles: tuple[scoring.Profile, ...]
    backoff: queue.Backoff = queue.DEFAULT_BACKOFF
    digest: str = ""
    extenders: tuple[extenders_module.Extender, ...] = ()

    def __post_init__(self) -> None:
        if not self.profiles:
            raise ValueError("at least one profile is needed")

    @functools.cached_property
    def by_name(self) -> Mapping[str, scoring.Profile]:
        return {profile.name: profile for profile in self.profiles}

    @functools.cached_property
    def names(self) -> frozenset[str]:
        return frozenset(self.by_name)

    @property
    def kube(self) -> emulation.Emulation:
        """The kube-scheduler release every profile decides as (they share one)."""
        return self.profiles[0].kube

    @functools.cached_property
    def accounting(self) -> objects.ResizeAccounting:
        """How a pod's status counts in its requests, as that release has it: read once per
        configuration, not per pod event."""
        return objects.ResizeAccounting(
            pod_totals=self.kube.resize_pod_totals,
            pod_level_status=self.kube.gate(POD_LEVEL_RESIZE),
        )

    @functools.cached_property
    def _hints(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple(
            (enabled.name, enabled.events)
            for profile in self.profiles
            for enabled in profile.extensions
        )

    def extension_hints(self, event: str) -> frozenset[str]:
        """The Python plugins whose rejections a cluster ``event`` may cure: those that wait
        for it, and those that name no event (any event may); "" for an event of another
        kind (a volume, a claim, a quota), which only the latter wait for. With extenders,
        "Extender" too: a pod whose nodes they dropped waits for any event (kube-scheduler's
        fake enqueue extension of that name, hinted by every cluster event)."""
        names = {name for name, events in self._hints if not events or event in events}
        if self.extenders:
            names.add(extenders_module.PLUGIN)
        return frozenset(names)

    @functools.cached_property
    def bodies_kept(self) -> extenders_module.Kept:
        """Which raw objects the extenders are sent whole, so the feed keeps them."""
        return extenders_module.kept(self.extenders)

    def get(self, scheduler_name: str) -> scoring.Profile | None:
        return self.by_name.get(scheduler_name)

    def describe(self) -> str:
        """One line for the log: the profiles and the file's hash."""
        names = ", ".join(profile.name for profile in self.profiles)
        source = f"configuration {self.digest}" if self.digest else "built-in defaults"
        return f"profiles {names} ({source})"


def defaults(scheduler_name: str, kube: emulation.Emulation = emulation.NEWEST_EMULATION) -> Served:
    """kube-scheduler's default profile under ``scheduler_name`` (``--scheduler-name``), as the
    release ``kube`` has it: what a file holding only that profile gives (its default plugins
    follow the release and its gates, schedconfig/revisions.py)."""
    return Served(profiles=(schedconfig.default_profile(scheduler_name, kube),))


def check_replacement(running: Served, new: Served) -> None:
    """Raise ReconfigureError when ``new`` cannot replace ``running`` in place: the set of
    schedulerNames is fixed at start (the pod watch keeps only the pods of those names)."""
    if new.names != running.names:
        raise ReconfigureError(
            "profiles[*].schedulerName: the set of scheduler names changed from "
            f"{sorted(running.names)} to {sorted(new.names)}; restart plumb to serve other "
            "scheduler names"
        )
