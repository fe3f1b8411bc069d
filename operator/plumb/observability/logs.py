"""Logging setup for ``plumb run``: one line per record on stderr, kopf kept quiet."""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str) -> None:
    """Log at ``level``; kopf's own chatter only at warning unless debugging."""
    logging.basicConfig(level=level.upper(), format=FORMAT)
    if level.lower() != "debug":
        logging.getLogger("kopf").setLevel(logging.WARNING)
