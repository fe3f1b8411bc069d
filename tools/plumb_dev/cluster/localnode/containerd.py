"""The node's containerd: its configuration, starting it, clearing its containers at the end.

Debian trixie's containerd 1.7 (``cdiruntime``: unpacked into the cache, not installed) with
bookworm's runc and the CRI plugin, all state in the node's directory (root, state, runc's
state, the network namespaces' mounts, the CDI specs DRA drivers write, the socket). No service
manager runs it: the node starts and stops it. Image pulls are sent to a closed port on
loopback, so a pod whose image was not loaded fails at once instead of reaching for a registry
over the network.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from plumb_dev.cluster.localnode import cdiruntime, daemons, layout, network

BINARY = "containerd"
NAMESPACE = "k8s.io"
# Port 1 on loopback (tcpmux) is closed on any ordinary machine: a pull fails with "connection
# refused" on the spot. Through a proxy, Go never resolves the registry's name itself either.
_NOWHERE = "http://127.0.0.1:1"


def config_text(paths: layout.NodeLayout, *, sandbox_image: str) -> str:
    """containerd's configuration (version 2 TOML) for the node."""

    # TOML basic strings and JSON strings escape alike for paths and image names.
    def q(value: object) -> str:
        return json.dumps(str(value))

    cri = 'plugins."io.containerd.grpc.v1.cri"'
    runc = f"{cri}.containerd.runtimes.runc"
    return "\n".join(
        [
            "version = 2",
            f"root = {q(paths.containerd / 'root')}",
            f"state = {q(paths.containerd / 'state')}",
            "",
            "[grpc]",
            f"  address = {q(paths.containerd_socket)}",
            "",
            '[plugins."io.containerd.internal.v1.opt"]',
            f"  path = {q(paths.containerd / 'opt')}",
            "",
            f"[{cri}]",
            f"  sandbox_image = {q(sandbox_image)}",
            # This VM's bounding set lacks CAP_SYS_RESOURCE, so no process may lower its
            # oom_score_adj; without this every sandbox fails in runc ("can't get final child's
            # PID from pipe: EOF").
            "  restrict_oom_score_adj = true",
            "  netns_mounts_under_state_dir = true",
            '  stream_server_address = "127.0.0.1"',
            '  stream_server_port = "0"',
            "  enable_tls_streaming = false",
            # A DRA driver's kubelet plugin writes the CDI spec of each device it prepares into
            # this directory; containerd applies it to the containers that use the device.
            "  enable_cdi = true",
            f"  cdi_spec_dirs = [{q(paths.cdi_dir)}]",
            "",
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            "",
            f"[{runc}]",
            '  runtime_type = "io.containerd.runc.v2"',
            "",
            f"[{runc}.options]",
            # The kubelet drives cgroupfs; there is no systemd here.
            "  SystemdCgroup = false",
            f"  Root = {q(paths.containerd / 'runc')}",
            "",
            f"[{cri}.cni]",
            f"  bin_dir = {q(network.CNI_BIN_DIR)}",
            f"  conf_dir = {q(paths.cni_conf_dir)}",
            "  max_conf_num = 1",
            "",
        ]
    )


def start(paths: layout.NodeLayout, runtime: cdiruntime.Runtime) -> daemons.Daemon:
    # containerd finds its shim on PATH: the package's own comes first.
    search = ":".join([str(runtime.bin_dir), os.environ.get("PATH", "/usr/sbin:/usr/bin")])
    return daemons.spawn(
        BINARY,
        runtime.containerd,
        [paths.identity_arg(BINARY), "--log-level=warn"],
        identity_arg=paths.identity_arg(BINARY),
        log=paths.log(BINARY),
        env={
            "PATH": search,
            "HTTP_PROXY": _NOWHERE,
            "HTTPS_PROXY": _NOWHERE,
            "NO_PROXY": "",
            "no_proxy": "",
        },
    )


def ctr(
    paths: layout.NodeLayout, *args: str, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ctr", "--address", str(paths.containerd_socket), "--namespace", NAMESPACE, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def ready(paths: layout.NodeLayout) -> bool:
    """Whether containerd answers and its CRI plugin loaded."""
    if not paths.containerd_socket.exists():
        return False
    plugins = ctr(paths, "plugins", "ls")
    return plugins.returncode == 0 and any(
        line.split()[:2] == ["io.containerd.grpc.v1", "cri"] and line.split()[-1] == "ok"
        for line in plugins.stdout.splitlines()
    )


def clear(paths: layout.NodeLayout) -> None:
    """Kills and deletes every container left in the node's namespace (containerd running).

    The kubelet stops what it was told to stop; this takes what it could not (a pod it never
    got to, a kubelet that died), so no shim or container process outlives the node.
    """
    tasks = ctr(paths, "tasks", "ls", "-q")
    for task in tasks.stdout.split() if tasks.returncode == 0 else []:
        ctr(paths, "tasks", "rm", "-f", task)
    containers = ctr(paths, "containers", "ls", "-q")
    for container in containers.stdout.split() if containers.returncode == 0 else []:
        ctr(paths, "containers", "rm", container)


def kill_shims(paths: layout.NodeLayout) -> list[int]:
    """SIGKILLs the shims serving this containerd (after it stopped); returns their pids."""
    killed: list[int] = []
    address = os.fsencode(str(paths.containerd_socket))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if Path(os.fsdecode(args[0])).name.startswith("containerd-shim") and address in args:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed
