"""The development tooling's commands: ``plumb cluster``, ``plumb demo`` and ``plumb bench``.

``plumb`` hands them their command line when plumb_dev is installed (plumb.cli); ``python -m
plumb_dev`` runs them too. Each imports its modules when run, so that ``plumb cluster`` does not
load the benchmark, nor ``plumb bench --help`` the cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from plumb import cli

if TYPE_CHECKING:
    from plumb_dev.cluster.controlplane.lifecycle import ControlPlane


def default_cluster_dir() -> Path:
    """Where ``plumb cluster`` keeps the local control plane: $PLUMB_CLUSTER_DIR or a cache."""
    configured = os.environ.get("PLUMB_CLUSTER_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "plumb" / "cluster"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plumb",
        description="plumb's development tooling: the local cluster, the demo, the benchmark",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for add in _ADDERS:
        add(commands)
    return parser


def _add_cluster(commands: cli.Commands) -> None:
    cluster = commands.add_parser(
        "cluster", help=cli.TOOLING["cluster"], formatter_class=_NamingHelp
    )
    cluster.add_argument("action", choices=["build", "up", "down", "env", "status", "image"])
    cluster.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="state directory (default: $PLUMB_CLUSTER_DIR or ~/.cache/plumb/cluster)",
    )
    cluster.add_argument(
        "--node",
        action="store_true",
        help="up: also run a real node that runs pods (needs root; installs containerd, runc, "
        "CNI plugins and iptables from Debian's packages when missing)",
    )
    cluster.add_argument(
        "--context",
        type=Path,
        default=None,
        help="image: a build context with a Containerfile (ARG BASE, FROM ${BASE}) built on the "
        "Debian base; without it, the small test image",
    )
    cluster.add_argument(
        "--name", default="app", help="image: the image's name with --context (default: app)"
    )
    cluster.add_argument(
        "--no-scheduler",
        action="store_true",
        help="up: leave kube-scheduler out (by default it schedules the pods that do not ask "
        "for plumb)",
    )
    cluster.add_argument(
        "--kube-version",
        type=_kube_version,
        default=None,
        metavar="v1.N.x",
        help="build, up: the Kubernetes release (the releases it knows, see _NamingHelp)",
    )
    cluster.add_argument(
        "--feature-gates",
        type=_feature_gates,
        default={},
        metavar="Name=true,...",
        help="up: Kubernetes feature gates for kube-apiserver, kube-controller-manager and "
        "kube-scheduler, as their own --feature-gates (comma-separated Name=true|false); "
        "GenericWorkload=true also serves its API (scheduling.k8s.io/v1beta1 on v1.37). A gate "
        "the release does not know is refused before anything starts",
    )
    cluster.add_argument(
        "--tracing",
        action="store_true",
        help="build, up: also run Jaeger (built once from its Go module: many minutes the first "
        "time), in memory on 127.0.0.1, and send it kube-apiserver's and etcd's spans for "
        "requests that carry a sampled traceparent from a system:masters caller (the admin "
        "token); `plumb cluster env` names its OTLP endpoint and query API. No web UI: read "
        "traces with curl $PLUMB_TRACING_UI_URL/api/traces/<trace id>",
    )


def _kube_version(text: str) -> str:
    """--kube-version's check; the table of releases is imported only when the option is given."""
    from plumb_dev.cluster.controlplane import releases

    if text not in releases.RELEASES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a release the local cluster builds; choose one of "
            f"{', '.join(releases.RELEASES)}"
        )
    return text


def _feature_gates(text: str) -> dict[str, bool]:
    """--feature-gates' syntax check: Kubernetes' own, which plumb run's flag of that name reads
    too; whether the release knows each gate is asked of its binaries when the cluster starts."""
    from plumb.framework import emulation

    try:
        return emulation.parse_feature_gates(text)
    except emulation.EmulationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _add_demo(commands: cli.Commands) -> None:
    demo_cmd = commands.add_parser("demo", help=cli.TOOLING["demo"])
    demo_cmd.add_argument(
        "--keep-running",
        action="store_true",
        help="keep plumb in the foreground after the tour (Ctrl-C stops)",
    )
    demo_cmd.add_argument(
        "--node",
        action="store_true",
        help="also run a real node and a Job on it whose log is printed (needs root)",
    )


