"""``plumb demo``: plumb scheduling pods on a local cluster, act by act (``tour``), the
preemption act in a module of its own (``preemptionact``)."""
