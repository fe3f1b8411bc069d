"""The local control plane's trace store: Jaeger's ports and configuration, and the tracing
flags kube-apiserver and etcd get to send their spans to it.

Jaeger is the ``jaeger`` command of github.com/jaegertracing/jaeger v1.75.0 (Jaeger v2, an OTel
Collector), built by hack/build-jaeger.sh (``building.ensure_jaeger``). It keeps spans in memory,
takes them in over OTLP (gRPC and HTTP) and answers the HTTP query API (``/api/traces/{id}``,
``/api/traces?service=...``, ``/api/services``); it has no web UI, as built from its module.
Everything listens on 127.0.0.1, on ports chosen free at start, so that parallel clusters never
clash, and the collector's own metrics (127.0.0.1:8888 by default) are off.

kube-apiserver follows an incoming W3C ``traceparent`` only from a ``system:masters`` or
``system:monitoring`` caller (the local cluster's admin token is one); with
``samplingRatePerMillion: 0`` it records only such callers' sampled requests, and etcd, told the
same, records only under the API server's sampled calls.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from plumb_dev.cluster.controlplane import config

JAEGER = config.JAEGER
# The span storage's name in Jaeger's configuration, and how many traces it keeps (the oldest
# go first): the upstream all-in-one's figure.
_STORE = "memstore"
_MAX_TRACES = 100_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class Jaeger:
    """A control plane's Jaeger: its binary, process and listeners (all on 127.0.0.1)."""

    binary: Path
    # 0 until it is started.
    pid: int
    # OTLP over gRPC: kube-apiserver's and etcd's exporters (``host:port``, no TLS).
    otlp_grpc_port: int
    # OTLP over HTTP (protobuf or JSON at /v1/traces): plumb's exporter.
    otlp_http_port: int
    # The HTTP query API (/api/...).
    query_port: int
    # The query API over gRPC (api_v2, api_v3); nothing here uses it, but it must listen
    # somewhere and its default is every interface.
    query_grpc_port: int

    @property
    def otlp_grpc_endpoint(self) -> str:
        """``127.0.0.1:<port>``: what kube-apiserver's TracingConfiguration and etcd take."""
        return f"{config.LOOPBACK}:{self.otlp_grpc_port}"

    @property
    def otlp_http_endpoint(self) -> str:
        """``http://127.0.0.1:<port>``: OTEL_EXPORTER_OTLP_ENDPOINT for an OTLP/HTTP exporter
        (which appends /v1/traces)."""
        return f"http://{config.LOOPBACK}:{self.otlp_http_port}"

    @property
    def query_url(self) -> str:
        """``http://127.0.0.1:<port>``: the query API's base (``/api/traces/<trace id>``)."""
        return f"http://{config.LOOPBACK}:{self.query_port}"

    def ports(self) -> dict[str, int]:
        return {
            "otlp_grpc_port": self.otlp_grpc_port,
            "otlp_http_port": self.otlp_http_port,
            "query_port": self.query_port,
            "query_grpc_port": self.query_grpc_port,
        }


def configuration(jaeger: Jaeger) -> dict[str, Any]:
    """Jaeger's configuration (an OTel Collector's): OTLP in, the in-memory store, the query
    API; every listener on 127.0.0.1 at jaeger's ports; no self-telemetry, no self-tracing."""
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query"],
            "pipelines": {
                "traces": {
                    "receivers": ["otlp"],
                    "processors": ["batch"],
                    "exporters": ["jaeger_storage_exporter"],
                }
            },
            "telemetry": {
                # "none": the collector serves no metrics of its own (default 127.0.0.1:8888).
                "metrics": {"level": "none"},
                "logs": {"level": "warn"},
            },
        },
        "extensions": {
            "jaeger_storage": {"backends": {_STORE: {"memory": {"max_traces": _MAX_TRACES}}}},
            "jaeger_query": {
                "storage": {"traces": _STORE},
                # On by default in v2: the query service would trace itself into the store.
                "enable_tracing": False,
                "http": {"endpoint": f"{config.LOOPBACK}:{jaeger.query_port}"},
                "grpc": {"endpoint": f"{config.LOOPBACK}:{jaeger.query_grpc_port}"},
            },
        },
        "receivers": {
            "otlp": {
                "protocols": {
                    "grpc": {"endpoint": jaeger.otlp_grpc_endpoint},
                    "http": {"endpoint": f"{config.LOOPBACK}:{jaeger.otlp_http_port}"},
                }
            }
        },
        "processors": {"batch": {}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": _STORE}},
    }


