"""A real exec credential plugin for tests: a script run as client-go runs an exec entry, which
records each run in a state file and prints that run's credential as its plan says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# An exec credential plugin, run for real: a script that records each run in a state file and
# prints that run's credential (tok-1, tok-2, ... unless its plan says otherwise).
_PLUGIN = """
import datetime, json, os, pathlib, sys
path = pathlib.Path(sys.argv[1])
state = json.loads(path.read_text())
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
run = len(state["runs"]) + 1
plan = state["plan"][min(run, len(state["plan"])) - 1] if state["plan"] else {}
state["runs"].append(
    {"info": info, "args": sys.argv[2:], "env": {n: os.environ.get(n) for n in state["names"]}}
)
status = {}
if plan.get("token", True):
    status["token"] = f"tok-{run}"
if "expires" in plan:
    status["expirationTimestamp"] = plan["expires"]
if "lifetime" in plan:
    now = datetime.datetime.now(datetime.timezone.utc)
    end = now + datetime.timedelta(seconds=plan["lifetime"])
    status["expirationTimestamp"] = end.isoformat(timespec="milliseconds")
for field, name in (("clientCertificateData", "cert"), ("clientKeyData", "key")):
    if name in plan:
        status[field] = pathlib.Path(plan[name]).read_text()
if "fail" not in plan:
    state["issued"].append(status)
staged = path.with_suffix(".new")
staged.write_text(json.dumps(state))
staged.replace(path)
if "fail" in plan:
    sys.exit(plan["fail"])
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}))
"""


class ScriptedPlugin:
    """A real exec plugin for tests. ``plan``: per run (the last repeats), ``expires`` (an
    RFC 3339 time) or ``lifetime`` (seconds from the run), ``cert`` and ``key`` (PEM files to
    give), ``token: False`` (give none), ``fail`` (exit with this on stderr). ``names``: the
    environment variables each run records."""

    def __init__(
        self,
        directory: Path,
        *,
        plan: Sequence[Mapping[str, Any]] = (),
        names: Sequence[str] = (),
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.script = directory / "plugin.py"
        self.script.write_text(_PLUGIN)
        self.state = directory / "plugin-state.json"
        self.state.write_text(
            json.dumps({"runs": [], "issued": [], "plan": list(plan), "names": list(names)})
        )

    def spec(self, **fields: Any) -> dict[str, Any]:
        """The kubeconfig's exec entry that runs it."""
        return {
            "apiVersion": "client.authentication.k8s.io/v1",
            "interactiveMode": "Never",
            "command": sys.executable,
            "args": [str(self.script), str(self.state)],
            **fields,
        }

    def run_elsewhere(self) -> None:
        """Run it as another client of the same login would: the last token changes."""
        request = {"apiVersion": self.spec()["apiVersion"], "kind": "ExecCredential", "spec": {}}
        subprocess.run(
            [sys.executable, str(self.script), str(self.state)],
            env={**os.environ, "KUBERNETES_EXEC_INFO": json.dumps(request)},
            capture_output=True,
            check=True,
        )

    def _read(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.state.read_text())
        return state

    @property
    def runs(self) -> list[dict[str, Any]]:
        """Each run: its KUBERNETES_EXEC_INFO, extra arguments and recorded variables."""
        runs: list[dict[str, Any]] = self._read()["runs"]
        return runs

    @property
    def issued(self) -> list[dict[str, Any]]:
        """The status each successful run printed."""
        issued: list[dict[str, Any]] = self._read()["issued"]
        return issued

    def latest(self) -> str | None:
        """The token of the last run: the only one a server of this login accepts."""
        issued = self.issued
        return str(issued[-1]["token"]) if issued and "token" in issued[-1] else None

    def kubeconfig(self, directory: Path, server: str, **cluster: Any) -> Path:
        path = directory / "kubeconfig"
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
            "users": [{"name": "u", "user": {"exec": self.spec()}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
        path.write_text(json.dumps(document))  # JSON is YAML
        return path
