"""The configuration file changes while plumb schedules 1,000 pods on the real control plane: the
new profiles take over between two batches with no pod lost or decided twice, and a broken file
keeps the running profiles and says so in the log and the metrics. Files beyond the reader's
bounds (issue 24) are refused the same way, and the process still shuts down cleanly."""

from __future__ import annotations

import collections
import functools
import json
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from prometheus_client import parser

from plumb.framework import schedconfig
from plumb.observability import metrics
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, kubescheduler
from tests.support import plumb_process
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import PlumbFactory, free_port
from tests.support.schedconfig_files import BAD_FILES

NAME = "plumb"
PODS = 1000
SWITCH_AFTER = 300  # pods created before the file changes
NODES = 10


def _write(path: Path, body: dict[str, Any]) -> str:
    """Write the file (whole, then renamed, as a ConfigMap update does); its hash."""
    data = json.dumps(body, indent=2).encode()
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(path)
    return schedconfig.parse(data).digest


def _body(plane: controlplane.ControlPlane, strategy: str) -> dict[str, Any]:
    profile = {
        "schedulerName": NAME,
        "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": strategy}}}
        ],
    }
    return kubescheduler.configuration(plane, profiles=[profile])


def _samples(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
        text = page.read().decode()
    return {
        f"{s.name}{s.labels.get('result', '')}": s.value
        for family in parser.text_string_to_metric_families(text)
        if family.name.startswith("plumb_config")
        for s in family.samples
    }


def test_a_changed_file_switches_profiles_mid_burst_and_a_broken_one_is_refused(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    tmp_path: Path,
) -> None:
    for i in range(NODES):
        add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu="64", pods="200"))
    path = tmp_path / "scheduler-config.json"
    spreading = _write(path, _body(control_plane, "LeastAllocated"))
    port = free_port()
    plumb = start_plumb("--config", str(path), "--metrics-port", str(port))
    # Fields plumb accepts and does not use are named once in the log.
    assert "clientConnection" in plumb.output()

    names = [f"p{i:04d}" for i in range(PODS)]
    packing = ""
    for i, name in enumerate(names):
        if i == SWITCH_AFTER:
            packing = _write(path, _body(control_plane, "MostAllocated"))
        kube_client.create_pod(
            builders.make_pod(name, namespace).scheduler(NAME).req(cpu="100m").obj()
        )
    kube.wait_for("the reload in the log", lambda: "configuration reloaded" in plumb.output())

    def bound() -> dict[str, str] | None:
        nodes = {
            p["metadata"]["name"]: p["spec"].get("nodeName") for p in kube_client.pods(namespace)
        }
        return nodes if all(nodes.get(name) for name in names) else None

    kube.wait_for(f"{PODS} pods bound", bound, timeout=180)
    records = plumb_process.scheduled_traces(plumb, {f"{namespace}/{name}" for name in names})
    decided = collections.Counter(r.pod for r in records)
    assert sorted(decided) == sorted(f"{namespace}/{name}" for name in names)  # none lost
    assert set(decided.values()) == {1}  # none decided twice
    scheduled = collections.Counter(
        e["involvedObject"]["name"]
        for e in kube_client.events(namespace)
        if e["reason"] == "Scheduled"
    )
    assert all(scheduled[name] == 1 for name in names), scheduled.most_common(3)
    # Every decision names the profile and the file it was made under: the first ones the
    # spreading file, the last ones the packing file, nothing else.
    configs = [r.config for r in records]
    assert {r.profile for r in records} == {NAME}
    assert set(configs) == {spreading, packing}
    assert configs[0] == spreading
    assert configs[-1] == packing
    assert _samples(port)[metrics.CONFIG_RELOAD_SUCCESSFUL] == 1.0

    # A broken file: refused with the field named, the packing profile stays.
    broken = _body(control_plane, "MostAllocated")
    broken["profiles"][0]["plugins"] = {"score": {"enabled": [{"name": "NoSuchPlugin"}]}}
    path.write_text(json.dumps(broken))
    kube.wait_for("the refusal in the log", lambda: "reload refused" in plumb.output())
    assert "NoSuchPlugin" in plumb.output()
    samples = _samples(port)
    assert samples[metrics.CONFIG_RELOAD_SUCCESSFUL] == 0.0
    assert samples[f"{metrics.CONFIG_RELOADS}failure"] == 1.0
    assert samples[f"{metrics.CONFIG_RELOADS}success"] == 1.0
    kube_client.create_pod(builders.make_pod("after", namespace).scheduler(NAME).obj())
    kube.wait_for(
        "the pod after", lambda: kube_client.pod(namespace, "after")["spec"].get("nodeName")
    )
    after = plumb_process.scheduled_traces(plumb, {f"{namespace}/after"})
    assert [r.config for r in after] == [packing]


