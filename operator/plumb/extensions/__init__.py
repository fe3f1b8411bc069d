"""plumb's extension points: Python plugins and kube-scheduler's HTTP extenders."""
