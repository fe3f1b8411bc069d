"""The ``plumb`` command: run the scheduler, explain and replay its decisions; hand the
development tooling's commands (cluster, demo, bench) to plumb_dev when it is installed."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import sys
import webbrowser
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

from plumb import DEFAULT_SCHEDULER_NAME, __version__, explain, leader, replay
from plumb import scheduler as scheduler_module
from plumb.app import configuring, debug, runtime
from plumb.extensions import registry
from plumb.framework import emulation
from plumb.framework.schedconfig import plugins as schedconfig_plugins
from plumb.k8s import credentials as credentials_module
from plumb.observability import logs, trace
from plumb.observability import spans as spans_module

# The development tooling's commands, with the line ``plumb --help`` gives each: they live in
# plumb_dev, the second distribution of plumb's repository (tools/), never in the image.
TOOLING: Mapping[str, str] = {
    "cluster": "the local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler "
    "and, with --node, a real node (containerd, kubelet, kube-proxy)",
    "demo": "show plumb scheduling pods on a local cluster",
    "bench": "benchmark plumb beside kube-scheduler; writes benchmarks.md",
}
TOOLING_PACKAGE = "plumb_dev"


def _duration(text: str) -> float:
    try:
        return leader.parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plumb",
        description=__doc__,
        epilog=f"{', '.join(TOOLING)}: development tooling ({TOOLING_PACKAGE}, tools/ in a "
        "checkout of plumb), run when it is installed",
    )
    parser.add_argument("--version", action="version", version=f"plumb {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for add in _ADDERS:
        add(commands)
    return parser


# argparse's subparsers type is generic only to type checkers: a string, not evaluated.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_run(commands: Commands) -> None:
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
        "--emulated-version",
        metavar="1.N",
        help="decide as kube-scheduler of this release (1.34 to 1.37; kube=1.N too), whatever "
        "the API server's; by default plumb follows the server's release (docs/versions.md)",
    )
    run.add_argument(
        "--feature-gates",
        default="",
        metavar="Name=true,...",
        help="kube-scheduler feature gates plumb honours, over the release's defaults "
        "(docs/versions.md lists them)",
    )
    run.add_argument(
        "--bind-concurrency",
        type=int,
        default=64,
        help="bindings in flight at most (default: %(default)s)",
    )
    _add_run_observability(run)
    _add_run_dumps(run)
    _add_run_tracing(run)
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


def _add_run_tracing(run: argparse.ArgumentParser) -> None:
    group = run.add_argument_group(
        "tracing",
        "OpenTelemetry spans for every scheduling attempt (docs/observability.md). Off unless an "
        "OTLP endpoint is set, here or by OTEL_EXPORTER_OTLP_ENDPOINT / "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; each flag replaces the OTEL_* variable it names; "
        "OTEL_SDK_DISABLED=true turns tracing off whatever else is set",
    )
    group.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="the collector's OTLP endpoint: a base URL for http/protobuf (/v1/traces is added), "
        "host:port or a URL for grpc (OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    group.add_argument(
        "--otlp-protocol",
        choices=spans_module.PROTOCOLS,
        help="how spans are sent (OTEL_EXPORTER_OTLP_PROTOCOL; default: http/protobuf)",
    )
    group.add_argument(
        "--trace-sampling-ratio",
        type=float,
        metavar="RATIO",
        help="the share of attempts traced whatever their outcome, 0 to 1, decided by the trace "
        "id (OTEL_TRACES_SAMPLER=traceidratio with OTEL_TRACES_SAMPLER_ARG; default: "
        f"{spans_module.DEFAULT_RATIO}); a failed attempt, or one slower than "
        "--trace-slow-seconds, is always traced",
    )
    group.add_argument(
        "--trace-slow-seconds",
        type=float,
        metavar="SECONDS",
        help="an attempt that took longer (from entering the active queue to its binding's "
        f"answer) is traced whatever the ratio (default: {spans_module.DEFAULT_SLOW_SECONDS:g})",
    )
    group.add_argument(
        "--tracing-service-name",
        metavar="NAME",
        help="the spans' service.name (OTEL_SERVICE_NAME; default: plumb)",
    )
    group.add_argument(
        "--tracing-ui-url",
        metavar="URL",
        default=os.environ.get("PLUMB_TRACING_UI_URL") or None,
        help="where a person reads a trace (Jaeger's query, e.g. http://jaeger:16686): `plumb "
        "explain` asking this plumb's debug endpoint prints each trace's link there "
        "(default: $PLUMB_TRACING_UI_URL)",
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


def _add_explain(commands: Commands) -> None:
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
    explain_cmd.add_argument(
        "--tracing-ui-url",
        default=os.environ.get("PLUMB_TRACING_UI_URL", ""),
        metavar="URL",
        help="Jaeger's query URL: the decision's trace is printed with its link (default: "
        "$PLUMB_TRACING_UI_URL)",
    )
    explain_cmd.add_argument(
        "--open",
        action="store_true",
        help="open the decision's trace in the browser (it needs the trace's link)",
    )


def _add_replay(commands: Commands) -> None:
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


def _add_plugins(commands: Commands) -> None:
    plugins_cmd = commands.add_parser(
        "plugins",
        help="list the Python scheduling plugins installed beside plumb",
        description="Lists the plugins of the plumb.plugins entry points: each one's name (what "
        "a profile enables), extension points, version and distribution, or why it cannot be "
        "used. Exit code 1 when one cannot.",
    )
    plugins_cmd.add_argument("--output", "-o", choices=["table", "json"], default="table")


def _add_tooling(commands: Commands) -> None:
    """The tooling's commands, listed by ``plumb --help``; main hands them over before parsing."""
    for name, summary in TOOLING.items():
        commands.add_parser(name, help=summary, add_help=False)