def _add_bench(commands: cli.Commands) -> None:
    bench_cmd = commands.add_parser("bench", help=cli.TOOLING["bench"], formatter_class=_NamingHelp)
    bench_cmd.add_argument(
        "--quick",
        action="store_true",
        help="small workloads (a smoke check, a few minutes): every pod placed, plumb 0 violations",
    )
    bench_cmd.add_argument(
        "--large", action="store_true", help="also run the large workload (5,000 nodes)"
    )
    bench_cmd.add_argument(
        "--xlarge",
        action="store_true",
        help="also run the xlarge workload (15,000 nodes, 30,000 pods: plain, zone-spread and "
        "preferred-affinity in turn; tens of minutes; with --quick, 1,500 nodes)",
    )
    bench_cmd.add_argument(
        "--kernel-only",
        action="store_true",
        help="only the kernel micro-benchmark (no control plane); prints its table, writes "
        "nothing (with --quick: 500 nodes only)",
    )
    bench_cmd.add_argument(
        "--out",
        type=Path,
        default=Path("docs"),
        help="directory for benchmarks.md, benchmarks.json and the plots (default: %(default)s)",
    )
    bench_cmd.add_argument(
        "--workloads",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        default=None,
        help="comma-separated subset of: (the workloads' names, see _NamingHelp)",
    )


class _NamingHelp(argparse.HelpFormatter):
    """Names the bench workloads and the cluster's Kubernetes releases only when ``--help``
    prints them: importing plumb_dev.bench or the cluster's table of releases to build the
    parser would load them under every command."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.dest == "workloads":
            from plumb_dev.bench import workloads

            return f"comma-separated subset of: {', '.join(workloads.names())}"
        if action.dest == "kube_version":
            from plumb_dev.cluster.controlplane import building, releases

            return (
                f"build, up: the Kubernetes release, one of {', '.join(releases.RELEASES)} "
                f"(default: ${building.KUBE_VERSION_ENV}, else {releases.DEFAULT})"
            )
        return super()._get_help_string(action)


# In the order ``python -m plumb_dev --help`` lists the commands.
_ADDERS = (_add_cluster, _add_demo, _add_bench)


def _cluster(args: argparse.Namespace, directory: Path) -> int:
    from plumb_dev.cluster.controlplane import building
    from plumb_dev.cluster.controlplane import lifecycle as controlplane
    from plumb_dev.cluster.localnode import nodelifecycle as localnode

    action: str = args.action
    if action == "build":
        print(building.ensure_binaries(args.kube_version))
        if args.tracing:
            print(building.ensure_jaeger())
        return 0
    if action == "up":
        return _cluster_up(
            directory,
            node=args.node,
            scheduler=not args.no_scheduler,
            kube_version=args.kube_version,
            feature_gates=args.feature_gates,
            tracing=args.tracing,
        )
    if action == "image":
        return _cluster_image(directory, context=args.context, name=args.name)
    if action == "down":
        if localnode.recorded(directory):
            localnode.down(directory)
            print("node and control plane stopped; the host is as it was", file=sys.stderr)
        else:
            controlplane.stop(directory)
            print("control plane stopped", file=sys.stderr)
        return 0
    plane = controlplane.load(directory)
    if plane is None:
        print(
            f"no control plane recorded in {directory}; start one with: plumb cluster up",
            file=sys.stderr,
        )
        return 1
    if action == "env":
        if not controlplane.is_running(plane):
            print(f"the control plane in {directory} is not running", file=sys.stderr)
            return 1
        print("\n".join(controlplane.env_lines(plane)))
        return 0
    parts = {
        name: "running" if up else "stopped" for name, up in controlplane.status(plane).items()
    }
    if localnode.recorded(directory):
        parts.update(localnode.status(directory))
    print(f"server: {plane.server} (Kubernetes {plane.kube_version}{_gates_note(plane)})")
    if plane.jaeger is not None:
        print(f"traces: {plane.jaeger.query_url}/api/traces/<trace id>")
    for name, state in parts.items():
        print(f"{name:<24} {state}")
    return 0 if all(state == "running" for state in parts.values()) else 1


def _cluster_image(directory: Path, *, context: Path | None, name: str) -> int:
    """Builds an image with buildah (cached by content) and loads it into the real node."""
    from plumb_dev.cluster.localnode import images  # only the cluster commands need it
    from plumb_dev.cluster.localnode import nodelifecycle as localnode

    try:
        if context is None:
            image = images.ensure_test_image()
        else:
            base = images.ensure_debian_base()
            image = images.build(name, containerfile_dir=context, base=base)
        node = localnode.load(directory)
        if node is not None and localnode.status(directory).get("containerd") == "running":
            images.load(image, containerd_address=node.containerd_address)
            print(f"loaded into {node.name}'s containerd", file=sys.stderr)
        else:
            print(
                f"no real node running in {directory} (plumb cluster up --node); built only",
                file=sys.stderr,
            )
    except images.ImageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{image.ref}\t{image.archive}")
    return 0


def _gates_note(plane: ControlPlane) -> str:
    """What a plane's description adds for its gates: ``, feature gates GenericWorkload=true``."""
    from plumb_dev.cluster.controlplane import featuregates

    gates = featuregates.value(plane.feature_gates)
    return f", feature gates {gates}" if gates else ""


