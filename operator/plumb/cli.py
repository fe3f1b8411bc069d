"""The ``plumb`` command: run the scheduler, explain and replay its decisions, manage the local
control plane, run the demo."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

from plumb import DEFAULT_SCHEDULER_NAME, __version__, explain, leader, replay
from plumb import scheduler as scheduler_module
from plumb.app import configuring, debug, runtime
from plumb.k8s import credentials as credentials_module
from plumb.observability import logs, trace


def default_cluster_dir() -> Path:
    """Where ``plumb cluster`` keeps the local control plane: $PLUMB_CLUSTER_DIR or a cache."""
    configured = os.environ.get("PLUMB_CLUSTER_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "plumb" / "cluster"


def _duration(text: str) -> float:
    try:
        return leader.parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plumb", description=__doc__)
    parser.add_argument("--version", action="version", version=f"plumb {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for add in _ADDERS:
        add(commands)
    return parser


# argparse's subparsers type is generic only to type checkers: a string, not evaluated.
_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_run(commands: _Commands) -> None:
    run = commands.add_parser("run", help="run the scheduler against a cluster")
    run.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)",
    )
    run.add_argument("--context", help="kubeconfig context to use")
    run.add_argument(
        "--scheduler-name",
        help="schedule pods whose spec.schedulerName is this, with kube-scheduler's default "
        f"profile (default: {DEFAULT_SCHEDULER_NAME}); not with --config",
    )
    run.add_argument(
        "--config",
        type=Path,
        help="a kube-scheduler KubeSchedulerConfiguration file "
        "(kubescheduler.config.k8s.io/v1): one profile per schedulerName; reloaded when it "
        "changes or on SIGHUP (docs/configuration.md)",
    )
    run.add_argument(
        "--bind-concurrency",
        type=int,
        default=64,
        help="bindings in flight at most (default: %(default)s)",
    )
    _add_run_observability(run)
    _add_run_dumps(run)
    _add_run_leader(run)


def _add_run_observability(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--metrics-port",
        type=int,
        default=runtime.RunSettings.metrics_port,
        help="serve Prometheus metrics at :PORT/metrics (and the probes, /healthz and /readyz) "
        "on --metrics-address; 0 turns them off (default: %(default)s)",
    )
    run.add_argument(
        "--metrics-address",
        default=runtime.RunSettings.metrics_host,
        help="address the metrics port (metrics and the /healthz, /readyz probes) listens on; "
        "the default, %(default)s, is every interface, so that Prometheus and the kubelet reach "
        "it: use 127.0.0.1 to keep it on this machine",
    )
    run.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="debug is the most verbose: kopf's and aiohttp's own lines as well "
        "(default: %(default)s)",
    )
    run.add_argument(
        "--log-format",
        default=logs.JSON,
        choices=logs.FORMATS,
        help="json: one JSON object per line; plain: '<time> LEVEL logger: message' with a "
        "trace's fields as key=value (default: %(default)s)",
    )
    run.add_argument(
        "--debug-port",
        type=int,
        default=runtime.RunSettings.debug_port,
        help="serve each pod's last decision (/debug/pods/NS/NAME, for `plumb explain`) and the "
        "cache's snapshot (/debug/snapshot) on 127.0.0.1:PORT only, never another interface: "
        "they hold every pod spec of the cluster; reach it with kubectl port-forward. 0 turns "
        "it off (default: %(default)s)",
    )
    run.add_argument(
        "--trace-candidates",
        type=int,
        default=runtime.RunSettings.trace_candidates,
        choices=range(trace.TOP + 1),
        metavar=f"0-{trace.TOP}",
        help="top candidates, with their per-plugin scores, on each trace line "
        "(default: %(default)s)",
    )


def _add_run_dumps(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--snapshot-dir",
        type=Path,
        default=runtime.RunSettings.snapshot_dir,
        help="where SIGUSR1 writes a snapshot dump for `plumb replay` (default: %(default)s)",
    )
    run.add_argument(
        "--journal",
        type=int,
        default=runtime.RunSettings.journal,
        help="cache writes kept so a snapshot dump can replay decisions made before them "
        "(default: %(default)s)",
    )


def _add_run_leader(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--leader-elect",
        action="store_true",
        help="run with Lease leader election: every replica watches and keeps its cache warm, "
        "only the one holding the Lease schedules (default: off, this process schedules)",
    )
    timings = runtime.RunSettings.leader_timings
    for flag, default, what in (
        (
            "lease-duration",
            timings.lease_duration,
            "how long a standby waits after the last renewal it saw before taking the Lease",
        ),
        (
            "renew-deadline",
            timings.renew_deadline,
            "how long the leader keeps trying to renew "
            "before it stops scheduling and gives the Lease up",
        ),
        ("retry-period", timings.retry_period, "how often candidates try and the leader renews"),
    ):
        run.add_argument(
            f"--leader-elect-{flag}",
            type=_duration,
            default=default,
            metavar="DURATION",
            help=f"{what}; Go-style, e.g. 15s, 500ms (default: {default:g}s)",
        )
    run.add_argument(
        "--leader-elect-resource-name",
        default=runtime.RunSettings.leader_name,
        help="the Lease's name (default: %(default)s)",
    )
    run.add_argument(
        "--leader-elect-resource-namespace",
        default=None,
        help="the Lease's namespace (default: the pod's namespace in a cluster, else "
        f"{runtime.DEFAULT_LEADER_NAMESPACE})",
    )


def _add_explain(commands: _Commands) -> None:
    explain_cmd = commands.add_parser(
        "explain",
        help="why a pod went where it did, or why it is pending, from plumb's trace",
        description="Prints the pod's last decision: the verdict, node, policy, the filters "
        "that rejected nodes, the top candidates' per-plugin scores. Reads plumb's log from "
        "stdin when it is piped (kubectl logs deploy/plumb -n plumb-system | plumb explain "
        "NS/POD), else asks the running scheduler's debug endpoint (kubectl port-forward -n "
        f"plumb-system deploy/plumb {debug.DEFAULT_PORT}).",
    )
    explain_cmd.add_argument("pod", metavar="NAMESPACE/NAME")
    explain_cmd.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="read plumb's log from FILE ('-': stdin) instead of asking the endpoint",
    )
    explain_cmd.add_argument(
        "--endpoint",
        help=f"plumb's debug endpoint (default: {explain.DEFAULT_ENDPOINT})",
    )


def _add_replay(commands: _Commands) -> None:
    replay_cmd = commands.add_parser(
        "replay",
        help="make a recorded decision again, offline, from a snapshot dump and the pod",
        description="Rewinds the snapshot's cache to what the pod's decision saw, decides "
        "again and prints the node, input hash and plan hash: those of the trace line when "
        "the decision is reproduced. Get a snapshot with `curl 127.0.0.1:10252/debug/snapshot "
        "> snap.json` (after kubectl port-forward) or `kill -USR1` (plumb logs the file), the "
        "pod with `kubectl get pod -o json`.",
    )
    replay_cmd.add_argument(
        "--snapshot",
        required=True,
        metavar="FILE|URL",
        help="a snapshot dump, or the debug endpoint's /debug/snapshot URL",
    )
    replay_cmd.add_argument(
        "--pod",
        required=True,
        metavar="FILE",
        help="the pod (or a List of pods) as JSON (kubectl get pod -o json); '-' reads stdin",
    )
    replay_cmd.add_argument(
        "--input-hash",
        help="replay the pod's decision with this input hash (default: its latest)",
    )
    replay_cmd.add_argument(
        "--trace",
        metavar="LOG",
        help="check a log instead: replay every decision its trace lines record for the given "
        "pods and say whether each reproduced ('-': stdin, e.g. kubectl logs deploy/plumb)",
    )
    replay_cmd.add_argument("--output", "-o", choices=["text", "json"], default="text")
    replay_cmd.add_argument(
        "--kernel",
        choices=["compiled", "reference"],
        default="compiled",
        help="the numba kernel plumb runs, or the pure-Python reference (default: %(default)s)",
    )


def _add_cluster(commands: _Commands) -> None:
    cluster = commands.add_parser(
        "cluster",
        help="the local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler "
        "and, with --node, a real node (containerd, kubelet, kube-proxy)",
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


def _add_demo(commands: _Commands) -> None:
    demo_cmd = commands.add_parser("demo", help="show plumb scheduling pods on a local cluster")
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


def _add_bench(commands: _Commands) -> None:
    bench_cmd = commands.add_parser(
        "bench",
        help="benchmark plumb beside kube-scheduler; writes benchmarks.md",
        formatter_class=_BenchHelp,
    )
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
        help="comma-separated subset of: (the workloads' names, see _BenchHelp)",
    )


class _BenchHelp(argparse.HelpFormatter):
    """Names the bench workloads only when ``plumb bench --help`` prints them: importing
    plumb.bench to build the parser would load it under ``plumb run`` too."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.dest != "workloads":
            return super()._get_help_string(action)
        from plumb.bench import workloads

        return f"comma-separated subset of: {', '.join(workloads.names())}"


