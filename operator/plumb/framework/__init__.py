"""Scheduling rules: pods compiled to kernel inputs, the plugins, their reasons and the diagnosis
that turns per-node verdicts into kube-scheduler's messages. Purely computational; no I/O."""
