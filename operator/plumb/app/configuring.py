"""The configuration file (``plumb run --config``): read and validated at start, then watched
(its content hash polled, and on SIGHUP) and applied between two batches when it changes.

A file that does not parse, fails validation or cannot replace the running profiles in place is
refused with the reason in the log: the running configuration stays and
``plumb_config_last_reload_successful`` drops to 0 until a good file is applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from plumb.backend import queue
from plumb.framework import schedconfig
from plumb.observability import metrics as metrics_module
from plumb.scheduler import Scheduler, profiles

logger = logging.getLogger("plumb.config")

POLL_SECONDS = 1.0


class ConfigFileError(ValueError):
    """The file cannot be read or is not a valid configuration (the message names the field)."""


def read(path: Path) -> tuple[bytes, profiles.Served]:
    """The file's bytes and the configuration they give; raises ConfigFileError."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigFileError(f"cannot read {path}: {error.strerror or error}") from error
    return data, served_from(data, path)


def served_from(data: bytes, path: Path) -> profiles.Served:
    """The configuration a file's bytes give; raises ConfigFileError naming the field."""
    try:
        config = schedconfig.parse(data)
    except schedconfig.ConfigError as error:
        raise ConfigFileError(f"{path}: {error}") from error
    for line in config.ignored:
        logger.info("%s: %s", path, line)
    return profiles.Served(
        profiles=config.profiles,
        backoff=queue.Backoff(initial=config.initial_backoff, maximum=config.max_backoff),
        digest=config.digest,
    )


class Reloader:
    """Watches the file and applies a changed, valid one to the scheduler."""

    def __init__(
        self,
        path: Path,
        scheduler: Scheduler,
        metrics: metrics_module.Metrics,
        data: bytes,
        *,
        interval: float = POLL_SECONDS,
    ) -> None:
        self._path = path
        self._scheduler = scheduler
        self._metrics = metrics
        self._interval = interval
        self._last = data  # the content last looked at (applied or refused)
        self._wake = asyncio.Event()

    def request(self) -> None:
        """SIGHUP: look at the file now, even if its content looks unchanged."""
        self._last = b""
        self._wake.set()

    async def run(self) -> None:
        """Poll until cancelled."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval)
            self._wake.clear()
            self.check()

    def check(self) -> None:
        """Apply the file if its content changed since it was last looked at."""
        try:
            data = self._path.read_bytes()
        except OSError as error:
            # A file being replaced (an editor's rename, a ConfigMap's symlink swap) may be
            # missing for a moment: say so, keep running, look again at the next poll.
            logger.warning("cannot read %s: %s", self._path, error.strerror or error)
            return
        if data == self._last:
            return
        self._last = data
        try:
            served = served_from(data, self._path)
            self._scheduler.reconfigure(served)
        except (ConfigFileError, profiles.ReconfigureError) as error:
            logger.error(
                "configuration reload refused, keeping %s: %s",
                self._scheduler.served.describe(),
                error,
            )
            self._metrics.config_reload(success=False)
            return
        logger.info("configuration reloaded from %s: %s", self._path, served.describe())
        self._metrics.config_reload(success=True)
