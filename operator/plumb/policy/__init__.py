"""SchedulingPolicy reconciliation, its pure core: specs compiled into frozen records, the policy
store the framework reads, deviation budgets, zone health, the status a policy reports and the
coalescing writer that patches it.

No kopf here (the app layer owns the handlers), and no I/O except in ``writer``, which patches
status through the k8s client it is given.
"""