def _replace(path: Path, data: bytes) -> None:
    """Write the file whole, then rename it into place, so no poll reads half of it."""
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(path)


def _lease_holder(kube_client: kube.Kube, namespace: str) -> str | None:
    api = k8s.CoordinationV1Api(kube_client.api)
    response = api.read_namespaced_lease("plumb", namespace, _preload_content=False)
    holder = json.loads(response.data)["spec"].get("holderIdentity")
    return None if holder is None else str(holder)


def test_files_beyond_the_readers_bounds_are_refused_a_later_one_applied_and_sigterm_is_clean(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    tmp_path: Path,
) -> None:
    # Equal shape, different size: LeastAllocated puts a pod on the big node, MostAllocated on
    # the small one.
    here = ("plumb.dev/test", namespace)
    big = add_node(
        builders.make_node(f"{namespace}-big").capacity(cpu="64", memory="128Gi").label(*here)
    )
    small = add_node(
        builders.make_node(f"{namespace}-small").capacity(cpu="4", memory="8Gi").label(*here)
    )
    path = tmp_path / "scheduler-config.yaml"
    spreading = _write(path, _body(control_plane, "LeastAllocated"))
    port = free_port()
    plumb = start_plumb(
        "--config",
        str(path),
        "--metrics-port",
        str(port),
        "--leader-elect",
        "--leader-elect-resource-namespace",
        namespace,
    )

    def said(words: str) -> bool:
        return words in plumb.output()

    kube.wait_for("the Lease", functools.partial(said, "became leader"))

    def placed(name: str) -> str:
        kube_client.create_pod(
            builders.make_pod(name, namespace)
            .scheduler(NAME)
            .req(cpu="1", memory="2Gi")
            .node_selector(*here)
            .obj()
        )
        return str(
            kube.wait_for(
                f"{name} bound", lambda: kube_client.pod(namespace, name)["spec"].get("nodeName")
            )
        )

    keeping = f"refused, keeping profiles plumb (configuration {spreading}): {path}: "
    for bad in ("billion-laughs", "2000-nested-brackets"):
        text, says = BAD_FILES[bad]
        _replace(path, text.encode())
        kube.wait_for(f"the {bad} refusal", functools.partial(said, keeping + says), timeout=15)
    samples = _samples(port)
    assert samples[metrics.CONFIG_RELOAD_SUCCESSFUL] == 0.0
    assert samples[f"{metrics.CONFIG_RELOADS}failure"] == 2.0
    assert placed("kept") == big  # the running configuration stayed

    packing = _write(path, _body(control_plane, "MostAllocated"))
    kube.wait_for("the reload", functools.partial(said, "configuration reloaded"), timeout=15)
    assert _samples(port)[metrics.CONFIG_RELOAD_SUCCESSFUL] == 1.0
    assert placed("applied") == small
    applied = plumb_process.scheduled_traces(plumb, {f"{namespace}/applied"})
    assert [r.config for r in applied] == [packing]

    terminated = time.monotonic()
    plumb.process.send_signal(signal.SIGTERM)
    assert plumb.process.wait(timeout=20) == 0
    print(f"exited {time.monotonic() - terminated:.1f} s after SIGTERM")
    assert "released the lease" in plumb.output()
    assert not _lease_holder(kube_client, namespace)  # a standby need not wait it out
