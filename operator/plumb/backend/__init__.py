"""The scheduler's memory: compact records, the cache (NodeTable + pod index), the queue and
snapshots. Purely in-process state owned by the event loop; no I/O and no kopf here."""
