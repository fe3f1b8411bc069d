"""The --config file's reload: a changed valid file switches the scheduler's profiles, a broken
one is refused and keeps them (with the metric at 0), SIGHUP looks again at once, and a file
missing for a moment is waited for."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from plumb import cli
from plumb.app import configuring
from plumb.framework import scoring
from plumb.observability import metrics as metrics_module
from tests.unit.fakes import Clock, FakeApi, make_scheduler


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
    scheduler = make_scheduler(FakeApi(), Clock(), metrics=metrics)
    scheduler.reconfigure(served)
    return path, configuring.Reloader(path, scheduler, metrics, data), scheduler, metrics


def _gauge(metrics: metrics_module.Metrics) -> str:
    return next(
        line
        for line in metrics.render().decode().splitlines()
        if line.startswith(metrics_module.CONFIG_RELOAD_SUCCESSFUL)
    )


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
