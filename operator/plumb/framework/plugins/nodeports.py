"""NodePorts: a pod's host ports must be free on the node (filter only).

Two host ports conflict when protocol and port are equal and either IP is 0.0.0.0 (all
addresses) or both IPs are the same (``specs.HostPort.conflicts``, kube-scheduler's
``HostPortInfo.CheckConflict``): TCP and UDP on the same port coexist, and so do two specific
IPs. Ports in use live per node as Python records, so this filter walks the nodes that have any;
a pod without host ports (nearly every pod) costs one allocation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plumb.backend.cache import snapshot
from plumb.backend.records import objects, specs

NAME = "NodePorts"
# kube-scheduler's ErrReason (plugins/nodeports/node_ports.go).
PORTS_IN_USE = "node(s) didn't have free ports for the requested pod ports"
# Status Unschedulable, not ...AndUnresolvable: evicting the pod holding the port frees it.
UNRESOLVABLE = False


def filter(pod: objects.PodInfo, used: Sequence[Sequence[specs.HostPort]]) -> snapshot.BoolArray:
    """True where a host port the pod wants conflicts with one in ``used[i]`` (node i)."""
    fails = np.zeros(len(used), dtype=np.bool_)
    wanted = pod.scheduling.host_ports
    if not wanted:
        return fails
    # Only an in-use port with the same protocol and number can conflict; test that first.
    keys = {(port.protocol, port.port) for port in wanted}
    for i in [i for i, ports in enumerate(used) if ports]:
        for taken in used[i]:
            if (taken.protocol, taken.port) in keys and any(w.conflicts(taken) for w in wanted):
                fails[i] = True
                break
    return fails
