"""Feature gates of a local control plane: which gates its binaries know, the flags that set them.

``lifecycle.start(feature_gates=...)`` gives the same gates to kube-apiserver,
kube-controller-manager and, when it runs, kube-scheduler: a gate on one part only leaves a
feature half there (GenericWorkload's admission puts a finalizer on every PodGroup that only
kube-controller-manager's podgroup-protection controller, which runs with the gate, takes off).

A gate is checked against the gates each binary lists under ``--feature-gates`` in its
``--help``, before anything starts: the binaries are the truth for their release (as
``--version`` is for the release itself), with the gates of k8s.io/apiserver and the other staging
modules that pkg/features/kube_features.go does not hold, and no Go source tree needed at run time.

GenericWorkload also needs its API version served, which each release names
(``releases.KubeRelease.workload_api``).
"""

from __future__ import annotations

import difflib
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from plumb_dev.cluster.controlplane import config, releases

GENERIC_WORKLOAD = "GenericWorkload"
# One option a line in --help: "kube:GenericWorkload=true|false (BETA - default=false)"; the
# "kube:" prefix names the component, and kube is the only one the Kubernetes binaries list.
_LISTED = re.compile(r"^\s*(?:kube:)?([A-Za-z][A-Za-z0-9]*)=true\|false \(", re.MULTILINE)
_FLAG = "--feature-gates"
# The next flag in --help: a line that starts with spaces and "--".
_NEXT_FLAG = re.compile(r"^\s+--[a-z]", re.MULTILINE)


def value(gates: Mapping[str, bool]) -> str:
    """The flag's value, as Kubernetes' binaries read it: ``GenericWorkload=true,Other=false``."""
    return ",".join(f"{name}={str(on).lower()}" for name, on in sorted(gates.items()))


def flags(gates: Mapping[str, bool]) -> list[str]:
    """``--feature-gates=...`` (kube-controller-manager's, kube-scheduler's); none without gates."""
    return [f"{_FLAG}={value(gates)}"] if gates else []


def apiserver_flags(gates: Mapping[str, bool], release: releases.KubeRelease) -> list[str]:
    """kube-apiserver's: the gates, and with GenericWorkload on the Workload and PodGroup API
    version, which is off by default even then (v1.37: scheduling.k8s.io/v1beta1 is in
    instance.go's betaAPIGroupVersionsDisabledByDefault)."""
    served = []
    if gates.get(GENERIC_WORKLOAD) and release.workload_api is not None:
        served.append(f"--runtime-config={release.workload_api}=true")
    return [*flags(gates), *served]


def listed(help_text: str) -> frozenset[str]:
    """The gates a binary's ``--help`` lists under ``--feature-gates``."""
    start = help_text.find(f"{_FLAG} ")
    if start < 0:
        return frozenset()
    section = help_text[start + len(_FLAG) :]
    following = _NEXT_FLAG.search(section)
    if following is not None:
        section = section[: following.start()]
    return frozenset(_LISTED.findall(section))


def known(binary: Path) -> frozenset[str]:
    """The gates ``binary --help`` lists; refuses a binary whose help lists none."""
    try:
        result = subprocess.run(
            [str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise config.ControlPlaneError(
            f"could not ask {binary} which feature gates it knows: {error}"
        ) from error
    gates = listed(result.stdout + result.stderr)
    if not gates:
        raise config.ControlPlaneError(
            f"{binary} --help lists no feature gates (exit code {result.returncode}); is it a "
            f"Kubernetes binary? Rebuild with hack/build-control-plane.sh"
        )
    return gates


def check(gates: Mapping[str, bool], known_by: Mapping[str, frozenset[str]], version: str) -> None:
    """Refuses gates a binary does not know, naming each, the binaries and the closest names.

    ``known_by``: {binary name: the gates it lists}, for every binary the gates go to.
    """
    everything = sorted(set().union(*known_by.values()))
    problems = []
    for name in sorted(gates):
        missing = [binary for binary, names in known_by.items() if name not in names]
        if not missing:
            continue
        if len(missing) < len(known_by):
            verb = "does" if len(missing) == 1 else "do"
            problems.append(f"{name!r} ({_listed(missing)} {verb} not know it)")
            continue
        close = difflib.get_close_matches(name, everything, n=1)
        problems.append(f"{name!r}" + (f" (did you mean {close[0]}?)" if close else ""))
    if problems:
        noun = "feature gate" if len(problems) == 1 else "feature gates"
        raise config.ControlPlaneError(
            f"unknown {noun} for Kubernetes {version}: {', '.join(problems)}; nothing was started. "
            f"Correct the name (`{config.APISERVER} --help` lists the gates under {_FLAG}), or "
            f"run a release that has it (plumb cluster up --kube-version v1.N.x)"
        )


def _listed(names: Iterable[str]) -> str:
    items = list(names)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
