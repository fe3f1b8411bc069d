"""The scheduler: cluster events in (``feed.ClusterFeed``), scheduling cycles out
(``loop.Scheduler``: pop a batch, decide on a snapshot, assume, bind in the background, report),
bindings carried out in the background (``binding.BindingCycle``), all three sharing one
``state.SchedulerState``.

Everything runs on one event loop, so the cache and the queue need no locks.
"""

from plumb.scheduler.binding import BindingCycle
from plumb.scheduler.feed import (
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    DEVICE_CLASS,
    DRA_KINDS,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    POD_ADDED_HELPS,
    POD_REMOVED_HELPS,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    STORAGE_CLASS,
    VOLUME_KINDS,
    ClusterFeed,
    node_change_helps,
)
from plumb.scheduler.loop import (
    DEFAULT_BATCH,
    STALLED_CYCLE_SECONDS,
    Scheduler,
)
from plumb.scheduler.profiles import ReconfigureError, Served, defaults
from plumb.scheduler.state import SchedulerState

__all__ = [
    "CSI_DRIVER",
    "CSI_NODE",
    "CSI_STORAGE_CAPACITY",
    "DEFAULT_BATCH",
    "DEVICE_CLASS",
    "DRA_KINDS",
    "PERSISTENT_VOLUME",
    "PERSISTENT_VOLUME_CLAIM",
    "POD_ADDED_HELPS",
    "POD_REMOVED_HELPS",
    "RESOURCE_CLAIM",
    "RESOURCE_CLAIM_TEMPLATE",
    "RESOURCE_SLICE",
    "STALLED_CYCLE_SECONDS",
    "STORAGE_CLASS",
    "VOLUME_KINDS",
    "BindingCycle",
    "ClusterFeed",
    "ReconfigureError",
    "Scheduler",
    "SchedulerState",
    "Served",
    "defaults",
    "node_change_helps",
]
