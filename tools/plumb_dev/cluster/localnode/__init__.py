"""The local cluster's real node: containerd, kubelet, CNI, the network guard, images; a tool beside the scheduler, never imported by it."""  # noqa: E501
