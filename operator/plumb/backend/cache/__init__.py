"""The cluster as the scheduler sees it: ``clustercache.Cache`` (the pod state machine over the node
table) and its parts: count rows, workload controllers, volumes, DRA objects (``dra``), the
journal of its writes, the nominated pods' room, the snapshot a cycle reads and the dump that
rebuilds it."""
