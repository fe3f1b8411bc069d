"""KubeSchedulerConfiguration files for tests: the header every file starts with, and the bad
YAML files of issue 24 with the refusal that names each one's problem."""

from __future__ import annotations

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def laughs() -> str:
    """A "billion laughs": nine anchors, each ten aliases of the one before, so ~500 bytes
    stand for 10^9 strings."""
    lines = ["lol0: &lol0 [" + ", ".join(["lol"] * 10) + "]"]
    lines += [f"lol{i}: &lol{i} [" + ", ".join([f"*lol{i - 1}"] * 10) + "]" for i in range(1, 9)]
    return HEADER + "\n".join(lines) + "\n"


# Each bad file of issue 24 and the refusal that names its problem.
BAD_FILES = {
    "int-abc": (
        HEADER + "podMaxBackoffSeconds: !!int abc\n",
        "yaml: line 3: cannot decode !!str `abc` as a !!int",
    ),
    "timestamp-month-13": (
        HEADER + "podMaxBackoffSeconds: !!timestamp 2020-13-45\n",
        "yaml: line 3: cannot decode !!str `2020-13-45` as a !!timestamp",
    ),
    "2000-nested-brackets": (
        HEADER + "profiles: " + "[" * 2000 + "]" * 2000 + "\n",
        "yaml: line 3: exceeded max depth of 100",
    ),
    "billion-laughs": (laughs(), "yaml: document contains excessive aliasing"),
}