def configuration_text(jaeger: Jaeger) -> str:
    # JSON is YAML, which the collector reads; this spares a YAML dependency.
    return json.dumps(configuration(jaeger), indent=2) + "\n"


def jaeger_args(layout: config.Layout) -> list[str]:
    return [layout.identity_arg(JAEGER)]


def apiserver_tracing_text(jaeger: Jaeger) -> str:
    """kube-apiserver's --tracing-config-file: a TracingConfiguration (apiserver.config.k8s.io/v1,
    read the same by every release the local cluster builds). Rate 0: only requests whose
    trusted caller sent a sampled traceparent are recorded."""
    return "\n".join(
        [
            "apiVersion: apiserver.config.k8s.io/v1",
            "kind: TracingConfiguration",
            f"endpoint: {json.dumps(jaeger.otlp_grpc_endpoint)}",
            "samplingRatePerMillion: 0",
            "",
        ]
    )


def apiserver_flags(layout: config.Layout) -> list[str]:
    """No feature gate: APIServerTracing is locked on from v1.34 and gone in v1.37."""
    return [f"--tracing-config-file={layout.tracing_config}"]


def etcd_flags(jaeger: Jaeger) -> list[str]:
    """etcd v3.6's (the ``--experimental-`` forms are deprecated): OTLP gRPC to Jaeger, sampling
    rate 0, so it records only under the API server's sampled requests."""
    return [
        "--enable-distributed-tracing",
        f"--distributed-tracing-address={jaeger.otlp_grpc_endpoint}",
        "--distributed-tracing-service-name=etcd",
    ]


def write(layout: config.Layout, jaeger: Jaeger) -> None:
    """Jaeger's configuration and kube-apiserver's tracing configuration, in the directory."""
    layout.jaeger_config.write_text(configuration_text(jaeger), encoding="utf-8")
    layout.tracing_config.write_text(apiserver_tracing_text(jaeger), encoding="utf-8")


def env_lines(jaeger: Jaeger) -> list[str]:
    """Shell lines for an OTLP exporter (plumb's) and for people reading traces."""
    return [
        f"export OTEL_EXPORTER_OTLP_ENDPOINT={jaeger.otlp_http_endpoint}",
        f"# OTLP over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc): {jaeger.otlp_grpc_endpoint}",
        f"export PLUMB_TRACING_UI_URL={jaeger.query_url}",
    ]


def record(jaeger: Jaeger) -> dict[str, Any]:
    """jaeger as state.json keeps it."""
    return {"binary": str(jaeger.binary), "pid": jaeger.pid, **jaeger.ports()}


def from_record(data: object) -> Jaeger:
    """The Jaeger ``record`` wrote; ValueError if it is not one."""
    if not isinstance(data, dict):
        raise ValueError(f"field 'jaeger' should be an object, found {data!r}")
    binary = data.get("binary")
    if not isinstance(binary, str):
        raise ValueError(f"field 'jaeger.binary' should be a path, found {binary!r}")
    numbers: dict[str, int] = {}
    for name in ("pid", "otlp_grpc_port", "otlp_http_port", "query_port", "query_grpc_port"):
        value = data.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"field 'jaeger.{name}' should be an int, found {value!r}")
        numbers[name] = value
    return Jaeger(binary=Path(binary), **numbers)
