"""The DRA test driver's command line and stopping one left running."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from plumb_dev.cluster.localnode import daemons, dratestdriver, layout


def test_the_driver_keeps_its_sockets_and_cdi_specs_in_the_node_directory() -> None:
    paths = layout.NodeLayout(directory=Path("/c"))
    args = dratestdriver.arguments(
        paths, kubeconfig=Path("/c/kubeconfig"), node="plumb-node", devices=2
    )
    flags = dict(a.split("=", 1) for a in args if a.startswith("--"))
    # Its defaults are /var/lib/kubelet and /var/run/cdi: the host's, which the node never uses.
    assert flags["--plugin-registration-path"] == "/c/node/kubelet/plugins_registry"
    assert flags["--datadir"] == "/c/node/kubelet/plugins"
    assert flags["--cdi-dir"] == "/c/node/cdi"
    assert (flags["--node-name"], flags["--num-devices"]) == ("plumb-node", "2")
    assert args.index("kubelet-plugin") > args.index("--kubeconfig=/c/kubeconfig")


def test_stop_ends_a_recorded_driver_and_forgets_it(tmp_path: Path) -> None:
    paths = layout.NodeLayout(directory=tmp_path)
    paths.node.mkdir()
    identity = f"--plugin-registration-path={paths.kubelet_root / 'plugins_registry'}"
    # A stand-in that runs until signalled and carries the driver's identifying argument.
    stand_in = daemons.spawn(
        dratestdriver.NAME,
        Path(sys.executable),
        ["-c", "import time; time.sleep(60)", identity],
        identity_arg=identity,
        log=paths.log(dratestdriver.NAME),
    )
    try:
        state = paths.node / f"{dratestdriver.NAME}.json"
        state.write_text(
            f'{{"pid": {stand_in.pid}, "binary": "{sys.executable}", "log": "{stand_in.log}"}}'
        )
        # Right after the spawn /proc may still show the parent's command line, until the exec.
        deadline = time.monotonic() + 10
        while not stand_in.alive():
            assert time.monotonic() < deadline, "the stand-in never started"
            time.sleep(0.01)
        started = time.monotonic()
        assert dratestdriver.stop(None, tmp_path) == []
        assert not stand_in.alive()
        assert not state.exists()
        assert time.monotonic() - started < 10
        # Nothing recorded: nothing to do.
        assert dratestdriver.stop(None, tmp_path) == []
    finally:
        # Whatever failed above, the stand-in does not outlive the test.
        if stand_in.alive():
            os.kill(stand_in.pid, signal.SIGKILL)
            os.waitpid(stand_in.pid, 0)