# In the order ``plumb --help`` lists the commands.
_ADDERS = (_add_run, _add_explain, _add_replay, _add_cluster, _add_demo, _add_bench)


def _cluster(args: argparse.Namespace, directory: Path) -> int:
    from plumb.controlplane import building
    from plumb.controlplane import running as controlplane
    from plumb.localnode import running as localnode

    action: str = args.action
    if action == "build":
        print(building.ensure_binaries())
        return 0
    if action == "up":
        return _cluster_up(directory, node=args.node, scheduler=not args.no_scheduler)
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
    print(f"server: {plane.server}")
    for name, state in parts.items():
        print(f"{name:<24} {state}")
    return 0 if all(state == "running" for state in parts.values()) else 1


def _cluster_image(directory: Path, *, context: Path | None, name: str) -> int:
    """Builds an image with buildah (cached by content) and loads it into the real node."""
    from plumb.localnode import images  # only the cluster commands need it
    from plumb.localnode import running as localnode

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


def _cluster_up(directory: Path, *, node: bool, scheduler: bool) -> int:
    from plumb.controlplane import building
    from plumb.controlplane import running as controlplane
    from plumb.localnode import running as localnode

    existing = controlplane.load(directory)
    if existing is not None and controlplane.is_running(existing):
        print(
            f"already running: {existing.server} (kubeconfig {existing.kubeconfig}); "
            f"plumb cluster down first to change what runs",
            file=sys.stderr,
        )
        return 0
    parts = controlplane.Parts(scheduler=scheduler)
    if node:
        problem = localnode.preflight()
        if problem is not None:
            print(f"error: this machine cannot run the real node: {problem}", file=sys.stderr)
            return 1
        started, real = localnode.up(directory, bin_dir=building.ensure_binaries(), parts=parts)
        print(f"node {real.name} Ready", file=sys.stderr)
    else:
        started = controlplane.start(directory, bin_dir=building.ensure_binaries(), parts=parts)
    print(f"control plane up at {started.server}", file=sys.stderr)
    print(f"kubeconfig: {started.kubeconfig}", file=sys.stderr)
    print('use it with: eval "$(plumb cluster env)"', file=sys.stderr)
    return 0


