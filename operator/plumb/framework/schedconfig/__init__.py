"""kube-scheduler's KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1), read and
validated as kube-scheduler of the release plumb decides as does (v1.34 to v1.37; what changed
between them is revisions.py's table) and turned into plumb's scoring profiles.

Pure: it reads only the text it is given. See docs/configuration.md and docs/versions.md.
"""

from __future__ import annotations

from plumb.framework.schedconfig.configuration import (
    DEFAULT_SCHEDULER_NAME,
    SCORE_ORDER,
    Configuration,
    default_profile,
    parse,
)
from plumb.framework.schedconfig.errors import ConfigError

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "SCORE_ORDER",
    "ConfigError",
    "Configuration",
    "default_profile",
    "parse",
]
