"""The scheduler: cluster events in (``feed.ClusterFeed``), scheduling cycles out
(``loop.Scheduler``: pop a batch, decide on a snapshot, assume, bind in the background, report).

Everything runs on one event loop, so the cache and the queue need no locks.
"""

from plumb.scheduler.feed import (
    POD_ADDED_HELPS,
    POD_REMOVED_HELPS,
    ClusterFeed,
    node_change_helps,
)
from plumb.scheduler.loop import (
    DEFAULT_BATCH,
    STALLED_CYCLE_SECONDS,
    Gate,
    KernelRunner,
    Profile,
    Scheduler,
)

__all__ = [
    "DEFAULT_BATCH",
    "POD_ADDED_HELPS",
    "POD_REMOVED_HELPS",
    "STALLED_CYCLE_SECONDS",
    "ClusterFeed",
    "Gate",
    "KernelRunner",
    "Profile",
    "Scheduler",
    "node_change_helps",
]
