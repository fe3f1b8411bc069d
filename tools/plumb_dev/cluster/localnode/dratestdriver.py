"""Kubernetes' DRA test driver as a kubelet plugin of the real node: built, started, stopped.

The driver is ``test/e2e/dra/test-driver`` of the k8s.io/kubernetes module, built by
hack/build-dra-test-driver.sh into the cache. Its ``kubelet-plugin`` command publishes one
ResourceSlice for the node (pool = the node's name, devices ``device-00`` ..), registers with
the kubelet through a socket in the kubelet's ``plugins_registry``, and answers the kubelet's
NodePrepareResources by writing a CDI spec per claim request into the node's CDI directory,
whose edits set environment variables in the containers that use the device: ``user_<key>``
for each opaque parameter of the claim, ``admin_<key>`` for the class's, and
``claim_<claim>_<request>=true``; NodeUnprepareResources removes the spec.

It runs as a host process, like the node's daemons (in its own session, found again by pid,
binary and an argument naming this cluster's kubelet directory), with the admin kubeconfig,
every path in the node's directory. ``start`` records it in ``node/dra-test-driver.json`` and
``stop`` (or the node's ``down``, which stops whatever is recorded there before the kubelet)
stops it and removes the record.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from plumb_dev.cluster.controlplane import building
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.cluster.localnode import api, daemons, layout

NAME = "dra-test-driver"
# The driver's name in ResourceSlices, DeviceClass selectors and CDI device names.
DRIVER = "test-driver.cdi.k8s.io"
_SCRIPT = "build-dra-test-driver.sh"
_POLL_SECONDS = 0.2
_STOP_SECONDS = 15.0
# The kubelet calls NotifyRegistrationStatus once it has taken the plugin; the driver logs the
# gRPC calls it serves at verbosity 6 in this file only.
_REGISTERED = ("NotifyRegistrationStatus", "handling request succeeded")
_SLICES = "/apis/resource.k8s.io/v1/resourceslices"


class DriverError(layout.NodeError):
    """The test driver could not be built, started or stopped."""


def ensure_binary(kube_version: str | None = None) -> Path:
    """Builds the driver of one release once (the release chosen as for the cluster)."""
    release = building.chosen_release(kube_version)
    script = building.hack_dir() / _SCRIPT
    result = subprocess.run(
        ["bash", str(script), release.version],
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
        check=False,
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise DriverError(
            f"{script} {release.version} failed with exit code {result.returncode}; its "
            f"messages are above on stderr"
        )
    return Path(lines[-1].strip())


def _state(paths: layout.NodeLayout) -> Path:
    return paths.node / f"{NAME}.json"


def _registry(paths: layout.NodeLayout) -> Path:
    return paths.kubelet_root / "plugins_registry"


def _identity(paths: layout.NodeLayout) -> str:
    return f"--plugin-registration-path={_registry(paths)}"


def arguments(paths: layout.NodeLayout, *, kubeconfig: Path, node: str, devices: int) -> list[str]:
    """The driver's command line for the node of ``paths``."""
    plugins = paths.kubelet_root / "plugins"
    return [
        f"--kubeconfig={kubeconfig}",
        "-v=3",
        "--vmodule=nonblockinggrpcserver=6",
        "kubelet-plugin",
        f"--node-name={node}",
        f"--num-devices={devices}",
        # The driver makes the parent of its own directory (plugins/<driver>), not the directory.
        f"--datadir={plugins}",
        _identity(paths),
        f"--cdi-dir={paths.cdi_dir}",
    ]


def start(
    cp: controlplane.ControlPlane,
    directory: Path,
    *,
    binary: Path,
    node: str = layout.NODE_NAME,
    devices: int = 4,
    timeout: float = 60.0,
) -> daemons.Daemon:
    """Starts the driver for the node of the cluster in ``directory``; returns once the kubelet
    has registered it and its ResourceSlice of ``devices`` devices is published."""
    paths = layout.NodeLayout(directory=directory.resolve())
    if _state(paths).exists():
        stop(cp, directory)
    (paths.kubelet_root / "plugins" / DRIVER).mkdir(parents=True, exist_ok=True)
    paths.cdi_dir.mkdir(parents=True, exist_ok=True)
    log = paths.log(NAME)
    log.unlink(missing_ok=True)
    daemon = daemons.spawn(
        NAME,
        binary,
        arguments(paths, kubeconfig=cp.kubeconfig, node=node, devices=devices),
        identity_arg=_identity(paths),
        log=log,
    )
    _state(paths).write_text(
        json.dumps({"pid": daemon.pid, "binary": str(binary), "log": str(log)}) + "\n",
        encoding="utf-8",
    )
    deadline = time.monotonic() + timeout
    waiting = "the kubelet to register the driver"
    try:
        while not _registered(log) or len(slice_devices(cp, node)) != devices:
            code = daemon.exit_code()
            if code is not None:
                raise DriverError(
                    f"{NAME} exited with code {code} before {waiting}; last lines of {log}:\n"
                    f"{daemon.tail()}"
                )
            if time.monotonic() > deadline:
                if _registered(log):
                    waiting = f"its ResourceSlice of {devices} devices for {node}"
                raise DriverError(
                    f"timed out after {timeout:.0f} s waiting for {waiting}; last lines of "
                    f"{log}:\n{daemon.tail()}"
                )
            time.sleep(_POLL_SECONDS)
    except BaseException:
        stop(cp, directory)
        raise
    return daemon


def _registered(log: Path) -> bool:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(all(word in line for word in _REGISTERED) for line in text.splitlines())


def slice_devices(cp: controlplane.ControlPlane, node: str) -> list[str]:
    """The device names the driver's ResourceSlices publish for ``node``."""
    selector = f"spec.driver={DRIVER},spec.nodeName={node}"
    status, body = api.request(cp, "GET", f"{_SLICES}?fieldSelector={selector}")
    if status != 200 or not isinstance(body, dict):
        return []
    items: list[dict[str, Any]] = body.get("items") or []
    return [d["name"] for s in items for d in (s.get("spec") or {}).get("devices") or []]


def stop(cp: controlplane.ControlPlane | None, directory: Path) -> list[str]:
    """Stops the recorded driver and, with a control plane, deletes its ResourceSlices.

    Returns what could not be done (empty when all went well); safe to call when none runs.
    """
    paths = layout.NodeLayout(directory=directory.resolve())
    problems: list[str] = []
    try:
        record = json.loads(_state(paths).read_text(encoding="utf-8"))
        daemon = daemons.Daemon(
            name=NAME,
            binary=Path(record["binary"]),
            pid=int(record["pid"]),
            identity_arg=_identity(paths),
            log=Path(record["log"]),
        )
    except FileNotFoundError:
        daemon = None
    except (ValueError, KeyError, TypeError) as error:
        problems.append(f"{_state(paths)} is unreadable ({error!r}): stop {NAME} by hand")
        daemon = None
    if daemon is not None:
        try:
            daemon.stop(_STOP_SECONDS)
        except controlplane.ControlPlaneError as error:
            problems.append(str(error))
    if cp is not None:
        status, _ = api.request(cp, "DELETE", f"{_SLICES}?fieldSelector=spec.driver={DRIVER}")
        if status not in (0, 200):
            problems.append(f"deleting {DRIVER}'s ResourceSlices answered HTTP {status}")
    if not problems:
        _state(paths).unlink(missing_ok=True)
    return problems