def _cluster_up(
    directory: Path,
    *,
    node: bool,
    scheduler: bool,
    kube_version: str | None,
    feature_gates: Mapping[str, bool],
    tracing: bool = False,
) -> int:
    from plumb_dev.cluster.controlplane import building
    from plumb_dev.cluster.controlplane import lifecycle as controlplane
    from plumb_dev.cluster.localnode import nodelifecycle as localnode

    existing = controlplane.load(directory)
    if existing is not None and controlplane.is_running(existing):
        print(
            f"already running: {existing.server} (Kubernetes {existing.kube_version}"
            f"{_gates_note(existing)}, kubeconfig {existing.kubeconfig}); plumb cluster down "
            f"first to change what runs",
            file=sys.stderr,
        )
        return 0
    # Built before anything starts: a first build takes many minutes.
    jaeger = building.ensure_jaeger() if tracing else None
    parts = controlplane.Parts(scheduler=scheduler, jaeger=jaeger)
    if node:
        problem = localnode.preflight()
        if problem is not None:
            print(f"error: this machine cannot run the real node: {problem}", file=sys.stderr)
            return 1
        bin_dir = building.ensure_binaries(kube_version)
        started, real = localnode.up(
            directory, bin_dir=bin_dir, parts=parts, feature_gates=feature_gates
        )
        print(f"node {real.name} Ready", file=sys.stderr)
    else:
        bin_dir = building.ensure_binaries(kube_version)
        started = controlplane.start(
            directory, bin_dir=bin_dir, parts=parts, feature_gates=feature_gates
        )
    print(
        f"control plane up at {started.server} (Kubernetes {started.kube_version}"
        f"{_gates_note(started)})",
        file=sys.stderr,
    )
    print(f"kubeconfig: {started.kubeconfig}", file=sys.stderr)
    if started.jaeger is not None:
        print(
            f"Jaeger: OTLP {started.jaeger.otlp_http_endpoint} (HTTP), "
            f"{started.jaeger.otlp_grpc_endpoint} (gRPC); traces at "
            f"{started.jaeger.query_url}/api/traces/<trace id> (no web UI)",
            file=sys.stderr,
        )
    print('use it with: eval "$(plumb cluster env)"', file=sys.stderr)
    return 0


def _setup_errors() -> tuple[type[Exception], ...]:
    """What building or starting a local cluster raises, for a one-line error."""
    from plumb_dev.cluster.controlplane import building
    from plumb_dev.cluster.controlplane import lifecycle as controlplane

    return (building.BuildError, controlplane.ControlPlaneError)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``plumb cluster|demo|bench ...`` (``argv`` starts with the command's name)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(arguments)
    return _RUNNERS[args.command](args, arguments)


def _command_cluster(args: argparse.Namespace, argv: Sequence[str]) -> int:
    try:
        return _cluster(args, args.dir or default_cluster_dir())
    except _setup_errors() as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _command_demo(args: argparse.Namespace, argv: Sequence[str]) -> int:
    # Imported here: the demo drives its cluster with the kubernetes package's client, which
    # the other commands have no use for.
    from plumb_dev.demo import tour

    try:
        return tour.main(keep_running=args.keep_running, node=args.node)
    except _setup_errors() as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _command_bench(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from plumb_dev.bench import benchruns

    bench_settings = benchruns.Settings(
        out=args.out,
        quick=args.quick,
        large=args.large,
        xlarge=args.xlarge,
        workloads=args.workloads,
        command=" ".join(["plumb", *argv]),
        kernel_only=args.kernel_only,
    )
    refused: tuple[type[Exception], ...] = (ValueError, *_setup_errors())
    try:
        return benchruns.main(bench_settings)
    except refused as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


_Runner: TypeAlias = Callable[[argparse.Namespace, Sequence[str]], int]
"""A command: its parsed arguments and its command line (from the command's name on) to its
exit code."""

_RUNNERS: Mapping[str, _Runner] = {
    "cluster": _command_cluster,
    "demo": _command_demo,
    "bench": _command_bench,
}
