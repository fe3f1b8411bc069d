"""``plumb run`` is left with what the scheduler uses: the development tools (bench, the local
cluster, the demo, the test builders) are imported only by their own commands (plumb.cli)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import textwrap

import pytest

from plumb import cli
from plumb_dev.bench import workloads

_TOOLS = (
    "plumb_dev.bench",
    "plumb_dev.cluster.controlplane",
    "plumb_dev.cluster.localnode",
    "plumb_dev.demo.tour",
    "plumb_dev.testing",
)

# A fresh interpreter: this test process has imported the tools already.
_PROBE = textwrap.dedent(
    f"""
    import json, sys
    from plumb import cli

    cli._parser()
    print(json.dumps(sorted(m for m in sys.modules if m.startswith({_TOOLS!r}))))
    """
)


def test_building_the_command_line_imports_no_development_tool() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_bench_help_names_every_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: argparse wraps at hyphens
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit:
        cli.main(["bench", "--help"])
    assert exit.value.code == 0
    assert f"comma-separated subset of: {', '.join(workloads.names())}" in out.getvalue()
