"""plumb's development tooling, beside the scheduler and never part of it: the local cluster
(control plane and real node), the benchmark, the demo and the test helpers.

A distribution of its own (tools/ in plumb's repository, ``plumb-dev``), installed by ``make
install`` and never into the image. ``plumb cluster``, ``plumb demo`` and ``plumb bench`` hand
their command line to ``plumb_dev.commands``; ``python -m plumb_dev`` is the same command.
"""
