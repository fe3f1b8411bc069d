"""The --config file's reload: a changed valid file switches the scheduler's profiles, a broken
one is refused and keeps them (with the metric at 0), SIGHUP looks again at once, a file
missing for a moment is waited for, no file ends the watching, and shutdown does not depend on
how the watching ended."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plumb import cli, leader
from plumb.app import configuring, leading, runtime
from plumb.framework import emulation, schedconfig, scoring
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials as credentials_module
from plumb.observability import metrics as metrics_module
from tests.support import leases
from tests.support.fakes import FakeApi, ManualClock, make_scheduler
from tests.support.schedconfig_files import BAD_FILES

WAIT_SECONDS = 10.0  # for the reload task, which reads the file in a worker thread


def _file(strategy: str, name: str = "plumb", **extra: Any) -> bytes:
    return json.dumps(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": name,
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {"scoringStrategy": {"type": strategy}},
                        }
                    ],
                }
            ],
            **extra,
        }
    ).encode()


def _reloading(tmp_path: Path) -> tuple[Path, configuring.Reloader, Any, metrics_module.Metrics]:
    path = tmp_path / "config.json"
    path.write_bytes(_file("LeastAllocated"))
    data, served = configuring.read(path)
    metrics = metrics_module.Metrics()
    scheduler = make_scheduler(FakeApi(), ManualClock(), metrics=metrics)
    scheduler.reconfigure(served)
    return path, configuring.Reloader(path, scheduler, metrics, data), scheduler, metrics


def _gauge(metrics: metrics_module.Metrics) -> str:
    return next(
        line
        for line in metrics.render().decode().splitlines()
        if line.startswith(metrics_module.CONFIG_RELOAD_SUCCESSFUL)
    )


def _failures(metrics: metrics_module.Metrics) -> str:
    return next(
        line
        for line in metrics.render().decode().splitlines()
        if line.startswith(f'{metrics_module.CONFIG_RELOADS}{{result="failure"}}')
    )


async def _refused_then_applied(
    reloader: configuring.Reloader,
    path: Path,
    bad: bytes,
    caplog: pytest.LogCaptureFixture,
    refused: Callable[[], None],
) -> None:
    """The reloader watching: ``bad`` written and refused (then ``refused`` checks), a good
    MostAllocated file written and applied."""
    task = asyncio.create_task(reloader.run())
    await asyncio.to_thread(path.write_bytes, bad)
    reloader.request()
    await _until("refusal", lambda: "reload refused" in caplog.text)
    refused()
    await asyncio.to_thread(path.write_bytes, _file("MostAllocated"))
    reloader.request()
    await _until("reload", lambda: "configuration reloaded" in caplog.text)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _until(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {WAIT_SECONDS} s"
        await asyncio.sleep(0.01)


def test_a_changed_file_is_applied_and_a_broken_one_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, reloader, scheduler, metrics = _reloading(tmp_path)
    first = scheduler.served.digest
    reloader.check()  # unchanged: nothing happens
    assert scheduler.served.digest == first
    path.write_bytes(_file("MostAllocated", podMaxBackoffSeconds=4))
    with caplog.at_level(logging.INFO, logger="plumb.config"):
        reloader.check()
    profile = scheduler.served.get("plumb")
    assert profile is not None
    assert profile.strategy == scoring.MOST_ALLOCATED
    assert scheduler.served.digest not in ("", first)
    assert scheduler.queue.backoff_duration(9) == 4.0
    assert f"configuration {scheduler.served.digest}" in caplog.text
    assert _gauge(metrics).endswith(" 1.0")

    applied = scheduler.served
    path.write_bytes(_file("MostAllocated").replace(b"pluginConfig", b"pluginConfigs"))
    with caplog.at_level(logging.INFO, logger="plumb.config"):
        reloader.check()
    assert scheduler.served is applied
    assert 'unknown field "profiles[0].pluginConfigs"' in caplog.text
    assert _gauge(metrics).endswith(" 0.0")
    # Another scheduler name needs a restart: refused too.
    path.write_bytes(_file("MostAllocated", name="other"))
    reloader.check()
    assert scheduler.served is applied
    assert "restart plumb" in caplog.text


def test_sighup_looks_at_once_and_a_missing_file_is_waited_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, reloader, scheduler, _metrics = _reloading(tmp_path)

    async def scenario() -> None:
        task = asyncio.create_task(reloader.run())
        path.unlink()  # replaced: gone for a moment
        reloader.request()
        await asyncio.sleep(0.05)
        assert "cannot read" in caplog.text
        path.write_bytes(_file("MostAllocated"))
        reloader.request()
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with caplog.at_level(logging.INFO, logger="plumb.config"):
        asyncio.run(scenario())
    profile = scheduler.served.get("plumb")
    assert profile is not None
    assert profile.strategy == scoring.MOST_ALLOCATED


def test_a_file_that_cannot_be_read_or_parsed_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(configuring.ConfigFileError, match="cannot read"):
        configuring.read(tmp_path / "nowhere.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Nope\n")
    with pytest.raises(configuring.ConfigFileError, match=r"broken\.yaml"):
        configuring.read(broken)


def test_plumb_run_refuses_a_bad_file_before_it_connects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_bytes(_file("Sideways"))
    assert cli.main(["run", "--config", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {broken}: ")
    assert "scoringStrategy.type" in err
    good = tmp_path / "good.json"
    good.write_bytes(_file("MostAllocated"))
    assert cli.main(["run", "--config", str(good), "--scheduler-name", "x"]) == 2
    assert "exclusive" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "says"), BAD_FILES.values(), ids=list(BAD_FILES))
def test_a_bad_file_is_refused_and_counted_and_a_later_good_file_applied(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, says: str
) -> None:
    path, reloader, scheduler, metrics = _reloading(tmp_path)
    kept = scheduler.served

    def refused() -> None:
        assert scheduler.served is kept
        assert _gauge(metrics).endswith(" 0.0")

    with caplog.at_level(logging.INFO, logger="plumb.config"):
        asyncio.run(_refused_then_applied(reloader, path, text.encode(), caplog, refused))
    assert f"keeping {kept.describe()}: {path}: {says}" in caplog.text
    assert _failures(metrics).endswith(" 1.0")
    assert _gauge(metrics).endswith(" 1.0")
    profile = scheduler.served.get("plumb")
    assert profile is not None
    assert profile.strategy == scoring.MOST_ALLOCATED


def test_a_fault_in_the_reader_is_refused_too_and_the_watching_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, reloader, scheduler, metrics = _reloading(tmp_path)
    kept = scheduler.served
    real_parse = schedconfig.parse

    def faulty(text: str | bytes, *, kube: emulation.Emulation) -> schedconfig.Configuration:
        if b"Faulty" in (text if isinstance(text, bytes) else text.encode()):
            raise AttributeError("'NoneType' object has no attribute 'get'")
        return real_parse(text, kube=kube)

    monkeypatch.setattr(schedconfig, "parse", faulty)

    def refused() -> None:
        assert scheduler.served is kept

    bad = _file("MostAllocated", name="Faulty")
    with caplog.at_level(logging.INFO, logger="plumb.config"):
        asyncio.run(_refused_then_applied(reloader, path, bad, caplog, refused))
    refusal = next(r for r in caplog.records if "reload refused" in r.getMessage())
    assert "AttributeError" in refusal.getMessage()
    assert "a fault in plumb, please report it" in refusal.getMessage()
    assert refusal.exc_info is not None  # the traceback, for the report
    assert _failures(metrics).endswith(" 1.0")
    assert _gauge(metrics).endswith(" 1.0")


@pytest.mark.parametrize(("text", "says"), BAD_FILES.values(), ids=list(BAD_FILES))
def test_plumb_run_refuses_each_bad_file_at_start_with_its_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert cli.main(["run", "--config", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {bad}: {says}")


async def test_shutdown_releases_the_lease_even_if_the_reload_task_died(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = leases.LeaseStore()
    elector = leader.Elector(
        leases.CuttableLeaseApi(store),
        leader.ElectionSettings(namespace="plumb-system", identity="a", timings=leases.TIMINGS),
    )
    scheduler = make_scheduler(FakeApi(), ManualClock())
    api = k8s_client.ApiClient(credentials_module.Credentials(server="http://127.0.0.1:1"))
    leadership = leading.Leadership(scheduler, api, elector)
    elector.on_change = leadership.on_change
    election = asyncio.create_task(elector.run(), name="plumb-leader-election")
    await _until("the Lease", lambda: elector.leading)
    assert store.lease is not None
    assert store.lease["spec"]["holderIdentity"] == "a"

    async def reload_as_before_issue_24() -> None:
        raise RecursionError("maximum recursion depth exceeded")

    died = asyncio.create_task(reload_as_before_issue_24(), name="plumb-config-reload")
    await asyncio.sleep(0)
    assert died.done()
    with caplog.at_level(logging.INFO):
        await runtime.stop_leading([died, election], leadership, scheduler)
        await runtime.stop_leading([], leadership, scheduler)  # run's finally: a second call
    assert election.cancelled()
    assert store.lease["spec"]["holderIdentity"] is None  # released: a standby takes it at once
    assert not elector.may_act()
    stopped = [r for r in caplog.records if "had stopped on an error" in r.getMessage()]
    assert [r.getMessage().split()[0] for r in stopped] == ["plumb-config-reload"]
    await api.close()
