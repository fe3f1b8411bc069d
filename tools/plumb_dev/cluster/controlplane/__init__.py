"""Local control plane (etcd + kube-apiserver) for tests, the demo and the benchmark; a tool beside the scheduler, never imported by it."""  # noqa: E501
