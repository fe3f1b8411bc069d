"""``plumb bench``: plumb and kube-scheduler side by side on identical workloads, measured against
a raw binder's ceiling, written up as docs/benchmarks.md with its raw JSON and plots.

A tool beside the scheduler, like the local control plane it runs on: it starts ``plumb run`` as a
child process and talks to the API server itself; the scheduler never imports it.
"""
