"""Helpers for tests, the demo and the benchmark: object builders and a small synchronous client
for the local control plane. Never imported by the scheduler itself."""
