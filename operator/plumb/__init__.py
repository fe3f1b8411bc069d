"""plumb: a secondary Kubernetes scheduler that scores every node with a compiled kernel.

Workloads opt in with ``spec.schedulerName: plumb``. The package is layered (imports point
downward only, enforced by import-linter in pyproject.toml):

    cli, demo → app → scheduler → binder, events → framework → backend → kernel → k8s
    → observability

``controlplane`` stands beside them: a local etcd + kube-apiserver for tests, the demo and the
benchmark, never imported by the scheduler.
"""

__version__ = "0.1.0"
DEFAULT_SCHEDULER_NAME = "plumb"
