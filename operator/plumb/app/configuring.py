"""The configuration file (``plumb run --config``): read and validated at start, then watched
(its content hash polled, and on SIGHUP) and applied between two batches when it changes.

A file that does not parse, fails validation or cannot replace the running profiles in place is
refused with the reason in the log: the running configuration stays and
``plumb_config_last_reload_successful`` drops to 0 until a good file is applied. Nothing a file
holds ends the watching: the reader is bounded (k8s/documents.py: nesting, aliases), a
changed file is read off the event loop, and even a failure plumb did not foresee is logged and
counted as a refusal, so a later good file is still applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from plumb.backend import queue
from plumb.extensions import extenderclient
from plumb.framework import emulation, schedconfig
from plumb.observability import metrics as metrics_module
from plumb.scheduler import Scheduler, profiles

logger = logging.getLogger("plumb.config")

POLL_SECONDS = 1.0


class ConfigFileError(ValueError):
    """The file cannot be read or is not a valid configuration (the message names the field)."""


def read(
    path: Path, kube: emulation.Emulation = emulation.NEWEST_EMULATION
) -> tuple[bytes, profiles.Served]:
    """The file's bytes and the configuration they give; raises ConfigFileError."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigFileError(f"cannot read {path}: {error.strerror or error}") from error
    return data, served_from(data, path, kube)


def served_from(
    data: bytes, path: Path, kube: emulation.Emulation = emulation.NEWEST_EMULATION
) -> profiles.Served:
    """The configuration a file's bytes give, read as kube-scheduler of the release ``kube``
    reads it; raises ConfigFileError naming the field."""
    try:
        config = schedconfig.parse(data, kube=kube)
    except schedconfig.ConfigError as error:
        raise ConfigFileError(f"{path}: {error}") from error
    for line in config.ignored:
        logger.info("%s: %s", path, line)
    for extender in config.extenders:
        try:
            # The TLS files are read as kube-scheduler reads them at start (NewHTTPExtender).
            extenderclient.ssl_context(extender)
        except extenderclient.ExtenderError as error:
            raise ConfigFileError(f"{path}: {error}") from error
    return profiles.Served(
        profiles=config.profiles,
        backoff=queue.Backoff(initial=config.initial_backoff, maximum=config.max_backoff),
        digest=config.digest,
        extenders=config.extenders,
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
            data = self._changed()
            if data is not None:
                # PyYAML is pure Python: a large file read on the loop would hold the Lease's
                # renewals and the watches for seconds. The scheduler itself is reconfigured on
                # the loop, between two batches.
                self._apply(await asyncio.to_thread(self._parsed, data))

    def check(self) -> None:
        """Apply the file if its content changed since it was last looked at (read and parsed
        on the calling thread)."""
        data = self._changed()
        if data is not None:
            self._apply(self._parsed(data))

    def _changed(self) -> bytes | None:
        """The file's content if it changed since it was last looked at, else None."""
        try:
            data = self._path.read_bytes()
        except OSError as error:
            # A file being replaced (an editor's rename, a ConfigMap's symlink swap) may be
            # missing for a moment: say so, keep running, look again at the next poll.
            logger.warning("cannot read %s: %s", self._path, error.strerror or error)
            return None
        if data == self._last:
            return None
        self._last = data  # a refused file is not read again until it changes (or SIGHUP)
        return data

    def _parsed(self, data: bytes) -> profiles.Served | Exception:
        """The configuration the bytes give, or why not; never raises."""
        try:
            return served_from(data, self._path, self._scheduler.served.kube)
        except Exception as error:
            # ConfigFileError; anything else is a fault in plumb's reader, refused all the
            # same, so that the watching goes on and a later good file is still applied.
            return error

    def _apply(self, parsed: profiles.Served | Exception) -> None:
        if not isinstance(parsed, Exception):
            try:
                self._scheduler.reconfigure(parsed)
            except Exception as error:
                parsed = error
            else:
                logger.info("configuration reloaded from %s: %s", self._path, parsed.describe())
                self._metrics.config_reload(success=True)
                return
        foreseen = isinstance(parsed, ConfigFileError | profiles.ReconfigureError)
        logger.error(
            "configuration reload refused, keeping %s: %s",
            self._scheduler.served.describe(),
            parsed
            if foreseen
            else f"{self._path}: {type(parsed).__name__}: {parsed} "
            "(a fault in plumb, please report it with the file)",
            exc_info=None if foreseen else parsed,
        )
        self._metrics.config_reload(success=False)
