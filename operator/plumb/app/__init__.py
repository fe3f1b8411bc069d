"""The operator shell: the only package that imports kopf. It logs in, registers watch handlers
that feed the scheduler, and runs the scheduling loop beside kopf's own tasks."""
