"""The local cluster the tests, the demo and the benchmark run against: the control plane
(``controlplane``: etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and the real
node built on it (``localnode``: containerd, kubelet, kube-proxy, the network guard, images)."""
