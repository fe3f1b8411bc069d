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
from plumb.framework import emulation, schedconfig, scoring


class ReconfigureError(ValueError):
    """A valid configuration that cannot replace the running one without a restart."""


# The gate that has a resizing pod's pod-level requests read from its status (emulation.GATES).
POD_LEVEL_RESIZE = "InPlacePodLevelResourcesVerticalScaling"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Served:
    """Profiles by schedulerName, the queue's backoff, and the file's hash ("" built in)."""

    profiles: tuple[scoring.Profile, ...]
    backoff: queue.Backoff = queue.DEFAULT_BACKOFF
    digest: str = ""

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
        kind (a volume, a claim, a quota), which only the latter wait for."""
        return frozenset(name for name, events in self._hints if not events or event in events)

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