def _setup_errors() -> tuple[type[Exception], ...]:
    """What building or starting a local cluster raises, for a one-line error."""
    from plumb.controlplane import building
    from plumb.controlplane import running as controlplane

    return (building.BuildError, controlplane.ControlPlaneError)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return _RUNNERS[args.command](args, argv)


def _command_run(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    logs.configure(args.log_level, args.log_format)
    try:
        settings = _run_settings(args)
    except _Refused as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(runtime.run(settings))
    except credentials_module.CredentialsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


class _Refused(Exception):
    """Flags ``plumb run`` cannot run with: printed as ``error: ...``, exit code 2."""


def _run_settings(args: argparse.Namespace) -> runtime.RunSettings:
    """``plumb run``'s settings from its flags; raises _Refused."""
    leader_timings = _leader_timings(args)
    config_bytes, served = _served(args)
    return runtime.RunSettings(
        kubeconfig=args.kubeconfig,
        context=args.context,
        served=served,
        config=args.config,
        config_bytes=config_bytes,
        bind_concurrency=args.bind_concurrency,
        metrics_host=args.metrics_address,
        metrics_port=args.metrics_port,
        debug_port=args.debug_port,
        trace_candidates=args.trace_candidates,
        snapshot_dir=args.snapshot_dir,
        journal=args.journal,
        leader_elect=args.leader_elect,
        leader_timings=leader_timings,
        leader_name=args.leader_elect_resource_name,
        leader_namespace=args.leader_elect_resource_namespace,
    )


def _leader_timings(args: argparse.Namespace) -> leader.Timings:
    try:
        return leader.Timings(
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        )
    except ValueError as error:
        raise _Refused(str(error)) from error


def _served(args: argparse.Namespace) -> tuple[bytes, scheduler_module.Served]:
    """The configuration file's bytes (empty without --config) and the profiles served."""
    if args.config is None:
        return b"", scheduler_module.defaults(args.scheduler_name or DEFAULT_SCHEDULER_NAME)
    if args.scheduler_name is not None:
        raise _Refused(
            "--scheduler-name and --config are exclusive: name the profiles in the "
            "file's profiles[].schedulerName"
        )
    try:
        return configuring.read(args.config)
    except configuring.ConfigFileError as error:
        raise _Refused(str(error)) from error


def _command_explain(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    return explain.main(args.pod, source=args.source, endpoint=args.endpoint)


def _command_replay(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    return replay.main(
        args.snapshot,
        args.pod,
        input_hash=args.input_hash,
        trace_log=args.trace,
        output=args.output,
        kernel_name=args.kernel,
    )


def _command_cluster(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    try:
        return _cluster(args, args.dir or default_cluster_dir())
    except _setup_errors() as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _command_demo(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    # Imported here: the demo drives its cluster with the kubernetes package's client, which
    # ``plumb run`` has no use for (and would carry, ~20 MiB, for its whole life).
    from plumb import demo

    try:
        return demo.main(keep_running=args.keep_running, node=args.node)
    except _setup_errors() as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _command_bench(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    from plumb.bench import running as bench_running

    bench_settings = bench_running.Settings(
        out=args.out,
        quick=args.quick,
        large=args.large,
        xlarge=args.xlarge,
        workloads=args.workloads,
        command=" ".join(["plumb", *(sys.argv[1:] if argv is None else argv)]),
        kernel_only=args.kernel_only,
    )
    refused: tuple[type[Exception], ...] = (ValueError, *_setup_errors())
    try:
        return bench_running.main(bench_settings)
    except refused as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


_Runner: TypeAlias = Callable[[argparse.Namespace, Sequence[str] | None], int]
"""A subcommand: its parsed arguments and the command line (None: sys.argv) to its exit code."""

# The cluster, demo and bench commands import their modules when run: ``plumb run``, the
# scheduler, is left with what it uses (a faster start, a smaller resident set).
_RUNNERS: Mapping[str, _Runner] = {
    "run": _command_run,
    "explain": _command_explain,
    "replay": _command_replay,
    "cluster": _command_cluster,
    "demo": _command_demo,
    "bench": _command_bench,
}


if __name__ == "__main__":
    sys.exit(main())
