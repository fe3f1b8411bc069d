"""The operator shell: the only package that imports kopf. It logs in, registers watch handlers
that feed the scheduler, and runs the scheduling loop beside kopf's own tasks.

kopf is imported here first, with ``kubernetes.client`` hidden from it: when the ``kubernetes``
package is installed (plumb's tests use it), kopf imports its generated client, every API and
model (docs/performance.md#memory-peak-rss-vmhwm), only to recognise its objects in
``kopf.adopt`` and friends, which plumb never passes it. kopf treats the hidden package as not
installed. A process that has already imported the client (a test run) keeps it.
"""

import sys

if "kopf" not in sys.modules and "kubernetes.client" not in sys.modules:
    sys.modules["kubernetes.client"] = None  # type: ignore[assignment]  # ImportError on import
    try:
        import kopf  # noqa: F401
    finally:
        del sys.modules["kubernetes.client"]
