"""``plumb run`` with a TaintToleration filter that raises for pods named ``doomed*``: a plugin
failing for one pod, in a real plumb process against the real API server.

Run as ``python -m tests.support.raising_plugin run --kubeconfig ...``.
"""

from __future__ import annotations

import sys
from typing import Any

from plumb import cli
from plumb.framework.plugins import tainttoleration

DOOMED = "doomed"
MESSAGE = "injected failure for {name}"

_filter = tainttoleration.filter


def _raising_filter(pod: Any, statics: Any) -> Any:
    if pod.name.startswith(DOOMED):
        raise RuntimeError(MESSAGE.format(name=pod.name))
    return _filter(pod, statics)


tainttoleration.filter = _raising_filter

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
