"""Starts, finds and stops the local cluster's real node, recorded in the cluster directory.

up: record the host → bridge cni0 up → network guard (before anything could start a pod) →
control plane on the bridge gateway → containerd → pause image → kubelet → kube-proxy → the Node
is Ready, kube-proxy has synced, the guard is first again. down: the node's pods stopped through
the API → a DRA test driver left running → kube-proxy, kubelet, containerd and every container
→ control plane → unmount, bridge
and veths, iptables chains and nfacct counters, sysctls, cgroups, paths, all measured against
the record. Any failure in up runs down.

The public face of the package: ``GATEWAY``, ``Node``, ``preflight``, ``up``, ``down``,
``status``, ``recorded`` and ``load``; the state file ``node/state.json`` connects them.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.cluster.localnode import (
    api,
    cdiruntime,
    containerd,
    daemons,
    dratestdriver,
    hostrecord,
    images,
    kubelet,
    layout,
    network,
    nodes,
    preflighting,
    restoring,
)

GATEWAY = network.GATEWAY
NodeError = layout.NodeError
Node = nodes.Node
load = nodes.load
_POLL_SECONDS = 0.2
_STOP_SECONDS = 15.0
# Pods on the node get this long to stop on down: the node is going away, not the workload.
_POD_GRACE_SECONDS = 2
_POD_STOP_SECONDS = 30.0


preflight = preflighting.preflight


def up(
    directory: Path,
    *,
    bin_dir: Path,
    parts: controlplane.Parts,
    timeout: float = 180.0,
    feature_gates: Mapping[str, bool] | None = None,
) -> tuple[controlplane.ControlPlane, Node]:
    """Starts the control plane and the real node; returns when the Node is Ready.

    The control plane listens on the bridge gateway (parts.address is replaced) and runs with
    ``feature_gates`` (``controlplane.start``'s, checked before the host is touched). On any
    failure, or an interrupt, everything done so far is undone before the error goes on.
    """
    if timeout <= 0:
        raise ValueError(f"timeout={timeout} must be positive (seconds to wait for the node)")
    controlplane.check_feature_gates(bin_dir, feature_gates or {}, parts=parts)
    problem = preflighting.preflight(install=False)
    runtime = cdiruntime.cached()
    if problem is not None or runtime is None:
        why = problem or preflighting.runtime_missing()
        raise NodeError(f"this machine cannot run the real node: {why}")
    deadline = time.monotonic() + timeout
    directory = directory.resolve()
    bin_dir = bin_dir.resolve()
    paths = layout.NodeLayout(directory=directory)
    _check_paths(paths, bin_dir)
    if recorded(directory):
        # A node that was not stopped (its caller was killed): clear it before starting anew.
        down(directory)
    if network.bridge_exists():
        raise NodeError(
            f"a network interface named {network.BRIDGE} already exists and is not this "
            f"cluster's; the node needs that name for its bridge: stop whatever made it (another "
            f"cluster? `plumb cluster down --dir ...`), or delete it with `ip link del "
            f"{network.BRIDGE}`"
        )
    # Built (once) before the record, so the build's own traces are not counted as the node's.
    try:
        pause = images.ensure_pause()
    except images.ImageError as error:
        raise NodeError(f"the pause image could not be built: {error}") from error
    paths.node.mkdir(parents=True, exist_ok=True)
    hostrecord.save(hostrecord.take(), paths.host_record)
    node = Node(
        name=layout.NODE_NAME,
        directory=directory,
        bin_dir=bin_dir,
        containerd_address=paths.containerd_socket,
        containerd_binary=runtime.containerd,
    )
    nodes.write_state(paths, node)
    try:
        network.create_bridge()
        network.install_guard()
        cp = controlplane.start(
            directory,
            bin_dir=bin_dir,
            parts=dataclasses.replace(parts, address=GATEWAY),
            timeout=max(1.0, deadline - time.monotonic()),
            feature_gates=feature_gates,
        )
        node = _start_node(cp, paths, node, runtime, pause, deadline)
        return cp, node
    except images.ImageError as error:
        _undo(directory, error)
        raise NodeError(f"the pause image could not be loaded into containerd: {error}") from error
    except BaseException as error:
        _undo(directory, error)
        raise


def _undo(directory: Path, error: BaseException) -> None:
    try:
        down(directory)
    except NodeError as undo:
        error.add_note(f"undoing the partial start failed too: {undo}")


def _start_node(
    cp: controlplane.ControlPlane,
    paths: layout.NodeLayout,
    node: Node,
    runtime: cdiruntime.Runtime,
    pause: images.ImageArchive,
    deadline: float,
) -> Node:
    folders = (paths.cni_conf_dir, paths.ipam_dir, paths.containerd, paths.pod_logs, paths.cdi_dir)
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    (paths.cni_conf_dir / "10-plumb.conflist").write_text(
        network.conflist_text(ipam_dir=paths.ipam_dir), encoding="utf-8"
    )
    paths.containerd_config.write_text(
        containerd.config_text(paths, sandbox_image=pause.ref), encoding="utf-8"
    )
    daemon = containerd.start(paths, runtime)
    node = dataclasses.replace(node, containerd_pid=daemon.pid)
    nodes.write_state(paths, node)
    _wait(lambda: containerd.ready(paths), deadline, [daemon], "containerd's CRI plugin")
    # Before the kubelet: with the sandbox image absent containerd would try to pull it.
    images.load(pause, containerd_address=paths.containerd_socket)

    kubelet.write_files(cp, paths)
    agent = daemons.spawn(
        kubelet.KUBELET,
        node.bin_dir / kubelet.KUBELET,
        kubelet.kubelet_args(paths),
        identity_arg=paths.identity_arg(kubelet.KUBELET),
        log=paths.log(kubelet.KUBELET),
    )
    node = dataclasses.replace(node, kubelet_pid=agent.pid)
    nodes.write_state(paths, node)
    proxy = daemons.spawn(
        kubelet.KUBE_PROXY,
        node.bin_dir / kubelet.KUBE_PROXY,
        kubelet.kube_proxy_args(paths),
        identity_arg=paths.identity_arg(kubelet.KUBE_PROXY),
        log=paths.log(kubelet.KUBE_PROXY),
    )
    node = dataclasses.replace(node, kube_proxy_pid=proxy.pid)
    nodes.write_state(paths, node)
    running = [daemon, agent, proxy]
    _wait(lambda: api.node_ready(cp, node.name), deadline, running, f"Node {node.name} Ready")
    _wait(
        lambda: network.service_programmed(network.SERVICE_IP),
        deadline,
        running,
        "kube-proxy to translate the kubernetes Service",
    )
    # kube-proxy prepends its jumps to filter FORWARD and OUTPUT at its first sync (the one that
    # translated the Service) and later only checks they exist; the kubelet appends its own. Put
    # the guard back on top now, for good.
    network.keep_guard_first()
    return node


def _check_paths(paths: layout.NodeLayout, bin_dir: Path) -> None:
    socket = str(paths.containerd_socket)
    if len(os.fsencode(socket)) > layout.MAX_SOCKET_PATH:
        raise NodeError(
            f"containerd's socket path {socket} is {len(os.fsencode(socket))} bytes long; a unix "
            f"socket path must stay under {layout.MAX_SOCKET_PATH}: use a shorter cluster directory"
        )
    missing = [
        b for b in (kubelet.KUBELET, kubelet.KUBE_PROXY) if not os.access(bin_dir / b, os.X_OK)
    ]
    if missing:
        raise NodeError(
            f"{' and '.join(missing)} missing (or not executable) in {bin_dir}; build them with "
            f"hack/build-control-plane.sh and pass the directory it prints as bin_dir"
        )


def _wait(
    ready: Callable[[], bool], deadline: float, running: list[daemons.Daemon], what: str
) -> None:
    while True:
        for daemon in running:
            code = daemon.exit_code()
            if code is not None:
                raise NodeError(
                    f"{daemon.name} exited with code {code} while waiting for {what}; last lines "
                    f"of {daemon.log}:\n{daemon.tail()}"
                )
        if ready():
            return
        if time.monotonic() >= deadline:
            newest = running[-1]
            raise NodeError(
                f"timed out waiting for {what}; raise the timeout if the machine is slow; last "
                f"lines of {newest.log}:\n{newest.tail()}"
            )
        time.sleep(_POLL_SECONDS)


def down(directory: Path) -> None:
    """Stops the node and the control plane and puts the host back as the record found it.

    Safe to call again, and after an up that failed halfway: each step does what is left to
    do. Raises NodeError listing what could not be undone, after trying everything.
    """
    directory = directory.resolve()
    paths = layout.NodeLayout(directory=directory)
    node = load(directory)
    record = hostrecord.load(paths.host_record) if paths.host_record.exists() else None
    problems: list[str] = []
    try:
        cp = controlplane.load(directory)
    except controlplane.ControlPlaneError:
        cp = None
    if node is not None:
        if cp is not None and any(
            d.name == kubelet.KUBELET and d.alive() for d in node.processes()
        ):
            _stop_pods(cp, node.name)
        # A DRA driver left running (its caller died): after the pods, whose devices it
        # unprepares, before the kubelet. Its slices go with the control plane.
        problems += dratestdriver.stop(None, directory)
        problems += _stop_daemons(paths, node)
    if record is not None:
        problems += restoring.kill_pod_processes(record)
    try:
        controlplane.stop(directory)
    except controlplane.ControlPlaneError as error:
        problems.append(str(error))
    problems += restoring.unmount_under(paths.node)
    if record is not None:
        network.remove_links(record)
        problems += network.remove_chains(record)
        problems += restoring.remove_counters(record)
        problems += restoring.restore_sysctls(record)
        problems += restoring.remove_cgroups(record)
        problems += restoring.remove_paths(record)
    elif node is not None:
        problems.append(
            f"no host record at {paths.host_record}: iptables chains, sysctls and cgroups the "
            f"node changed were not restored; compare with a freshly booted machine"
        )
    if problems:
        raise NodeError(
            "the node stopped, but not everything it changed could be undone (run "
            "`plumb cluster down` again, or undo these by hand):\n- " + "\n- ".join(problems)
        )
    paths.state.unlink(missing_ok=True)
    paths.host_record.unlink(missing_ok=True)


def _stop_pods(cp: controlplane.ControlPlane, name: str) -> None:
    """Asks the kubelet, through the API, to stop the node's pods (containers, then networks)."""
    api.cordon(cp, name)
    pods = api.pods_on(cp, name)
    for namespace, pod in pods or []:
        api.delete_pod(cp, namespace, pod, _POD_GRACE_SECONDS)
    deadline = time.monotonic() + _POD_STOP_SECONDS
    while pods and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
        pods = api.pods_on(cp, name)


def _stop_daemons(paths: layout.NodeLayout, node: Node) -> list[str]:
    problems: list[str] = []
    for daemon in node.processes():
        if daemon.name == containerd.BINARY and daemon.alive():
            # What the kubelet did not stop: no container process may outlive the node.
            containerd.clear(paths)
        try:
            daemon.stop(_STOP_SECONDS)
        except controlplane.ControlPlaneError as error:
            problems.append(str(error))
    containerd.kill_shims(paths)
    return problems


def status(directory: Path) -> dict[str, str]:
    """Each part of the node and its state: "running" when all is well."""
    node = load(directory.resolve())
    found: dict[str, str] = {}
    started = {d.name: d for d in node.processes()} if node is not None else {}
    for name in (containerd.BINARY, kubelet.KUBELET, kubelet.KUBE_PROXY):
        daemon = started.get(name)
        found[name] = (
            "not started" if daemon is None else "running" if daemon.alive() else "stopped"
        )
    first = network.guard_first()
    if not network.guard_installed():
        found["guard"] = "missing"
    elif not all(first.values()):
        found["guard"] = "not first in " + ", ".join(hook for hook, ok in first.items() if not ok)
    else:
        found["guard"] = "running"
    if not network.bridge_exists():
        found["bridge"] = "missing"
    else:
        flags = Path("/sys/class/net", network.BRIDGE, "flags").read_text(encoding="utf-8")
        found["bridge"] = "running" if int(flags, 16) & 0x1 else "down"
    return found


def recorded(directory: Path) -> bool:
    """Whether directory holds a node (running, stopped halfway, or not yet undone)."""
    paths = layout.NodeLayout(directory=directory.resolve())
    return paths.state.exists() or paths.host_record.exists()
