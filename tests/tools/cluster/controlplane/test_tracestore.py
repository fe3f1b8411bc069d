"""The local cluster's tracing, without a server: Jaeger's configuration (every listener on
127.0.0.1 at the chosen ports, no self-telemetry), kube-apiserver's TracingConfiguration and
etcd's flags, Jaeger recorded in the state file and stopped last, the environment lines, and
``plumb cluster up --tracing``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # no stubs in the dev dependencies

from plumb_dev import commands
from plumb_dev.cluster.controlplane import config, lifecycle, processes, tracestore

JAEGER = tracestore.Jaeger(
    binary=Path("/cache/jaeger-v1.75.0-abc/jaeger"),
    pid=104,
    otlp_grpc_port=41317,
    otlp_http_port=41318,
    query_port=41686,
    query_grpc_port=41685,
)


def _endpoints(node: object) -> list[str]:
    """Every ``endpoint`` value anywhere in a configuration."""
    if isinstance(node, dict):
        found = [str(v) for k, v in node.items() if k == "endpoint"]
        return found + [e for v in node.values() for e in _endpoints(v)]
    if isinstance(node, list):
        return [e for v in node for e in _endpoints(v)]
    return []


def test_jaeger_listens_on_loopback_only_at_the_chosen_ports() -> None:
    loaded: dict[str, Any] = yaml.safe_load(tracestore.configuration_text(JAEGER))
    assert loaded == tracestore.configuration(JAEGER)
    assert sorted(_endpoints(loaded)) == [
        "127.0.0.1:41317",
        "127.0.0.1:41318",
        "127.0.0.1:41685",
        "127.0.0.1:41686",
    ]
    # Only the listeners asked for: no Jaeger or Zipkin receivers, sampling, health or zpages
    # extensions on their fixed default ports.
    assert loaded["service"]["extensions"] == ["jaeger_storage", "jaeger_query"]
    assert loaded["service"]["pipelines"]["traces"] == {
        "receivers": ["otlp"],
        "processors": ["batch"],
        "exporters": ["jaeger_storage_exporter"],
    }


def test_jaeger_keeps_spans_in_memory_and_neither_measures_nor_traces_itself() -> None:
    loaded = tracestore.configuration(JAEGER)
    assert loaded["service"]["telemetry"]["metrics"] == {"level": "none"}
    query = loaded["extensions"]["jaeger_query"]
    assert query["enable_tracing"] is False
    backends = loaded["extensions"]["jaeger_storage"]["backends"]
    assert list(backends.values()) == [{"memory": {"max_traces": 100_000}}]
    store = next(iter(backends))
    assert query["storage"] == {"traces": store}
    assert loaded["exporters"]["jaeger_storage_exporter"] == {"trace_storage": store}


def test_the_api_server_sends_otlp_grpc_to_jaeger_following_its_callers_sampling() -> None:
    assert yaml.safe_load(tracestore.apiserver_tracing_text(JAEGER)) == {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "TracingConfiguration",
        # host:port: kube-apiserver refuses an http:// endpoint.
        "endpoint": "127.0.0.1:41317",
        "samplingRatePerMillion": 0,
    }
    layout = config.Layout(directory=Path("/plane"))
    assert tracestore.apiserver_flags(layout) == ["--tracing-config-file=/plane/tracing.yaml"]
    assert tracestore.etcd_flags(JAEGER) == [
        "--enable-distributed-tracing",
        "--distributed-tracing-address=127.0.0.1:41317",
        "--distributed-tracing-service-name=etcd",
    ]


def test_both_configurations_are_written_in_the_planes_directory(tmp_path: Path) -> None:
    layout = config.Layout(directory=tmp_path)
    tracestore.write(layout, JAEGER)
    assert json.loads(layout.jaeger_config.read_text()) == tracestore.configuration(JAEGER)
    assert layout.tracing_config.read_text() == tracestore.apiserver_tracing_text(JAEGER)
    # Jaeger's process is known by its configuration file, as the others by their directory.
    assert tracestore.jaeger_args(layout) == [f"--config={tmp_path / 'jaeger.yaml'}"]
    assert layout.identity_arg(config.JAEGER) == f"--config={tmp_path / 'jaeger.yaml'}"


def _plane(directory: Path, jaeger: tracestore.Jaeger | None) -> lifecycle.ControlPlane:
    return lifecycle.ControlPlane(
        directory=directory,
        bin_dir=Path("/bin-dir"),
        kube_version="v1.37.2",
        kubeconfig=directory / "kubeconfig",
        server="https://127.0.0.1:6443",
        token="t",
        ca_file=directory / "pki" / "ca.crt",
        etcd_pid=101,
        apiserver_pid=102,
        controller_manager_pid=103,
        jaeger=jaeger,
    )


def test_the_state_file_records_jaeger_which_stops_last(tmp_path: Path) -> None:
    plane = _plane(tmp_path, JAEGER)
    lifecycle._write_state(
        config.Layout(directory=tmp_path), plane, etcd_port=2379, etcd_peer_port=2380
    )
    state = json.loads((tmp_path / config.STATE_FILE).read_text())
    assert state["jaeger"] == {
        "binary": "/cache/jaeger-v1.75.0-abc/jaeger",
        "pid": 104,
        "otlp_grpc_port": 41317,
        "otlp_http_port": 41318,
        "query_port": 41686,
        "query_grpc_port": 41685,
    }
    assert state["logs"]["jaeger"] == str(tmp_path / "jaeger.log")
    loaded = lifecycle.load(tmp_path)
    assert loaded == plane
    assert loaded is not None
    assert loaded.processes() == [
        ("kube-controller-manager", 103),
        ("kube-apiserver", 102),
        ("etcd", 101),
        ("jaeger", 104),
    ]
    assert loaded.binary("jaeger") == JAEGER.binary
    assert loaded.binary("etcd") == Path("/bin-dir/etcd")


def test_a_plane_without_tracing_records_no_jaeger(tmp_path: Path) -> None:
    plane = _plane(tmp_path, None)
    lifecycle._write_state(
        config.Layout(directory=tmp_path), plane, etcd_port=2379, etcd_peer_port=2380
    )
    assert "jaeger" not in json.loads((tmp_path / config.STATE_FILE).read_text())
    loaded = lifecycle.load(tmp_path)
    assert loaded is not None
    assert loaded.jaeger is None
    assert [name for name, _ in loaded.processes()][-1] == "etcd"
    assert not any("OTEL" in line for line in lifecycle.env_lines(loaded))


def test_a_state_file_with_a_broken_jaeger_record_is_refused(tmp_path: Path) -> None:
    plane = _plane(tmp_path, JAEGER)
    lifecycle._write_state(
        config.Layout(directory=tmp_path), plane, etcd_port=2379, etcd_peer_port=2380
    )
    path = tmp_path / config.STATE_FILE
    state = json.loads(path.read_text())
    state["jaeger"]["query_port"] = "41686"
    path.write_text(json.dumps(state))
    with pytest.raises(lifecycle.ControlPlaneError, match=r"'jaeger\.query_port' should be an int"):
        lifecycle.load(tmp_path)


def test_the_environment_names_the_otlp_endpoint_and_the_query_api(tmp_path: Path) -> None:
    lines = lifecycle.env_lines(_plane(tmp_path, JAEGER))
    assert "export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:41318" in lines
    assert "export PLUMB_TRACING_UI_URL=http://127.0.0.1:41686" in lines
    assert JAEGER.otlp_grpc_endpoint == "127.0.0.1:41317"
    # Every line is a shell command or a comment: `eval "$(plumb cluster env)"` runs them.
    assert all(line.startswith(("export ", "# ")) for line in lines)


def test_free_ports_are_distinct_and_avoid_those_taken() -> None:
    first = processes.free_ports(3)
    again = processes.free_ports(4, taken=set(first))
    assert len(set(first)) == 3
    assert len(set(again)) == 4
    assert not set(first) & set(again)


def test_plumb_cluster_up_and_build_take_tracing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = commands._parser()
    assert parser.parse_args(["cluster", "up", "--tracing"]).tracing is True
    assert parser.parse_args(["cluster", "build", "--tracing"]).tracing is True
    assert parser.parse_args(["cluster", "up"]).tracing is False
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option
    with pytest.raises(SystemExit):
        parser.parse_args(["cluster", "--help"])
    out = capsys.readouterr().out
    assert "--tracing" in out
    assert "No web UI" in out
