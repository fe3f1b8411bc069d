"""The scheduler's memory, in three rooms: ``records`` (the compact records parsed from API
bodies), ``cache`` (the cluster as the scheduler sees it: ``clustercache.Cache``, its node
table, count rows, journal, volumes, nominations, snapshots and dumps) and ``queue`` (the pods
waiting).

Purely in-process state owned by the event loop; no I/O and no kopf here. The same split as
kube-scheduler's pkg/scheduler/backend/{cache,queue}.
"""
