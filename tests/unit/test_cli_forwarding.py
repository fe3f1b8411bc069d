"""``plumb cluster|demo|bench`` are handed to the development tooling (plumb_dev) when it is
installed, and otherwise answered with one line saying how to get it; ``plumb run`` loads none
of the tooling."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Sequence

import pytest

from plumb import cli
from plumb_dev import commands
from plumb_dev.bench import workloads

_WITHOUT_TOOLING = """
import sys

sys.modules["plumb_dev"] = None  # as in an environment without plumb-dev: not importable
from plumb import entry

sys.exit(entry.main(sys.argv[1:]))
"""


def _plumb_without_tooling(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_TOOLING, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("command", ["cluster", "demo", "bench"])
def test_without_the_tooling_a_tooling_command_says_how_to_get_it(command: str) -> None:
    done = _plumb_without_tooling(command, "up" if command == "cluster" else "--help")
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"plumb {command} is development tooling, not part of the scheduler")
    assert "pip install -e tools/" in line


def test_without_the_tooling_the_scheduler_commands_work() -> None:
    done = _plumb_without_tooling("run", "--help")
    assert done.returncode == 0, done.stderr
    assert "--kubeconfig" in done.stdout


def test_help_lists_the_tooling_commands_beside_the_scheduler_ones() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit:
        cli.main(["--help"])
    assert exit.value.code == 0
    for command in ("run", "explain", "replay", "cluster", "demo", "bench"):
        assert f"    {command}" in out.getvalue()


def test_a_tooling_command_gets_its_whole_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[Sequence[str]] = []

    def main(argv: Sequence[str] | None = None) -> int:
        assert argv is not None
        handed.append(argv)
        return 7

    monkeypatch.setattr(commands, "main", main)
    assert cli.main(["bench", "--quick", "--out", "x"]) == 7
    assert handed == [["bench", "--quick", "--out", "x"]]


def test_cluster_help_is_the_tooling_parser() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit:
        cli.main(["cluster", "--help"])
    assert exit.value.code == 0
    assert "usage: plumb cluster" in out.getvalue()
    assert "{build,up,down,env,status,image}" in out.getvalue()


def test_bench_help_names_every_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: argparse wraps at hyphens
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit:
        cli.main(["bench", "--help"])
    assert exit.value.code == 0
    assert f"comma-separated subset of: {', '.join(workloads.names())}" in out.getvalue()


def test_run_help_imports_nothing_from_the_tooling() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "plumb", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "plumb.cli" in imported
    assert [name for name in imported if name.split(".")[0] == "plumb_dev"] == []