# In the order ``plumb --help`` lists the commands.
_ADDERS = (_add_run, _add_explain, _add_replay, _add_plugins, _add_tooling)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] and arguments[0] in TOOLING:
        return _forward(arguments)
    args = _parser().parse_args(arguments)
    return _RUNNERS[args.command](args)


def _forward(arguments: list[str]) -> int:
    """``plumb cluster|demo|bench ...``: the tooling's own command line, or one line saying how
    to get it. Found by name, not imported: the scheduler never imports the tooling (make lint),
    and ``plumb run`` loads none of it."""
    if importlib.util.find_spec(TOOLING_PACKAGE) is None:
        print(
            f"plumb {arguments[0]} is development tooling, not part of the scheduler: install "
            f"it with `pip install -e tools/` in a checkout of plumb (or `make install` there)",
            file=sys.stderr,
        )
        return 2
    commands = importlib.import_module(f"{TOOLING_PACKAGE}.commands")
    code: int = commands.main(arguments)
    return code


def _command_run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level, args.log_format)
    try:
        settings = _run_settings(args)
    except _Refused as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(runtime.run(settings))
    except (credentials_module.CredentialsError, runtime.StartError) as error:
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
    pinned, gates, kube = _emulation(args)
    config_bytes, served = _served(args, kube)
    return runtime.RunSettings(
        kubeconfig=args.kubeconfig,
        context=args.context,
        served=served,
        config=args.config,
        config_bytes=config_bytes,
        emulated_version=pinned,
        feature_gates=gates,
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
        spans=_span_settings(args),
    )


def _span_settings(args: argparse.Namespace) -> spans_module.SpanSettings:
    try:
        return spans_module.settings_from(
            os.environ,
            endpoint=args.otlp_endpoint,
            protocol=args.otlp_protocol,
            ratio=args.trace_sampling_ratio,
            slow_seconds=args.trace_slow_seconds,
            service=args.tracing_service_name,
            ui_url=args.tracing_ui_url,
        )
    except spans_module.SettingsError as error:
        raise _Refused(str(error)) from error


