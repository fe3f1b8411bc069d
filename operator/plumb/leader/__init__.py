"""Lease leader election, as client-go's leaderelection does it: one replica acts, the others
keep their caches warm and wait.

Every replica runs an ``Elector``. A candidate reads the Lease every retry period and takes it
when it is free (no holder) or expired (its record unchanged for ``leaseDurationSeconds``,
timed by this replica's own clock from when it first saw that record, so clock skew between
machines does not matter). The leader renews it every retry period; when no renewal succeeds
within the renew deadline, it gives the lease up and goes back to being a candidate. Writes
carry the resourceVersion read, so of two replicas writing at once one gets a 409 and reads
again. On shutdown the leader releases the lease (no holder), so a standby takes it within one
retry period instead of waiting for it to expire.

The safety rule: ``may_act()`` is true only while ``now < last successful renewal + renew
deadline``, timed from when that renewal was *sent*. Others cannot consider the lease expired
before ``leaseDuration`` after they saw that renewal, which was after it was sent, and the
renew deadline is shorter than the lease duration; so a leader cut off from the API server
stops acting (binding, posting events, writing status) before anyone else may start. The
scheduler checks it before every bind, and ``on_change(False)`` cancels what is in flight.
"""

from plumb.leader.electing import API_VERSION, Clock, Elector, LeaseApi
from plumb.leader.records import (
    DEFAULT_TIMINGS,
    ElectionSettings,
    Record,
    Timings,
    micro_time,
    parse_duration,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_TIMINGS",
    "Clock",
    "ElectionSettings",
    "Elector",
    "LeaseApi",
    "Record",
    "Timings",
    "micro_time",
    "parse_duration",
]
