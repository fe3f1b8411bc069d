"""`plumb plugins`: the installed Python plugins, their points and versions, or why one cannot
be used (exit code 1 then)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from plumb import cli
from plumb.extensions import interface, registry
from tests.support import sample_plugins


class _Unpointed(interface.Plugin):
    name = "Pointless"


def test_the_table_lists_each_plugin_and_a_problem_fails_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = registry.of(sample_plugins.RackFilter, sample_plugins.Gatekeeper, _Unpointed)
    monkeypatch.setattr(registry, "installed", lambda builtin: found)
    assert cli.main(["plugins"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "EXTENSION", "POINTS", "VERSION", "DISTRIBUTION", "STATUS"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["Gatekeeper"].split()[1:3] == ["PreFilter,Reserve,Permit,PreBind", "1.0"]
    assert rows["RackFilter"].endswith("ok")
    assert rows["Pointless"].endswith("unusable: implements no extension point")

    assert cli.main(["plugins", "-o", "json"]) == 1
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)["plugins"]}
    assert listed["RackFilter"]["points"] == ["Filter"]
    assert listed["Pointless"]["problem"] == "implements no extension point"
    assert "problem" not in listed["RackFilter"]


def test_the_installed_examples_are_listed() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "plumb", "plugins", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listed = {p["name"]: p for p in json.loads(done.stdout)["plugins"]}
    # make install puts the examples beside plumb (pip install -e examples/...).
    assert listed["MaintenanceWindow"]["points"] == ["Filter"]
    assert listed["MaintenanceWindow"]["distribution"] == "plumb-maintenance-window"
    assert listed["PriceLabel"]["version"] == "0.1.0"