def _leader_timings(args: argparse.Namespace) -> leader.Timings:
    try:
        return leader.Timings(
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        )
    except ValueError as error:
        raise _Refused(str(error)) from error


def _emulation(args: argparse.Namespace) -> tuple[int | None, dict[str, bool], emulation.Emulation]:
    """--emulated-version's release (None: the server's), --feature-gates', and the emulation
    the flags are checked against before the server is asked: the pinned release, or the
    newest (a gate the server's older release lacks is refused once it is known)."""
    try:
        # Empty, as the manifests' settings pass an unset one: the server's release.
        pinned = (
            emulation.parse_emulated_version(args.emulated_version)
            if args.emulated_version
            else None
        )
        gates = emulation.parse_feature_gates(args.feature_gates)
        kube = emulation.emulate(emulation.NEWEST if pinned is None else pinned, gates)
    except emulation.EmulationError as error:
        raise _Refused(str(error)) from error
    return pinned, gates, kube


def _served(
    args: argparse.Namespace, kube: emulation.Emulation
) -> tuple[bytes, scheduler_module.Served]:
    """The configuration file's bytes (empty without --config) and the profiles served."""
    if args.config is None:
        return b"", scheduler_module.defaults(args.scheduler_name or DEFAULT_SCHEDULER_NAME, kube)
    if args.scheduler_name is not None:
        raise _Refused(
            "--scheduler-name and --config are exclusive: name the profiles in the "
            "file's profiles[].schedulerName"
        )
    try:
        return configuring.read(args.config, kube)
    except configuring.ConfigFileError as error:
        raise _Refused(str(error)) from error


def _command_explain(args: argparse.Namespace) -> int:
    return explain.main(
        args.pod,
        source=args.source,
        endpoint=args.endpoint,
        tracing_ui=args.tracing_ui_url,
        open_trace=webbrowser.open if args.open else None,
    )


def _command_replay(args: argparse.Namespace) -> int:
    return replay.main(
        args.snapshot,
        args.pod,
        input_hash=args.input_hash,
        trace_log=args.trace,
        output=args.output,
        kernel_name=args.kernel,
    )


def _command_plugins(args: argparse.Namespace) -> int:
    found = registry.installed(frozenset(schedconfig_plugins.registry()))
    plugins = sorted(found.plugins.values(), key=lambda p: p.name)
    if args.output == "json":
        listed = [
            {
                "name": p.name,
                "points": list(p.points),
                "version": p.version,
                "distribution": p.distribution,
                "entryPoint": p.entry,
                **({"problem": p.problem} if p.problem else {}),
            }
            for p in plugins
        ]
        print(json.dumps({"plugins": listed}, indent=2))
    elif not plugins:
        print(f"No plugins found (entry point group {registry.GROUP}).")
    else:
        rows = [("NAME", "EXTENSION POINTS", "VERSION", "DISTRIBUTION", "STATUS")]
        rows += [
            (
                p.name,
                ",".join(p.points) or "-",
                p.version or "-",
                p.distribution or "-",
                f"unusable: {p.problem}" if p.problem else "ok",
            )
            for p in plugins
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            print(
                "   ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True))
                + "   "
                + row[4]
            )
    return 1 if any(p.problem for p in plugins) else 0


_Runner: TypeAlias = Callable[[argparse.Namespace], int]
"""A subcommand: its parsed arguments to its exit code."""

# The tooling's commands are not here: main hands them to plumb_dev before parsing, so that
# ``plumb run``, the scheduler, is left with what it uses (a faster start, a smaller resident set).
_RUNNERS: Mapping[str, _Runner] = {
    "run": _command_run,
    "explain": _command_explain,
    "replay": _command_replay,
    "plugins": _command_plugins,
}


if __name__ == "__main__":
    sys.exit(main())
